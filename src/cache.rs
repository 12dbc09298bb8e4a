//! Per-thread (or user-owned) LIFO caches of free entries, and their flush/refill policies.
//!
//! A cache sits between one thread and the common ring, as `struct rte_mempool_cache` does, so
//! that most gets and puts touch only memory owned by that thread. It holds entries of the
//! pool's representation (4-byte indices for the index pool). The policy decides when the cache
//! flushes to the ring and how much it refills from it; see [`FlushPolicy`].
//!
//! Invariants (checked by `audit`, relied on by the `unsafe` blocks below):
//! * `len <= fill_limit <= objs.len() == 2 * size`;
//! * `objs[..len]` are initialised entries of distinct free objects, coldest at the bottom;
//! * only the owning thread mutates the cache; other threads read `len` (atomically) for
//!   `available()`, and read `objs` only when the pool is quiescent (`&mut` access).

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;

use crate::error::PoolError;
use crate::repr::copy_entries;
use crate::ring::{Behavior, Ring};
use crate::stats::{Counter, Counters};
use crate::sync::{AtomicU32, Ordering};

/// DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`: the largest cache size accepted.
pub const CACHE_MAX_SIZE: u32 = 512;

/// When a cache flushes to the common ring and how much it refills from it.
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

/// One LIFO cache of entries of type `E`.
///
/// Aligned to two cache lines ([`crate::CACHE_LINE`] pairs, as DPDK's caches are
/// `__rte_cache_aligned` and crossbeam's `CachePadded` on x86_64): its owner writes `len` and
/// the counters on every operation, and two threads' caches allocated side by side must not
/// share a line (the adjacent-line prefetcher pulls lines in pairs).
#[repr(align(128))]
pub(crate) struct Cache<E> {
    /// Entries held; written only by the owner (relaxed store, no RMW), read by anyone.
    len: AtomicU32,
    size: u32,
    /// Most entries the cache may hold (the flush threshold).
    fill_limit: u32,
    /// Largest put that goes through the cache; larger ones go straight to the ring.
    max_put: u32,
    /// Largest get that refills the cache; larger ones go straight to the ring.
    max_get: u32,
    policy: FlushPolicy,
    objs: Box<[UnsafeCell<MaybeUninit<E>>]>,
    pub(crate) counters: Counters,
}

// SAFETY: the entries (UnsafeCell) are mutated only by the cache's owner, which every mutating
// method requires of its caller (they are `unsafe fn`); other threads only read the atomic
// `len` and counters, or the entries while the pool is quiescent.
unsafe impl<E: Send> Sync for Cache<E> {}

impl<E: Copy> Cache<E> {
    /// A cache of `size` (1..=512) under `policy`.
    pub(crate) fn new(size: u32, policy: FlushPolicy) -> Self {
        debug_assert!(size <= CACHE_MAX_SIZE);
        let (max_put, max_get) = match policy {
            FlushPolicy::Classic => (policy.fill_limit(size), size.saturating_sub(1)),
            FlushPolicy::Dpdk2607 => (size / 2, size / 2),
            FlushPolicy::SizeAligned => (size, size),
        };
        Cache {
            len: AtomicU32::new(0),
            size,
            fill_limit: policy.fill_limit(size),
            max_put,
            max_get,
            policy,
            objs: (0..2 * size as usize)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            counters: Counters::default(),
        }
    }

    /// Entries held now.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    #[inline(always)]
    fn set_len(&self, n: usize) {
        debug_assert!(n <= self.fill_limit as usize);
        self.len.store(n as u32, Ordering::Relaxed);
    }

    /// Flush threshold.
    pub(crate) fn fill_limit(&self) -> u32 {
        self.fill_limit
    }

    /// The entry array; writable through UnsafeCell.
    #[inline(always)]
    fn objs(&self) -> *mut E {
        self.objs.as_ptr() as *mut E
    }

    /// The entries held, coldest first. Meant for a quiescent pool: the owner must not be
    /// mutating the cache meanwhile (callers hold `&mut` pool or the slot lock).
    pub(crate) fn entries(&self) -> &[E] {
        let len = self.len().min(self.objs.len());
        // SAFETY: objs[..len] are initialised (cache invariant); callers guarantee the owner
        // is not running (see above).
        unsafe { std::slice::from_raw_parts(self.objs().cast_const(), len) }
    }

