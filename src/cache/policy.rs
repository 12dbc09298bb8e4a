//! The flush and refill policies: when a cache flushes to the common ring and how much it
//! refills from it (`FlushPolicy`), and the decisions each makes (`CachePlan`).

use std::fmt;

use crate::error::PoolError;
use crate::ring::Behavior;

use super::CACHE_MAX_SIZE;

/// When a cache flushes to the common ring and how much it refills from it.
///
/// ```
/// use idxpool::{FlushPolicy, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(1024)
///     .cache_size(64)
///     .policy(FlushPolicy::Classic)
///     .build()?;
/// assert_eq!(pool.policy(), FlushPolicy::Classic);
/// assert_eq!(FlushPolicy::Classic.fill_limit(64), 96); // flushes above 1.5 x size
/// assert!(FlushPolicy::Classic.validate(512, 600).is_err()); // 768 > 600 objects
/// assert_eq!(FlushPolicy::from_name("aligned"), Some(FlushPolicy::SizeAligned));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushPolicy {
    /// DPDK 1.3 .. 26.03 (`rte_mempool_do_generic_put/get`): flush threshold `1.5 x size`; a put
    /// that would cross it first flushes the whole cache to the ring; a get that finds too few
    /// refills `size + remaining` from the ring. Gets of `>= size` objects bypass the cache.
    /// Creation fails when `1.5 x size > capacity`, so one cache cannot hoard the pool.
    Classic,
    /// DPDK 26.07: a full cache flushes its coldest `size / 2` objects (the bottom of the LIFO);
    /// an empty one refills `size / 2`; requests above `size / 2` bypass the cache. The cache
    /// never holds more than `size` objects. Creation needs `size <= capacity`.
    Dpdk2607,
    /// RFC "CPU cache aligning mempool driver accesses" (2023): threshold `2 x size`, and every
    /// transfer between cache and ring is exactly `size` objects (the coldest on flush), so
    /// copies have a constant length. Requests above `size` bypass the cache. Creation needs
    /// `size <= capacity`.
    SizeAligned,
}

impl FlushPolicy {
    /// Every policy, for sweeps.
    pub const ALL: [FlushPolicy; 3] = [
        FlushPolicy::Classic,
        FlushPolicy::Dpdk2607,
        FlushPolicy::SizeAligned,
    ];

    /// The default, chosen by measurement (see BENCHMARKS.md, "Policy comparison").
    pub const DEFAULT: FlushPolicy = FlushPolicy::Dpdk2607;

    /// Short name: `classic`, `dpdk2607`, `aligned`.
    pub fn name(self) -> &'static str {
        match self {
            FlushPolicy::Classic => "classic",
            FlushPolicy::Dpdk2607 => "dpdk2607",
            FlushPolicy::SizeAligned => "aligned",
        }
    }

    /// Parses [`FlushPolicy::name`].
    pub fn from_name(s: &str) -> Option<FlushPolicy> {
        FlushPolicy::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Most objects a cache of `size` may hold under this policy (its flush threshold).
    pub fn fill_limit(self, size: u32) -> u32 {
        match self {
            FlushPolicy::Classic => size * 3 / 2,
            FlushPolicy::Dpdk2607 => size,
            FlushPolicy::SizeAligned => 2 * size,
        }
    }

    /// Checks `cache_size` against DPDK's limits for a pool of `capacity` objects.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] when `cache_size > 512` or too large for `capacity`.
    pub fn validate(self, cache_size: u32, capacity: u32) -> Result<(), PoolError> {
        if cache_size > CACHE_MAX_SIZE {
            return Err(PoolError::config(format!(
                "cache size {cache_size} exceeds the maximum {CACHE_MAX_SIZE}"
            )));
        }
        let (need, rule) = match self {
            FlushPolicy::Classic => (cache_size as u64 * 3 / 2, "1.5 x cache size"),
            FlushPolicy::Dpdk2607 | FlushPolicy::SizeAligned => (cache_size as u64, "cache size"),
        };
        if need > capacity as u64 {
            return Err(PoolError::config(format!(
                "cache size {cache_size} too large for capacity {capacity} under policy {}: \
                 {rule} ({need}) must not exceed the capacity",
                self.name()
            )));
        }
        Ok(())
    }
}

