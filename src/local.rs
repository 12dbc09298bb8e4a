//! User-owned caches: the fast path with no thread-local lookup.

use crate::cache::CacheMut;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::repr::{Geometry, ReprImpl};
use crate::ring::Behavior;

/// The handle type of the pool behind `P`.
type H<P> = Handle<<P as PoolRef>::T, <P as PoolRef>::B, <P as PoolRef>::R>;
/// The entry type of the pool behind `P`.
type E<P> = <<P as PoolRef>::R as ReprImpl>::Entry;

/// A cache owned by its holder (DPDK's `rte_mempool_cache_create` + `rte_mempool_generic_get/put`
/// with an explicit cache): gets and puts touch only this cache until it must flush to or refill
/// from the common ring. No thread-local lookup, no atomic read-modify-write on the cached path.
///
/// `P` is how it holds its pool ([`PoolRef`]): `&Pool` ([`crate::Pool::local_cache`]) or
/// `Arc<Pool>` ([`LocalCache::new`]: `'static`, keeps the pool alive, moves into
/// `std::thread::spawn`). Dropping it flushes its objects to the ring. `Send`, not `Sync`; methods
/// that move objects take `&mut self`. Handle -> `&T` / `&mut T` is the pool's
/// ([`crate::Pool::get_mut`]) or a [`crate::Resolver`]'s, which borrow the pool, not the cache, so
/// a `&mut T` can be held while the cache allocates.
///
/// Its objects are its holder's, as with DPDK's user-owned caches: `pool.available()` does not
/// count them (`in_use()` does). Forgotten (`mem::forget`), it strands them until the pool's
/// `audit()` or drop (whose `&mut` proves the cache gone) returns them to the ring.
///
/// ```
/// let pool = idxpool::PoolBuilder::<[u8; 256]>::zeroed(1024).cache_size(64).build()?;
/// let objs = pool.resolver();
/// let mut cache = pool.local_cache();
/// let mut burst = Vec::with_capacity(32);
/// cache.get_bulk(&mut burst, 32)?;
/// for h in burst.iter_mut() {
///     objs.get_mut(h)[0] = 1;
/// }
/// cache.put_bulk(&mut burst);
/// assert_eq!(pool.in_use(), cache.len()); // cached objects are the cache holder's
/// drop(cache);
/// assert_eq!(pool.in_use(), 0);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// Aligned to 128 bytes (two cache lines): the owner writes its fast state here on every operation,
/// so caches side by side (one per thread in a `Vec`) must not share a line (false sharing,
/// BENCHMARKS.md).
#[repr(align(128))]
pub struct LocalCache<P: PoolRef> {
    /// The owner token of this value's own cache (boxed in `new`, freed in `drop`): holds the
    /// entries pointer and threshold here, where the compiler keeps them in registers across a loop
    /// (the length lives in the cache). Its `'static` is nominal: raw pointers only (see
    /// `CacheMut`), valid while `pool` lives, used only through `&mut self`.
    pub(crate) cm: CacheMut<'static, E<P>>,
    /// A copy of the pool's geometry, for run-time pools' identity check on every put (and the
    /// `put_hook` flag test): held here, it stays in registers across a loop of puts instead of
    /// being reloaded after every store through a raw pointer (which may alias the pool).
    pub(crate) geometry: Geometry,
    pub(crate) pool: P,
}

// SAFETY: the cache is owned by this value alone (the registry only reads its atomic length);
// moving it moves that ownership, `P: Send` moves the pool reference, and objects moved through it
// need T: Send.
unsafe impl<P: PoolRef + Send> Send for LocalCache<P> where P::T: Send {}

impl<T: ?Sized + crate::Element, B: crate::Brand, R: crate::repr::Repr> crate::Pool<T, B, R> {
    /// A user-owned cache borrowing this pool (rte_mempool_cache_create +
    /// rte_mempool_generic_get/put): no thread-local state; its objects go back to the ring on
    /// drop. For one holding an `Arc` of the pool, [`LocalCache::new`]`(arc.clone())`.
    pub fn local_cache(&self) -> LocalCache<&Self> {
        LocalCache::new(self)
    }
}

