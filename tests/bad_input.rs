//! Bad input: every core `PoolError` variant provoked through the public API, plus edge
//! configurations (cache size 0, capacity 1, bulk requests larger than the pool, 8 KiB object
//! alignment) and an init callback that panics. Bad input must return a typed error (or, for a
//! panicking callback, unwind cleanly): no hang, no leak, no lost brand.
//!
//! Hugetlb tests depend on the machine: they run when pages are reserved and print a skip
//! message otherwise. (The shared-region variants `LayoutMismatch`, `FingerprintMismatch`,
//! `SharedFile`, `NoProcessSlot` belong to `idxpool::shared` and are tested with it.)

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use idxpool::{
    Backing, BackingPolicy, FlushPolicy, Handle, Index, Offset, PoolBuilder, PoolError, StrideMode,
    CACHE_MAX_SIZE,
};

/// Builds a scoped pool just to get the configuration error (the closure never runs).
fn config_error<T>(b: PoolBuilder<'_, T>) -> PoolError {
    match b.scoped(|_| ()) {
        Err(e) => e,
        Ok(()) => panic!("configuration accepted"),
    }
}

fn assert_invalid(e: PoolError, needle: &str) {
    match &e {
        PoolError::InvalidConfig { reason } => {
            assert!(
                reason.contains(needle),
                "reason {reason:?} should mention {needle:?}"
            )
        }
        other => panic!("expected InvalidConfig about {needle:?}, got {other:?}"),
    }
    // Every error displays as a sentence naming its cause.
    assert!(!e.to_string().is_empty());
}

// ---- InvalidConfig ---------------------------------------------------------------------------

#[test]
fn cache_size_above_512_is_rejected() {
    assert_eq!(CACHE_MAX_SIZE, 512);
    for policy in FlushPolicy::ALL {
        let e = config_error(
            PoolBuilder::<u64>::with_default(1024)
                .cache_size(513)
                .policy(policy),
        );
        assert_invalid(e, "513");
        // 512 itself is fine.
        PoolBuilder::<u64>::with_default(1024)
            .cache_size(512)
            .policy(policy)
            .scoped(|p| assert_eq!(p.cache_size(), 512))
            .unwrap();
    }
}

#[test]
fn cache_too_big_for_capacity_under_each_policy() {
    // Classic: the flush threshold 1.5 x cache_size (integer, as DPDK's
    // CALC_CACHE_FLUSHTHRESH) must not exceed the capacity: 8 -> 12 > 10, 7 -> 10 is fine.
    assert_invalid(
        config_error(
            PoolBuilder::<u64>::with_default(10)
                .cache_size(8)
                .policy(FlushPolicy::Classic),
        ),
        "too large",
    );
    PoolBuilder::<u64>::with_default(10)
        .cache_size(7)
        .policy(FlushPolicy::Classic)
        .scoped(|_| ())
        .unwrap();
    // Dpdk2607 and SizeAligned: cache_size must not exceed the capacity.
    for policy in [FlushPolicy::Dpdk2607, FlushPolicy::SizeAligned] {
        assert_invalid(
            config_error(
                PoolBuilder::<u64>::with_default(10)
                    .cache_size(11)
                    .policy(policy),
            ),
            "too large",
        );
        PoolBuilder::<u64>::with_default(10)
            .cache_size(10)
            .policy(policy)
            .scoped(|_| ())
            .unwrap();
    }
}

#[test]
fn capacity_zero_is_rejected() {
    assert_invalid(
        config_error(PoolBuilder::<u64>::with_default(0).cache_size(0)),
        "capacity",
    );
}

#[test]
fn zero_sized_objects_are_rejected() {
    assert_invalid(
        config_error(PoolBuilder::<()>::with_default(8)),
        "zero-sized",
    );
    #[derive(Default)]
    struct Empty;
    assert_invalid(
        config_error(PoolBuilder::<Empty>::with_default(8)),
        "zero-sized",
    );
}

