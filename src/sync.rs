//! One place that switches between std and loom primitives (as sharded-slab does), so that the
//! ring and the cache registry can be model-checked with `RUSTFLAGS="--cfg loom"`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

// The waiter queue of the common ring (wait.rs): its lock under loom (otherwise a
// `fork::Lock`, which the fork handlers can hold) and the parking of blocked threads.
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::{current as current_thread, Thread};
#[cfg(not(loom))]
pub(crate) use std::thread::{current as current_thread, Thread};

/// Under loom only, a SeqCst fence; nothing otherwise. Loom treats SeqCst accesses as AcqRel
/// (its README, "limitations") but models SeqCst fences: the waiter handshake (wait.rs), which
/// relies on the single total order of two SeqCst pairs (the producer's CAS of `prod.head`
/// then its load of the waiter count; the waiter's increment then its load of `prod.head`),
/// places one right after the first access of each pair under loom. That gives the model the
/// ordering those accesses guarantee in the real build (store-buffering between the pairs
/// forbidden) and no more: the producer's fence is after its CAS, not after its publication,
/// so the model still needs the waiter's wait for in-flight producers (a mutant without
/// `settle_producers` deadlocks in `waiter_handshake_blocking`). Nothing outside loom.
#[inline(always)]
pub(crate) fn seq_cst_fence_under_loom() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// Parks the calling thread until it is unparked or `timeout` passes (`None`: no timeout);
/// may return spuriously. Under loom the timeout is ignored (loom models time no timeouts).
pub(crate) fn park(timeout: Option<std::time::Duration>) {
    #[cfg(loom)]
    {
        let _ = timeout;
        loom::thread::park();
    }
    #[cfg(not(loom))]
    match timeout {
        Some(t) => std::thread::park_timeout(t),
        None => std::thread::park(),
    }
}

/// Spin-wait helper (defined with the fork handlers' locks, the lowest layer, which spin with
/// it too).
pub(crate) use crate::fork::Backoff;
