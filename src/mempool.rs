//! [`Mempool`]: the one interface of the crate's pools, implemented by the in-process `Pool<T, B,
//! R>` (any identity and representation) and the multi-process
//! [`SharedPool`](crate::shared::SharedPool), so code written once over `M: Mempool` runs on
//! either: DPDK's `rte_mempool_get/put(_bulk)` family, the caller's-table forms, handle -> object
//! and the settings.
//!
//! Each operation is defined once: as the pool's inherent method (no `use` of the trait needed) or,
//! where there is none, as a provided method. Implementations forward to the inherent methods
//! through `forward!` (`#[inline(always)]`), so a trait call is the same code as a direct call.
//! Companions reaching into an in-process pool's internals (`LocalCache`'s token, `HandleRing`'s
//! zeroing, the kernel receivers' region) are written over [`crate::PoolRef`]; those needing only
//! the interface ([`crate::Pooled`]) over this trait.
//!
//! ```
//! use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
//! use idxpool::{Mempool, PoolBuilder, PoolError};
//!
//! /// Fills `n` objects, reads them back and returns them: once for every pool.
//! fn round_trip<M: Mempool<Object = [u64; 4]>>(pool: &M, n: usize) -> Result<u64, PoolError> {
//!     let mut burst = Vec::new();
//!     pool.get_bulk(&mut burst, n)?;
//!     for (i, h) in burst.iter_mut().enumerate() {
//!         pool.get_mut(h)[0] = i as u64;
//!     }
//!     let sum = burst.iter().map(|h| pool.get_ref(h)[0]).sum();
//!     pool.put_bulk(&mut burst);
//!     Ok(sum)
//! }
//!
//! let local = PoolBuilder::<[u64; 4]>::with_default(64).cache_size(8).build()?;
//! assert_eq!(round_trip(&local, 8)?, 28);
//! let name = format!("idxpool-doc-{}-mempool", std::process::id());
//! let shared = SharedPool::<[u64; 4]>::create(&name, 64, fingerprint("u64x4"), SharedOptions::default())?;
//! assert_eq!(round_trip(&shared, 8)?, 28);
//! assert_eq!((local.in_use(), Mempool::in_use(&shared)), (0, 0));
//! # Ok::<(), PoolError>(())
//! ```

use std::ops::Deref;
use std::sync::Arc;

use crate::brand::Brand;
use crate::cache::FlushPolicy;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::pool::Pool;
use crate::repr::Repr;

/// How a [`crate::Pooled`] guard holds its pool: `&M` (the guard cannot outlive it) or `Arc<M>`
/// (the guard keeps it alive). Sealed: every dereference reaches the same pool. (`Mempool` itself
/// is open and safe: no unsafe code relies on its implementations.)
///
/// ```
/// use std::sync::Arc;
/// use idxpool::{Mempool, MempoolRef, PoolBuilder, Pooled};
/// fn first<P: MempoolRef>(pool: P) -> Result<usize, idxpool::PoolError> {
///     let guard = Pooled::get(pool)?;          // back in the pool when dropped
///     Ok(guard.pool().in_use())
/// }
/// let pool = PoolBuilder::<u64>::with_default(8).build()?;
/// assert_eq!(first(&pool)?, 1);
/// assert_eq!(first(Arc::new(pool))?, 1);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub trait MempoolRef: sealed::Sealed + Deref<Target = <Self as MempoolRef>::Pool> {
    /// The pool held.
    ///
    /// ```
    /// use idxpool::{Mempool, MempoolRef};
    /// fn capacity_of<P: MempoolRef>(p: &P) -> u32 { <P::Pool as Mempool>::capacity(p) }
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// assert_eq!(capacity_of(&&pool), 8);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    type Pool: Mempool;
}

mod sealed {
    /// `&M` and `Arc<M>` (see [`super::MempoolRef`]).
    pub trait Sealed {}
    impl<M: super::Mempool> Sealed for &M {}
    impl<M: super::Mempool> Sealed for std::sync::Arc<M> {}
}

