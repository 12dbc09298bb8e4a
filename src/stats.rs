//! Per-cache counters, as DPDK's `struct rte_mempool_debug_stats` (feature `stats`; without it
//! every counter reads 0, the counting compiles away, [`Stats::COUNTING`] says so). A pool's totals
//! include its dropped local caches' and exited threads' counters (folded in when they go, as DPDK
//! keeps per-lcore counters for the pool's life).

use std::fmt;
use std::ops::AddAssign;

/// Counters of one cache, or their sum over a pool ([`crate::Pool::stats`]).
///
/// Names follow DPDK: `*_bulk` counts calls, `*_objs` objects; the "common pool" is the ring
/// (`put_common_pool_*`: flushes, `get_common_pool_*`: refills).
///
/// ```
/// use idxpool::{PoolBuilder, Stats};
/// let pool = PoolBuilder::<u64>::with_default(64).build()?;
/// let h = pool.get()?;
/// pool.put(h);
/// let s: Stats = pool.stats();
/// if Stats::COUNTING {
///     assert_eq!((s.get_success_objs, s.put_objs), (1, 1));
/// } else {
///     assert_eq!(s, Stats::default()); // built without the `stats` feature
/// }
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Put calls (single puts count as a bulk of 1).
    pub put_bulk: u64,
    /// Objects put.
    pub put_objs: u64,
    /// Enqueues into the common ring (flushes and bypasses).
    pub put_common_pool_bulk: u64,
    /// Objects enqueued into the common ring.
    pub put_common_pool_objs: u64,
    /// Dequeues from the common ring (refills and bypasses).
    pub get_common_pool_bulk: u64,
    /// Objects dequeued from the common ring.
    pub get_common_pool_objs: u64,
    /// Successful get calls.
    pub get_success_bulk: u64,
    /// Objects handed out by successful gets.
    pub get_success_objs: u64,
    /// Failed get calls (a waiting get counts its first failed try; what it takes after its wait
    /// counts in `get_success_*` and `get_common_pool_*`).
    pub get_fail_bulk: u64,
    /// Objects requested by failed gets.
    pub get_fail_objs: u64,
}

impl Stats {
    /// True when built with the `stats` feature. Without it nothing is counted and every `Stats`
    /// reads 0: check this before reading a zero as "nothing happened".
    pub const COUNTING: bool = cfg!(feature = "stats");

    /// [`Stats::COUNTING`], as a method (e.g. on a value returned by `pool.stats()`).
    pub fn is_counting(&self) -> bool {
        Self::COUNTING
    }

    /// Field-wise `self - base`, saturating at 0 (for [`crate::Pool::stats_reset`]).
    pub(crate) fn saturating_sub(self, base: Stats) -> Stats {
        Stats {
            put_bulk: self.put_bulk.saturating_sub(base.put_bulk),
            put_objs: self.put_objs.saturating_sub(base.put_objs),
            put_common_pool_bulk: self
                .put_common_pool_bulk
                .saturating_sub(base.put_common_pool_bulk),
            put_common_pool_objs: self
                .put_common_pool_objs
                .saturating_sub(base.put_common_pool_objs),
            get_common_pool_bulk: self
                .get_common_pool_bulk
                .saturating_sub(base.get_common_pool_bulk),
            get_common_pool_objs: self
                .get_common_pool_objs
                .saturating_sub(base.get_common_pool_objs),
            get_success_bulk: self.get_success_bulk.saturating_sub(base.get_success_bulk),
            get_success_objs: self.get_success_objs.saturating_sub(base.get_success_objs),
            get_fail_bulk: self.get_fail_bulk.saturating_sub(base.get_fail_bulk),
            get_fail_objs: self.get_fail_objs.saturating_sub(base.get_fail_objs),
        }
    }
}

impl AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.put_bulk += o.put_bulk;
        self.put_objs += o.put_objs;
        self.put_common_pool_bulk += o.put_common_pool_bulk;
        self.put_common_pool_objs += o.put_common_pool_objs;
        self.get_common_pool_bulk += o.get_common_pool_bulk;
        self.get_common_pool_objs += o.get_common_pool_objs;
        self.get_success_bulk += o.get_success_bulk;
        self.get_success_objs += o.get_success_objs;
        self.get_fail_bulk += o.get_fail_bulk;
        self.get_fail_objs += o.get_fail_objs;
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !Self::COUNTING {
            return f.write_str("(not counted: build idxpool with the `stats` feature)");
        }
        write!(
            f,
            "put_bulk={} put_objs={} put_common_pool_bulk={} put_common_pool_objs={} \
             get_common_pool_bulk={} get_common_pool_objs={} get_success_bulk={} \
             get_success_objs={} get_fail_bulk={} get_fail_objs={}",
            self.put_bulk,
            self.put_objs,
            self.put_common_pool_bulk,
            self.put_common_pool_objs,
            self.get_common_pool_bulk,
            self.get_common_pool_objs,
            self.get_success_bulk,
            self.get_success_objs,
            self.get_fail_bulk,
            self.get_fail_objs
        )
    }
}

/// Live counters of one cache: written by the owning thread with relaxed load + store (no RMW on
/// the hot path), read by any thread; the zero-size cache's (shared by threads without a cache) are
/// `shared`, with atomic RMW.
#[derive(Default)]
pub(crate) struct Counters {
    #[cfg(feature = "stats")]
    shared: bool,
    #[cfg(feature = "stats")]
    c: [std::sync::atomic::AtomicU64; 10],
}

/// Counter slots, in the order of [`Stats`]' fields.
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum Counter {
    PutBulk,
    PutObjs,
    PutCommonBulk,
    PutCommonObjs,
    GetCommonBulk,
    GetCommonObjs,
    GetSuccessBulk,
    GetSuccessObjs,
    GetFailBulk,
    GetFailObjs,
}

impl Counters {
    /// Counters that several threads add to at once (atomic RMW).
    pub(crate) fn shared() -> Self {
        #[cfg_attr(not(feature = "stats"), allow(unused_mut))]
        let mut c = Counters::default();
        #[cfg(feature = "stats")]
        {
            c.shared = true;
        }
        c
    }

    /// Adds `n` to a counter: relaxed load + store for the owner, atomic add when shared.
    #[inline(always)]
    pub(crate) fn add(&self, _which: Counter, _n: usize) {
        #[cfg(feature = "stats")]
        {
            use std::sync::atomic::Ordering::Relaxed;
            let c = &self.c[_which as usize];
            if self.shared {
                c.fetch_add(_n as u64, Relaxed);
            } else {
                c.store(c.load(Relaxed) + _n as u64, Relaxed);
            }
        }
    }

    /// A snapshot.
    pub(crate) fn snapshot(&self) -> Stats {
        #[cfg(feature = "stats")]
        {
            let v: Vec<u64> = self
                .c
                .iter()
                .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
                .collect();
            Stats {
                put_bulk: v[0],
                put_objs: v[1],
                put_common_pool_bulk: v[2],
                put_common_pool_objs: v[3],
                get_common_pool_bulk: v[4],
                get_common_pool_objs: v[5],
                get_success_bulk: v[6],
                get_success_objs: v[7],
                get_fail_bulk: v[8],
                get_fail_objs: v[9],
            }
        }
        #[cfg(not(feature = "stats"))]
        Stats::default()
    }
}
