//! What a pool holds where: free, in use, lent to the kernel, in the ring, per cache, and the
//! counters.

use super::*;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    // ---- counts ---------------------------------------------------------------------------

    /// Free objects: the ring plus every thread's implicit cache (rte_mempool_avail_count).
    /// Objects in a [`crate::LocalCache`] are its holder's, not counted here (as DPDK's count
    /// ignores user-owned caches): a `LocalCache` passed to `mem::forget` strands them, and
    /// they count as in use until `audit()` or the pool's drop takes them back. A snapshot
    /// while other threads work; exact when quiescent.
    pub fn available(&self) -> usize {
        self.available_of(self.capacity() as usize)
    }

    /// [`Pool::available`] clamped to `cap`, a capacity read before (under concurrent growth
    /// the ring may already hold objects of a capacity not yet published).
    fn available_of(&self, cap: usize) -> usize {
        let n = self.core.ring.count() + self.core.registry.thread_cached();
        n.min(cap)
    }

    /// Objects held by handles and by [`crate::LocalCache`]s (rte_mempool_in_use_count).
    /// Objects lent to the kernel are not among them ([`Pool::lent_to_kernel`]), so
    /// `available() + in_use() + lent_to_kernel() == capacity()` when quiescent.
    pub fn in_use(&self) -> usize {
        let cap = self.capacity() as usize;
        (cap - self.available_of(cap)).saturating_sub(self.lent_to_kernel())
    }

    /// Objects lent to the kernel now: published in an io_uring provided-buffer ring (feature
    /// `uring`, `idxpool::uring`) and not yet back in a completion. They are neither free nor
    /// held by a handle; the lender gives them back to the pool when it is dropped. Always 0
    /// without such a lender. A snapshot while other threads work.
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).build()?;
    /// assert_eq!(pool.lent_to_kernel(), 0);
    /// assert_eq!(pool.available() + pool.in_use() + pool.lent_to_kernel(), 64);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn lent_to_kernel(&self) -> usize {
        self.core
            .kernel_lent
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when every object is free (rte_mempool_full).
    pub fn is_full(&self) -> bool {
        let cap = self.capacity() as usize;
        self.available_of(cap) == cap
    }

    /// True when no object is free (rte_mempool_empty).
    pub fn is_empty(&self) -> bool {
        self.available() == 0
    }

    /// Objects in the common ring now.
    pub fn ring_count(&self) -> usize {
        self.core.ring.count()
    }

    /// The pool's counters (DPDK's `rte_mempool_debug_stats`): every live cache, plus the
    /// caches already gone (dropped [`crate::LocalCache`]s, exited threads' caches, folded in
    /// when they went), plus operations that used no cache, minus what
    /// [`Pool::stats_reset`] set aside. A snapshot while other threads work; exact when
    /// quiescent (e.g. after joining the workers).
    ///
    /// Counting needs the crate's **`stats` feature** (`idxpool = { features = ["stats"] }`,
    /// or `cargo test --features stats`): without it every counter is 0, the counting code
    /// compiles away, and [`Stats::COUNTING`] (`stats().is_counting()`) is false.
    pub fn stats(&self) -> Stats {
        let base = *self.core.baseline.lock();
        self.stats_total().saturating_sub(base)
    }

    /// The counters since the pool was built ([`Pool::stats`] without the reset's baseline:
    /// never decreasing, as the metrics export needs).
    ///
    /// One snapshot with every cache's lock held (`Registry::with_all_locked`) and the totals
    /// read under them: a cache that goes away moves its counters into the totals under its
    /// lock, so each operation is counted once, in its cache or in the totals (read one lock
    /// at a time, a thread that exited in between was counted twice or not at all).
    pub(crate) fn stats_total(&self) -> Stats {
        if !Stats::COUNTING {
            return Stats::default();
        }
        let core = &*self.core;
        let mut s = core.uncached.counters.snapshot();
        core.registry.with_all_locked(|visit| {
            visit(&mut |_, c| s += c.counters.snapshot());
            s += *core.retired.lock();
        });
        s
    }

    /// Starts the counters of [`Pool::stats`] from 0 again (the current totals are set
    /// aside; the caches' own counters are not written, so this never races their owners).
    pub fn stats_reset(&self) {
        let s = self.stats_total();
        *self.core.baseline.lock() = s;
    }

    /// `(label, objects held)` of every live cache.
    pub fn cache_counts(&self) -> Vec<(String, usize)> {
        let mut v = Vec::new();
        self.core
            .registry
            .for_each_cache(|l, c| v.push((l, c.len())));
        v
    }
}