impl<M: Mempool> MempoolRef for &M {
    type Pool = M;
}

impl<M: Mempool> MempoolRef for Arc<M> {
    type Pool = M;
}

/// A pool of objects addressed by handles: get and put one, a bulk (all or nothing) or a burst
/// (best effort), through a caller's table of `Option<Handle>` slots, and handle -> object.
/// Implemented by [`Pool`] and [`SharedPool`](crate::shared::SharedPool); [module
/// docs](crate::mempool) for an example over both.
pub trait Mempool {
    /// The object type (`T`; `[u8]` for byte-buffer pools).
    type Object: ?Sized;
    /// The handle: owns one object, neither `Clone` nor `Copy`.
    type Handle;

    /// Takes one object (DPDK's `rte_mempool_get`).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when the calling thread's (or process's) cache and the ring are
    /// empty.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(1).build()?;
    /// let h = Mempool::get(&pool)?;
    /// assert!(Mempool::get(&pool).is_err()); // Exhausted
    /// Mempool::put(&pool, h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get(&self) -> Result<Self::Handle, PoolError>;

    /// Returns one object (DPDK's `rte_mempool_put`).
    ///
    /// # Panics
    /// When `h` is another pool's (run-time and shared pools check): nothing moves, and the
    /// consumed handle's object stays counted in use by its own pool. [`Mempool::try_put`] gives it
    /// back instead.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let h = Mempool::get(&pool)?;
    /// Mempool::put(&pool, h);
    /// assert_eq!(Mempool::in_use(&pool), 0);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn put(&self, h: Self::Handle);

    /// [`Mempool::put`] that gives another pool's handle back (`Err(h)`, nothing moved).
    ///
    /// # Errors
    /// `Err(h)` when `h` is another pool's.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let a = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let b = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let h = Mempool::try_put(&b, a.get()?).unwrap_err(); // a's handle, given back
    /// Mempool::try_put(&a, h).unwrap();
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn try_put(&self, h: Self::Handle) -> Result<(), Self::Handle> {
        if !self.owns(&h) {
            return Err(h);
        }
        self.put(h);
        Ok(())
    }

    /// True when `h` was minted by this pool (always for branded pools: the compiler checked it).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let a = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let b = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let h = a.get()?;
    /// assert!(Mempool::owns(&a, &h) && !Mempool::owns(&b, &h));
    /// a.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn owns(&self, h: &Self::Handle) -> bool;

    /// Appends exactly `n` handles to `out`, or none (DPDK's `rte_mempool_get_bulk`).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with nothing taken and `out` unchanged.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut v = Vec::new();
    /// Mempool::get_bulk(&pool, &mut v, 8)?;
    /// assert!(Mempool::get_bulk(&pool, &mut v, 1).is_err() && v.len() == 8);
    /// Mempool::put_bulk(&pool, &mut v);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get_bulk(&self, out: &mut Vec<Self::Handle>, n: usize) -> Result<(), PoolError>;

    /// Appends up to `n` handles to `out`; returns how many (a burst: best effort).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut v = Vec::new();
    /// assert_eq!(Mempool::get_burst(&pool, &mut v, 100), 8);
    /// Mempool::put_bulk(&pool, &mut v);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get_burst(&self, out: &mut Vec<Self::Handle>, n: usize) -> usize;

    /// Returns every handle of `handles`, leaving it empty (DPDK's `rte_mempool_put_bulk`).
    ///
    /// # Panics
    /// As [`Mempool::put`], checked for every handle before any goes back.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut v = Vec::new();
    /// Mempool::get_bulk(&pool, &mut v, 4)?;
    /// Mempool::put_bulk(&pool, &mut v);
    /// assert!(v.is_empty());
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn put_bulk(&self, handles: &mut Vec<Self::Handle>);