    /// The owner's fast-path view: entry array, length and flush threshold as plain values,
    /// so that a caller that keeps the view (a `LocalCache`) keeps them in registers.
    #[inline(always)]
    pub(crate) fn fast(&self) -> Fast<E> {
        Fast {
            objs: self.objs(),
            len: self.len(),
            fill_limit: self.fill_limit as usize,
        }
    }

    /// Publishes the length of a fast-path view after a successful get (`got`) or put of `n`
    /// entries, and counts it.
    #[inline(always)]
    pub(crate) fn publish(&self, fast: &Fast<E>, got: bool, n: usize) {
        self.set_len(fast.len);
        if got {
            self.counters.add(Counter::GetSuccessBulk, 1);
            self.counters.add(Counter::GetSuccessObjs, n);
        } else {
            self.counters.add(Counter::PutBulk, 1);
            self.counters.add(Counter::PutObjs, n);
        }
    }

    /// Takes one entry: the hottest in the cache, else after a refill.
    ///
    /// # Safety (all mutating methods)
    /// The caller must be the cache's only user for the call (its owner thread, or the holder
    /// of exclusive access).
    #[inline(always)]
    pub(crate) unsafe fn get_one(&self, ring: &Ring<E>) -> Option<E> {
        let mut out = MaybeUninit::<E>::uninit();
        // SAFETY: out is valid for one write; the caller owns the cache. get_bulk writes the
        // entry exactly when it returns Ok (fast path through `Fast::try_get`, else the slow
        // path).
        match unsafe { self.get_bulk(ring, out.as_mut_ptr(), 1) } {
            // SAFETY: written on success.
            Ok(()) => Some(unsafe { out.assume_init() }),
            Err(_) => None,
        }
    }

    /// Returns one entry to the cache (flushing first if it is full).
    #[inline(always)]
    pub(crate) unsafe fn put_one(&self, ring: &Ring<E>, e: E) {
        // SAFETY: &e is valid for one read; the caller owns the cache.
        unsafe { self.put_bulk(ring, &e, 1) }
    }

    /// Takes exactly `n` entries into `dst` or none.
    ///
    /// # Errors
    /// `Err(available)`: the cache plus the ring held fewer than `n`; nothing was written to
    /// `dst` (the cache may have refilled).
    ///
    /// # Safety
    /// `dst` must be valid for `n` writes.
    #[inline(always)]
    pub(crate) unsafe fn get_bulk(
        &self,
        ring: &Ring<E>,
        dst: *mut E,
        n: usize,
    ) -> Result<(), usize> {
        let mut fast = self.fast();
        // SAFETY: caller guarantees dst and ownership.
        if unsafe { fast.try_get(dst, n) } {
            self.publish(&fast, true, n);
            return Ok(());
        }
        // SAFETY: forwarded.
        unsafe { self.get_bulk_slow(ring, dst, n) }
    }

