//! Owned sharing of a branded pool (issue 11): a pool in an `Arc` whose explicit cache,
//! resolver and handle-ring halves each hold a clone of the `Arc`, so they are `'static` and
//! move into `std::thread::spawn` (no `static`, no `thread::scope`).
//!
//! ```
//! use std::sync::Arc;
//! use idxpool::{HandleRing, PoolBuilder, handle_ring::Zeroing};
//!
//! idxpool::brand!(Rx);
//! let pool = Arc::new(PoolBuilder::<[u8; 64]>::zeroed(256).cache_size(16).build::<Rx>()?);
//! let (mut tx, mut rx) = HandleRing::new_owned(&pool, 64, Zeroing::Batched)?;
//! let mut cache = pool.local_cache_owned();
//! let producer = std::thread::spawn(move || {
//!     for i in 0..100u8 {
//!         let mut h = cache.get().unwrap();
//!         cache.get_mut(&mut h)[0] = i;
//!         let mut h = Some(h);
//!         while let Some(x) = h.take() {
//!             if let Err(back) = tx.produce(x) { h = Some(back); std::thread::yield_now(); }
//!         }
//!     }
//! });
//! let worker = std::thread::spawn(move || {
//!     let mut cache = rx.pool().local_cache_owned();
//!     let mut seen = 0u8;
//!     while seen < 100 {
//!         if let Some(h) = rx.consume() {
//!             assert_eq!(cache.get_ref(&h)[0], seen);
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
//! Each type keeps its borrowing core (`LocalCache<'static, ..>`, a ring half) in a field
//! declared before the `Arc`, so the core is dropped first, and never hands out anything that
//! carries the `'static` borrow (no `Deref` to the core: its `pool()` would return a
//! `&'static` pool that outlives the `Arc`). A core that holds references to the pool (the
//! caches) is kept in a `Dangling`, so that a companion passed by value as the pool's last
//! owner does not carry a protected reference into the freed pool. Brands must be `'static`
//! (named brands); a scoped pool cannot leave its closure anyway.

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::brand::Brand;
use crate::error::PoolError;
use crate::handle::GenericHandle;
use crate::handle_ring::{Consumer, GenericHandleRing, Producer, SlotRepr, Zeroing};
use crate::local::LocalCache;
use crate::pool::{GenericPool, ObjectsMut, Resolver};
use crate::repr::Repr;

type H<T, B, R> = GenericHandle<T, B, R>;

/// The pool behind an `Arc`, with its lifetime extended, for a companion that also holds a
/// clone of that `Arc` in a field declared after the borrower.
fn static_pool<T: 'static, B: Brand + 'static, R: Repr>(
    pool: &Arc<GenericPool<T, B, R>>,
) -> &'static GenericPool<T, B, R> {
    // SAFETY: the pool lives in the Arc allocation, which does not move and lives as long as
    // any clone. Every caller stores the result (inside a LocalCache, a Resolver or a ring
    // half) in a struct that also holds a clone of the Arc in a field declared after it, so
    // the borrower is dropped first, and no method hands the 'static borrow out.
    unsafe { &*Arc::as_ptr(pool) }
}

/// A value that may hold references to memory freed while the value is being passed by
/// value: the borrowing core of a companion that also owns the last `Arc` of its pool.
///
/// A reference field of a struct passed by value (`drop(cache)`, a by-value argument, a
/// `move` closure) is a *protected* function-argument reference for the whole call under the
/// aliasing models Rust is checked against (Stacked and Tree Borrows): freeing the pool inside
/// that call, while the field still points into it, is undefined behaviour even if the field is
/// never used again. A `MaybeUninit` is a union, whose contents are not retagged or protected,
/// so the core kept in one may dangle while the call ends. This is the stable form of
/// `MaybeDangling` (RFC 3336), as in the `maybe-dangling` crate; always initialised here.
/// Regression test: `tests/soundness.rs`, `owned_companions_may_be_the_last_owner_of_their_pool`
/// (Miri).
pub(crate) struct Dangling<X>(MaybeUninit<X>);

impl<X> Dangling<X> {
    pub(crate) fn new(x: X) -> Self {
        Dangling(MaybeUninit::new(x))
    }

    /// The value (initialised from `new` until `drop`).
    #[inline(always)]
    pub(crate) fn get(&self) -> &X {
        // SAFETY: initialised by `new`, dropped only by `Drop` below.
        unsafe { self.0.assume_init_ref() }
    }

    /// The value, exclusively.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self) -> &mut X {
        // SAFETY: initialised by `new`, dropped only by `Drop` below.
        unsafe { self.0.assume_init_mut() }
    }
}