    /// Fills every slot of `table` with a handle, all or nothing (DPDK's `rte_mempool_get_bulk(mp,
    /// obj_table, n)`).
    ///
    /// # Errors
    /// Nothing taken, table unchanged, on [`PoolError::SlotOccupied`] (a get never overwrites a
    /// handle) and [`PoolError::Exhausted`].
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut table: [Option<idxpool::Handle<u64>>; 4] = Default::default();
    /// Mempool::get_into(&pool, &mut table)?;
    /// Mempool::put_from(&pool, &mut table)?;
    /// assert!(table.iter().all(Option::is_none));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get_into(&self, table: &mut [Option<Self::Handle>]) -> Result<(), PoolError> {
        if let Some(index) = table.iter().position(Option::is_some) {
            return Err(PoolError::SlotOccupied {
                index,
                len: table.len(),
            });
        }
        let mut got = Vec::with_capacity(table.len());
        self.get_bulk(&mut got, table.len())?;
        for (slot, h) in table.iter_mut().zip(got) {
            *slot = Some(h);
        }
        Ok(())
    }

    /// Returns and empties every slot of `table`, all or nothing (DPDK's `rte_mempool_put_bulk(mp,
    /// obj_table, n)`).
    ///
    /// # Errors
    /// Nothing moved, table unchanged, on [`PoolError::SlotEmpty`] and
    /// [`PoolError::ForeignHandle`].
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut table: [Option<idxpool::Handle<u64>>; 2] = [Some(pool.get()?), None];
    /// assert!(Mempool::put_from(&pool, &mut table).is_err()); // SlotEmpty { index: 1, .. }
    /// pool.put(table[0].take().unwrap());
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn put_from(&self, table: &mut [Option<Self::Handle>]) -> Result<(), PoolError> {
        let len = table.len();
        for (index, slot) in table.iter().enumerate() {
            match slot {
                None => return Err(PoolError::SlotEmpty { index, len }),
                Some(h) if !self.owns(h) => {
                    return Err(PoolError::ForeignHandle {
                        handle_pool: format!("(another pool or attachment: table slot {index})"),
                        pool: "(the pool put to)".into(),
                    })
                }
                Some(_) => {}
            }
        }
        let mut all: Vec<Self::Handle> = table.iter_mut().filter_map(Option::take).collect();
        self.put_bulk(&mut all);
        Ok(())
    }

    /// The object `h` owns, shared.
    ///
    /// # Panics
    /// When `h` is another pool's (run-time and shared pools).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_fn(4, |i| i as u64 * 10).build()?;
    /// let h = pool.get()?;
    /// assert_eq!(*Mempool::get_ref(&pool, &h) % 10, 0);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get_ref<'a>(&'a self, h: &'a Self::Handle) -> &'a Self::Object;

    /// The object `h` owns, exclusive for as long as `h` is borrowed.
    ///
    /// # Panics
    /// When `h` is another pool's (run-time and shared pools).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).build()?;
    /// let mut h = pool.get()?;
    /// *Mempool::get_mut(&pool, &mut h) = 7;
    /// assert_eq!(*pool.get_ref(&h), 7);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn get_mut<'a>(&'a self, h: &'a mut Self::Handle) -> &'a mut Self::Object;

    /// Objects the pool holds (its live capacity).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(100).build()?;
    /// assert_eq!(Mempool::capacity(&pool), 100);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn capacity(&self) -> u32;

    /// Bytes from one object to the next in the region.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<[u8; 60]>::zeroed(4).build()?;
    /// assert!(Mempool::stride(&pool) >= 60);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn stride(&self) -> usize;

    /// Entries a cache holds before it flushes (DPDK's `cache_size`).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(256).cache_size(32).build()?;
    /// assert_eq!(Mempool::cache_size(&pool), 32);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn cache_size(&self) -> u32;

    /// The caches' flush and refill policy.
    ///
    /// ```
    /// use idxpool::{FlushPolicy, Mempool};
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(64).policy(FlushPolicy::Dpdk2607).build()?;
    /// assert_eq!(Mempool::policy(&pool), FlushPolicy::Dpdk2607);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn policy(&self) -> FlushPolicy;

    /// Objects a get can reach now (the common ring and the caches that count as free).
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let h = pool.get()?;
    /// assert_eq!(Mempool::available(&pool), 7);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn available(&self) -> usize;

    /// Objects owned by handles (or stranded in a forgotten cache) now.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let h = pool.get()?;
    /// assert_eq!(Mempool::in_use(&pool), 1);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn in_use(&self) -> usize;

    /// Entries in the common ring now.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).cache_size(0).build()?;
    /// assert_eq!(Mempool::ring_count(&pool), 8);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn ring_count(&self) -> usize;

    /// Gives the calling thread's (or attachment's) cached objects back to the common ring.
    ///
    /// ```
    /// use idxpool::Mempool;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(64).cache_size(16).build()?;
    /// let h = pool.get()?; // refills this thread's cache
    /// pool.put(h);
    /// Mempool::flush(&pool);
    /// assert_eq!(Mempool::ring_count(&pool), 64);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn flush(&self);
}

