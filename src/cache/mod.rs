//! Per-thread (or user-owned) LIFO caches of free entries, and their flush/refill policies.
//!
//! A cache sits between one thread and the common ring, as `struct rte_mempool_cache` does, so
//! that most gets and puts touch only memory owned by that thread. It holds entries of the
//! pool's representation (4-byte indices for the index pool). The policy decides when the cache
//! flushes to the ring and how much it refills from it; see `FlushPolicy`.
//!
//! Invariants (checked by `audit`, relied on by the `unsafe` blocks below):
//! * `len <= fill_limit <= capacity() == 2 * size` (entries of `objs`, which is whole lines);
//! * `objs[..len]` are initialised entries of distinct free objects, coldest at the bottom;
//! * only the holder of its `CacheMut` (the owner token) mutates the cache; other threads
//!   read `len` (atomically) for `available()`, and read `objs` only when the pool is
//!   quiescent (`&mut` access).
//!
//! The cache algorithm is written once, in two layers:
//! * its **decisions** (`CachePlan`: on a miss, refill how many and how, or bypass; on an
//!   overflow, flush how many of the coldest, or bypass), one per [`FlushPolicy`];
//! * its **sequence** (`take_top`, `append`, `get_miss`, `put_overflow`, `flush_all`:
//!   fast path, refill, bypass, last resort, give-back, flush), generic over the
//!   **mechanics** trait `CacheOps` that moves entries between the caller, the cache and
//!   the ring.
//!
//! Two mechanics implement it: `CacheMut` (the core pool: plain memory and the lock-free
//! `Ring`; monomorphised, so the core's code is what it was when it was written by hand) and
//! the shared pool's in-region cache (`shared::pool::region_cache::RegionCache`: recoverable
//! rings, owner words, kill points). `CacheMut::get` and `CacheMut::put` are the core pool's one get path
//! and one put path: the fast path, refill, flush, bypass, and the uncached case (a zero-size
//! cache).

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::error::PoolError;
use crate::repr::{copy_entries, Dyn, Shape};
use crate::ring::{Behavior, Ring};
use crate::stats::{Counter, Counters};
use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// Cache line size assumed for layout (x86-64, most arm64): the alignment of the region and
/// of each cache, and the unit of `StrideMode::Auto`.
pub const CACHE_LINE: usize = 64;

/// DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`: the largest cache size accepted.
pub const CACHE_MAX_SIZE: u32 = 512;

// The flush and refill policies: when a cache flushes to the common ring and how much it
// refills from it (`FlushPolicy`), and the decisions each makes (`CachePlan`).

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

/// The mechanics of one cache and the ring behind it: how entries move, with no decision of
/// their own. The cache algorithm ([`take_top`], [`append`], [`get_miss`], [`put_overflow`],
/// [`flush_all`]) calls them in the order its [`CachePlan`] says.
///
/// Contract of every implementation: the cache is a LIFO of `len()` entries, coldest at the
/// bottom; each method moves exactly what it says (an implementation may drop an entry it
/// finds corrupt, writing a marker the caller's adapter recognises, see the shared pool) and
/// keeps its own invariants at each step (the shared pool: recoverable after a kill at any
/// instruction).
pub(crate) trait CacheOps<E: Copy> {
    /// Entries held.
    fn len(&self) -> usize;
    /// Most entries the cache may hold (the flush threshold).
    fn fill_limit(&self) -> usize;
    /// Moves the top `dst.len() <= len()` entries into `dst` (in cache order: the hottest
    /// last).
    fn pop_top(&mut self, dst: &mut [MaybeUninit<E>]);
    /// Appends `src` on top (`len() + src.len()` fits the cache's array).
    fn push(&mut self, src: &[E]);
    /// Moves up to `want` entries from the ring onto the top (`Bulk`: all or none); returns
    /// how many came.
    fn refill(&mut self, want: usize, how: Behavior) -> usize;
    /// Gives the top `k` entries (those the last refill brought) back to the ring, or leaves
    /// them in the cache where that is within its fill limit (the shared pool).
    fn unrefill(&mut self, k: usize);
    /// Moves the coldest `k <= len()` entries to the ring; the rest slide to the bottom.
    fn flush_bottom(&mut self, k: usize);
    /// Takes entries from the ring straight into `dst` (`Bulk`: all or none); returns how many.
    fn ring_get(&mut self, dst: &mut [MaybeUninit<E>], how: Behavior) -> usize;
    /// Sends `src` straight to the ring.
    fn ring_put(&mut self, src: &[E]);
    /// Entries in the ring (a snapshot).
    fn ring_count(&self) -> usize;
    /// Makes `len()` visible to other threads' counts (a no-op where every step stores it).
    fn publish(&self);
    /// Adds `n` to a statistics counter.
    fn count(&self, which: Counter, n: usize);
}

