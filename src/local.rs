//! User-owned caches: the fast path with no thread-local lookup.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::brand::Brand;
use crate::cache::{Cache, Fast};
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
///
/// Aligned to 128 bytes (two cache lines): the owner writes its fast state (held in this value)
/// on every operation, so caches kept side by side, e.g. one per thread in a `Vec`, must not
/// share a line (false sharing made 2-thread runs collapse to 0.3x, BENCHMARKS.md).
#[repr(align(128))]
pub struct LocalCache<'p, T, B: Brand, R: Repr> {
    pool: &'p GenericPool<T, B, R>,
    cache: NonNull<Cache<R::Entry>>,
    /// Copy of the pool's geometry, so that handle conversion reads the caller's stack frame
    /// (registers, once inlined) instead of reloading the pool after every object write.
    geometry: Geometry,
    /// The cache's fast-path state (entries pointer, length, threshold) held here, where the
    /// compiler can keep it in registers across a loop of gets and puts; published to the
    /// shared cache with a relaxed store after each operation.
    fast: Fast<R::Entry>,
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
            // SAFETY: just allocated above; owned by this value.
            fast: unsafe { cache.as_ref() }.fast(),
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
        self.fast.len
    }

    /// True when the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Re-reads the cache's state after a slow-path call changed it.
    #[inline(always)]
    fn resync(&mut self) {
        // SAFETY: see c().
        self.fast = unsafe { self.cache.as_ref() }.fast();
    }

    /// Publishes the fast view's length (a relaxed store, never read back here).
    #[inline(always)]
    fn publish(&self, got: bool, n: usize) {
        // SAFETY: see c().
        unsafe { self.cache.as_ref() }.publish(&self.fast, got, n);
    }

    /// Takes one object: the most recently put one if any (LIFO), else after a refill.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when this cache and the ring are empty.
    #[inline(always)]
    pub fn get(&mut self) -> Result<H<T, B, R>, PoolError> {
        let mut e = MaybeUninit::<R::Entry>::uninit();
        // SAFETY: &mut self: we own the cache and its view; e is valid for one write.
        if unsafe { self.fast.try_get(e.as_mut_ptr(), 1) } {
            self.publish(true, 1);
            // SAFETY: written by try_get.
            let h = H::from_entry(unsafe { e.assume_init() });
            if crate::pool::DEBUG_CHECKS {
                self.pool.debug_mark_got(std::slice::from_ref(&h));
            }
            return Ok(h);
        }
        // SAFETY: as above.
        let r = unsafe { self.pool.op_get_one(self.c()) };
        self.resync();
        r
    }

    /// Returns one object.
    #[inline(always)]
    pub fn put(&mut self, h: H<T, B, R>) {
        if crate::pool::DEBUG_CHECKS {
            self.pool.debug_mark_put(std::slice::from_ref(&h));
        }
        let e = h.into_entry();
        // SAFETY: we own the cache and its view; &e is valid for one read.
        if unsafe { self.fast.try_put(&e, 1) } {
            self.publish(false, 1);
            return;
        }
        // SAFETY: as above; the entry was checked.
        unsafe { self.pool.put_entries(self.c(), &e, 1) };
        self.resync();
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and the objects this cache plus the ring
    /// held; `out` is unchanged.
    #[inline(always)]
    pub fn get_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        if n <= self.fast.len {
            out.reserve(n);
            let len = out.len();
            // SAFETY: room for n after len; H is repr(transparent) over R::Entry; we own the
            // cache; n <= fast.len so try_get succeeds and writes n entries.
            unsafe {
                let dst = out.as_mut_ptr().add(len).cast::<R::Entry>();
                self.fast.try_get(dst, n);
                out.set_len(len + n);
            }
            self.publish(true, n);
            if crate::pool::DEBUG_CHECKS {
                self.pool.debug_mark_got(&out[len..]);
            }
            return Ok(());
        }
        // SAFETY: &mut self: we own the cache.
        let r = unsafe { self.pool.op_get_bulk(self.c(), out, n) };
        self.resync();
        r
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[inline]
    pub fn get_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        // SAFETY: as get.
        let got = unsafe { self.pool.op_get_burst(self.c(), out, n) };
        self.resync();
        got
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
        let n = n.min(handles.len());
        let start = handles.len() - n;
        if n <= self.fast.fill_limit_room() {
            if crate::pool::DEBUG_CHECKS {
                self.pool.debug_mark_put(&handles[start..]);
            }
            // SAFETY: handles[start..] are n initialised handles, repr(transparent) over
            // entries; they fit (checked), so try_put copies them; set_len forgets them
            // (handles have no destructor): ownership passes to the cache.
            unsafe {
                self.fast
                    .try_put(handles.as_ptr().add(start).cast::<R::Entry>(), n);
                handles.set_len(start);
            }
            self.publish(false, n);
            return;
        }
        // SAFETY: as get.
        unsafe { self.pool.op_put_vec_tail(self.c(), handles, n) };
        self.resync();
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
        // SAFETY: &mut self owns the cache; dst is valid for N entries (H is
        // repr(transparent) over R::Entry).
        let ok = unsafe { self.fast.try_get(dst, N) };
        let res = if ok {
            self.publish(true, N);
            Ok(())
        } else {
            let ring = &self.pool.shared.ring;
            // SAFETY: as above.
            let r = unsafe { self.cache.as_ref().get_bulk(ring, dst, N) };
            self.resync();
            r
        };
        match res {
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
        if unsafe { self.fast.try_put(src, N) } {
            self.publish(false, N);
            return;
        }
        // SAFETY: as above.
        unsafe { self.pool.put_entries(self.c(), src, N) };
        self.resync();
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
        unsafe { self.cache.as_ref().flush(&self.pool.shared.ring) };
        self.resync();
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