#[test]
fn bad_strides_are_rejected() {
    // Smaller than the object.
    assert_invalid(
        config_error(PoolBuilder::<u64>::with_default(8).stride(StrideMode::Bytes(4))),
        "stride",
    );
    // Not a multiple of the alignment.
    assert_invalid(
        config_error(PoolBuilder::<u64>::with_default(8).stride(StrideMode::Bytes(12))),
        "stride",
    );
    // A valid explicit stride is honoured.
    PoolBuilder::<u64>::with_default(8)
        .stride(StrideMode::Bytes(24))
        .scoped(|p| assert_eq!(p.stride(), 24))
        .unwrap();
}

#[test]
fn max_threads_zero_is_rejected() {
    assert_invalid(
        config_error(PoolBuilder::<u64>::with_default(8).max_threads(0)),
        "max_threads",
    );
}

// ---- SizeOverflow ----------------------------------------------------------------------------

#[test]
fn huge_objects_times_huge_capacity_overflow() {
    // 4 GiB objects x (2^32 - 1) overflows usize.
    let e = config_error(PoolBuilder::<[u8; 1 << 32]>::zeroed(u32::MAX).cache_size(0));
    assert!(matches!(e, PoolError::SizeOverflow { .. }), "{e:?}");
    // 2 GiB objects x 2^32 - 1 fits usize but exceeds isize::MAX (the most any allocation
    // may span).
    let e = config_error(PoolBuilder::<[u8; 1 << 31]>::zeroed(u32::MAX).cache_size(0));
    assert!(matches!(e, PoolError::SizeOverflow { .. }), "{e:?}");
    assert!(e.to_string().contains("size overflow"));
}

// ---- ReprLimit (offset entries) ---------------------------------------------------------------

#[test]
fn offset_pools_beyond_32_gib_are_refused_before_mapping() {
    // 10 M objects x 4160 bytes = 41.6 GB: the last object starts beyond 32 GiB, which an
    // offset entry (byte offset / 8 in a u32) cannot name. Refused before any mmap.
    let e = match PoolBuilder::<[u8; 4096]>::zeroed(10_000_000)
        .cache_size(0)
        .repr::<Offset>()
        .scoped(|_| ())
    {
        Err(e) => e,
        Ok(()) => panic!("a 41.6 GB offset pool was accepted"),
    };
    match &e {
        PoolError::ReprLimit {
            repr,
            capacity,
            stride,
            max_offset,
        } => {
            assert_eq!(*repr, "offset");
            assert_eq!(*capacity, 10_000_000);
            assert_eq!(*stride, 4160);
            assert_eq!(*max_offset, idxpool::repr::OFFSET_MAX_OBJECT_OFFSET);
        }
        other => panic!("expected ReprLimit, got {other:?}"),
    }
    assert!(e.to_string().contains("offset representation"), "{e}");
}

#[test]
fn offset_entries_need_strides_that_are_multiples_of_8() {
    let e = match PoolBuilder::<[u8; 12]>::zeroed(8)
        .stride(StrideMode::Natural)
        .repr::<Offset>()
        .scoped(|_| ())
    {
        Err(e) => e,
        Ok(()) => panic!("stride 12 accepted for offset entries"),
    };
    assert_invalid(e, "multiple of 8");
    // The same layout is fine for index entries, and Auto rounds tiny objects up to 8 for
    // offset entries only.
    PoolBuilder::<[u8; 12]>::zeroed(8)
        .stride(StrideMode::Natural)
        .repr::<Index>()
        .scoped(|p| assert_eq!(p.stride(), 12))
        .unwrap();
    PoolBuilder::<u8>::with_default(8)
        .repr::<Offset>()
        .scoped(|p| assert_eq!(p.stride(), 8))
        .unwrap();
    PoolBuilder::<u8>::with_default(8)
        .repr::<Index>()
        .scoped(|p| assert_eq!(p.stride(), 1))
        .unwrap();
}

// ---- BackingUnavailable ----------------------------------------------------------------------