impl<X> Drop for Dangling<X> {
    fn drop(&mut self) {
        // SAFETY: initialised by `new`, dropped exactly once, here.
        unsafe { self.0.assume_init_drop() }
    }
}

impl<T: 'static, B: Brand + 'static, R: Repr> GenericPool<T, B, R> {
    /// An explicit cache ([`crate::LocalCache`]) that holds a clone of the pool's `Arc`:
    /// `'static`, `Send` when `T: Send`, not `Sync`. See [`OwnedLocalCache`].
    pub fn local_cache_owned(self: &Arc<Self>) -> OwnedLocalCache<T, B, R> {
        let p = static_pool(self);
        OwnedLocalCache {
            cache: Dangling::new(p.local_cache()),
            objs: p.resolver(),
            pool: self.clone(),
        }
    }

    /// A resolver ([`crate::Resolver`]) that holds a clone of the pool's `Arc`: `'static`,
    /// `Clone`; references it gives borrow it.
    pub fn resolver_owned(self: &Arc<Self>) -> OwnedResolver<T, B, R> {
        OwnedResolver {
            objs: static_pool(self).resolver(),
            pool: self.clone(),
        }
    }
}

/// A [`LocalCache`] of a pool in an `Arc`, holding a clone of the `Arc`: it can be stored next
/// to the pool in a struct or moved into a spawned thread. Made by
/// [`GenericPool::local_cache_owned`].
///
/// As [`LocalCache`], the methods that move objects take `&mut self` (no interior
/// mutability: nothing, not even an allocator or a panic hook that re-enters the pool, can
/// reach the cache while one of them runs). References from [`OwnedLocalCache::get_mut`]
/// borrow the cache; to hold a `&mut T` while the cache keeps allocating, convert through a
/// resolver of your own ([`GenericPool::resolver_owned`], or `pool.resolver()` on the `Arc`).
pub struct OwnedLocalCache<T: 'static, B: Brand + 'static, R: Repr> {
    // Field order matters: the cache (which borrows the pool) is dropped before `pool`.
    // In a `Dangling`: it may be the last owner of the pool when passed by value.
    cache: Dangling<LocalCache<'static, T, B, R>>,
    objs: Resolver<'static, T, B, R>,
    pool: Arc<GenericPool<T, B, R>>,
}

impl<T: 'static, B: Brand + 'static, R: Repr> OwnedLocalCache<T, B, R> {
    #[inline(always)]
    fn c(&mut self) -> &mut LocalCache<'static, T, B, R> {
        self.cache.get_mut()
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<GenericPool<T, B, R>> {
        &self.pool
    }
    /// Objects held by this cache now.
    pub fn len(&self) -> usize {
        self.cache.get().len()
    }
    /// True when the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// As [`LocalCache::get`].
    ///
    /// # Errors
    /// [`PoolError::Exhausted`].
    #[inline(always)]
    #[must_use = "the handle owns an object: put it back with cache.put(h)"]
    pub fn get(&mut self) -> Result<H<T, B, R>, PoolError> {
        self.c().get()
    }
    /// As [`LocalCache::put`].
    #[inline(always)]
    pub fn put(&mut self, h: H<T, B, R>) {
        self.c().put(h)
    }
    /// As [`LocalCache::get_bulk`].
    ///
    /// # Errors
    /// [`PoolError::Exhausted`]; `out` unchanged.
    #[inline(always)]
    #[must_use = "on Ok, `out` holds objects that must be put back"]
    pub fn get_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        // The allocation first, while no `&mut` to the cache exists: an allocator that
        // re-enters this cache (through a thread-local) then meets no live borrow (issue 25).
        if n <= self.pool.capacity() as usize {
            out.reserve(n);
        }
        self.c().get_bulk(out, n)
    }
    /// As [`LocalCache::get_burst`].
    #[inline]
    #[must_use = "the count says how many objects were appended to `out`"]
    pub fn get_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        // As get_bulk: allocate before borrowing the cache.
        out.reserve(n.min(self.pool.capacity() as usize));
        self.c().get_burst(out, n)
    }
    /// As [`LocalCache::put_bulk`].
    #[inline(always)]
    pub fn put_bulk(&mut self, handles: &mut Vec<H<T, B, R>>) {
        self.c().put_bulk(handles)
    }
    /// As [`LocalCache::put_bulk_tail`].
    #[inline(always)]
    pub fn put_bulk_tail(&mut self, handles: &mut Vec<H<T, B, R>>, n: usize) {
        self.c().put_bulk_tail(handles, n)
    }
    /// As [`LocalCache::get_array`].
    ///
    /// # Errors
    /// [`PoolError::Exhausted`].
    #[inline(always)]
    pub fn get_array<const N: usize>(&mut self) -> Result<[H<T, B, R>; N], PoolError> {
        self.c().get_array::<N>()
    }
    /// As [`LocalCache::put_array`].
    #[inline(always)]
    pub fn put_array<const N: usize>(&mut self, handles: [H<T, B, R>; N]) {
        self.c().put_array(handles)
    }
    /// Shared access to an object (borrows the handle and this cache, shared).
    #[inline(always)]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        self.objs.get_ref(h)
    }
    /// Exclusive access to an object (borrows the handle mutably and this cache shared, so
    /// the cache can keep allocating while the reference lives).
    #[inline(always)]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        self.objs.get_mut(h)
    }
    /// As [`LocalCache::prefetch`].
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        self.objs.prefetch(h)
    }
    /// As [`LocalCache::prefetch_all`].
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[H<T, B, R>]) {
        self.objs.prefetch_all(hs)
    }
    /// As [`LocalCache::resolve_bulk`]: raw pointers, dereferencing them is the caller's
    /// `unsafe` responsibility.
    #[inline]
    pub fn resolve_bulk(&self, hs: &[H<T, B, R>], out: &mut [NonNull<T>]) -> usize {
        self.objs.resolve_bulk(hs, out)
    }
    /// As [`LocalCache::get_mut_all`]; the references borrow `hs` mutably and this cache
    /// shared (which keeps the pool alive).
    #[inline(always)]
    pub fn get_mut_all<'a>(&'a self, hs: &'a mut [H<T, B, R>]) -> ObjectsMut<'a, T, B, R> {
        self.objs.get_mut_all(hs)
    }
    /// As [`LocalCache::flush`].
    pub fn flush(&mut self) {
        self.c().flush()
    }
}

