//! The pool's parts and their lifetime: the untyped core (`PoolCore`: ring, registry of
//! caches, zero-size cache, waiters, fork locks), the making of a `Pool` from its parts, and
//! the drops.

use super::*;

/// The untyped part of a pool, which thread-exit destructors may outlive the pool with: the
/// common ring, the registry of caches, and the zero-size cache of callers without one.
pub(crate) struct PoolCore<E> {
    pub(crate) ring: Ring<E>,
    pub(crate) registry: Registry<E>,
    /// The cache of callers that have none (cache size 0, threads beyond `max_threads`, code
    /// running during thread exit): size 0, so every operation goes to the ring (boxed, as
    /// every cache).
    pub(crate) uncached: Box<Cache<E>>,
    pub(crate) cache_size: u32,
    pub(crate) policy: FlushPolicy,
    /// Counters of caches that are gone (dropped local caches, exited threads' caches), folded
    /// in when they go, so that `stats()` keeps counting their operations.
    /// (Boxed, as `baseline`: the fork handlers reach their locks by raw pointers, `CoreLocks`.)
    pub(super) retired: Box<crate::fork::Lock<Stats>>,
    /// What `stats_reset()` subtracts.
    pub(super) baseline: Box<crate::fork::Lock<Stats>>,
    /// Objects lent to the kernel (published in an io_uring provided-buffer ring by
    /// `idxpool::uring`): neither free nor held by a handle. Written only by their lender.
    pub(crate) kernel_lent: std::sync::atomic::AtomicUsize,
    /// Getters waiting for objects, attached at build (wait.rs); their count is on the
    /// ring's producer line. Reached only through [`PoolCore::after_put`] (and by the waiting
    /// gets themselves).
    pub(crate) waiters: Box<dyn Waiters<E>>,
}

/// The getters waiting for objects (wait.rs), as the core sees them: attached at build, woken
/// by the operations whose token reached the ring. This is the seam of waiting, one per
/// direction: such an operation calls [`PoolCore::after_put`] once, after its token is gone
/// (out of line, cold), which tests the ring's count of waiters and only then calls in here.
pub(crate) trait Waiters<E>: std::any::Any + Send + Sync {
    /// Wakes waiters for the entries now in `ring`.
    fn wake_for(&self, ring: &Ring<E>);
    /// The fork's prepare handler: takes the waiters' lock (crate::fork, a leaf of its order).
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_prepare(&self);
    /// In the parent after the fork: releases it.
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_parent(&self);
    /// In the child after the fork (one thread, the lock still held): repairs the waiters,
    /// sets `waiting` (the ring's count of waiters) to those left, releases the lock.
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_child(&self, waiting: &crate::sync::AtomicU32);
}

impl<E> PoolCore<E> {
    /// Adds the counters of a cache that is going away to the pool's totals.
    pub(crate) fn retire_counters(&self, c: &Cache<E>) {
        if Stats::COUNTING {
            *self.retired.lock() += c.counters.snapshot();
        }
    }
}