fn read_sys(path: &str) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
#[cfg_attr(miri, ignore = "hugetlb mmap flags are not supported by Miri")]
fn require_hugetlb_1g_without_pages_is_unavailable() {
    let free_1g = read_sys("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages");
    if free_1g.unwrap_or(0) > 0 {
        eprintln!("skip: {free_1g:?} free 1 GiB hugepages are reserved on this machine");
        return;
    }
    let r = PoolBuilder::<[u8; 64]>::zeroed(16)
        .backing(BackingPolicy::Require(Backing::Hugetlb1G))
        .scoped(|p| p.backing().backing);
    match r {
        Err(PoolError::BackingUnavailable { backing, source }) => {
            assert_eq!(backing, Backing::Hugetlb1G);
            // The OS error and a hint how to reserve pages.
            assert!(!source.to_string().is_empty());
        }
        other => panic!("expected BackingUnavailable(Hugetlb1G), got {other:?}"),
    }
}

#[test]
#[cfg_attr(miri, ignore = "hugetlb mmap flags are not supported by Miri")]
fn require_hugetlb_2m_follows_the_reserve() {
    let free = idxpool::region::free_hugepages_2m();
    let r = PoolBuilder::<[u8; 64]>::zeroed(16)
        .cache_size(0)
        .backing(BackingPolicy::Require(Backing::Hugetlb2M))
        .scoped(|p| p.backing().clone());
    match (free, r) {
        (Some(0), Err(PoolError::BackingUnavailable { backing, .. })) => {
            assert_eq!(backing, Backing::Hugetlb2M);
            eprintln!("no free 2 MiB hugepages: Require(Hugetlb2M) correctly refused");
        }
        (Some(n), Ok(rep)) if n > 0 => {
            assert_eq!(rep.backing, Backing::Hugetlb2M);
            assert!(rep.fallbacks.is_empty());
            assert_eq!(rep.mapped_bytes % (2 << 20), 0);
        }
        (Some(n), Err(e)) if n > 0 => {
            // Pages may be reserved but not usable by this process (cgroup hugetlb limits).
            eprintln!("skip: {n} free 2 MiB pages reported, but the mapping failed: {e}");
        }
        (None, r) => eprintln!("skip: no 2 MiB hugetlb counter in sysfs ({:?})", r.is_ok()),
        (free, r) => panic!("free 2 MiB hugepages {free:?} but Require(Hugetlb2M) gave {r:?}"),
    }
}

#[test]
#[cfg_attr(miri, ignore = "hugetlb mmap flags are not supported by Miri")]
fn hugetlb_pools_work_when_pages_are_reserved() {
    match idxpool::region::free_hugepages_2m() {
        Some(n) if n >= 2 => {}
        other => {
            eprintln!("skip: needs 2 free 2 MiB hugepages, free_hugepages = {other:?}");
            return;
        }
    }
    idxpool::brand!(Huge);
    let pool = match PoolBuilder::<[u8; 2048]>::zeroed(512)
        .cache_size(32)
        .backing(BackingPolicy::Require(Backing::Hugetlb2M))
        .prefault(true)
        .build_named::<Huge>()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skip: hugetlb pages reserved but not mappable here: {e}");
            return;
        }
    };
    assert_eq!(pool.backing().backing, Backing::Hugetlb2M);
    assert_eq!(pool.base().as_ptr() as usize % (2 << 20), 0);
    let mut c = pool.local_cache();
    let mut v = Vec::new();
    c.get_bulk(&mut v, 512).unwrap();
    for h in v.iter_mut() {
        pool.get_mut(h)[2047] = 1;
    }
    c.put_bulk(&mut v);
}

// ---- Exhausted ---------------------------------------------------------------------------------

#[test]
fn exhaustion_is_an_error_with_the_numbers() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<u64>::with_default(8)
            .cache_size(2)
            .policy(policy)
            .scoped(|pool| {
                let mut c = pool.local_cache();
                let mut v = Vec::new();
                c.get_bulk(&mut v, 8).unwrap();
                match c.get() {
                    Err(PoolError::Exhausted {
                        requested: 1,
                        available: 0,
                    }) => {}
                    other => panic!("{policy}: {other:?}"),
                }
                match pool.get() {
                    Err(PoolError::Exhausted { requested: 1, .. }) => {}
                    other => panic!("{policy}: implicit {other:?}"),
                }
                c.put_bulk_tail(&mut v, 3);
                let e = c.get_bulk(&mut v, 4).unwrap_err();
                assert!(
                    matches!(
                        e,
                        PoolError::Exhausted {
                            requested: 4,
                            available: 3
                        }
                    ),
                    "{policy}: {e:?}"
                );
                assert!(e.to_string().contains("requested 4"));
                assert_eq!(v.len(), 5, "a failed bulk leaves the vector unchanged");
                c.put_bulk(&mut v);
            })
            .unwrap();
    }
}