/// The get's fast path: fills `dst` from the top of the cache if it holds that many (then
/// true), else changes nothing (false).
#[inline(always)]
pub(crate) fn take_top<E: Copy, M: CacheOps<E>>(m: &mut M, dst: &mut [MaybeUninit<E>]) -> bool {
    let n = dst.len();
    if n > m.len() {
        return false;
    }
    m.pop_top(dst);
    m.publish();
    m.count(Counter::GetSuccessBulk, 1);
    m.count(Counter::GetSuccessObjs, n);
    true
}

/// The put's fast path: appends `src` if it fits under the flush threshold (then true), else
/// changes nothing (false).
#[inline(always)]
pub(crate) fn append<E: Copy, M: CacheOps<E>>(m: &mut M, src: &[E]) -> bool {
    let n = src.len();
    if n > m.fill_limit() - m.len() {
        return false;
    }
    m.push(src);
    m.publish();
    m.count(Counter::PutBulk, 1);
    m.count(Counter::PutObjs, n);
    true
}

/// The one get (DPDK's `rte_mempool_do_generic_get`): fills `dst` with entries of free
/// objects, the hottest first. `Bulk`: all of `dst` or nothing, returning `Ok(dst.len())` or
/// `Err(reachable)` (this cache plus the ring held too few; every count is left where it was).
/// `Burst`: as many as this cache plus the ring hold, `Ok(k)` with `dst[..k]` written.
#[inline]
pub(crate) fn get<E: Copy, M: CacheOps<E>>(
    m: &mut M,
    plan: &CachePlan,
    dst: &mut [MaybeUninit<E>],
    behavior: Behavior,
) -> Result<usize, usize> {
    if take_top(m, dst) {
        return Ok(dst.len());
    }
    get_miss(m, plan, dst, behavior)
}

/// The one put (DPDK's `rte_mempool_do_generic_put`): returns the entries of `src` (free
/// objects now owned by the cache); always succeeds.
#[inline]
pub(crate) fn put<E: Copy, M: CacheOps<E>>(m: &mut M, plan: &CachePlan, src: &[E]) {
    if !append(m, src) {
        put_overflow(m, plan, src);
    }
}

/// The get's cold path, after [`take_top`] failed: refill from the ring by the policy, or
/// bypass the cache for large requests, or as a last resort take the whole cache plus the
/// rest from the ring (so that a get never fails while this cache plus the ring hold enough).
pub(crate) fn get_miss<E: Copy, M: CacheOps<E>>(
    m: &mut M,
    plan: &CachePlan,
    dst: &mut [MaybeUninit<E>],
    behavior: Behavior,
) -> Result<usize, usize> {
    let n = dst.len();
    let mut refilled = 0;
    match plan.on_get_miss(n, m.len()) {
        GetMiss::Refill { want, how } => {
            refilled = m.refill(want, how);
            if refilled > 0 {
                m.count(Counter::GetCommonBulk, 1);
                m.count(Counter::GetCommonObjs, refilled);
            }
            // The refill may overshoot the fill limit only transiently: serving n below
            // brings it back (Classic: size + n - len refilled, n served).
            if n <= m.len() {
                m.pop_top(dst);
                return Ok(got(m, n));
            }
        }
        GetMiss::Bypass => {
            if m.ring_get(dst, Behavior::Bulk) == n {
                m.count(Counter::GetCommonBulk, 1);
                m.count(Counter::GetCommonObjs, n);
                return Ok(got(m, n));
            }
        }
    }
    // Last resort: the whole cache plus the rest from the ring.
    let len = m.len().min(n);
    let need = n - len;
    let (mine, rest) = dst.split_at_mut(len);
    if m.ring_get(rest, Behavior::Bulk) == need {
        m.pop_top(mine);
        m.count(Counter::GetCommonBulk, 1);
        m.count(Counter::GetCommonObjs, need);
        return Ok(got(m, n));
    }
    // Too few. A failed bulk get changes no count: give back what the refill took.
    if refilled > 0 {
        m.unrefill(refilled);
        m.count(Counter::PutCommonBulk, 1);
        m.count(Counter::PutCommonObjs, refilled);
    }
    if behavior == Behavior::Burst {
        // Hand over the cache and whatever the ring has.
        let take = m.len().min(n);
        let (mine, rest) = dst.split_at_mut(take);
        m.pop_top(mine);
        let more = m.ring_get(rest, Behavior::Burst);
        if more > 0 {
            m.count(Counter::GetCommonBulk, 1);
            m.count(Counter::GetCommonObjs, more);
        }
        if take + more > 0 {
            return Ok(got(m, take + more));
        }
    }
    m.publish();
    m.count(Counter::GetFailBulk, 1);
    m.count(Counter::GetFailObjs, n);
    Err(m.len() + m.ring_count())
}