impl<E: Copy + Send + 'static> PoolCore<E> {
    /// A new user-owned cache (`LocalCache`) of the pool's cache size and flush policy,
    /// registered (counts, stats and audits see it; its objects count as in use), and its
    /// token. The token holds raw pointers only: its nominal `'static` lends nothing.
    ///
    /// # Safety
    /// This core stays in place and alive while the token is used, and the token is not used
    /// after [`PoolCore::release_explicit_cache`] freed its cache.
    pub(crate) unsafe fn explicit_cache(&self) -> CacheMut<'static, E> {
        let cache = NonNull::from(Box::leak(Cache::new(self.cache_size, self.policy)));
        self.registry.add_explicit(cache);
        // SAFETY: the cache was just allocated and is owned by the token alone until
        // release_explicit_cache frees it (the registry only reads its atomic length); the
        // ring lives as long as this core (the caller's contract).
        unsafe { CacheMut::new(cache, &*(&self.ring as *const Ring<E>)) }
    }

    /// Unregisters and frees a cache made by [`PoolCore::explicit_cache`] (its token flushed
    /// it first), adding its counters to the pool's totals; nothing when `cache` is not one
    /// registered here.
    pub(crate) fn release_explicit_cache(&self, cache: NonNull<Cache<E>>) {
        let retire = || {
            // SAFETY: called only when `cache` was registered (remove_explicit), so allocated
            // by Box in explicit_cache and not yet freed.
            self.retire_counters(unsafe { cache.as_ref() });
        };
        if self.registry.remove_explicit(cache, retire) {
            // SAFETY: registered, so allocated by Box in explicit_cache and not yet freed;
            // unregistered now, so no reader remains but its token, which its contract forbids
            // to be used again.
            drop(unsafe { Box::from_raw(cache.as_ptr()) });
        }
    }

    /// # Errors
    /// [`PoolError::SizeOverflow`] when the slot array of `max_threads` slots cannot be
    /// allocated (fallible reserve: never an abort); the builder bounds `max_threads` first.
    pub(crate) fn new(
        ring: Ring<E>,
        max_threads: usize,
        cache_size: u32,
        policy: FlushPolicy,
        waiters: Box<dyn Waiters<E>>,
    ) -> Result<Self, PoolError> {
        Ok(PoolCore {
            ring,
            registry: Registry::new(max_threads)?,
            uncached: Cache::uncached(policy),
            cache_size,
            policy,
            retired: Box::new(crate::fork::Lock::new(Stats::default())),
            baseline: Box::new(crate::fork::Lock::new(Stats::default())),
            kernel_lent: std::sync::atomic::AtomicUsize::new(0),
            waiters,
        })
    }
}

impl<E: Copy + Send + 'static> PoolCore<E> {
    /// Gives the entries of forgotten `LocalCache`s (still registered although their owner is
    /// gone) back to the ring and frees their caches; returns how many there were.
    ///
    /// # Safety
    /// As [`Registry::reclaim_orphans`]: the caller holds `&mut` on the pool.
    pub(crate) unsafe fn reclaim_forgotten_caches(&self) -> usize {
        let reclaim = |c: NonNull<Cache<E>>| {
            // SAFETY: the cache's owner is gone (the caller's contract): this is its only user.
            unsafe { CacheMut::new(c, &self.ring) }.flush();
            // SAFETY: still allocated (reclaim_orphans frees it after this call).
            self.retire_counters(unsafe { c.as_ref() });
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.registry.reclaim_orphans(reclaim) }
    }
}

impl<E: Copy + Send + 'static> ExitFlush for PoolCore<E> {
    fn flush_exiting(&self, tid: usize) {
        self.registry.take_exiting(tid, |cache| {
            // SAFETY: the exiting thread owns its cache, just taken out of its slot.
            unsafe { CacheMut::new(NonNull::from(cache), &self.ring) }.flush();
            self.retire_counters(cache);
        });
        // After the token: the flushed objects may serve waiters.
        self.after_put();
    }
}

/// A pool's part in a fork (crate::fork): its locks in the fork's order (the registry's slot
/// locks and `LocalCache` list, the stats totals, the waiter queue), and in the child the
/// waiter queue's repair. Raw pointers into the core's heap parts only, never into the core:
/// its last drop (`Arc`'s, then `Drop::drop`) holds `&mut` on the core while it unlists this
/// part, which the handlers may be reading until then. Listed (owned by the fork's list) from
/// `Pool::from_parts`, when the core is in its `Arc`, until the core's drop.
#[cfg(all(unix, not(miri), not(loom)))]
struct CoreLocks<E> {
    registry: registry::RegistryLocks<E>,
    retired: *const crate::fork::RawLock,
    baseline: *const crate::fork::RawLock,
    waiters: *const dyn Waiters<E>,
    waiting: *const crate::sync::AtomicU32,
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E: Copy + Send + 'static> PoolCore<E> {
    /// Lists the core's locks with the fork handlers (once it is in its `Arc`).
    fn list_for_fork(&self) {
        let part = CoreLocks {
            registry: self.registry.fork_locks(),
            retired: self.retired.raw(),
            baseline: self.baseline.raw(),
            waiters: &*self.waiters,
            waiting: self.ring.waiting(),
        };
        // SAFETY: the parts pointed to (the registry's slot array and list box, the stats
        // boxes, the waiters' box, the ring's state) are freed only after the core's drop
        // unlists it (they are its fields, dropped after `Drop::drop`).
        unsafe { crate::fork::register_owned((self as *const Self).cast(), Box::new(part)) };
    }
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E: Copy + Send + 'static> crate::fork::Participant for CoreLocks<E> {
    fn fork_prepare(&self) {
        // SAFETY: listed only while the core lives (see `list_for_fork`); so in the two below.
        unsafe {
            self.registry.fork_prepare();
            (*self.retired).fork_take();
            (*self.baseline).fork_take();
            (*self.waiters).fork_prepare();
        }
    }