#[test]
fn bulk_requests_larger_than_the_pool() {
    for policy in FlushPolicy::ALL {
        for cache in [0u32, 4] {
            PoolBuilder::<u64>::with_default(16)
                .cache_size(cache)
                .policy(policy)
                .scoped(|pool| {
                    let mut c = pool.local_cache();
                    let mut v = Vec::new();
                    for n in [17usize, 100, 1 << 20] {
                        let e = c.get_bulk(&mut v, n).unwrap_err();
                        assert!(
                            matches!(e, PoolError::Exhausted { requested, available: 16 } if requested == n),
                            "{policy}/{cache}: {e:?}"
                        );
                        assert!(v.is_empty());
                        let e = pool.get_bulk(&mut v, n).unwrap_err();
                        assert!(matches!(e, PoolError::Exhausted { .. }), "{e:?}");
                        assert!(v.is_empty());
                    }
                    assert_eq!(c.get_burst(&mut v, 1000), 16, "burst takes what there is");
                    assert_eq!(c.get_burst(&mut v, 1000), 0);
                    c.put_bulk(&mut v);
                    assert_eq!(pool.available(), 16);
                    // Zero-sized requests are no-ops.
                    c.get_bulk(&mut v, 0).unwrap();
                    assert_eq!(c.get_burst(&mut v, 0), 0);
                    c.put_bulk(&mut v);
                    assert!(v.is_empty());
                })
                .unwrap();
        }
    }
}

/// Every failed get is counted (`--features stats`), including a bulk larger
/// than the whole pool, which is refused before the cache algorithm runs. Before the fix,
/// `get_fail_bulk`/`get_fail_objs` missed exactly those calls (3 of the 5 failures per round
/// below).
#[test]
fn every_failed_get_is_counted_in_the_stats() {
    for policy in FlushPolicy::ALL {
        for cache in [0u32, 4] {
            PoolBuilder::<u64>::with_default(16)
                .cache_size(cache)
                .policy(policy)
                .scoped(|pool| {
                    let (mut calls, mut objs) = (0u64, 0u64);
                    let mut v = Vec::new();
                    let mut c = pool.local_cache();
                    // Larger than the pool: refused up front.
                    for n in [17usize, 1 << 20] {
                        assert!(c.get_bulk(&mut v, n).is_err());
                        assert!(pool.get_bulk(&mut v, n).is_err());
                        calls += 2;
                        objs += 2 * n as u64;
                    }
                    assert!(c.get_array::<17>().is_err());
                    calls += 1;
                    objs += 17;
                    // Within the pool's size but more than there is: the cache algorithm's
                    // own failure.
                    let mut held = Vec::new();
                    c.get_bulk(&mut held, 10).unwrap();
                    assert!(c.get_bulk(&mut v, 7).is_err());
                    assert!(pool.get_bulk(&mut v, 7).is_err());
                    calls += 2;
                    objs += 14;
                    assert!(v.is_empty());
                    c.put_bulk(&mut held);
                    drop(c);
                    let s = pool.stats();
                    if idxpool::Stats::COUNTING {
                        assert_eq!(
                            (s.get_fail_bulk, s.get_fail_objs),
                            (calls, objs),
                            "{policy}/cache {cache}: {s}"
                        );
                        assert_eq!(s.get_success_bulk, 1, "{policy}/cache {cache}: {s}");
                    } else {
                        assert_eq!(s, idxpool::Stats::default());
                    }
                })
                .unwrap();
        }
    }
}

// ---- BrandInUse ------------------------------------------------------------------------------

