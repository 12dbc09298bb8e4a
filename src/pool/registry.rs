//! The registry of a pool's caches (the pool's, as DPDK's `local_cache` array is the
//! mempool's): implicit per-thread caches (thread ids, one slot per tid, giving a thread's
//! cached objects back to the ring when the thread exits) and the user-owned
//! [`crate::LocalCache`]s, so that counts, audits and the pool's drop see every cache.
//!
//! Each thread that uses `pool.get()` gets a small process-wide id (`tid`), recycled when the
//! thread exits (as sharded-slab's `Tid`). A pool has one cache slot per tid, up to its
//! `max_threads`; the slot's cache is allocated on the thread's first use and registered in the
//! thread's exit list. At thread exit a TLS destructor flushes each registered cache into its
//! pool's ring and frees it, then releases the tid. Threads beyond `max_threads`, and code that
//! runs while the thread's TLS is being torn down, use the ring directly (no cache).

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::Weak;

use super::MEMO;
use crate::cache::Cache;
use crate::error::PoolError;
use crate::fork::{GlobalLock, Lock, LockGuard, RawLock};
use crate::sync::{AtomicPtr, Ordering};

/// A pool's side of thread exit.
pub(crate) trait ExitFlush: Send + Sync {
    /// Flushes and frees the cache of `tid` (called on the exiting thread itself).
    fn flush_exiting(&self, tid: usize);
}

struct TidAllocator {
    next: usize,
    free: Vec<usize>,
}

/// The process's thread ids (a global lock of crate::fork's order).
static TIDS: GlobalLock<TidAllocator> = GlobalLock::new(TidAllocator {
    next: 0,
    free: Vec::new(),
});

const NO_TID: usize = usize::MAX;

thread_local! {
    /// This thread's tid, or NO_TID: a const TLS read on the hot path (no lazy init check).
    static TID: Cell<usize> = const { Cell::new(NO_TID) };
    /// Registered pools and the tid, released by Drop at thread exit.
    static GUARD: ExitGuard = const { ExitGuard { pools: RefCell::new(Vec::new()) } };
}

struct ExitGuard {
    pools: RefCell<Vec<Weak<dyn ExitFlush>>>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = MEMO.try_with(|m| m.set((0, std::ptr::null())));
        let tid = TID.try_with(|t| t.replace(NO_TID)).unwrap_or(NO_TID);
        if tid == NO_TID {
            return;
        }
        for pool in self.pools.borrow_mut().drain(..) {
            if let Some(pool) = pool.upgrade() {
                pool.flush_exiting(tid);
            }
        }
        TIDS.lock().free.push(tid);
    }
}

/// Memoises this thread's cache of pool `id` (ignored during TLS teardown).
#[inline]
fn memo_store(id: u64, cache: *const ()) {
    // Only while the exit guard is alive: after its destructor ran, nothing may be memoised.
    if GUARD.try_with(|_| ()).is_ok() {
        let _ = MEMO.try_with(|m| m.set((id, cache)));
    }
}

/// The calling thread's tid if it has one (hot path: one TLS load).
#[inline(always)]
fn current_tid() -> usize {
    TID.try_with(|t| t.get()).unwrap_or(NO_TID)
}

/// Assigns a tid to the calling thread if it has none. `None` while the thread's TLS is being
/// torn down (then the caller must not cache).
fn ensure_tid() -> Option<usize> {
    let tid = TID.try_with(|t| t.get()).ok()?;
    if tid != NO_TID {
        return Some(tid);
    }
    // Touch the guard first so that its destructor is registered before we take a tid.
    GUARD.try_with(|_| ()).ok()?;
    let tid = {
        let mut t = TIDS.lock();
        match t.free.pop() {
            Some(tid) => tid,
            None => {
                t.next += 1;
                t.next - 1
            }
        }
    };
    TID.try_with(|t| t.set(tid)).ok()?;
    Some(tid)
}

/// Registers `pool` for a flush of this thread's cache at exit. Returns false when the
/// thread is exiting (the caller then must not install a cache).
fn register(pool: Weak<dyn ExitFlush>) -> bool {
    GUARD
        .try_with(|g| match g.pools.try_borrow_mut() {
            Ok(mut v) => {
                v.retain(|w| w.strong_count() > 0);
                v.push(pool);
                true
            }
            Err(_) => false,
        })
        .unwrap_or(false)
}

