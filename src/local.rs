//! User-owned caches: the fast path with no thread-local lookup.

use std::ptr::NonNull;

use crate::brand::Brand;
use crate::cache::{Cache, CacheMut};
use crate::error::PoolError;
use crate::pool::{resolve, GenericPool, ObjectsMut, Resolver, H};
use crate::repr::{Geometry, Repr};
use crate::ring::Behavior;

/// A cache owned by its holder (DPDK's `rte_mempool_cache_create` + `rte_mempool_generic_get/
/// put` with an explicit cache): gets and puts through it touch only this cache until it must
/// flush to or refill from the common ring. No thread-local lookup, no atomic read-modify-write
/// on the cached path.
///
/// It borrows its pool, so the pool outlives it; dropping it flushes its objects back to the
/// ring. It is `Send` (move it to the thread that will use it) but not `Sync`. The objects it
/// holds are its holder's, as with DPDK's user-owned caches: `pool.available()` does not count
/// them (`in_use()` does). Passed to `mem::forget`, it strands them until the pool's `audit()`
/// or drop (whose `&mut` proves the cache gone) gives them back to the ring.
///
/// ```
/// idxpool::brand!(Bufs);
/// let pool = idxpool::PoolBuilder::<[u8; 256]>::zeroed(1024).cache_size(64).build::<Bufs>().unwrap();
/// let mut cache = pool.local_cache();
/// let mut burst = Vec::with_capacity(32);
/// cache.get_bulk(&mut burst, 32).unwrap();
/// for h in burst.iter_mut() {
///     cache.get_mut(h)[0] = 1;
/// }
/// cache.put_bulk(&mut burst);
/// assert_eq!(pool.in_use(), cache.len()); // cached objects are the cache holder's
/// drop(cache);
/// assert_eq!(pool.in_use(), 0);
/// ```
///
/// Aligned to 128 bytes (two cache lines): the owner writes its fast state (held in this value)
/// on every operation, so caches kept side by side, e.g. one per thread in a `Vec`, must not
/// share a line (false sharing made 2-thread runs collapse to 0.3x, BENCHMARKS.md).
#[repr(align(128))]
pub struct LocalCache<'p, T, B: Brand, R: Repr> {
    pool: &'p GenericPool<T, B, R>,
    /// The owner token of this value's own cache (boxed in `new`, freed in `drop`). It holds
    /// the cache's fast-path state (entries pointer, length, threshold) here, where the
    /// compiler can keep it in registers across a loop of gets and puts.
    cm: CacheMut<'p, R::Entry>,
    /// Copy of the pool's geometry, so that handle conversion reads the caller's stack frame
    /// (registers, once inlined) instead of reloading the pool after every object write.
    geometry: Geometry,
}

// SAFETY: the cache is owned by this value alone (the registry only reads its atomic length);
// moving it to another thread moves that ownership. Objects moved through it need T: Send.
unsafe impl<T: Send, B: Brand, R: Repr> Send for LocalCache<'_, T, B, R> {}

impl<'p, T, B: Brand, R: Repr> LocalCache<'p, T, B, R> {
    pub(crate) fn new(pool: &'p GenericPool<T, B, R>) -> Self {
        let core = &*pool.core;
        let cache = NonNull::from(Box::leak(Box::new(Cache::new(
            core.cache_size,
            core.policy,
        ))));
        core.registry.add_explicit(cache);
        LocalCache {
            pool,
            // SAFETY: the cache was just allocated and is owned by this value alone until its
            // drop frees it (the registry only reads its atomic length); the ring lives for 'p.
            cm: unsafe { CacheMut::new(cache, &core.ring) },
            geometry: pool.geometry,
        }
    }

    /// The pool.
    pub fn pool(&self) -> &'p GenericPool<T, B, R> {
        self.pool
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
    pub fn get(&mut self) -> Result<H<T, B, R>, PoolError> {
        self.pool.get_array_via::<1>(&mut self.cm).map(|[h]| h)
    }

    /// Returns one object.
    #[inline(always)]
    pub fn put(&mut self, h: H<T, B, R>) {
        self.pool.put_via(&mut self.cm, &[h]);
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and the objects this cache plus the ring
    /// held; `out` is unchanged (nothing is allocated for a request larger than the pool).
    #[inline(always)]
    #[must_use = "on Ok, `out` holds objects that must be given back with cache.put_bulk"]
    pub fn get_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        self.pool
            .get_vec_via(&mut self.cm, out, n, Behavior::Bulk)
            .map(|_| ())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[inline]
    #[must_use = "the count says how many objects were appended to `out`; give them back with cache.put_bulk"]
    pub fn get_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        self.pool
            .get_vec_via(&mut self.cm, out, n, Behavior::Burst)
            .unwrap_or(0)
    }

    /// Returns every handle of `handles`, leaving it empty. Always succeeds.
    #[inline(always)]
    pub fn put_bulk(&mut self, handles: &mut Vec<H<T, B, R>>) {
        self.put_bulk_tail(handles, handles.len())
    }

    /// Returns the last `n` handles of `handles` (all of them if it holds fewer) and
    /// truncates it.
    #[inline(always)]
    pub fn put_bulk_tail(&mut self, handles: &mut Vec<H<T, B, R>>, n: usize) {
        self.pool.put_vec_tail_via(&mut self.cm, handles, n);
    }