#[test]
fn two_live_pools_of_one_brand_are_refused() {
    idxpool::brand!(OnlyOne);
    let a = PoolBuilder::<u64>::with_default(4)
        .build_named::<OnlyOne>()
        .unwrap();
    match PoolBuilder::<u64>::with_default(4).build_named::<OnlyOne>() {
        Err(PoolError::BrandInUse { brand, state }) => {
            assert!(brand.contains("OnlyOne"), "{brand}");
            assert_eq!(state, "a live pool");
        }
        other => panic!("expected BrandInUse, got {other:?}"),
    }
    // A different T does not help: the brand, not the type, names the pool.
    assert!(matches!(
        PoolBuilder::<u32>::with_default(4).build_named::<OnlyOne>(),
        Err(PoolError::BrandInUse { .. })
    ));
    // The pointer twin shares the brand registry.
    assert!(matches!(
        PoolBuilder::<u64>::with_default(4)
            .repr::<idxpool::Pointer>()
            .build_named::<OnlyOne>(),
        Err(PoolError::BrandInUse { .. })
    ));
    // A failed build did not disturb the live pool, and dropping it (all objects home)
    // releases the brand.
    let h = a.get().unwrap();
    a.put(h);
    drop(a);
    let b = PoolBuilder::<u64>::with_default(4)
        .build_named::<OnlyOne>()
        .expect("brand released by the drop");
    drop(b);
}

#[test]
fn a_pool_dropped_with_handles_out_retires_its_brand() {
    idxpool::brand!(Retired);
    let pool = PoolBuilder::<u64>::with_default(4)
        .cache_size(0)
        .build_named::<Retired>()
        .unwrap();
    let h = pool.get().unwrap();
    let raw = h.into_raw(); // the handle is gone; the object stays in use
    drop(pool);
    assert!(<Retired as idxpool::NamedBrand>::slot().is_retired());
    match PoolBuilder::<u64>::with_default(4).build_named::<Retired>() {
        Err(PoolError::BrandInUse { state, .. }) => {
            assert!(state.contains("outstanding"), "{state}")
        }
        other => panic!("expected a retired brand, got {other:?}"),
    }
    // SAFETY: never used with a pool: the retired brand guarantees no pool of it exists.
    let _h: Handle<u64, Retired> = unsafe { Handle::from_raw(raw) };
}

#[test]
fn a_failed_build_after_claiming_releases_the_brand() {
    // The brand is claimed after validation: configuration errors never touch it.
    idxpool::brand!(Validated);
    assert!(PoolBuilder::<u64>::with_default(0)
        .build_named::<Validated>()
        .is_err());
    assert!(!<Validated as idxpool::NamedBrand>::slot().is_live());
    drop(
        PoolBuilder::<u64>::with_default(4)
            .build_named::<Validated>()
            .unwrap(),
    );
}

// ---- IndexOutOfRange / DoubleFree --------------------------------------------------------------

#[test]
fn check_raw_rejects_bad_and_free_indices() {
    PoolBuilder::<u64>::with_default(8)
        .cache_size(2)
        .scoped(|pool| {
            for bad in [8u32, 9, 1000, u32::MAX - 1, u32::MAX] {
                match pool.check_raw(bad) {
                    Err(PoolError::IndexOutOfRange { index, capacity: 8 }) => {
                        assert_eq!(index, bad)
                    }
                    other => panic!("index {bad}: {other:?}"),
                }
            }
            let h = pool.get().unwrap();
            let i = pool.index_of(&h);
            assert!(pool.check_raw(i).is_ok(), "held object is in use");
            let other = (i + 1) % 8;
            if idxpool::DEBUG_CHECKS {
                match pool.check_raw(other) {
                    Err(PoolError::DoubleFree { index, pool: name }) => {
                        assert_eq!(index, other);
                        assert_eq!(name, pool.name());
                    }
                    r => panic!("free object {other}: {r:?}"),
                }
            } else {
                // Without debug checks only the range is checked.
                assert!(pool.check_raw(other).is_ok());
            }
            pool.put(h);
            if idxpool::DEBUG_CHECKS {
                assert!(matches!(
                    pool.check_raw(i),
                    Err(PoolError::DoubleFree { .. })
                ));
            }
        })
        .unwrap();
}

// ---- AuditFailed -------------------------------------------------------------------------------