impl<T: 'static, B: Brand + 'static, R: Repr> fmt::Debug for OwnedLocalCache<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedLocalCache")
            .field("pool", &self.pool.name())
            .field("len", &self.len())
            .finish()
    }
}

/// A [`Resolver`] holding a clone of the pool's `Arc` (`'static`, `Clone`); references borrow
/// the resolver. Made by [`GenericPool::resolver_owned`].
pub struct OwnedResolver<T: 'static, B: Brand + 'static, R: Repr> {
    objs: Resolver<'static, T, B, R>,
    pool: Arc<GenericPool<T, B, R>>,
}

impl<T: 'static, B: Brand + 'static, R: Repr> Clone for OwnedResolver<T, B, R> {
    fn clone(&self) -> Self {
        OwnedResolver {
            objs: self.objs,
            pool: self.pool.clone(),
        }
    }
}

impl<T: 'static, B: Brand + 'static, R: Repr> OwnedResolver<T, B, R> {
    /// Shared access to the object of `h`.
    #[inline(always)]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        self.objs.get_ref(h)
    }
    /// Exclusive access to the object of `h`.
    #[inline(always)]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        self.objs.get_mut(h)
    }
    /// As [`Resolver::prefetch`].
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        self.objs.prefetch(h)
    }
    /// As [`Resolver::prefetch_all`].
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[H<T, B, R>]) {
        self.objs.prefetch_all(hs)
    }
    /// As [`Resolver::resolve_bulk`]: raw pointers, dereferencing them is the caller's
    /// `unsafe` responsibility.
    #[inline]
    pub fn resolve_bulk(&self, hs: &[H<T, B, R>], out: &mut [NonNull<T>]) -> usize {
        self.objs.resolve_bulk(hs, out)
    }
    /// As [`Resolver::get_mut_all`]; the references borrow `hs` mutably and this resolver.
    #[inline(always)]
    pub fn get_mut_all<'a>(&'a self, hs: &'a mut [H<T, B, R>]) -> ObjectsMut<'a, T, B, R> {
        self.objs.get_mut_all(hs)
    }
    /// The pool.
    pub fn pool(&self) -> &Arc<GenericPool<T, B, R>> {
        &self.pool
    }
}

impl<T: 'static, B: Brand + 'static, R: SlotRepr> GenericHandleRing<'static, T, B, R> {
    /// As [`GenericHandleRing::new`], for a pool in an `Arc`: each half holds a clone of the
    /// `Arc`, so both are `'static` and move into `std::thread::spawn`. Handles left in the
    /// ring return to the pool when both halves are dropped.
    ///
    /// # Errors
    /// As [`GenericHandleRing::new`].
    #[allow(clippy::type_complexity)]
    pub fn new_owned(
        pool: &Arc<GenericPool<T, B, R>>,
        size: usize,
        zeroing: Zeroing,
    ) -> Result<(OwnedProducer<T, B, R>, OwnedConsumer<T, B, R>), PoolError> {
        let (tx, rx) = GenericHandleRing::new(static_pool(pool), size, zeroing)?;
        Ok((
            OwnedProducer {
                tx,
                pool: pool.clone(),
            },
            OwnedConsumer {
                rx,
                pool: pool.clone(),
            },
        ))
    }
}