impl<P: PoolRef> LocalCache<P> {
    /// A new cache of the pool `pool` refers to (`&pool`, or an `Arc<Pool>` clone), of the pool's
    /// cache size and policy, registered with the pool (`stats()` includes its counters; its
    /// objects count as in use, as DPDK's counts ignore user-owned caches:
    /// [`Pool::available`](crate::Pool::available)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let pool = Arc::new(idxpool::PoolBuilder::<u64>::with_default(64).build()?);
    /// let mut cache = idxpool::LocalCache::new(pool.clone());
    /// std::thread::spawn(move || {
    ///     let h = cache.get().unwrap();
    ///     cache.put(h);
    /// }).join().unwrap();
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn new(pool: P) -> Self {
        let p = pool.pool();
        // SAFETY: `pool`, stored next to the token, keeps the pool in place and alive (PoolRef)
        // while the token is used; the drop releases the cache last.
        let cm = unsafe { p.core.explicit_cache() };
        let geometry = p.geometry;
        LocalCache { cm, geometry, pool }
    }

    /// The pool (as held: `&&Pool` or `&Arc<Pool>`; both dereference to the pool).
    pub fn pool(&self) -> &P {
        &self.pool
    }

    /// Objects held by this cache now.
    pub fn len(&self) -> usize {
        self.cm.len()
    }

    /// True when the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes one object: the most recently put one if any (LIFO), else after a refill.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when this cache and the ring are empty.
    #[inline(always)]
    #[must_use = "the handle owns an object: give it back with cache.put(h)"]
    pub fn get(&mut self) -> Result<H<P>, PoolError> {
        self.pool
            .pool()
            .get_array_via::<_, 1>(|| &mut self.cm)
            .map(|[h]| h)
    }

    /// Returns one object.
    ///
    /// # Panics
    /// Run-time pools: when `h` is another pool's (nothing is moved).
    #[inline(always)]
    #[track_caller]
    pub fn put(&mut self, h: H<P>) {
        self.pool
            .pool()
            .put_via(&self.geometry, || &mut self.cm, &[h]);
    }