#[test]
fn audit_reports_an_object_named_twice() {
    // Breaking the from_raw contract (putting a rebuilt handle of an object that is free) is
    // caught at the put by debug checks (see tests/debug_checks.rs); without them, audit()
    // finds the object twice among the free ones.
    if idxpool::DEBUG_CHECKS {
        eprintln!("skip: debug checks catch this at put(); run with --release to see audit()");
        return;
    }
    idxpool::brand!(Audited);
    let mut pool = PoolBuilder::<u64>::with_default(4)
        .cache_size(0)
        .build_named::<Audited>()
        .unwrap();
    let h = pool.get().unwrap();
    let _held = pool.get().unwrap(); // leaves room in the ring for the duplicate
    let i = pool.index_of(&h);
    pool.put(h);
    // SAFETY (deliberately broken contract, no access to the object): object i is free; the
    // rebuilt handle is put without ever resolving it.
    pool.put(unsafe { Handle::from_raw(i) });
    match pool.audit() {
        Err(PoolError::AuditFailed(msg)) => assert!(msg.contains("twice"), "{msg}"),
        other => panic!("expected AuditFailed, got {other:?}"),
    }
    // The pool now has one entry too many: forget it rather than run its drop accounting.
    std::mem::forget(pool);
}

// ---- edge configurations -----------------------------------------------------------------------

#[test]
fn cache_size_zero_goes_straight_to_the_ring() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<u64>::with_default(5)
            .cache_size(0)
            .policy(policy)
            .scoped(|pool| {
                let mut c = pool.local_cache();
                let mut v = Vec::new();
                c.get_bulk(&mut v, 3).unwrap();
                assert_eq!(pool.ring_count(), 2);
                let h = pool.get().unwrap();
                assert_eq!(pool.ring_count(), 1);
                pool.put(h);
                c.put_bulk(&mut v);
                assert_eq!(pool.ring_count(), 5, "nothing is cached");
                assert!(c.is_empty());
                assert!(pool.cache_counts().iter().all(|(_, n)| *n == 0));
            })
            .unwrap();
    }
}

#[test]
fn capacity_one() {
    for policy in FlushPolicy::ALL {
        for cache in [0u32, 1] {
            PoolBuilder::<u64>::with_default(1)
                .cache_size(cache)
                .policy(policy)
                .scoped(|mut pool| {
                    let mut h = pool.get().unwrap();
                    assert_eq!(pool.index_of(&h), 0);
                    *pool.get_mut(&mut h) = 7;
                    assert!(pool.get().is_err());
                    {
                        let mut c = pool.local_cache();
                        assert!(c.get().is_err());
                        c.put(h);
                        let h = c.get().unwrap();
                        assert_eq!(*pool.get_ref(&h), 7, "the object keeps its state");
                        c.put(h);
                    }
                    assert!(pool.is_full());
                    pool.audit().unwrap();
                })
                .unwrap();
        }
    }
}

#[test]
fn objects_aligned_to_8192_bytes() {
    #[repr(align(8192))]
    #[derive(Default)]
    struct Page {
        first: u8,
    }
    PoolBuilder::<Page>::with_default(5)
        .cache_size(2)
        .scoped(|pool| {
            assert_eq!(pool.base().as_ptr() as usize % 8192, 0, "base alignment");
            assert_eq!(pool.stride() % 8192, 0, "stride keeps every object aligned");
            let mut v = Vec::new();
            pool.get_bulk(&mut v, 5).unwrap();
            for h in v.iter_mut() {
                assert_eq!(pool.as_ptr(h).as_ptr() as usize % 8192, 0);
                pool.get_mut(h).first = 1;
            }
            pool.put_bulk(&mut v);
        })
        .unwrap();
}

// ---- a panicking init callback -----------------------------------------------------------------

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Counts live instances.
struct Counted(#[allow(dead_code)] u64);

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, SeqCst);
    }
}