    fn fork_parent(&self) {
        // SAFETY: as above.
        unsafe {
            (*self.waiters).fork_parent();
            (*self.baseline).fork_release();
            (*self.retired).fork_release();
            self.registry.fork_release();
        }
    }

    fn fork_child(&self) {
        // SAFETY: as above.
        unsafe {
            (*self.waiters).fork_child(&*self.waiting);
            (*self.baseline).fork_release();
            (*self.retired).fork_release();
            self.registry.fork_release();
        }
    }
}

impl<E> Drop for PoolCore<E> {
    fn drop(&mut self) {
        // Before any field is dropped (a no-op for a core never listed). Only the address:
        // the handlers read the core's heap parts, never the core (`CoreLocks`).
        crate::fork::unregister((self as *const Self).cast());
    }
}

impl<T: ?Sized + Element, B, R: Repr> Pool<T, B, R> {
    /// Gives the entries of forgotten `LocalCache`s back to the ring (see
    /// `PoolCore::reclaim_forgotten_caches`); returns how many caches there were.
    pub(crate) fn reclaim_forgotten_caches(&mut self) -> usize {
        // SAFETY: &mut self: no LocalCache of this pool is alive, so any still registered was
        // forgotten (its owner is gone).
        unsafe { self.core.reclaim_forgotten_caches() }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    #[allow(clippy::too_many_arguments)] // the parts of a pool, named once, by the builder
    pub(crate) fn from_parts(
        geometry: Geometry,
        region: Region,
        core: Arc<PoolCore<R::Entry>>,
        name: String,
        brand: Option<&'static BrandSlot>,
        space: Option<crate::space::Range>,
        states: ObjectStates,
        growth: Growth,
    ) -> Self {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        #[cfg(all(unix, not(miri), not(loom)))]
        core.list_for_fork();
        Pool {
            geometry,
            core,
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            states,
            name,
            brand,
            space,
            growth,
            region,
            on_put: None,
            _marker: PhantomData,
        }
    }
}

impl<T: ?Sized + Element, B, R: Repr> Drop for Pool<T, B, R> {
    fn drop(&mut self) {
        // Quiescent (we own the pool); exiting threads may still flush, under the slot locks.
        self.reclaim_forgotten_caches();
        let mut in_ring = 0;
        let free = self.core.registry.held_by_threads_and(|| {
            in_ring = self.core.ring.count();
            in_ring
        });
        // The live capacity: &mut self, so no grow runs (it takes &self).
        let capacity = self.growth.capacity();
        let cap = capacity as usize;
        // A panicking leak hook is caught and resumed at the end (leaks::rethrow).
        let hook_panic = if free < cap {
            let lent_to_kernel = self
                .core
                .kernel_lent
                .load(std::sync::atomic::Ordering::Relaxed);
            crate::leaks::report(crate::leaks::AuditReport {
                pool: self.name.clone(),
                capacity: cap,
                in_ring,
                in_caches: free - in_ring,
                in_use: cap - free - lent_to_kernel.min(cap - free),
                lent_to_kernel,
                caches: Vec::new(),
            })
        } else {
            None
        };
        if let Some(slot) = self.brand {
            slot.release(free == cap);
        }
        if let Some(range) = self.space {
            // Objects still out: their handles must never meet a later pool (quarantine).
            crate::space::release(range, free == cap);
        }
        if T::needs_drop() {
            // SAFETY: every object below the live capacity was initialised (at creation or
            // by grow) and is dropped once here; no reference to it can outlive the pool (all
            // borrow &self). Objects beyond it were never made.
            unsafe { drop_objects::<T>(&self.geometry, 0, capacity) };
        }
        crate::leaks::rethrow(hook_panic);
        // The region unmaps after this (field drop order).
    }
}