/// Publishes and counts a successful slow-path get of `n`; returns `n`.
fn got<E: Copy, M: CacheOps<E>>(m: &M, n: usize) -> usize {
    m.publish();
    m.count(Counter::GetSuccessBulk, 1);
    m.count(Counter::GetSuccessObjs, n);
    n
}

/// The put's cold path, after [`append`] failed: flush by the policy first, or bypass the
/// cache for large puts.
pub(crate) fn put_overflow<E: Copy, M: CacheOps<E>>(m: &mut M, plan: &CachePlan, src: &[E]) {
    let n = src.len();
    m.count(Counter::PutBulk, 1);
    m.count(Counter::PutObjs, n);
    match plan.on_put_overflow(n, m.len()) {
        PutOverflow::Bypass => {
            m.ring_put(src);
            m.count(Counter::PutCommonBulk, 1);
            m.count(Counter::PutCommonObjs, n);
        }
        PutOverflow::Flush(k) => {
            m.flush_bottom(k);
            m.push(src);
            m.publish();
            m.count(Counter::PutCommonBulk, 1);
            m.count(Counter::PutCommonObjs, k);
        }
    }
}

/// Returns every held entry to the ring (`rte_mempool_cache_flush`).
pub(crate) fn flush_all<E: Copy, M: CacheOps<E>>(m: &mut M) {
    let len = m.len();
    if len == 0 {
        return;
    }
    m.flush_bottom(len);
    m.count(Counter::PutCommonBulk, 1);
    m.count(Counter::PutCommonObjs, len);
    m.publish();
}

/// One LIFO cache of entries of type `E`. Mutated only through a [`CacheMut`], the proof of
/// exclusive access; other threads read its atomic `len` and counters.
///
/// Aligned to two cache lines ([`CACHE_LINE`] pairs, as DPDK's caches are
/// `__rte_cache_aligned` and crossbeam's `CachePadded` on x86_64): its owner writes `len` and
/// the counters on every operation, and two threads' caches allocated side by side must not
/// share a line (the adjacent-line prefetcher pulls lines in pairs).
#[repr(C, align(128))]
pub(crate) struct Cache<E> {
    /// Entries held; written only by the owner (relaxed store, no RMW), read by anyone.
    /// A full word although it never exceeds `2 x CACHE_MAX_SIZE`: every operation loads
    /// the length the operation before stored, and on Intel cores (Rocket Lake measured)
    /// a 64-bit store forwards to its reload about twice as fast as a 32-bit one does
    /// (BENCHMARKS.md 39).
    len: AtomicUsize,
    size: u32,
    /// Most entries the cache may hold (the flush threshold); 0 while the cache is pinned
    /// ([`Cache::pin`]). Written by the owner only; an atomic because the tokens and the
    /// counts read it through `&Cache` (a relaxed load: one plain load).
    fill_limit: AtomicU32,
    /// Largest put that goes through the cache; larger ones go straight to the ring.
    max_put: u32,
    /// Largest get that refills the cache; larger ones go straight to the ring.
    max_get: u32,
    policy: FlushPolicy,
    _entries: PhantomData<E>,
    pub(crate) counters: Counters,
    /// The entry array, inline as DPDK's `objs[RTE_MEMPOOL_CACHE_MAX_SIZE * 2]`: a token
    /// reaches it at a constant offset from the cache, with no pointer to load per operation.
    /// Room for `2 x CACHE_MAX_SIZE` entries of up to 8 bytes; `2 x size` are used
    /// (`capacity()`). Whole cache lines starting on a line (DPDK's is `__rte_cache_aligned`
    /// too): the copies are wide vector moves (64 bytes with AVX-512), and a move that
    /// straddles two lines, read back right after it was written (a put then a get of the
    /// same entries), cannot take its bytes from the store (BENCHMARKS.md 33).
    objs: [Line; OBJ_LINES],
}

/// Lines of a cache's entry array: `2 x CACHE_MAX_SIZE` entries of 8 bytes (the pointer twin's;
/// 4-byte entries use the first half at most).
const OBJ_LINES: usize = 2 * CACHE_MAX_SIZE as usize * 8 / CACHE_LINE;