/// One implicit cache slot: the cache of the thread whose tid is this slot's index.
///
/// Not padded: the owner only reads `cache` (and only when its memo misses); `lock` is written
/// by the exit flush, counts, audits and drop, never on the hot path. The cache itself, which
/// its owner writes on every operation, is a separate cache-line-aligned allocation.
struct ThreadSlot<E> {
    /// Null until the thread's first use; freed (set null) at the thread's exit.
    cache: AtomicPtr<Cache<E>>,
    /// Taken by the exit flush, `available()`, `audit()` and drop: never by the owner's hot
    /// path (the owner is the only thread that frees the cache, and only at its exit).
    lock: RawLock,
}

impl<E> ThreadSlot<E> {
    fn lock(&self) -> SlotGuard<'_, E> {
        self.lock.lock();
        SlotGuard(self)
    }
}

struct SlotGuard<'a, E>(&'a ThreadSlot<E>);

impl<E> Drop for SlotGuard<'_, E> {
    fn drop(&mut self) {
        self.0.lock.unlock();
    }
}

/// A registered user-owned cache (raw pointer to its boxed `Cache`).
struct CachePtr<E>(NonNull<Cache<E>>);
// SAFETY: the pointee is a Cache<E> (Sync for E: Send) kept alive until unregistered.
unsafe impl<E: Send> Send for CachePtr<E> {}

/// Every cache of one pool: a slot per thread id for the implicit caches, and the list of
/// live user-owned caches.
pub(crate) struct Registry<E> {
    slots: Box<[ThreadSlot<E>]>,
    /// Boxed: the fork handlers reach its lock by a raw pointer ([`RegistryLocks`]).
    explicit: Box<Lock<Vec<CachePtr<E>>>>,
}