impl Default for FlushPolicy {
    fn default() -> Self {
        FlushPolicy::DEFAULT
    }
}

impl fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The decisions of the cache algorithm for one cache size under one [`FlushPolicy`]: what a
/// get that misses and a put that overflows do. Pure arithmetic, shared by every cache
/// (the core's [`CacheMut`] and the shared pool's in-region cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CachePlan {
    /// Cache size (0 = uncached: every get and put bypasses).
    pub(crate) size: u32,
    /// Most entries the cache may hold (the flush threshold).
    pub(crate) fill_limit: u32,
    /// Largest put that goes through the cache; larger ones go straight to the ring.
    pub(crate) max_put: u32,
    /// Largest get that refills the cache; larger ones go straight to the ring.
    pub(crate) max_get: u32,
    pub(crate) policy: FlushPolicy,
}

/// What a get of `n` that the cache cannot serve does ([`CachePlan::on_get_miss`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GetMiss {
    /// Refill up to `want` entries from the ring onto the cache's top (`how`: all or
    /// nothing, or as many as there are), then serve from the top.
    Refill { want: usize, how: Behavior },
    /// Take the request straight from the ring, all or nothing.
    Bypass,
}

/// What a put of `n` that does not fit under the flush threshold does
/// ([`CachePlan::on_put_overflow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PutOverflow {
    /// Send the coldest `k` entries (the bottom of the LIFO) to the ring, then append.
    Flush(usize),
    /// Send the put straight to the ring.
    Bypass,
}

impl CachePlan {
    /// The plan of a cache of `size` (0..=512) under `policy`.
    pub(crate) fn new(size: u32, policy: FlushPolicy) -> Self {
        let (max_put, max_get) = match policy {
            FlushPolicy::Classic => (policy.fill_limit(size), size.saturating_sub(1)),
            FlushPolicy::Dpdk2607 => (size / 2, size / 2),
            FlushPolicy::SizeAligned => (size, size),
        };
        CachePlan {
            size,
            fill_limit: policy.fill_limit(size),
            max_put,
            max_get,
            policy,
        }
    }

    /// Entries a cache array needs: a refill may overshoot the fill limit transiently
    /// (Classic refills `size + n - len` before serving `n`), never beyond `2 x size`.
    pub(crate) fn capacity(&self) -> usize {
        2 * self.size as usize
    }

    /// A get of `n` found `len < n` entries in the cache: refill (how many, how) or bypass.
    #[inline]
    pub(crate) fn on_get_miss(&self, n: usize, len: usize) -> GetMiss {
        debug_assert!(len < n);
        if n > self.max_get as usize {
            return GetMiss::Bypass;
        }
        let (want, how) = match self.policy {
            FlushPolicy::Classic => (self.size as usize + n - len, Behavior::Bulk),
            FlushPolicy::Dpdk2607 => ((self.size / 2) as usize, Behavior::Burst),
            FlushPolicy::SizeAligned => (self.size as usize, Behavior::Bulk),
        };
        debug_assert!(len + want <= self.capacity());
        GetMiss::Refill { want, how }
    }

    /// A put of `n` found `len` entries, too many to append under the fill limit: flush the
    /// coldest `k <= len` (Classic: all; the others: the policy's transfer size), or bypass.
    #[inline]
    pub(crate) fn on_put_overflow(&self, n: usize, len: usize) -> PutOverflow {
        if n > self.max_put as usize {
            return PutOverflow::Bypass;
        }
        let k = match self.policy {
            FlushPolicy::Classic => len,
            FlushPolicy::Dpdk2607 => (self.size / 2) as usize,
            FlushPolicy::SizeAligned => self.size as usize,
        };
        // A put that crosses the limit finds at least `k` entries, and after the flush
        // `len - k + n <= fill_limit` (policy arithmetic).
        debug_assert!(k <= len && len - k + n <= self.fill_limit as usize);
        PutOverflow::Flush(k)
    }
}
