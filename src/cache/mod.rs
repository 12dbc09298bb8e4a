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
//! the shared pool's in-region cache (`shared::pool::region_cache::RegionCache`: recoverable rings, owner
//! words, kill points). `CacheMut::get` and `CacheMut::put` are the core pool's one get path
//! and one put path: the fast path, refill, flush, bypass, and the uncached case (a zero-size
//! cache).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use crate::ring::Behavior;
use crate::stats::{Counter, Counters};
use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// Cache line size assumed for layout (x86-64, most arm64): the alignment of the region and
/// of each cache, and the unit of `StrideMode::Auto`.
pub const CACHE_LINE: usize = 64;

/// DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`: the largest cache size accepted.
pub const CACHE_MAX_SIZE: u32 = 512;

mod policy;
mod token;

pub use policy::FlushPolicy;
pub(crate) use policy::{CachePlan, GetMiss, PutOverflow};
pub(crate) use token::CacheMut;

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
#[repr(align(128))]
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
    /// The entry array, `2 x size` entries (`capacity()`), in whole cache lines starting on a
    /// line (DPDK's `objs` is `__rte_cache_aligned` too): the caches' copies are wide vector
    /// moves (64 bytes in builds with AVX-512), and a move that straddles two lines, read
    /// back right after it was written (a put then a get of the same entries), cannot take its
    /// bytes from the store (BENCHMARKS.md 33).
    objs: Box<[Line]>,
    _entries: PhantomData<E>,
    pub(crate) counters: Counters,
}

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
    pub(crate) fn new(size: u32, policy: FlushPolicy) -> Self {
        Self::with_counters(size, policy, Counters::default())
    }

    /// The zero-size cache of a pool's callers that have no cache (cache size 0, threads beyond
    /// `max_threads`, code running during thread exit): every get and put goes straight to the
    /// ring. It holds no entry, so several threads may use it at once (see [`CacheMut::new`]);
    /// its counters are shared.
    pub(crate) fn uncached(policy: FlushPolicy) -> Self {
        Self::with_counters(0, policy, Counters::shared())
    }

    fn with_counters(size: u32, policy: FlushPolicy, counters: Counters) -> Self {
        debug_assert!(size <= CACHE_MAX_SIZE);
        // The plan's fields, kept one by one: the layout of the cache's first line is the one
        // the fast paths were tuned with.
        const {
            assert!(
                align_of::<E>() <= CACHE_LINE,
                "entries fit the lines' alignment"
            )
        };
        let plan = CachePlan::new(size, policy);
        Cache {
            len: AtomicUsize::new(0),
            size,
            fill_limit: AtomicU32::new(plan.fill_limit),
            max_put: plan.max_put,
            max_get: plan.max_get,
            policy,
            objs: (0..(2 * size as usize * size_of::<E>()).div_ceil(CACHE_LINE))
                .map(|_| Line(UnsafeCell::new(MaybeUninit::uninit())))
                .collect(),
            _entries: PhantomData,
            counters,
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ring::{Ring, RingFlags};
    use std::ptr::NonNull;

    /// A cache and its ring owned by one test thread: the owner contract holds trivially.
    struct Owned {
        r: Ring<u32>,
        c: Cache<u32>,
    }

    impl Owned {
        fn new(total: u32, size: u32, policy: FlushPolicy) -> Self {
            let exact = RingFlags {
                exact_size: true,
                ..Default::default()
            };
            let r = Ring::new(total, exact).unwrap();
            let all: Vec<u32> = (0..total).collect();
            assert!(r.enqueue_bulk(&all));
            Owned {
                r,
                c: Cache::new(size, policy),
            }
        }
        fn cm(&self) -> CacheMut<'_, u32> {
            // SAFETY: single-threaded owner; one token at a time (each helper makes its own).
            unsafe { CacheMut::new(NonNull::from(&self.c), &self.r) }
        }
        fn get(&self, n: usize) -> Result<Vec<u32>, usize> {
            let mut v = vec![MaybeUninit::uninit(); n];
            self.cm().get(&mut v, Behavior::Bulk)?;
            // SAFETY: a successful bulk get wrote all n.
            Ok(v.into_iter().map(|e| unsafe { e.assume_init() }).collect())
        }
        fn put(&self, v: &[u32]) {
            self.cm().put(v);
        }
        fn get_one(&self) -> Option<u32> {
            self.get(1).ok().map(|v| v[0])
        }
        fn put_one(&self, e: u32) {
            self.put(&[e])
        }
        fn flush(&self) {
            self.cm().flush()
        }
    }

    /// The run-time pool's put: the identity check fused into the fast path's copy,
    /// and made before anything moves on the slow path. A failing entry changes nothing.
    #[test]
    fn put_checked_moves_nothing_when_an_entry_fails() {
        let o = Owned::new(200, 8, FlushPolicy::Dpdk2607);
        // rank = the entry itself, span 100: entries >= 100 are "foreign".
        let rank = |e: u32| e;
        let mut cm = o.cm();
        for n in [1usize, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 100] {
            let ring_before = o.r.count();
            let len_before = cm.len();
            let mut src: Vec<u32> = (0..n as u32).collect();
            *src.last_mut().unwrap() = 150; // the last one is foreign
            assert_eq!(cm.put_checked(&src, rank, 100), Put::Foreign, "n = {n}");
            assert_eq!(
                (cm.len(), o.r.count()),
                (len_before, ring_before),
                "n = {n}"
            );
        }
        // A good put of each shape goes through (fast path, then the slow path's flush).
        let mut got = vec![MaybeUninit::uninit(); 8];
        cm.get(&mut got, Behavior::Bulk).unwrap();
        // SAFETY: a successful bulk get wrote all 8.
        let got: Vec<u32> = got
            .into_iter()
            .map(|e| unsafe { e.assume_init() })
            .collect();
        let (small, rest) = got.split_at(1);
        assert_ne!(cm.put_checked(small, |e| e % 200, 200), Put::Foreign);
        assert_ne!(cm.put_checked(rest, |e| e % 200, 200), Put::Foreign);
        let _ = cm.len(); // the token published its length on every put
        o.flush();
        assert_eq!(o.r.count(), 200, "every entry home");
    }

    #[test]
    fn caches_are_two_cache_lines_apart() {
        // Each thread's cache (written on every operation) on its own line pair.
        let pair = 2 * CACHE_LINE;
        assert!(std::mem::align_of::<Cache<u32>>() >= pair);
        let boxes: Vec<Box<Cache<u32>>> = (0..4)
            .map(|_| Box::new(Cache::new(4, FlushPolicy::DEFAULT)))
            .collect();
        for b in &boxes {
            assert_eq!(&**b as *const Cache<u32> as usize % pair, 0);
        }
    }

    #[test]
    fn validation_follows_dpdk() {
        assert!(FlushPolicy::Classic.validate(513, 10_000).is_err());
        assert!(FlushPolicy::Classic.validate(512, 767).is_err());
        assert!(FlushPolicy::Classic.validate(512, 768).is_ok());
        assert!(FlushPolicy::Dpdk2607.validate(512, 511).is_err());
        assert!(FlushPolicy::Dpdk2607.validate(512, 512).is_ok());
        assert!(FlushPolicy::SizeAligned.validate(512, 512).is_ok());
        for p in FlushPolicy::ALL {
            assert_eq!(FlushPolicy::from_name(p.name()), Some(p));
        }
    }

    #[test]
    fn lifo_order_single() {
        let o = Owned::new(100, 16, FlushPolicy::Dpdk2607);
        o.put_one(1000);
        o.put_one(1001);
        assert_eq!(o.get_one(), Some(1001));
        assert_eq!(o.get_one(), Some(1000));
    }

    #[test]
    fn every_policy_conserves_and_respects_its_limit() {
        for policy in FlushPolicy::ALL {
            for size in [0u32, 1, 2, 7, 32] {
                let total = 200;
                let o = Owned::new(total, size, policy);
                let mut held: Vec<u32> = Vec::new();
                let mut rng = 12345u64;
                for _ in 0..2000 {
                    rng = rng
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let n = 1 + (rng >> 33) as usize % 40;
                    if (rng >> 20) & 1 == 0 {
                        match o.get(n) {
                            Ok(v) => held.extend(v),
                            Err(avail) => {
                                assert!(avail < n, "{policy} size {size}: spurious failure")
                            }
                        }
                    } else {
                        let k = n.min(held.len());
                        let src: Vec<u32> = held.split_off(held.len() - k);
                        o.put(&src);
                    }
                    assert!(
                        o.c.len() <= o.c.fill_limit() as usize,
                        "{policy} size {size}"
                    );
                    assert_eq!(o.c.len() + o.r.count() + held.len(), total as usize);
                }
                o.flush();
                let mut seen: Vec<u32> = held;
                let mut all = vec![0u32; o.r.count()];
                // SAFETY: `all` has room for every entry.
                let got = unsafe {
                    o.r.dequeue_raw(all.as_mut_ptr(), all.len(), Behavior::Bulk)
                        .n
                };
                seen.extend(&all[..got]);
                seen.sort_unstable();
                assert_eq!(seen, (0..total).collect::<Vec<_>>(), "{policy} size {size}");
            }
        }
    }

    #[test]
    fn get_never_fails_while_cache_and_ring_hold_enough() {
        for policy in FlushPolicy::ALL {
            let o = Owned::new(64, 32, policy);
            let v = o.get(20).unwrap();
            o.put(&v);
            let all = o
                .get(64)
                .unwrap_or_else(|a| panic!("{policy}: failed, avail {a}"));
            assert_eq!(all.len(), 64);
            assert_eq!(o.get(1), Err(0));
        }
    }

    #[test]
    fn dpdk2607_flush_evicts_the_coldest_half() {
        let o = Owned::new(100, 8, FlushPolicy::Dpdk2607);
        let cold = o.get(4).unwrap();
        let hot = o.get(4).unwrap();
        o.flush();
        o.put(&cold);
        o.put(&hot);
        assert_eq!(o.c.len(), 8);
        let extra = o.r.count();
        let one = o.get(1); // served from the cache: the hottest
        assert_eq!(one, Ok(vec![hot[3]]));
        o.put_one(hot[3]);
        o.put_one(99); // 9th object: flushes the 4 coldest
        assert_eq!(o.c.entries(), &[hot[0], hot[1], hot[2], hot[3], 99]);
        assert_eq!(o.r.count(), extra + 4);
    }

    #[test]
    fn classic_flushes_everything_when_crossing_the_threshold() {
        let o = Owned::new(100, 8, FlushPolicy::Classic);
        let v = o.get(12).unwrap();
        o.flush();
        o.put(&v); // 12 == 1.5 x 8: at the threshold, no flush
        assert_eq!(o.c.len(), 12);
        let before = o.r.count();
        let w = o.get(1).unwrap();
        o.put(&w);
        assert_eq!(o.c.len(), 12);
        // One more crosses the threshold: the whole cache goes, the new object stays.
        let y = {
            let mut v = vec![0u32; 1];
            // SAFETY: owner; direct ring dequeue of one entry.
            unsafe { o.r.dequeue_raw(v.as_mut_ptr(), 1, Behavior::Bulk) };
            v
        };
        o.put(&y);
        assert_eq!(o.c.len(), 1);
        assert_eq!(o.r.count(), before - 1 + 12);
    }
}