impl<E: Copy + Send + 'static> Registry<E> {
    /// Room for `max_threads` implicit caches.
    ///
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the slot array cannot be allocated (fallible reserve:
    /// never an abort); the builder bounds `max_threads` first.
    pub(crate) fn new(max_threads: usize) -> Result<Self, PoolError> {
        let mut slots: Vec<ThreadSlot<E>> = Vec::new();
        slots.try_reserve_exact(max_threads).map_err(|e| {
            PoolError::overflow(format!(
                "{max_threads} thread cache slots cannot be allocated: {e}"
            ))
        })?;
        slots.extend((0..max_threads).map(|_| ThreadSlot {
            cache: AtomicPtr::new(std::ptr::null_mut()),
            lock: RawLock::new(),
        }));
        Ok(Registry {
            slots: slots.into_boxed_slice(),
            explicit: Box::new(Lock::new(Vec::new())),
        })
    }

    /// The calling thread's cache of the pool with (never reused) id `pool_id`, if it has one,
    /// from the slot of the thread's tid, memoised for the next call (the pool reads the memo
    /// first: `Pool::thread_cache`).
    #[inline(always)]
    pub(crate) fn current(&self, pool_id: u64) -> Option<&Cache<E>> {
        let slot = self.slots.get(current_tid())?;
        let p = slot.cache.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        memo_store(pool_id, p.cast());
        // SAFETY: the slot's cache lives until this very thread exits.
        Some(unsafe { &*p })
    }

    /// Gives the calling thread a cache made by `make`, registered for a flush at the thread's
    /// exit through `exit`. `None` when the thread has no slot (beyond `max_threads`) or is
    /// exiting: the caller then works without a cache.
    #[cold]
    pub(crate) fn install(
        &self,
        pool_id: u64,
        exit: Weak<dyn ExitFlush>,
        make: impl FnOnce() -> Box<Cache<E>>,
    ) -> Option<&Cache<E>> {
        let tid = ensure_tid()?;
        let slot = self.slots.get(tid)?;
        let p = slot.cache.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: as in current().
            return Some(unsafe { &*p });
        }
        if !register(exit) {
            return None;
        }
        let c = Box::into_raw(make());
        let _g = slot.lock();
        // The allocation above may have run a global allocator that used this pool on this
        // thread and installed a cache first: keep that one, whose
        // entries are in use, and free ours (empty: nothing was ever put in it).
        let existing = slot.cache.load(Ordering::Acquire);
        if !existing.is_null() {
            // SAFETY: `c` was made by Box::into_raw above and never shared.
            drop(unsafe { Box::from_raw(c) });
            // SAFETY: as in current(): the slot's cache lives until this thread's exit.
            return Some(unsafe { &*existing });
        }
        slot.cache.store(c, Ordering::Release);
        memo_store(pool_id, c.cast());
        // SAFETY: just allocated; freed only at this thread's exit or with the registry.
        Some(unsafe { &*c })
    }

    /// At the exit of thread `tid`: takes its cache out of its slot and hands it to `flush`
    /// (under the slot lock, so that no count sees the objects nowhere), then frees it.
    pub(crate) fn take_exiting(&self, tid: usize, flush: impl FnOnce(&Cache<E>)) {
        let Some(slot) = self.slots.get(tid) else {
            return;
        };
        let _g = slot.lock();
        let p = slot.cache.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: the slot's cache was Box-allocated by this (exiting) thread, its only
            // user; we took it out of the slot under the lock, so nobody else will read it.
            let cache = unsafe { Box::from_raw(p) };
            flush(&cache);
        }
    }

    /// Registers a user-owned cache, so that counts and audits see it.
    pub(crate) fn add_explicit(&self, c: NonNull<Cache<E>>) {
        self.explicit_list().push(CachePtr(c));
    }

    /// Unregisters a user-owned cache before it is freed, calling `last` (no argument: the
    /// caller's closure holds what it moves) while the registry's lock is still held: the
    /// cache's last use as registered, where its counters go to the pool's totals, so that
    /// [`Registry::with_all_locked`] sees them in one place or the other. False, without
    /// calling `last`, when `c` was not registered.
    pub(crate) fn remove_explicit(&self, c: NonNull<Cache<E>>, last: impl FnOnce()) -> bool {
        let mut list = self.explicit_list();
        let before = list.len();
        list.retain(|p| p.0 != c);
        let removed = list.len() != before;
        if removed {
            last();
        }
        removed
    }

    fn explicit_list(&self) -> LockGuard<'_, Vec<CachePtr<E>>> {
        self.explicit.lock()
    }

    /// Entries held by the implicit (per-thread) caches, each read under its slot lock. The
    /// user-owned caches are not counted: their objects belong to their holder, as DPDK's
    /// `rte_mempool_avail_count` ignores user-owned caches, so that a `LocalCache` passed to
    /// `mem::forget` strands its objects without making them look available.
    pub(crate) fn thread_cached(&self) -> usize {
        let mut n = 0;
        self.each_thread_cache(|_, c| n += c.len());
        n
    }

    /// Calls `f` with the slot number and the cache of every implicit cache, each under its
    /// slot lock (one at a time).
    fn each_thread_cache(&self, mut f: impl FnMut(usize, &Cache<E>)) {
        for (tid, slot) in self.slots.iter().enumerate() {
            if slot.cache.load(Ordering::Acquire).is_null() {
                continue;
            }
            let _g = slot.lock();
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: non-null slot caches are live until freed under this lock.
                f(tid, unsafe { &*p });
            }
        }
    }

    /// Unregisters every user-owned cache still registered, hands each to `reclaim` (to give
    /// its entries back to the ring), then frees it. Returns how many there were.
    ///
    /// # Safety
    /// No `LocalCache` (nor any other owner) of a registered cache may be alive: the caller
    /// holds `&mut` on the pool (a live `LocalCache` borrows it, an owned or run-time one holds
    /// an `Arc` of it), so every cache still registered belongs to a value that was leaked
    /// without its drop (`mem::forget`) and will never be used again.
    pub(crate) unsafe fn reclaim_orphans(
        &self,
        mut reclaim: impl FnMut(NonNull<Cache<E>>),
    ) -> usize {
        let orphans = std::mem::take(&mut *self.explicit_list());
        for c in &orphans {
            reclaim(c.0);
            // SAFETY: allocated by Box in LocalCache::new; its owner is gone (the contract) and
            // it is unregistered, so nobody reads it any more.
            drop(unsafe { Box::from_raw(c.0.as_ptr()) });
        }
        orphans.len()
    }

    /// Calls `f` with every cache (implicit under its slot lock, explicit under the registry
    /// lock) and a label.
    pub(crate) fn for_each_cache(&self, mut f: impl FnMut(String, &Cache<E>)) {
        self.each_thread_cache(|tid, c| f(format!("thread {tid}"), c));
        let reg = self.explicit_list();
        for (i, c) in reg.iter().enumerate() {
            // SAFETY: registered caches are live until unregistered under this lock.
            f(format!("local {i}"), unsafe { c.0.as_ref() });
        }
    }

    /// Takes every thread slot lock (in slot order, as the pool's drop does) and then the
    /// registry lock, and calls `f` with a visitor of every live cache.
    /// While they are held no cache can go away: an exit flush holds its slot's lock from
    /// taking the cache out until its entries are in the ring and its counters in the pool's
    /// totals, and a `LocalCache`'s drop moves its counters to the totals under the registry
    /// lock (its entries went to the ring before, through its own token). So with `&mut` on
    /// the pool (no other user) `f` sees one consistent snapshot of the entries, and at any
    /// time one of the counters (each cache's counters counted once: live, or in the totals,
    /// which `f` may read under their lock). Every slot, even one empty at a first look: an
    /// exit flush empties its slot before it moves the counters. Lock order: slot locks, the
    /// registry, the totals; an exit flush takes its own slot lock and then the totals', so
    /// no cycle.
    pub(crate) fn with_all_locked<X>(
        &self,
        f: impl FnOnce(&mut dyn FnMut(&mut dyn FnMut(String, &Cache<E>))) -> X,
    ) -> X {
        let guards: Vec<SlotGuard<'_, E>> = self.slots.iter().map(|s| s.lock()).collect();
        let reg = self.explicit_list();
        let mut visit = |g: &mut dyn FnMut(String, &Cache<E>)| {
            for (tid, guard) in guards.iter().enumerate() {
                let p = guard.0.cache.load(Ordering::Acquire);
                if !p.is_null() {
                    // SAFETY: non-null slot caches are live until freed under this (held) lock.
                    g(format!("thread {tid}"), unsafe { &*p });
                }
            }
            for (i, c) in reg.iter().enumerate() {
                // SAFETY: registered caches are live until unregistered under this (held) lock.
                g(format!("local {i}"), unsafe { c.0.as_ref() });
            }
        };
        f(&mut visit)
    }

    /// Entries held by the implicit caches plus `elsewhere()` (the ring's count), read with
    /// every slot locked at once (for the pool's drop: exiting threads may still flush
    /// meanwhile, and an exit flush moves its cache into the ring under its slot lock, so
    /// with every lock held each entry is counted once: in a cache or in the ring; read outside
    /// the locks, a flush in between would make a false leak report).
    pub(crate) fn held_by_threads_and(&self, elsewhere: impl FnOnce() -> usize) -> usize {
        let guards: Vec<_> = self.slots.iter().map(|s| s.lock()).collect();
        let mut n = elsewhere();
        for s in self.slots.iter() {
            let p = s.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: slot locked, cache live.
                n += unsafe { (*p).len() };
            }
        }
        drop(guards);
        n
    }
}