/// One cache line of entry storage (see `Cache::objs`).
#[repr(C, align(64))]
struct Line(UnsafeCell<MaybeUninit<[u8; CACHE_LINE]>>);

const _: () = assert!(std::mem::size_of::<Line>() == CACHE_LINE);

// SAFETY: the entries (UnsafeCell) are mutated only through a CacheMut, whose (unsafe)
// constructor requires exclusive use; other threads only read the atomic `len` and counters,
// or the entries while the pool is quiescent (`entries`).
unsafe impl<E: Send> Sync for Cache<E> {}

impl<E: Copy> Cache<E> {
    /// A cache of `size` (0..=512) under `policy`.
    pub(crate) fn new(size: u32, policy: FlushPolicy) -> Box<Self> {
        Self::with_counters(size, policy, Counters::default())
    }

    /// The zero-size cache of a pool's callers that have no cache (cache size 0, threads beyond
    /// `max_threads`, code running during thread exit): every get and put goes straight to the
    /// ring. It holds no entry, so several threads may use it at once (see [`CacheMut::new`]);
    /// its counters are shared.
    pub(crate) fn uncached(policy: FlushPolicy) -> Box<Self> {
        Self::with_counters(0, policy, Counters::shared())
    }

    /// Made in place on the heap: the entry array (8 KiB) is never on the stack, so a thread
    /// with the smallest stack can take its first cache.
    fn with_counters(size: u32, policy: FlushPolicy, counters: Counters) -> Box<Self> {
        debug_assert!(size <= CACHE_MAX_SIZE);
        const {
            assert!(
                align_of::<E>() <= CACHE_LINE && size_of::<E>() <= 8,
                "entries fit the lines' alignment and the array's room"
            )
        };
        let plan = CachePlan::new(size, policy);
        let mut cache = Box::<Self>::new_uninit();
        let p = cache.as_mut_ptr();
        // SAFETY: `p` is the new allocation, sized and aligned for `Self`; every field but
        // `objs` is written once below, and `objs` (lines of `UnsafeCell<MaybeUninit<_>>`) is
        // valid uninitialised, so the whole value is initialised after the writes.
        unsafe {
            (&raw mut (*p).len).write(AtomicUsize::new(0));
            (&raw mut (*p).size).write(size);
            (&raw mut (*p).fill_limit).write(AtomicU32::new(plan.fill_limit));
            (&raw mut (*p).max_put).write(plan.max_put);
            (&raw mut (*p).max_get).write(plan.max_get);
            (&raw mut (*p).policy).write(policy);
            (&raw mut (*p)._entries).write(PhantomData);
            (&raw mut (*p).counters).write(counters);
            cache.assume_init()
        }
    }

    /// Entries held now.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Flush threshold (0 while pinned).
    #[inline(always)]
    pub(crate) fn fill_limit(&self) -> u32 {
        self.fill_limit.load(Ordering::Relaxed)
    }

    /// Whether the cache is pinned ([`Cache::pin`]).
    fn pinned(&self) -> bool {
        self.size > 0 && self.fill_limit() == 0
    }

    /// Pins the cache: from now on every get and put through it bypasses it (the ring, as a
    /// zero-size cache does), until [`Cache::unpin_if_idle`] finds nobody waiting. A thread
    /// whose future waits for an object pins its own cache, so that a put from another task
    /// of the same thread reaches the ring, which wakes the waiter, instead of staying in
    /// this cache (wait.rs).
    ///
    /// The owner only, the cache flushed just before with no user code run since. A cache
    /// that holds entries anyway is left as it is (`len <= fill_limit` must hold: the puts'
    /// room check subtracts the length from the limit).
    pub(crate) fn pin(&self) {
        if self.size > 0 && self.len() == 0 {
            self.fill_limit.store(0, Ordering::Relaxed);
        }
    }

    /// The owner, after a slow-path operation: unpins a pinned cache once no waiter is left
    /// (`waiting`, the ring's count of waiters), for the next operation's token.
    #[inline]
    pub(crate) fn unpin_if_idle(&self, waiting: &AtomicU32) {
        if self.pinned() && waiting.load(Ordering::Relaxed) == 0 {
            let plan = CachePlan::new(self.size, self.policy);
            self.fill_limit.store(plan.fill_limit, Ordering::Relaxed);
        }
    }

