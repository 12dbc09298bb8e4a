//! One place that switches between std and loom primitives (as sharded-slab does), so that the
//! ring and the cache registry can be model-checked with `RUSTFLAGS="--cfg loom"`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

/// Spin-wait helper: crossbeam's exponential `Backoff` normally; under loom a plain yield, so the
/// model checker can schedule the thread we are waiting for.
pub(crate) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Self {
        Backoff {
            #[cfg(not(loom))]
            inner: crossbeam_utils::Backoff::new(),
        }
    }

    /// Waits a little, escalating to `thread::yield_now` after a few rounds, so a thread waiting
    /// for a preempted peer (more threads than cores) lets the peer run instead of burning its
    /// time slice: no livelock.
    #[inline]
    pub(crate) fn snooze(&self) {
        #[cfg(not(loom))]
        {
            if self.inner.is_completed() {
                std::thread::yield_now();
            } else {
                self.inner.snooze();
            }
        }
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}
