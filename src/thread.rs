//! Implicit per-thread caches: thread ids, and giving a thread's cached objects back to the
//! ring when the thread exits.
//!
//! Each thread that uses `pool.get()` gets a small process-wide id (`tid`), recycled when the
//! thread exits (as sharded-slab's `Tid`). A pool has one cache slot per tid, up to its
//! `max_threads`; the slot's cache is allocated on the thread's first use and registered in the
//! thread's exit list. At thread exit a TLS destructor flushes each registered cache into its
//! pool's ring and frees it, then releases the tid. Threads beyond `max_threads`, and code that
//! runs while the thread's TLS is being torn down, use the ring directly (no cache).

use std::cell::{Cell, RefCell};
use std::sync::{Mutex, Weak};

/// A pool's side of thread exit.
pub(crate) trait ExitFlush: Send + Sync {
    /// Flushes and frees the cache of `tid` (called on the exiting thread itself).
    fn flush_exiting(&self, tid: usize);
}

struct TidAllocator {
    next: usize,
    free: Vec<usize>,
}

static TIDS: Mutex<TidAllocator> = Mutex::new(TidAllocator {
    next: 0,
    free: Vec::new(),
});

const NO_TID: usize = usize::MAX;

thread_local! {
    /// This thread's tid, or NO_TID: a const TLS read on the hot path (no lazy init check).
    static TID: Cell<usize> = const { Cell::new(NO_TID) };
    /// (pool id, that pool's cache of this thread): the last pool used, for a one-compare hot
    /// path. Pool ids are never reused; cleared at thread exit before caches are freed.
    static MEMO: Cell<(u64, *const ())> = const { Cell::new((0, std::ptr::null())) };
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
        if let Ok(mut t) = TIDS.lock() {
            t.free.push(tid);
        }
    }
}

/// This thread's cache of pool `id` if it is the memoised one, else null.
#[inline(always)]
pub(crate) fn memo_lookup(id: u64) -> *const () {
    match MEMO.try_with(|m| m.get()) {
        Ok((k, p)) if k == id => p,
        _ => std::ptr::null(),
    }
}

/// Memoises this thread's cache of pool `id` (ignored during TLS teardown).
#[inline]
pub(crate) fn memo_store(id: u64, cache: *const ()) {
    // Only while the exit guard is alive: after its destructor ran, nothing may be memoised.
    if GUARD.try_with(|_| ()).is_ok() {
        let _ = MEMO.try_with(|m| m.set((id, cache)));
    }
}

/// The calling thread's tid if it has one (hot path: one TLS load).
#[inline(always)]
pub(crate) fn current_tid() -> usize {
    TID.try_with(|t| t.get()).unwrap_or(NO_TID)
}

/// Assigns a tid to the calling thread if it has none. `None` while the thread's TLS is being
/// torn down (then the caller must not cache).
pub(crate) fn ensure_tid() -> Option<usize> {
    let tid = TID.try_with(|t| t.get()).ok()?;
    if tid != NO_TID {
        return Some(tid);
    }
    // Touch the guard first so that its destructor is registered before we take a tid.
    GUARD.try_with(|_| ()).ok()?;
    let tid = {
        let mut t = TIDS.lock().unwrap_or_else(|e| e.into_inner());
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
pub(crate) fn register(pool: Weak<dyn ExitFlush>) -> bool {
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