    /// The decisions of the cache algorithm for this cache: every get and put bypasses it
    /// while it is pinned.
    #[inline]
    fn plan(&self) -> CachePlan {
        let pinned = self.pinned();
        CachePlan {
            size: self.size,
            fill_limit: self.fill_limit(),
            max_put: if pinned { 0 } else { self.max_put },
            max_get: if pinned { 0 } else { self.max_get },
            policy: self.policy,
        }
    }

    /// The entry array; writable through UnsafeCell.
    #[inline(always)]
    fn objs(&self) -> *mut E {
        self.objs.as_ptr().cast::<E>().cast_mut()
    }

    /// Entries the array holds: `2 x size`.
    #[inline(always)]
    fn capacity(&self) -> usize {
        2 * self.size as usize
    }

    /// The entries held, coldest first. Meant for a quiescent pool: the owner must not be
    /// mutating the cache meanwhile (callers hold `&mut` pool or the slot lock).
    pub(crate) fn entries(&self) -> &[E] {
        let len = self.len().min(self.capacity());
        // SAFETY: objs[..len] are initialised (cache invariant); callers guarantee the owner
        // is not running (see above).
        unsafe { std::slice::from_raw_parts(self.objs().cast_const(), len) }
    }
}

/// What [`CacheMut::put_checked`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Appended to the cache (the fast path).
    Cached,
    /// Through the cold path: entries may have reached the ring (check for waiters).
    Ring,
    /// An entry failed the identity check: nothing moved.
    Foreign,
}

// The owner token: `CacheMut`, through which every get and put of the core pool runs.

/// Exclusive access to one cache and the common ring behind it: the owner token through which
/// every get and put of the core pool runs (DPDK's `rte_mempool_do_generic_get` /
/// `rte_mempool_do_generic_put`, with the cache argument). It is neither `Send`, `Sync` nor
/// `Clone`, and only its `unsafe` constructor can make one, so holding one proves that nobody
/// else mutates the cache.
///
/// It keeps the cache's flush threshold by value, so that an owner that keeps the token (a
/// [`crate::LocalCache`]) may keep it in a register across a loop of gets and puts; the entry
/// array is inline in the cache, at a constant offset from the cache pointer. The length has one home, the cache's `len`: each operation reads it once and stores
/// it once (a relaxed store, for counts by other threads), as DPDK's `cache->len`; a second
/// copy in the token cost a store per operation.
pub(crate) struct CacheMut<'a, E> {
    cache: NonNull<Cache<E>>,
    /// The ring, as a raw pointer (valid for `'a`): a token kept inside a companion that owns
    /// its pool through an `Arc` must hold no reference into that pool, since a reference
    /// field of a value passed by value is protected for the whole call under Stacked and
    /// Tree Borrows (the companion may be the pool's last owner: `drop(cache)`).
    ring: NonNull<Ring<E>>,
    fill_limit: usize,
    /// Borrows the cache for 'a; `*mut ()` makes the token neither Send nor Sync.
    _owner: PhantomData<(&'a Cache<E>, *mut ())>,
}

