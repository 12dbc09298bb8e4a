//! User-owned caches: the fast path with no thread-local lookup.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::brand::Brand;
use crate::cache::Cache;
use crate::error::PoolError;
use crate::pool::{CachePtr, GenericPool, H};
use crate::repr::{Geometry, Repr};

/// A cache owned by its holder (DPDK's `rte_mempool_cache_create` + `rte_mempool_generic_get/
/// put` with an explicit cache): gets and puts through it touch only this cache until it must
/// flush to or refill from the common ring. No thread-local lookup, no atomic read-modify-write
/// on the cached path.
///
/// It borrows its pool, so the pool outlives it; dropping it flushes its objects back to the
/// ring. It is `Send` (move it to the thread that will use it) but not `Sync`.
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
/// assert_eq!(pool.in_use(), 0);
/// ```
pub struct LocalCache<'p, T, B: Brand, R: Repr> {
    pool: &'p GenericPool<T, B, R>,
    cache: NonNull<Cache<R::Entry>>,
    /// Copy of the pool's geometry, so that handle conversion reads the caller's stack frame
    /// (registers, once inlined) instead of reloading the pool after every object write.
    geometry: Geometry,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

// SAFETY: the cache is owned by this value alone (the registry only reads its atomic length);
// moving it to another thread moves that ownership. Objects moved through it need T: Send.
unsafe impl<T: Send, B: Brand, R: Repr> Send for LocalCache<'_, T, B, R> {}

impl<'p, T, B: Brand, R: Repr> LocalCache<'p, T, B, R> {
    pub(crate) fn new(pool: &'p GenericPool<T, B, R>) -> Self {
        let cache = NonNull::from(Box::leak(Box::new(Cache::new(
            pool.shared.cache_size,
            pool.shared.policy,
        ))));
        pool.shared
            .explicit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(CachePtr(cache));
        LocalCache {
            pool,
            cache,
            geometry: pool.geometry,
            _not_sync: std::marker::PhantomData,
        }
    }

    #[inline(always)]
    fn c(&self) -> Option<&Cache<R::Entry>> {
        // SAFETY: the cache lives until this value is dropped.
        Some(unsafe { self.cache.as_ref() })
    }

    /// The pool.
    pub fn pool(&self) -> &'p GenericPool<T, B, R> {
        self.pool
    }

    /// Objects held by this cache now.
    pub fn len(&self) -> usize {
        // SAFETY: see c().
        unsafe { self.cache.as_ref() }.len()
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
    pub fn get(&mut self) -> Result<H<T, B, R>, PoolError> {
        // SAFETY: &mut self: we are the cache's only user.
        unsafe { self.pool.op_get_one(self.c()) }
    }

    /// Returns one object.
    #[inline(always)]
    pub fn put(&mut self, h: H<T, B, R>) {
        // SAFETY: as get.
        unsafe { self.pool.op_put_one(self.c(), h) }
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and the objects this cache plus the ring
    /// held; `out` is unchanged.
    #[inline]
    pub fn get_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        // SAFETY: as get.
        unsafe { self.pool.op_get_bulk(self.c(), out, n) }
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[inline]
    pub fn get_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        // SAFETY: as get.
        unsafe { self.pool.op_get_burst(self.c(), out, n) }
    }

    /// Returns every handle of `handles`, leaving it empty. Always succeeds.
    #[inline]
    pub fn put_bulk(&mut self, handles: &mut Vec<H<T, B, R>>) {
        // SAFETY: as get.
        unsafe { self.pool.op_put_vec_tail(self.c(), handles, handles.len()) }
    }

    /// Returns the last `n` handles of `handles` (all of them if it holds fewer) and
    /// truncates it.
    #[inline]
    pub fn put_bulk_tail(&mut self, handles: &mut Vec<H<T, B, R>>, n: usize) {
        // SAFETY: as get.
        unsafe { self.pool.op_put_vec_tail(self.c(), handles, n) }
    }

    /// Takes exactly `N` objects as an array (bulk size known at compile time: DPDK's
    /// `constant_n`).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] as [`LocalCache::get_bulk`].
    #[inline(always)]
    pub fn get_array<const N: usize>(&mut self) -> Result<[H<T, B, R>; N], PoolError> {
        let mut out = MaybeUninit::<[H<T, B, R>; N]>::uninit();
        let dst = out.as_mut_ptr().cast::<R::Entry>();
        let ring = &self.pool.shared.ring;
        // SAFETY: &mut self owns the cache; dst is valid for N entries (H is
        // repr(transparent) over R::Entry).
        match unsafe { self.cache.as_ref().get_bulk(ring, dst, N) } {
            Ok(()) => {
                // SAFETY: all N entries were written.
                let arr = unsafe { out.assume_init() };
                if crate::pool::DEBUG_CHECKS {
                    self.pool.debug_mark_got(&arr);
                }
                Ok(arr)
            }
            Err(available) => Err(PoolError::Exhausted {
                requested: N,
                available,
            }),
        }
    }

    /// Returns `N` objects given as an array.
    #[inline(always)]
    pub fn put_array<const N: usize>(&mut self, handles: [H<T, B, R>; N]) {
        if crate::pool::DEBUG_CHECKS {
            self.pool.debug_mark_put(&handles);
        }
        let handles = std::mem::ManuallyDrop::new(handles);
        let src = handles.as_ptr().cast::<R::Entry>();
        // SAFETY: &mut self owns the cache; src holds N entries whose handles are forgotten.
        unsafe { self.pool.put_entries(self.c(), src, N) };
    }

    /// Shared access to an object (see [`GenericPool::get_ref`]).
    #[inline(always)]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        // SAFETY: as GenericPool::get_ref (same geometry, same brand).
        unsafe { &*R::ptr(&self.geometry, h.entry()).cast::<T>() }
    }

    /// Exclusive access to an object (see [`GenericPool::get_mut`]).
    #[inline(always)]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        // SAFETY: as GenericPool::get_mut (same geometry, same brand; &mut h is exclusive).
        unsafe { &mut *R::ptr(&self.geometry, h.entry()).cast::<T>() }
    }

    /// Returns every cached object to the ring (rte_mempool_cache_flush).
    pub fn flush(&mut self) {
        // SAFETY: &mut self owns the cache.
        unsafe { self.cache.as_ref().flush(&self.pool.shared.ring) }
    }
}

impl<T, B: Brand, R: Repr> Drop for LocalCache<'_, T, B, R> {
    fn drop(&mut self) {
        self.flush();
        let mut reg = self
            .pool
            .shared
            .explicit
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reg.retain(|c| c.0 != self.cache);
        drop(reg);
        // SAFETY: unregistered, so no reader remains; allocated by Box in new().
        drop(unsafe { Box::from_raw(self.cache.as_ptr()) });
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