    /// [`LocalCache::put`] that gives a foreign handle back (`Err(h)`, nothing moved) instead of
    /// panicking, as [`Pool::try_put`](crate::Pool::try_put).
    ///
    /// # Errors
    /// `Err(h)` when `h` is another pool's ([`Pool::check`](crate::Pool::check) says which).
    ///
    /// ```
    /// use idxpool::PoolBuilder;
    /// let a = PoolBuilder::<u64>::with_default(8).build()?;
    /// let b = PoolBuilder::<u64>::with_default(8).build()?;
    /// let mut cache = a.local_cache();
    /// let h = b.get()?;
    /// let h = cache.try_put(h).unwrap_err(); // b's handle: given back, not consumed
    /// b.put(h);
    /// let mine = cache.get()?;
    /// cache.try_put(mine).unwrap();
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline(always)]
    pub fn try_put(&mut self, h: H<P>) -> Result<(), H<P>> {
        if !self.pool.pool().owns(&h) {
            return Err(h);
        }
        self.put(h);
        Ok(())
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and what this cache plus the ring held; `out`
    /// is unchanged (nothing allocated for a request larger than the pool).
    #[inline(always)]
    #[must_use = "on Ok, `out` holds objects that must be given back with cache.put_bulk"]
    pub fn get_bulk(&mut self, out: &mut Vec<H<P>>, n: usize) -> Result<(), PoolError> {
        self.pool
            .pool()
            .get_vec_via(|| &mut self.cm, out, n, Behavior::Bulk, true)
            .map(|_| ())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[inline]
    #[must_use = "the count says how many objects were appended to `out`; give them back with cache.put_bulk"]
    pub fn get_burst(&mut self, out: &mut Vec<H<P>>, n: usize) -> usize {
        self.pool
            .pool()
            .get_vec_via(|| &mut self.cm, out, n, Behavior::Burst, true)
            .unwrap_or(0)
    }

    /// [`LocalCache::get_burst`] without the type's reset on get (`Element::RESET_ON_GET`), for the
    /// kernel receivers' refills: a lent object has no handle, and reaches a user only through a
    /// receive, which writes every field the reset writes (`RxObject::received`), or a put, after
    /// which the next get resets it. Resetting here would write its cold header line twice per
    /// packet.
    #[cfg(all(
        any(feature = "uring", feature = "xdp"),
        target_os = "linux",
        not(loom)
    ))]
    #[inline]
    pub(crate) fn get_burst_for_kernel(&mut self, out: &mut Vec<H<P>>, n: usize) -> usize {
        self.pool
            .pool()
            .get_vec_via(|| &mut self.cm, out, n, Behavior::Burst, false)
            .unwrap_or(0)
    }

    /// Returns every handle of `handles`, leaving it empty. Always succeeds.
    ///
    /// # Panics
    /// Run-time pools: when one of the handles is another pool's (all checked first: nothing is
    /// moved).
    #[inline(always)]
    #[track_caller]
    pub fn put_bulk(&mut self, handles: &mut Vec<H<P>>) {
        self.put_bulk_tail(handles, handles.len())
    }

    /// Returns the last `n` handles of `handles` (all if fewer) and truncates it.
    ///
    /// # Panics
    /// As [`LocalCache::put_bulk`].
    #[inline(always)]
    #[track_caller]
    pub fn put_bulk_tail(&mut self, handles: &mut Vec<H<P>>, n: usize) {
        self.pool
            .pool()
            .put_vec_tail_via(&self.geometry, || &mut self.cm, handles, n);
    }

    /// Takes exactly `N` objects as an array (DPDK's `constant_n`). The array comes back by value
    /// in a `Result` (one copy through the stack); a hot loop storing handles in its own table
    /// should use [`LocalCache::get_into`] with a constant-length slice (written straight into the
    /// slots, BENCHMARKS.md).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] as [`LocalCache::get_bulk`].
    #[inline(always)]
    #[must_use = "the handles own objects: give them back with cache.put_array"]
    pub fn get_array<const N: usize>(&mut self) -> Result<[H<P>; N], PoolError> {
        self.pool.pool().get_array_via::<_, N>(|| &mut self.cm)
    }

    /// Returns `N` objects given as an array.
    ///
    /// # Panics
    /// As [`LocalCache::put_bulk`].
    #[inline(always)]
    #[track_caller]
    pub fn put_array<const N: usize>(&mut self, handles: [H<P>; N]) {
        if !self
            .pool
            .pool()
            .try_put_via(&self.geometry, || &mut self.cm, &handles)
        {
            self.put_array_mixed(handles)
        }
    }

    /// A `put_array` with another pool's handle: this pool's handles go back (the consumed array
    /// would lose them), then the panic names the foreign one, whose object stays out of its pool
    /// until that pool is dropped.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn put_array_mixed<const N: usize>(&mut self, handles: [H<P>; N]) -> ! {
        let pool = self.pool.pool();
        let (mut mine, foreign): (Vec<H<P>>, Vec<H<P>>) =
            handles.into_iter().partition(|h| pool.owns(h));
        let e = foreign
            .first()
            .and_then(|h| pool.check(h).err())
            .map_or_else(|| "a foreign handle".to_string(), |e| e.to_string());
        self.put_bulk(&mut mine);
        panic!("idxpool: {e}")
    }

    /// Returns every cached object to the ring (rte_mempool_cache_flush).
    pub fn flush(&mut self) {
        self.cm.flush();
        let core = &self.pool.pool().core;
        core.after_put(); // wait.rs
    }
}

impl<P: PoolRef> Drop for LocalCache<P> {
    fn drop(&mut self) {
        self.flush();
        // The token is not used again.
        self.pool
            .pool()
            .core
            .release_explicit_cache(self.cm.cache_ptr());
        // `pool` drops after this (field drop): for an `Arc`, possibly the pool itself.
    }
}

impl<P: PoolRef> std::fmt::Debug for LocalCache<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCache")
            .field("pool", &self.pool.pool().name())
            .field("len", &self.len())
            .finish()
    }
}