/// The producing half of a ring made by [`GenericHandleRing::new_owned`] (`'static`, `Send`
/// when `T: Send`); methods as [`Producer`]'s.
pub struct OwnedProducer<T: 'static, B: Brand + 'static, R: SlotRepr> {
    // Field order: the ring half (which borrows the pool) is dropped before `pool`.
    tx: Producer<'static, T, B, R>,
    pool: Arc<GenericPool<T, B, R>>,
}

impl<T: 'static, B: Brand + 'static, R: SlotRepr> OwnedProducer<T, B, R> {
    /// The pool.
    pub fn pool(&self) -> &Arc<GenericPool<T, B, R>> {
        &self.pool
    }
    /// Slot count of the ring.
    pub fn size(&self) -> usize {
        self.tx.ring().size()
    }
    /// As [`Producer::is_full`].
    pub fn is_full(&self) -> bool {
        self.tx.is_full()
    }
    /// As [`Producer::produce`].
    ///
    /// # Errors
    /// The handle, when the ring is full.
    #[inline]
    pub fn produce(&mut self, h: H<T, B, R>) -> Result<(), H<T, B, R>> {
        self.tx.produce(h)
    }
    /// As [`Producer::produce_bulk`].
    #[must_use = "on false the handles are still in the Vec"]
    pub fn produce_bulk(&mut self, handles: &mut Vec<H<T, B, R>>) -> bool {
        self.tx.produce_bulk(handles)
    }
    /// As [`Producer::produce_burst`].
    pub fn produce_burst(&mut self, handles: &mut Vec<H<T, B, R>>) -> usize {
        self.tx.produce_burst(handles)
    }
    /// As [`Producer::produce_array`].
    ///
    /// # Errors
    /// The handles, when they do not all fit.
    pub fn produce_array<const N: usize>(
        &mut self,
        handles: [H<T, B, R>; N],
    ) -> Result<(), [H<T, B, R>; N]> {
        self.tx.produce_array(handles)
    }
}

impl<T: 'static, B: Brand + 'static, R: SlotRepr> fmt::Debug for OwnedProducer<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedProducer")
            .field("tx", &self.tx)
            .finish()
    }
}

/// The consuming half of a ring made by [`GenericHandleRing::new_owned`] (`'static`, `Send`
/// when `T: Send`); methods as [`Consumer`]'s.
pub struct OwnedConsumer<T: 'static, B: Brand + 'static, R: SlotRepr> {
    // Field order: the ring half (which borrows the pool) is dropped before `pool`.
    rx: Consumer<'static, T, B, R>,
    pool: Arc<GenericPool<T, B, R>>,
}

impl<T: 'static, B: Brand + 'static, R: SlotRepr> OwnedConsumer<T, B, R> {
    /// The pool.
    pub fn pool(&self) -> &Arc<GenericPool<T, B, R>> {
        &self.pool
    }
    /// As [`Consumer::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
    /// As [`Consumer::pending`].
    pub fn pending(&self) -> usize {
        self.rx.pending()
    }
    /// As [`Consumer::consume`].
    #[inline]
    #[must_use = "the handle owns an object: put it back into the pool"]
    pub fn consume(&mut self) -> Option<H<T, B, R>> {
        self.rx.consume()
    }
    /// As [`Consumer::consume_bulk`].
    #[must_use = "on true, `out` holds objects that must be put back"]
    pub fn consume_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> bool {
        self.rx.consume_bulk(out, n)
    }
    /// As [`Consumer::consume_burst`].
    #[must_use = "the count says how many objects were appended to `out`"]
    pub fn consume_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        self.rx.consume_burst(out, n)
    }
    /// As [`Consumer::consume_array`].
    #[must_use = "the handles own objects: put them back into the pool"]
    pub fn consume_array<const N: usize>(&mut self) -> Option<[H<T, B, R>; N]> {
        self.rx.consume_array::<N>()
    }
    /// As [`Consumer::drain_into`].
    pub fn drain_into(&mut self, out: &mut Vec<H<T, B, R>>) -> usize {
        self.rx.drain_into(out)
    }
}

impl<T: 'static, B: Brand + 'static, R: SlotRepr> fmt::Debug for OwnedConsumer<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedConsumer")
            .field("rx", &self.rx)
            .finish()
    }
}