impl<'a, E: Copy> CacheMut<'a, E> {
    /// The owner token of `cache` in front of `ring`.
    ///
    /// # Safety
    /// For `'a`, no other `CacheMut` of `cache` may be in use (the caller is its owner thread
    /// or holds it exclusively) — unless `cache` has size 0: a zero-size cache holds no entry,
    /// every operation on it goes to the ring, and what it writes of the cache (`len`, always
    /// 0, and its shared counters) is atomic, so any number of tokens may use it at once.
    /// `cache` must stay valid for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn new(cache: NonNull<Cache<E>>, ring: &'a Ring<E>) -> Self {
        let ring = NonNull::from(ring);
        // SAFETY: valid for 'a (the caller's contract).
        let c = unsafe { cache.as_ref() };
        CacheMut {
            cache,
            ring,
            fill_limit: c.fill_limit() as usize,
            _owner: PhantomData,
        }
    }

    /// The cache this token owns (for its owner's drop).
    pub(crate) fn cache_ptr(&self) -> NonNull<Cache<E>> {
        self.cache
    }

    /// The ring behind the cache.
    #[inline(always)]
    fn ring(&self) -> &'a Ring<E> {
        // SAFETY: valid for 'a (constructor contract: made from a `&'a Ring`).
        unsafe { self.ring.as_ref() }
    }

    #[inline(always)]
    fn cache(&self) -> &'a Cache<E> {
        // SAFETY: valid for 'a (constructor contract).
        unsafe { self.cache.as_ref() }
    }

    /// The cache's entry array: at a constant offset from the cache (no load).
    #[inline(always)]
    fn objs(&self) -> *mut E {
        self.cache().objs()
    }

    /// Entries held now.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.cache().len()
    }

    /// Sets the length (the owner's relaxed store: other threads only count it).
    #[inline(always)]
    fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.cache().capacity());
        self.cache().len.store(len, Ordering::Relaxed);
    }

    /// Counts a get of `n` objects that failed before the cache algorithm ran (a bulk larger
    /// than the pool, refused by the pool's adapter), as [`get_miss`] counts its own failures.
    #[cold]
    pub(crate) fn count_failed_get(&self, n: usize) {
        self.count(Counter::GetFailBulk, 1);
        self.count(Counter::GetFailObjs, n);
    }

    /// What a get could reach now: this cache plus the ring (a snapshot).
    pub(crate) fn reachable(&self) -> usize {
        self.len() + self.ring().count()
    }

    /// The one get ([`get`] with this token's mechanics): fills `dst` with entries of free
    /// objects, the hottest first; `Ok(n)` or `Err(reachable)` as [`get`] says.
    ///
    /// Fast path: the cache holds `dst.len()`: copy from its top. Else (cold) [`get_miss`].
    #[inline(always)]
    pub(crate) fn get(
        &mut self,
        dst: &mut [MaybeUninit<E>],
        behavior: Behavior,
    ) -> Result<usize, usize> {
        if self.take_top(dst) {
            return Ok(dst.len());
        }
        self.get_miss(dst, behavior)
    }

    /// The get's slow path alone (out of line, see [`CacheMut::cold`]), for adapters that
    /// tried [`CacheMut::take_top_with`] first.
    #[inline(always)]
    pub(crate) fn get_miss(
        &mut self,
        dst: &mut [MaybeUninit<E>],
        behavior: Behavior,
    ) -> Result<usize, usize> {
        self.cold(|c| c.get_slow(dst, behavior))
    }

    /// Runs a slow path on a copy of this token held in a local. The token's own memory
    /// (inside a `LocalCache`, the caller's loop state) then never escapes to the out-of-line
    /// call, so the caller's loop may keep the token's fields in registers instead of
    /// reloading them after every operation.
    /// The copy is the only token used until it is dropped: `self` stays mutably borrowed.
    #[inline(always)]
    fn cold<X>(&mut self, f: impl FnOnce(&mut CacheMut<'a, E>) -> X) -> X {
        let mut local = CacheMut {
            cache: self.cache,
            ring: self.ring,
            fill_limit: self.fill_limit,
            _owner: PhantomData,
        };
        f(&mut local)
    }

    /// The get's fast path alone: fills `dst` from the top of the cache if it holds that many
    /// (then true), else changes nothing (false). Adapters call it first, apart from
    /// [`CacheMut::get`], so that a loop of hits keeps the cache state in registers.
    ///
    /// It does what the generic [`take_top`] does with this token's `pop_top`, written out:
    /// routed through the generic function, LLVM allocated registers differently in 13 of
    /// mempool_perf's 36 `worker_const` loops (an extra reload of the cache pointer per put in
    /// some), while written out the workers compile to the instructions they had before the
    /// algorithm was shared (BENCHMARKS.md, section 11).
    #[inline(always)]
    pub(crate) fn take_top(&mut self, dst: &mut [MaybeUninit<E>]) -> bool {
        self.take_top_with::<Dyn>(dst)
    }

    /// [`CacheMut::take_top`] when the caller read the length (`len`, [`CacheMut::len`]) and
    /// saw that it holds `dst.len()`: the length is read once per operation (an atomic read
    /// is not merged with another by the compiler).
    #[inline(always)]
    pub(crate) fn take_top_of(&mut self, dst: &mut [MaybeUninit<E>], len: usize) {
        let n = dst.len();
        debug_assert!(len == self.len() && n <= len);
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant, n <= len:
        // the caller's check of the length it read, which only this token's owner writes);
        // dst has room for n and does not overlap the cache's array (it is a &mut).
        unsafe { copy_entries(self.objs().add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
        self.count(Counter::GetSuccessBulk, 1);
        self.count(Counter::GetSuccessObjs, n);
    }

    /// [`CacheMut::take_top`] with the copy in the shape `S` (which covers `dst.len()`; the
    /// caller dispatched on the length once for all its steps, `repr::by_shape`).
    #[inline(always)]
    pub(crate) fn take_top_with<S: Shape>(&mut self, dst: &mut [MaybeUninit<E>]) -> bool {
        let n = dst.len();
        let len = self.len();
        if n > len {
            return false;
        }
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant); dst has room
        // for n and does not overlap the cache's array (it is a &mut); S covers n (contract).
        unsafe { S::copy(self.objs().add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
        self.count(Counter::GetSuccessBulk, 1);
        self.count(Counter::GetSuccessObjs, n);
        true
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self, dst: &mut [MaybeUninit<E>], behavior: Behavior) -> Result<usize, usize> {
        let plan = self.cache().plan();
        let r = get_miss(self, &plan, dst, behavior);
        self.cache().unpin_if_idle(self.ring().waiting());
        r
    }

    /// The one put ([`put`] with this token's mechanics): returns the entries of `src` (free
    /// objects of this pool, now owned by the cache); always succeeds.
    ///
    /// Fast path: they fit under the flush threshold: append them. Else (cold)
    /// [`put_overflow`]. Returns true when the cold path ran (entries may have reached the
    /// ring: the adapter then checks for waiters once the token is gone, wait.rs).
    #[inline(always)]
    pub(crate) fn put(&mut self, src: &[E]) -> bool {
        self.put_with::<Dyn>(src)
    }

    /// [`CacheMut::put`] with the copy in the shape `S` (which covers `src.len()`).
    #[inline(always)]
    pub(crate) fn put_with<S: Shape>(&mut self, src: &[E]) -> bool {
        if !self.append_with::<S>(src) {
            self.cold(|c| c.put_slow(src));
            return true;
        }
        false
    }

    /// The put's fast path alone: appends `src` if it fits under the flush threshold (then
    /// true), else changes nothing (false). The generic [`append`] written out, as
    /// [`CacheMut::take_top`] says why.
    ///
    /// The copy is in the shape `S` (which covers `src.len()`; [`Dyn`] dispatches on it).
    #[inline(always)]
    pub(crate) fn append_with<S: Shape>(&mut self, src: &[E]) -> bool {
        let n = src.len();
        let len = self.len();
        // `len + n` cannot wrap: len <= 2 x CACHE_MAX_SIZE and a slice holds at most
        // isize::MAX entries. The sum is the new length too (one add, one compare); for one
        // entry the room's form (`fill_limit - len`, a compare of the two) compiles shorter.
        let new_len = len + n;
        let over = if S::ONE {
            n > self.fill_limit - len
        } else {
            new_len > self.fill_limit
        };
        if over {
            return false;
        }
        // SAFETY: len + n <= fill_limit <= capacity(); src does not overlap the cache; S
        // covers n (contract).
        unsafe { S::copy(src.as_ptr(), self.objs().add(len), n) };
        self.set_len(new_len);
        self.count(Counter::PutBulk, 1);
        self.count(Counter::PutObjs, n);
        true
    }

    /// The put of a run-time pool: as [`CacheMut::put`], after the identity check of every
    /// entry (`rank(e) < span`: the OR of the ranks, one vector OR per few entries and one
    /// compare). Returns [`Put::Foreign`], with nothing changed, when an entry fails the check;
    /// the caller reports it after the token is gone.
    #[inline(always)]
    pub(crate) fn put_checked(&mut self, src: &[E], rank: impl Fn(E) -> u32, span: u32) -> Put {
        // SAFETY: src is n valid entries (a slice of E), whatever the check says.
        unsafe { self.put_checked_with::<Dyn, E>(src.as_ptr(), src.len(), |e| rank(*e), span) }
    }

    /// The checked put over a run of `n` values `X` that have an entry's layout (the caller's
    /// table slots, `Option<Handle>`): the OR of `bad(x)` over the run is computed first (in
    /// the shape `S`, which covers `n`); when it is `>= limit` nothing changes and the result
    /// is [`Put::Foreign`] (the caller says why: an empty slot or a foreign handle); else the
    /// run is put as entries ([`CacheMut::put_with`]).
    ///
    /// # Safety
    /// `src` valid for `n` reads of `X`; `X` has `E`'s size and alignment; and when the OR of
    /// `bad` over the run is below `limit`, the run's bits are `n` entries of free objects of
    /// this pool whose ownership passes to the cache (the caller forgets them).
    #[inline(always)]
    pub(crate) unsafe fn put_checked_with<S: Shape, X>(
        &mut self,
        src: *const X,
        n: usize,
        bad: impl Fn(&X) -> u32,
        limit: u32,
    ) -> Put {
        // SAFETY: src valid for n reads (contract); S covers n.
        if unsafe { S::or(src, n, bad) } >= limit {
            return Put::Foreign;
        }
        // SAFETY: the check passed: the run is n entries (contract).
        let src = unsafe { std::slice::from_raw_parts(src.cast::<E>(), n) };
        if self.put_with::<S>(src) {
            Put::Ring
        } else {
            Put::Cached
        }
    }

    #[cold]
    #[inline(never)]
    fn put_slow(&mut self, src: &[E]) {
        let plan = self.cache().plan();
        put_overflow(self, &plan, src);
        self.cache().unpin_if_idle(self.ring().waiting());
    }

    /// Returns every held entry to the ring (rte_mempool_cache_flush).
    pub(crate) fn flush(&mut self) {
        flush_all(self)
    }
}

/// The core's mechanics: the cache's array in plain memory (this token owns it) and the
/// lock-free [`Ring`].
impl<E: Copy> CacheOps<E> for CacheMut<'_, E> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.cache().len()
    }

    #[inline(always)]
    fn fill_limit(&self) -> usize {
        self.fill_limit
    }

    #[inline(always)]
    fn pop_top(&mut self, dst: &mut [MaybeUninit<E>]) {
        let n = dst.len();
        let len = self.len();
        debug_assert!(n <= len);
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant, n <= len);
        // dst has room for n and does not overlap the cache's array (it is a &mut).
        unsafe { copy_entries(self.objs().add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
    }

    #[inline(always)]
    fn push(&mut self, src: &[E]) {
        let n = src.len();
        let len = self.len();
        // SAFETY: len + n fits the array (contract: the fast path checked the fill limit, the
        // flush path flushed first); src does not overlap the cache.
        unsafe { copy_entries(src.as_ptr(), self.objs().add(len), n) };
        self.set_len(len + n);
    }

    #[inline]
    fn refill(&mut self, want: usize, how: Behavior) -> usize {
        let len = self.len();
        debug_assert!(len + want <= self.cache().capacity());
        // SAFETY: objs[len .. len + want] is inside the array (CachePlan::on_get_miss).
        let got = unsafe { self.ring().dequeue_raw(self.objs().add(len), want, how).n };
        self.set_len(len + got);
        got
    }

    #[inline]
    fn unrefill(&mut self, k: usize) {
        let len = self.len() - k;
        self.set_len(len);
        // SAFETY: objs[len .. len + k] are the entries the refill brought (initialised).
        unsafe { enqueue_all(self.ring(), self.objs().add(len), k) };
    }

    #[inline]
    fn flush_bottom(&mut self, k: usize) {
        let (objs, len) = (self.objs(), self.len());
        debug_assert!(k <= len);
        // SAFETY: k <= len, objs[..len] initialised; the moved tail stays inside objs.
        unsafe {
            enqueue_all(self.ring(), objs, k);
            std::ptr::copy(objs.add(k), objs, len - k);
        }
        self.set_len(len - k);
    }

    #[inline]
    fn ring_get(&mut self, dst: &mut [MaybeUninit<E>], how: Behavior) -> usize {
        // SAFETY: dst is valid for dst.len() writes.
        unsafe {
            self.ring()
                .dequeue_raw(dst.as_mut_ptr().cast(), dst.len(), how)
                .n
        }
    }

    #[inline]
    fn ring_put(&mut self, src: &[E]) {
        // SAFETY: src is valid for src.len() reads.
        unsafe { enqueue_all(self.ring(), src.as_ptr(), src.len()) };
    }

    fn ring_count(&self) -> usize {
        self.ring().count()
    }

    /// Nothing: every step stores the length in the cache ([`CacheMut::set_len`]).
    #[inline(always)]
    fn publish(&self) {
        debug_assert!(self.len() <= self.fill_limit);
    }

    #[inline(always)]
    fn count(&self, which: Counter, n: usize) {
        self.cache().counters.add(which, n);
    }
}

/// Enqueues `n` entries that the ring must have room for.
///
/// # Safety
/// `src` valid for `n` reads.
#[inline]
unsafe fn enqueue_all<E: Copy>(ring: &Ring<E>, src: *const E, n: usize) {
    // SAFETY: the caller's contract.
    let t = unsafe { ring.enqueue_raw(src, n, Behavior::Bulk) };
    // The ring is sized for every object of the pool and each object is in one place only, so
    // this cannot fail unless an `unsafe` contract (Handle::from_raw) was broken. Panicking is
    // the only way not to lose objects silently then.
    assert!(
        t.n == n,
        "idxpool: common ring overflow putting {n} entries (free {}): an entry was put twice \
         (broken Handle::from_raw contract)",
        t.remaining
    );
}

#[cfg(all(test, not(loom)))]
mod tests;