    #[cold]
    #[inline(never)]
    unsafe fn get_bulk_slow(&self, ring: &Ring<E>, dst: *mut E, n: usize) -> Result<(), usize> {
        let mut len = self.len();
        if n <= self.max_get as usize {
            // Refill, then serve from the top.
            let (want, behavior) = match self.policy {
                FlushPolicy::Classic => (self.size as usize + n - len, Behavior::Bulk),
                FlushPolicy::Dpdk2607 => ((self.size / 2) as usize, Behavior::Burst),
                FlushPolicy::SizeAligned => (self.size as usize, Behavior::Bulk),
            };
            debug_assert!(len + want <= self.objs.len());
            // SAFETY: objs[len .. len + want] is inside the array (policy arithmetic above).
            let got = unsafe { ring.dequeue_raw(self.objs().add(len), want, behavior).n };
            if got > 0 {
                self.counters.add(Counter::GetCommonBulk, 1);
                self.counters.add(Counter::GetCommonObjs, got);
                len += got;
                // The refill may overshoot the fill limit only transiently: serving n below
                // brings it back (Classic: size + n - len refilled, n served).
                self.len.store(len as u32, Ordering::Relaxed);
            }
            if n <= len {
                // SAFETY: as in get_bulk.
                unsafe { copy_entries(self.objs().add(len - n), dst, n) };
                self.set_len(len - n);
                self.counters.add(Counter::GetSuccessBulk, 1);
                self.counters.add(Counter::GetSuccessObjs, n);
                return Ok(());
            }
        } else {
            // Bypass: straight from the ring.
            // SAFETY: caller guarantees dst for n writes.
            if unsafe { ring.dequeue_raw(dst, n, Behavior::Bulk).n } == n {
                self.counters.add(Counter::GetCommonBulk, 1);
                self.counters.add(Counter::GetCommonObjs, n);
                self.counters.add(Counter::GetSuccessBulk, 1);
                self.counters.add(Counter::GetSuccessObjs, n);
                return Ok(());
            }
        }
        // Last resort, so that a get never fails while this cache plus the ring hold enough:
        // the whole cache plus the rest from the ring.
        let need = n - len;
        // SAFETY: dst + len .. dst + n is inside the caller's buffer.
        if unsafe { ring.dequeue_raw(dst.add(len), need, Behavior::Bulk).n } == need {
            // SAFETY: objs[..len] initialised; dst[..len] valid.
            unsafe { std::ptr::copy_nonoverlapping(self.objs(), dst, len) };
            self.set_len(0);
            self.counters.add(Counter::GetCommonBulk, 1);
            self.counters.add(Counter::GetCommonObjs, need);
            self.counters.add(Counter::GetSuccessBulk, 1);
            self.counters.add(Counter::GetSuccessObjs, n);
            return Ok(());
        }
        self.counters.add(Counter::GetFailBulk, 1);
        self.counters.add(Counter::GetFailObjs, n);
        Err(len + ring.count())
    }

    /// Takes up to `n` entries into `dst`; returns how many.
    ///
    /// # Safety
    /// `dst` must be valid for `n` writes.
    pub(crate) unsafe fn get_burst(&self, ring: &Ring<E>, dst: *mut E, n: usize) -> usize {
        // SAFETY: forwarded.
        match unsafe { self.get_bulk(ring, dst, n) } {
            Ok(()) => n,
            Err(_) => {
                // Fewer than n reachable: hand over the cache and whatever the ring has.
                let len = self.len();
                let take = len.min(n);
                // SAFETY: top `take` entries are initialised; dst valid for n >= take.
                unsafe { std::ptr::copy_nonoverlapping(self.objs().add(len - take), dst, take) };
                self.set_len(len - take);
                // SAFETY: dst + take .. dst + n valid.
                let more = unsafe { ring.dequeue_raw(dst.add(take), n - take, Behavior::Burst).n };
                if more > 0 {
                    self.counters.add(Counter::GetCommonBulk, 1);
                    self.counters.add(Counter::GetCommonObjs, more);
                }
                if take + more > 0 {
                    self.counters.add(Counter::GetSuccessBulk, 1);
                    self.counters.add(Counter::GetSuccessObjs, take + more);
                }
                take + more
            }
        }
    }

    /// Puts `n` entries from `src`; always succeeds.
    ///
    /// # Safety
    /// `src` must be valid for `n` reads of entries of free objects of this pool.
    #[inline(always)]
    pub(crate) unsafe fn put_bulk(&self, ring: &Ring<E>, src: *const E, n: usize) {
        let mut fast = self.fast();
        // SAFETY: caller guarantees src and ownership.
        if unsafe { fast.try_put(src, n) } {
            self.publish(&fast, false, n);
            return;
        }
        // SAFETY: forwarded.
        unsafe { self.put_bulk_slow(ring, src, n) }
    }

    #[cold]
    #[inline(never)]
    unsafe fn put_bulk_slow(&self, ring: &Ring<E>, src: *const E, n: usize) {
        self.counters.add(Counter::PutBulk, 1);
        self.counters.add(Counter::PutObjs, n);
        if n > self.max_put as usize {
            // SAFETY: caller guarantees src.
            unsafe { enqueue_all(ring, src, n) };
            self.counters.add(Counter::PutCommonBulk, 1);
            self.counters.add(Counter::PutCommonObjs, n);
            return;
        }
        let len = self.len();
        let flush = match self.policy {
            FlushPolicy::Classic => len,
            FlushPolicy::Dpdk2607 => (self.size / 2) as usize,
            FlushPolicy::SizeAligned => self.size as usize,
        };
        let objs = self.objs();
        // SAFETY: flush <= len (policy arithmetic: a put that crosses the limit finds at least
        // `flush` entries), objs[..len] initialised; the moved tail stays inside objs.
        unsafe {
            enqueue_all(ring, objs, flush);
            std::ptr::copy(objs.add(flush), objs, len - flush);
            std::ptr::copy_nonoverlapping(src, objs.add(len - flush), n);
        }
        self.set_len(len - flush + n);
        self.counters.add(Counter::PutCommonBulk, 1);
        self.counters.add(Counter::PutCommonObjs, flush);
    }