/// `forward!`: implements [`Mempool`] methods by calling the implementing type's inherent method of
/// the same name and signature (`Self::name` finds an inherent method first), `#[inline(always)]`.
/// One arm per method, its signature written once; an implementation lists what it forwards
/// (`forward!(get put ..)`) and writes the rest. The signatures' names (`forward`, `PoolError`,
/// `FlushPolicy`) are the caller's imports.
macro_rules! forward {
    ($(#[$at:meta])* fn $m:ident $(<$l:lifetime>)? (&$($sl:lifetime)? self $(, $a:ident: $t:ty)*)
        $(-> $r:ty)?) => {
        #[inline(always)]
        $(#[$at])*
        fn $m $(<$l>)? (&$($sl)? self $(, $a: $t)*) $(-> $r)? { Self::$m(self $(, $a)*) }
    };
    ($($m:ident)*) => { $(forward!(@ $m);)* };
    (@ get) => { forward!(fn get(&self) -> Result<Self::Handle, PoolError>); };
    (@ put) => { forward!(#[track_caller] fn put(&self, h: Self::Handle)); };
    (@ owns) => { forward!(fn owns(&self, h: &Self::Handle) -> bool); };
    (@ get_bulk) => {
        forward!(fn get_bulk(&self, out: &mut Vec<Self::Handle>, n: usize)
            -> Result<(), PoolError>);
    };
    (@ get_burst) => {
        forward!(fn get_burst(&self, out: &mut Vec<Self::Handle>, n: usize) -> usize);
    };
    (@ put_bulk) => {
        forward!(#[track_caller] fn put_bulk(&self, handles: &mut Vec<Self::Handle>));
    };
    (@ get_into) => {
        forward!(fn get_into(&self, table: &mut [Option<Self::Handle>]) -> Result<(), PoolError>);
    };
    (@ put_from) => {
        forward!(fn put_from(&self, table: &mut [Option<Self::Handle>]) -> Result<(), PoolError>);
    };
    (@ get_ref) => {
        forward!(#[track_caller] fn get_ref<'a>(&'a self, h: &'a Self::Handle) -> &'a Self::Object);
    };
    (@ get_mut) => {
        forward!(#[track_caller] fn get_mut<'a>(&'a self, h: &'a mut Self::Handle)
            -> &'a mut Self::Object);
    };
    (@ capacity) => { forward!(fn capacity(&self) -> u32); };
    (@ stride) => { forward!(fn stride(&self) -> usize); };
    (@ cache_size) => { forward!(fn cache_size(&self) -> u32); };
    (@ policy) => { forward!(fn policy(&self) -> FlushPolicy); };
    (@ available) => { forward!(fn available(&self) -> usize); };
    (@ in_use) => { forward!(fn in_use(&self) -> usize); };
    (@ ring_count) => { forward!(fn ring_count(&self) -> usize); };
    (@ flush) => { forward!(fn flush(&self)); };
}
pub(crate) use forward;

impl<T: ?Sized + Element, B: Brand, R: Repr> Mempool for Pool<T, B, R> {
    type Object = T;
    type Handle = Handle<T, B, R>;
    forward!(get put owns get_bulk get_burst put_bulk get_into put_from get_ref get_mut
        capacity stride cache_size policy available in_use ring_count flush);
}