#[test]
fn panicking_init_drops_what_it_made_and_releases_the_brand() {
    idxpool::brand!(InitPanics);
    let made = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        PoolBuilder::<Counted>::with_init(10, |i, slot| {
            if i == 6 {
                panic!("init of object {i} failed");
            }
            LIVE.fetch_add(1, SeqCst);
            made.fetch_add(1, SeqCst);
            slot.write(Counted(i as u64))
        })
        .cache_size(2)
        .build_named::<InitPanics>()
    }));
    let msg = r.expect_err("the panic propagates");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("object 6"), "{msg}");
    assert_eq!(made.load(SeqCst), 6);
    assert_eq!(
        LIVE.load(SeqCst),
        0,
        "the 6 objects made were dropped, no leak"
    );
    assert!(!<InitPanics as idxpool::NamedBrand>::slot().is_live());
    // The brand is free again: a pool of it can be built.
    LIVE.store(0, SeqCst);
    let pool = PoolBuilder::<Counted>::with_fn(10, |i| {
        LIVE.fetch_add(1, SeqCst);
        Counted(i as u64)
    })
    .cache_size(2)
    .build_named::<InitPanics>()
    .expect("brand released after the panic");
    assert_eq!(LIVE.load(SeqCst), 10);
    drop(pool);
    assert_eq!(
        LIVE.load(SeqCst),
        0,
        "every object dropped once with the pool"
    );
}

// ---- Huge requests, failed bulk gets, out-of-range handles ------

#[test]
fn huge_requests_are_exhausted_at_once_without_allocating() {
    // Before: `usize::MAX` and `usize::MAX / 2` panicked ("capacity overflow") and `1 << 40`
    // aborted the process: the Vec was reserved before the request was compared with the pool.
    PoolBuilder::<u64>::with_default(64)
        .cache_size(32)
        .scoped(|pool| {
            let mut v = Vec::new();
            for n in [usize::MAX, usize::MAX / 2, 1 << 40, 65] {
                match pool.get_bulk(&mut v, n) {
                    Err(PoolError::Exhausted {
                        requested,
                        available,
                    }) => assert_eq!((requested, available), (n, 64)),
                    other => panic!("get_bulk({n}): {other:?}"),
                }
                assert!(v.is_empty());
                assert_eq!(v.capacity(), 0, "get_bulk({n}) allocated");
            }
            let got = pool.get_burst(&mut v, usize::MAX);
            assert_eq!(got, 64);
            pool.put_bulk(&mut v);
            let mut cache = pool.local_cache();
            let mut w = Vec::new();
            for n in [usize::MAX, usize::MAX / 2, 1 << 40] {
                assert!(matches!(
                    cache.get_bulk(&mut w, n),
                    Err(PoolError::Exhausted { requested, .. }) if requested == n
                ));
                assert_eq!(w.capacity(), 0, "LocalCache::get_bulk({n}) allocated");
            }
            assert_eq!(cache.get_burst(&mut w, usize::MAX), 64);
            cache.put_bulk(&mut w);
            assert_eq!(pool.in_use(), 0);
        })
        .unwrap();
}

#[test]
fn a_failed_bulk_get_leaves_every_count_where_it_was() {
    // Before, under Dpdk2607: A's failed get_bulk(15) refilled A's cache with the ring's 14
    // objects and kept them, so B's get_bulk(14) failed too.
    for policy in FlushPolicy::ALL {
        PoolBuilder::<u64>::with_default(64)
            .cache_size(32)
            .policy(policy)
            .scoped(|pool| {
                let mut a = pool.local_cache();
                let mut b = pool.local_cache();
                let mut vb = Vec::new();
                b.get_bulk(&mut vb, 50).unwrap();
                let (ring, in_a, in_b) = (pool.ring_count(), a.len(), b.len());
                assert_eq!(ring + in_a + in_b, 14, "{policy}");
                let mut va = Vec::new();
                match a.get_bulk(&mut va, 15) {
                    Err(PoolError::Exhausted {
                        requested: 15,
                        available,
                    }) => assert_eq!(available, ring + in_a, "{policy}"),
                    other => panic!("{policy}: {other:?}"),
                }
                assert!(va.is_empty());
                assert_eq!(
                    (pool.ring_count(), a.len(), b.len()),
                    (ring, in_a, in_b),
                    "{policy}: a failed get_bulk moved objects"
                );
                // The same through a thread cache and through the array form.
                assert!(pool.get_bulk(&mut va, 15).is_err());
                assert!(a.get_array::<15>().is_err());
                assert_eq!((pool.ring_count(), a.len()), (ring, in_a), "{policy}");
                // B can still take what the ring holds.
                let more = 14 - in_b.min(14);
                b.get_bulk(&mut vb, 14)
                    .unwrap_or_else(|e| panic!("{policy}: {e} ({more})"));
                b.put_bulk(&mut vb);
            })
            .unwrap();
    }
}

