//! Ownership: how a companion of a pool ([`crate::LocalCache`], [`crate::Pooled`],
//! [`crate::HandleRing`]) holds it. One type parameter, [`PoolRef`], for a borrow (`&'p Pool`:
//! cannot outlive the pool, compiler-checked) and an `Arc<Pool>` (keeps the pool alive: `'static`
//! when the pool is, so it can sit in a struct or move into `std::thread::spawn`). Each companion
//! is written once over it; no second "owned" family.
//!
//! ```
//! use std::sync::Arc;
//! use idxpool::{HandleRing, LocalCache, PoolBuilder, handle_ring::Zeroing};
//!
//! let pool = Arc::new(PoolBuilder::<[u8; 64]>::zeroed(256).cache_size(16).build()?);
//! let (mut tx, mut rx) = HandleRing::new(pool.clone(), 64, Zeroing::Batched)?;
//! let mut cache = LocalCache::new(pool.clone());            // holds an Arc: 'static
//! let producer = std::thread::spawn(move || {
//!     for i in 0..100u8 {
//!         let mut h = cache.get().unwrap();
//!         cache.pool().get_mut(&mut h)[0] = i;
//!         let mut h = Some(h);
//!         while let Some(x) = h.take() {
//!             if let Err(back) = tx.produce(x) { h = Some(back); std::thread::yield_now(); }
//!         }
//!     }
//! });
//! let worker = std::thread::spawn(move || {
//!     let mut cache = LocalCache::new(rx.ring().pool().clone());
//!     let mut seen = 0u8;
//!     while seen < 100 {
//!         if let Some(h) = rx.consume() {
//!             assert_eq!(cache.pool().get_ref(&h)[0], seen);
//!             cache.put(h);
//!             seen += 1;
//!         }
//!     }
//! });
//! producer.join().unwrap();
//! worker.join().unwrap();
//! assert_eq!(pool.in_use(), 0);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! A companion reaches inside the pool (a cache's token) through raw pointers only, never
//! references: it may be the pool's last owner while passed by value (`drop(cache)`), and a
//! reference field would stay protected (Stacked and Tree Borrows) while the pool is freed
//! (DESIGN.md, "One pool type"; tests/soundness.rs
//! `owned_companions_may_be_the_last_owner_of_their_pool`, Miri).

use std::ops::Deref;
use std::sync::Arc;

use crate::brand::Brand;
use crate::element::Element;
use crate::pool::Pool;
use crate::repr::Repr;

/// A reference to a [`Pool`] that a companion holds: `&'p Pool<T, B, R>` or `Arc<Pool<T, B, R>>`.
/// See the [module docs](crate::owned).
///
/// ```
/// use idxpool::{LocalCache, Pool, PoolBuilder, PoolRef};
/// fn fill<P: PoolRef<T = u64>>(cache: &mut LocalCache<P>) -> Result<(), idxpool::PoolError> {
///     let mut h = cache.get()?;
///     *cache.pool().get_mut(&mut h) = 1;
///     cache.put(h);
///     Ok(())
/// }
/// let pool: Pool<u64> = PoolBuilder::with_default(8).build()?;
/// fill(&mut pool.local_cache())?;                                     // &Pool
/// fill(&mut LocalCache::new(std::sync::Arc::new(pool)))?;             // Arc<Pool>
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// Implemented by `&Pool` and `Arc<Pool>` only. The crate relies on three things of every value:
/// `pool()` returns the same pool on every call; that pool neither moves nor is dropped while the
/// value lives (companions keep raw pointers into it); and no `&mut Pool` can be taken while it
/// lives. The third is what a hand-written owner (a raw pointer) could not promise: `audit`,
/// `obj_iter` and drop read `&mut self` as proof that no `LocalCache` is alive, so a
/// still-registered cache was forgotten and its storage reclaimable (DESIGN.md, "Where `&mut self`
/// is the proof"). A raw-pointer owner would let `audit` free a live cache's storage and the pool
/// hand objects out twice (tests/ui/pool_ref_sealed.rs).
pub trait PoolRef:
    sealed::Sealed
    + Deref<Target = Pool<<Self as PoolRef>::T, <Self as PoolRef>::B, <Self as PoolRef>::R>>
{
    /// The object type.
    ///
    /// ```
    /// use idxpool::{Pool, PoolRef};
    /// fn object_bytes<P: PoolRef>(_: &P) -> usize where P::T: Sized {
    ///     std::mem::size_of::<P::T>()
    /// }
    /// let pool: Pool<[u8; 64]> = idxpool::PoolBuilder::zeroed(4).build()?;
    /// assert_eq!(object_bytes(&&pool), 64);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    type T: ?Sized + Element;
    /// The pool's identity ([`crate::Runtime`] or a brand).
    ///
    /// ```
    /// use idxpool::{Brand, PoolRef};
    /// fn checked<P: PoolRef>(_: &P) -> bool { <P::B as Brand>::CHECKED }
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// assert!(checked(&std::sync::Arc::new(pool)));       // a run-time pool
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    type B: Brand;
    /// The pool's entry representation.
    ///
    /// ```
    /// use idxpool::{repr::Repr, PoolRef};
    /// fn repr_name<P: PoolRef>(_: &P) -> &'static str { <P::R as Repr>::NAME }
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).repr::<idxpool::Index>().build()?;
    /// assert_eq!(repr_name(&&pool), "index");
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    type R: Repr;
    /// The pool (as `&Pool` whichever the owner).
    ///
    /// ```
    /// use idxpool::PoolRef;
    /// let pool = std::sync::Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build()?);
    /// let owner = pool.clone();
    /// assert!(std::ptr::eq(owner.pool(), &*pool));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn pool(&self) -> &Pool<Self::T, Self::B, Self::R>;
}

mod sealed {
    /// The owners `PoolRef` admits: a borrow and an `Arc` (see [`super::PoolRef`], "Sealed").
    pub trait Sealed {}
}

// A shared borrow keeps the pool in place and alive for 'p, and forbids `&mut Pool` meanwhile.
impl<T: ?Sized + Element, B: Brand, R: Repr> sealed::Sealed for &Pool<T, B, R> {}

impl<T: ?Sized + Element, B: Brand, R: Repr> PoolRef for &Pool<T, B, R> {
    type T = T;
    type B = B;
    type R = R;
    #[inline(always)]
    fn pool(&self) -> &Pool<T, B, R> {
        self
    }
}

// The pool lives in the Arc's allocation, which never moves and lives while any clone does;
// `Arc::get_mut` (the only safe `&mut Pool` from an `Arc`) fails while a companion's clone exists.
impl<T: ?Sized + Element, B: Brand, R: Repr> sealed::Sealed for Arc<Pool<T, B, R>> {}

impl<T: ?Sized + Element, B: Brand, R: Repr> PoolRef for Arc<Pool<T, B, R>> {
    type T = T;
    type B = B;
    type R = R;
    #[inline(always)]
    fn pool(&self) -> &Pool<T, B, R> {
        self
    }
}