/// The registry's locks for the fork handlers (crate::fork): raw pointers into its heap
/// parts (the slot array, the boxed `LocalCache` list), never into the registry itself, which
/// lives inline in a pool core (the core's last drop holds `&mut` on it while it unlists).
#[cfg(all(unix, not(miri), not(loom)))]
pub(crate) struct RegistryLocks<E> {
    slots: *const [ThreadSlot<E>],
    explicit: *const RawLock,
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E> Registry<E> {
    /// Its locks, for the fork handlers.
    pub(crate) fn fork_locks(&self) -> RegistryLocks<E> {
        RegistryLocks {
            slots: &*self.slots,
            explicit: self.explicit.raw(),
        }
    }
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E> RegistryLocks<E> {
    /// The fork's prepare handler (crate::fork, its lock order): every slot lock in slot
    /// order, then the `LocalCache` list. No exit flush, count or audit is then half-done.
    ///
    /// # Safety
    /// The registry is alive (its slot array and list not freed).
    pub(crate) unsafe fn fork_prepare(&self) {
        // SAFETY: the caller's contract.
        let (slots, explicit) = unsafe { (&*self.slots, &*self.explicit) };
        for slot in slots {
            slot.lock.fork_take();
        }
        explicit.fork_take();
    }

    /// After the fork (parent and child): releases them. In the child, the caches of threads
    /// that do not exist there stay in their slots (stranded, still counted by `available()`),
    /// as do the `LocalCache`s they owned (never counted).
    ///
    /// # Safety
    /// As [`RegistryLocks::fork_prepare`].
    pub(crate) unsafe fn fork_release(&self) {
        // SAFETY: the caller's contract.
        let (slots, explicit) = unsafe { (&*self.slots, &*self.explicit) };
        explicit.fork_release();
        for slot in slots.iter().rev() {
            slot.lock.fork_release();
        }
    }
}

impl<E> Drop for Registry<E> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: &mut self: no thread uses the slot; the pointer came from Box::into_raw.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}