#[test]
fn out_of_range_handles_panic_naming_the_index_on_every_access_path() {
    // Handle::from_raw promises this with debug checks on; before, resolver().get_mut and
    // LocalCache::get_mut returned an out-of-region pointer, get_ref a bare assertion.
    if !idxpool::DEBUG_CHECKS {
        eprintln!("skip: needs debug checks (debug build or the debug-checks feature)");
        return;
    }
    idxpool::brand!(OutOfRange);
    let pool = PoolBuilder::<u64>::with_default(8)
        .build_named::<OutOfRange>()
        .unwrap();
    let cache = pool.local_cache();
    let msg = |r: std::thread::Result<()>| -> String {
        let e = r.expect_err("no panic");
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    };
    type Paths<'a> = [(&'a str, &'a dyn Fn(&mut Handle<u64, OutOfRange>)); 7];
    let paths: Paths<'_> = [
        ("pool.get_ref", &|h| {
            let _ = pool.get_ref(h);
        }),
        ("pool.get_mut", &|h| {
            let _ = pool.get_mut(h);
        }),
        ("pool.as_ptr", &|h| {
            let _ = pool.as_ptr(h);
        }),
        ("resolver.get_ref", &|h| {
            let _ = pool.resolver().get_ref(h);
        }),
        ("resolver.get_mut", &|h| {
            let _ = pool.resolver().get_mut(h);
        }),
        ("cache.get_ref", &|h| {
            let _ = pool.get_ref(h);
        }),
        ("cache.get_mut", &|h| {
            let _ = pool.get_mut(h);
        }),
    ];
    for (name, f) in paths {
        // SAFETY (deliberately broken contract): the index is outside the pool; the debug check
        // must panic before any access.
        let mut h = unsafe { Handle::<u64, OutOfRange>::from_raw(1000) };
        let m = msg(catch_unwind(AssertUnwindSafe(|| f(&mut h))));
        assert!(
            m.contains("1000") && m.contains("out of range"),
            "{name}: panic message {m:?}"
        );
    }
    drop(cache);
    assert_eq!(pool.in_use(), 0);
}

/// The bulk conversions take any lengths: `resolve_bulk` converts
/// `min(handles, out)` and returns that count (0 for an empty side), `get_mut_all` and
/// `prefetch_all` of an empty slice do nothing.
#[test]
fn bulk_resolve_with_mismatched_lengths_converts_the_minimum() {
    PoolBuilder::<u64>::with_default(8)
        .scoped(|pool| {
            let objs = pool.resolver();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 8).unwrap();
            let mut out = [std::ptr::NonNull::dangling(); 3];
            assert_eq!(objs.resolve_bulk(&hs, &mut out), 3);
            assert_eq!(objs.resolve_bulk(&hs, &mut []), 0);
            assert_eq!(objs.resolve_bulk(&hs[..0], &mut out), 0);
            let mut big = vec![std::ptr::NonNull::dangling(); 100];
            assert_eq!(objs.resolve_bulk(&hs, &mut big), 8);
            for (h, p) in hs.iter().zip(&big) {
                assert_eq!(*p, pool.as_ptr(h));
            }
            assert!(big[8..].iter().all(|p| *p == std::ptr::NonNull::dangling()));
            assert_eq!(objs.get_mut_all(&mut hs[..0]).count(), 0);
            objs.prefetch_all(&hs[..0]);
            // Every object of a full pool, prefetched, then written through get_mut_all.
            objs.prefetch_all(&hs);
            for (k, o) in objs.get_mut_all(&mut hs).enumerate() {
                *o = k as u64;
            }
            for (k, h) in hs.iter().enumerate() {
                assert_eq!(*objs.get_ref(h), k as u64);
            }
            pool.put_bulk(&mut hs);
            assert!(pool.is_full());
        })
        .unwrap();
}