    /// Takes exactly `N` objects as an array (bulk size known at compile time: DPDK's
    /// `constant_n`).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] as [`LocalCache::get_bulk`].
    #[inline(always)]
    #[must_use = "the handles own objects: give them back with cache.put_array"]
    pub fn get_array<const N: usize>(&mut self) -> Result<[H<T, B, R>; N], PoolError> {
        self.pool.get_array_via::<N>(&mut self.cm)
    }

    /// Returns `N` objects given as an array.
    #[inline(always)]
    pub fn put_array<const N: usize>(&mut self, handles: [H<T, B, R>; N]) {
        self.pool.put_via(&mut self.cm, &handles);
    }

    /// Shared access to an object (see [`GenericPool::get_ref`]). The reference borrows the
    /// handle and the *pool* (`'p`), not this cache, so the cache can keep allocating while it
    /// lives.
    #[inline(always)]
    pub fn get_ref<'a>(&self, h: &'a H<T, B, R>) -> &'a T
    where
        'p: 'a,
    {
        // SAFETY: as GenericPool::get_ref (same geometry, same brand); the result lives no
        // longer than the handle borrow and the pool borrow 'p.
        unsafe { resolve::<T, R>(&self.geometry, h.entry()).as_ref() }
    }

    /// Exclusive access to an object (see [`GenericPool::get_mut`]). The reference borrows the
    /// handle (mutably: one `&mut T` per handle at a time) and the *pool* (`'p`), not this
    /// cache, so a burst loop can hold it while the same cache allocates:
    ///
    /// ```
    /// idxpool::PoolBuilder::<u64>::with_default(64).cache_size(16).scoped(|pool| {
    ///     let mut cache = pool.local_cache();
    ///     let mut first = cache.get().unwrap();
    ///     let x = cache.get_mut(&mut first);   // &mut u64 tied to the pool and `first`
    ///     let second = cache.get().unwrap();   // the cache keeps allocating
    ///     *x = 7;
    ///     cache.put(second);
    ///     cache.put(first);
    /// }).unwrap();
    /// ```
    ///
    /// [`GenericPool::resolver`] gives a `Copy` converter with the same borrow shape that holds
    /// the pool's base and stride by value (for hot loops, and for code that has the pool but
    /// not the cache at hand).
    #[inline(always)]
    pub fn get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> &'a mut T
    where
        'p: 'a,
    {
        // SAFETY: as GenericPool::get_mut (same geometry, same brand; &mut h is exclusive and
        // no other handle names the object); the result lives no longer than the handle borrow
        // and the pool borrow 'p.
        unsafe { resolve::<T, R>(&self.geometry, h.entry()).as_mut() }
    }

    /// A resolver over this cache's copy of the geometry (no reload from the pool).
    #[inline(always)]
    fn objs(&self) -> Resolver<'p, T, B, R> {
        Resolver::with_geometry(self.pool, self.geometry)
    }

    /// Prefetches the first cache line of the object of `h` for writing (see
    /// [`Resolver::prefetch`]: DPDK's `rte_prefetch0_write`, VPP's
    /// `vlib_prefetch_buffer_header`). A hint only: nothing is read or written.
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        self.objs().prefetch(h)
    }

    /// Prefetches the objects of every handle of `hs` (see [`Resolver::prefetch_all`]), e.g.
    /// right after [`LocalCache::get_bulk`], before writing through them.
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[H<T, B, R>]) {
        self.objs().prefetch_all(hs)
    }

    /// Converts `min(hs.len(), out.len())` handles to raw object pointers and returns that
    /// count (see [`Resolver::resolve_bulk`]: VPP's `vlib_get_buffers`). Dereferencing the
    /// pointers is the caller's `unsafe` responsibility, as for [`GenericPool::as_ptr`].
    #[inline]
    pub fn resolve_bulk(&self, hs: &[H<T, B, R>], out: &mut [NonNull<T>]) -> usize {
        self.objs().resolve_bulk(hs, out)
    }

    /// `&mut T` to the object of each handle of `hs`, in order (see
    /// [`Resolver::get_mut_all`]; sound because distinct handles own distinct objects). As
    /// with [`LocalCache::get_mut`], the references borrow `hs` (mutably) and the *pool*, not
    /// this cache, so the cache can keep allocating while they live.
    #[inline(always)]
    pub fn get_mut_all<'a>(&self, hs: &'a mut [H<T, B, R>]) -> ObjectsMut<'a, T, B, R>
    where
        'p: 'a,
    {
        self.objs().get_mut_all(hs)
    }

    /// Returns every cached object to the ring (rte_mempool_cache_flush).
    pub fn flush(&mut self) {
        self.cm.flush();
    }
}

impl<T, B: Brand, R: Repr> Drop for LocalCache<'_, T, B, R> {
    fn drop(&mut self) {
        self.flush();
        let cache = self.cm.cache_ptr();
        self.pool.core.registry.remove_explicit(cache);
        // SAFETY: still allocated (freed below); unregistered, so only this value reads it.
        self.pool.core.retire_counters(unsafe { cache.as_ref() });
        // SAFETY: unregistered, so no reader remains; allocated by Box in new(); the token in
        // `cm` is not used again.
        drop(unsafe { Box::from_raw(cache.as_ptr()) });
    }
}

impl<T, B: Brand, R: Repr> std::fmt::Debug for LocalCache<'_, T, B, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCache")
            .field("pool", &self.pool.name())
            .field("len", &self.len())
            .finish()
    }
}