    /// Returns every held entry to the ring (rte_mempool_cache_flush).
    pub(crate) unsafe fn flush(&self, ring: &Ring<E>) {
        let len = self.len();
        if len == 0 {
            return;
        }
        // SAFETY: objs[..len] initialised.
        unsafe { enqueue_all(ring, self.objs(), len) };
        self.set_len(0);
        self.counters.add(Counter::PutCommonBulk, 1);
        self.counters.add(Counter::PutCommonObjs, len);
    }
}

/// The cache's fast paths over a copy of its state (see [`Cache::fast`]). After a successful
/// `try_*`, the owner publishes `len` with [`Cache::publish`]; a failed `try_*` changes nothing.
pub(crate) struct Fast<E> {
    objs: *mut E,
    pub(crate) len: usize,
    fill_limit: usize,
}

impl<E: Copy> Fast<E> {
    /// Entries that still fit under the flush threshold.
    #[inline(always)]
    pub(crate) fn fill_limit_room(&self) -> usize {
        self.fill_limit - self.len
    }

    /// Copies the top `n` entries to `dst` if the cache holds them.
    ///
    /// # Safety
    /// `dst` valid for `n` writes; the view is the owner's and current.
    #[inline(always)]
    pub(crate) unsafe fn try_get(&mut self, dst: *mut E, n: usize) -> bool {
        if n <= self.len {
            // SAFETY: objs[len - n .. len] are initialised entries (cache invariant).
            unsafe { copy_entries(self.objs.add(self.len - n), dst, n) };
            self.len -= n;
            true
        } else {
            false
        }
    }

    /// Appends `n` entries from `src` if they fit under the flush threshold.
    ///
    /// # Safety
    /// `src` valid for `n` reads; the view is the owner's and current.
    #[inline(always)]
    pub(crate) unsafe fn try_put(&mut self, src: *const E, n: usize) -> bool {
        if n <= self.fill_limit - self.len {
            // SAFETY: len + n <= fill_limit <= objs.len().
            unsafe { copy_entries(src, self.objs.add(self.len), n) };
            self.len += n;
            true
        } else {
            false
        }
    }
}

/// Enqueues `n` entries that the ring must have room for.
///
/// # Safety
/// `src` valid for `n` reads.
#[inline]
unsafe fn enqueue_all<E: Copy>(ring: &Ring<E>, src: *const E, n: usize) {
    // SAFETY: forwarded.
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
mod tests {
    use super::*;
    use crate::ring::RingFlags;

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
        fn get(&self, n: usize) -> Result<Vec<u32>, usize> {
            let mut v = vec![0u32; n];
            // SAFETY: single-threaded owner; v has n slots.
            unsafe { self.c.get_bulk(&self.r, v.as_mut_ptr(), n) }.map(|()| v)
        }
        fn put(&self, v: &[u32]) {
            // SAFETY: single-threaded owner; v holds v.len() entries.
            unsafe { self.c.put_bulk(&self.r, v.as_ptr(), v.len()) }
        }
        fn get_one(&self) -> Option<u32> {
            // SAFETY: single-threaded owner.
            unsafe { self.c.get_one(&self.r) }
        }
        fn put_one(&self, e: u32) {
            // SAFETY: single-threaded owner.
            unsafe { self.c.put_one(&self.r, e) }
        }
        fn flush(&self) {
            // SAFETY: single-threaded owner.
            unsafe { self.c.flush(&self.r) }
        }
    }

    #[test]
    fn caches_are_two_cache_lines_apart() {
        // Issue 12: each thread's cache (written on every operation) on its own line pair.
        let pair = 2 * crate::CACHE_LINE;
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
