//! Growth to a reserved maximum: `PoolBuilder::max_capacity` and `Pool::grow`.
//! Its own binary: it installs the process-wide leak hook (no false leak report after growth).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use idxpool::{
    repr::Repr, Backing, BackingPolicy, Brand, Handle, Index, LocalCache, Offset, Pointer, Pool,
    PoolBuilder, PoolError,
};

const MIRI: bool = cfg!(miri);

/// Pool names reported by the leak hook (installed once for the whole binary).
fn leak_reports() -> &'static Mutex<Vec<String>> {
    static REPORTS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        idxpool::leaks::set_leak_hook(|r| {
            leak_reports().lock().unwrap().push(r.pool.to_string());
        })
    });
    REPORTS.get_or_init(|| Mutex::new(Vec::new()))
}

fn leaked(name: &str) -> bool {
    leak_reports().lock().unwrap().iter().any(|n| n == name)
}

/// Capacity, counts, the new objects' values, the error past the maximum, on one pool.
fn basics<B: Brand, R: Repr>(pool: &Pool<u64, B, R>, cap: u32, max: u32) {
    assert_eq!(pool.capacity(), cap);
    assert_eq!(pool.available(), cap as usize);
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, cap as usize).unwrap();
    assert!(matches!(pool.get(), Err(PoolError::Exhausted { .. })));
    // A bulk above the capacity but within the maximum fails as any too-large bulk does.
    let mut more = Vec::new();
    assert!(matches!(
        pool.get_bulk(&mut more, cap as usize + 1),
        Err(PoolError::Exhausted { .. })
    ));
    assert!(more.is_empty());
    assert_eq!(pool.grow(0).unwrap(), cap);
    let step = (max - cap) / 2;
    assert_eq!(pool.grow(step).unwrap(), cap + step);
    assert_eq!(pool.capacity(), cap + step);
    assert_eq!(pool.in_use(), cap as usize);
    assert_eq!(pool.available(), step as usize);
    pool.get_bulk(&mut hs, step as usize).unwrap();
    // The new objects were made by the builder's closure, with their indices.
    for h in &hs {
        assert_eq!(*pool.get_ref(h), u64::from(pool.index_of(h)) * 3);
    }
    let mut idx: Vec<u32> = hs.iter().map(|h| pool.index_of(h)).collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..cap + step).collect::<Vec<_>>(), "each object once");
    // Past the maximum: a typed error, nothing changes.
    let err = pool.grow(max - cap - step + 1).unwrap_err();
    assert!(
        matches!(err, PoolError::GrowBeyondMax { requested, max: m } if requested == u64::from(max) + 1 && m == max),
        "{err}"
    );
    assert!(matches!(
        pool.grow(u32::MAX),
        Err(PoolError::GrowBeyondMax { .. })
    ));
    assert_eq!(pool.capacity(), cap + step);
    assert_eq!(pool.grow(max - cap - step).unwrap(), max);
    assert!(matches!(
        pool.grow(1),
        Err(PoolError::GrowBeyondMax { requested, .. }) if requested == u64::from(max) + 1
    ));
    assert_eq!(pool.available(), (max - cap - step) as usize);
    pool.put_bulk(&mut hs);
    assert!(pool.is_full());
    assert_eq!(pool.available(), max as usize);
    // A bulk of the whole grown pool.
    pool.get_bulk(&mut hs, max as usize).unwrap();
    assert_eq!(pool.in_use(), max as usize);
    pool.put_bulk(&mut hs);
}

fn builder(cap: u32, max: u32) -> PoolBuilder<'static, u64> {
    PoolBuilder::<u64>::with_fn(cap, |i| u64::from(i) * 3)
        .max_capacity(max)
        .cache_size(4)
}

#[test]
fn grow_basics_every_repr_and_identity() {
    let (cap, max) = if MIRI { (8, 24) } else { (100, 5000) };
    let mut rt = builder(cap, max).build().unwrap();
    basics(&rt, cap, max);
    assert!(rt.audit().is_ok());
    let mut ix = builder(cap, max).repr::<Index>().build().unwrap();
    basics(&ix, cap, max);
    assert!(ix.audit().is_ok());
    builder(cap, max)
        .repr::<Pointer>()
        .scoped(|pool| basics(&pool, cap, max))
        .unwrap();
    idxpool::brand!(Grown);
    let named = builder(cap, max).build_named::<Grown>().unwrap();
    basics(&named, cap, max);
    drop(named);
    // Released (every object home): the brand can be claimed again.
    let again = builder(cap, max).build_named::<Grown>().unwrap();
    drop(again);
}

#[test]
fn zeroed_and_byte_pools_grow_zeroed() {
    let pool = PoolBuilder::<[u64; 5]>::zeroed(4)
        .max_capacity(40)
        .build()
        .unwrap();
    assert_eq!(pool.grow(36).unwrap(), 40);
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 40).unwrap();
    assert!(hs.iter().all(|h| *pool.get_ref(h) == [0; 5]));
    pool.put_bulk(&mut hs);
    let bytes = PoolBuilder::bytes(2, 100, 64)
        .max_capacity(10)
        .build()
        .unwrap();
    assert_eq!(bytes.grow(8).unwrap(), 10);
    bytes.get_bulk(&mut Vec::new(), 0).unwrap();
    let mut bs = Vec::new();
    bytes.get_bulk(&mut bs, 10).unwrap();
    for b in bs.iter_mut() {
        let buf = bytes.get_mut(b);
        assert_eq!(buf.len(), 100);
        assert!(buf.iter().all(|&x| x == 0));
        assert_eq!(buf.as_ptr() as usize % 64, 0);
        buf[99] = 1;
    }
    bytes.put_bulk(&mut bs);
}

#[test]
fn default_max_is_the_capacity_and_a_smaller_max_is_refused() {
    let pool = PoolBuilder::<u64>::with_default(8).build().unwrap();
    assert!(matches!(
        pool.grow(1),
        Err(PoolError::GrowBeyondMax {
            requested: 9,
            max: 8
        })
    ));
    assert_eq!(pool.grow(0).unwrap(), 8);
    let same = PoolBuilder::<u64>::with_default(8)
        .max_capacity(8)
        .build()
        .unwrap();
    assert!(same.grow(1).is_err());
    assert!(matches!(
        PoolBuilder::<u64>::with_default(8).max_capacity(7).build(),
        Err(PoolError::InvalidConfig { .. })
    ));
    // The representation's limit applies to the maximum (offsets: 32 GiB of region).
    assert!(matches!(
        PoolBuilder::<[u8; 4096]>::zeroed(8)
            .max_capacity(u32::MAX)
            .build(),
        Err(PoolError::ReprLimit { .. } | PoolError::SizeOverflow { .. })
    ));
}

#[test]
fn handles_taken_before_growth_stay_valid() {
    let (cap, max) = if MIRI { (8, 40) } else { (1000, 100_000) };
    let pool = PoolBuilder::<[u64; 4]>::zeroed(cap)
        .max_capacity(max)
        .build()
        .unwrap();
    let base = pool.base();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, cap as usize).unwrap();
    let before: Vec<(u32, usize)> = hs
        .iter_mut()
        .map(|h| {
            let i = pool.index_of(h);
            pool.get_mut(h)[0] = u64::from(i) + 7;
            (h.clone_raw(), pool.as_ptr(h).as_ptr() as usize)
        })
        .collect();
    let mut grown = Vec::new();
    for _ in 0..4 {
        let n = (max - pool.capacity()) / 2;
        pool.grow(n).unwrap();
        pool.get_bulk(&mut grown, n as usize).unwrap();
        for h in grown.iter_mut() {
            pool.get_mut(h)[1] = 1;
        }
    }
    assert_eq!(pool.base(), base, "the region never moves");
    for (h, (raw, addr)) in hs.iter().zip(&before) {
        assert_eq!(h.clone_raw(), *raw);
        assert_eq!(pool.as_ptr(h).as_ptr() as usize, *addr);
        assert_eq!(pool.get_ref(h)[0], u64::from(pool.index_of(h)) + 7);
    }
    // A raw value of an object not yet made is out of range.
    let unborn = PoolBuilder::<u64>::with_default(2)
        .max_capacity(4)
        .repr::<Index>()
        .build()
        .unwrap();
    let h = unborn.get().unwrap();
    let i = unborn.index_of(&h);
    let raw = h.into_raw();
    let raw3 = raw - i + 3; // index entries: the raw value is the block's start + the index
    assert!(matches!(
        unborn.check_raw(raw3),
        Err(PoolError::IndexOutOfRange {
            index: 3,
            capacity: 2
        })
    ));
    unborn.grow(2).unwrap();
    assert!(matches!(
        unborn.check_raw(raw3),
        Ok(()) | Err(PoolError::DoubleFree { .. })
    ));
    // SAFETY: `raw` came from into_raw of this live pool's handle, rebuilt once.
    unborn.put(unsafe { Handle::from_raw(raw) });
    pool.put_bulk(&mut hs);
    pool.put_bulk(&mut grown);
    assert_eq!(pool.in_use(), 0);
}

/// A raw-value copy of a handle's entry (for the comparison above).
trait CloneRaw {
    fn clone_raw(&self) -> u32;
}
impl<T: ?Sized, B> CloneRaw for Handle<T, B, Offset> {
    fn clone_raw(&self) -> u32 {
        // SAFETY: the handle is rebuilt at once from its own raw value and forgotten, so
        // the original stays the only owner.
        let copy: Handle<T, B, Offset> = unsafe { std::ptr::read(self) };
        copy.into_raw()
    }
}

/// Objects with a drop counter: every object made (at build and by grow) is dropped once.
struct Counted(#[allow(dead_code)] u32, Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn drop_after_growth_drops_every_object_once_and_reports_no_leak() {
    let drops = Arc::new(AtomicUsize::new(0));
    let made = Arc::new(AtomicUsize::new(0));
    let (d, m) = (drops.clone(), made.clone());
    let (cap, max) = if MIRI { (4, 16) } else { (64, 4096) };
    let pool = PoolBuilder::<Counted>::with_fn(cap, move |i| {
        m.fetch_add(1, Ordering::Relaxed);
        Counted(i, d.clone())
    })
    .max_capacity(max)
    .name("grow-drop")
    .build()
    .unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, cap as usize).unwrap();
    pool.grow(max / 2).unwrap();
    let mut hs2 = Vec::new();
    pool.get_bulk(&mut hs2, (max / 2) as usize).unwrap();
    pool.put_bulk(&mut hs);
    pool.put_bulk(&mut hs2);
    let n = pool.capacity() as usize;
    assert_eq!(made.load(Ordering::Relaxed), n);
    drop(pool);
    assert_eq!(drops.load(Ordering::Relaxed), n);
    assert!(!leaked("grow-drop"), "every object was home");
    // With one object out after growth: reported, with the grown capacity.
    let pool = builder(4, 8).name("grow-leak").build().unwrap();
    pool.grow(4).unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 8).unwrap();
    let kept = hs.pop().unwrap();
    pool.put_bulk(&mut hs);
    assert_eq!(pool.in_use(), 1);
    let _ = kept.into_raw();
    drop(pool);
    assert!(leaked("grow-leak"));
}

#[test]
fn a_panicking_initialiser_adds_nothing_and_loses_nothing() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let pool = PoolBuilder::<Counted>::with_fn(4, move |i| {
        assert!(i != 6, "no object 6 yet");
        Counted(i, d.clone())
    })
    .max_capacity(12)
    .build()
    .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.grow(4)));
    assert!(r.is_err());
    assert_eq!(
        drops.load(Ordering::Relaxed),
        2,
        "objects 4 and 5 made, then dropped"
    );
    assert_eq!(pool.capacity(), 4);
    assert_eq!(pool.available(), 4);
    assert_eq!(
        pool.grow(2).unwrap(),
        6,
        "the pool grows again after the panic"
    );
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 6).unwrap();
    pool.put_bulk(&mut hs);
    drop(pool);
    assert_eq!(drops.load(Ordering::Relaxed), 2 + 6);
}

#[test]
fn grow_from_its_own_initialiser_is_refused() {
    type P = Pool<u64>;
    let me: Arc<OnceLock<Weak<P>>> = Arc::new(OnceLock::new());
    let seen: Arc<Mutex<Option<Result<u32, PoolError>>>> = Arc::new(Mutex::new(None));
    let (m, s) = (me.clone(), seen.clone());
    let pool = Arc::new(
        PoolBuilder::<u64>::with_fn(2, move |i| {
            if let Some(p) = m.get().and_then(Weak::upgrade) {
                *s.lock().unwrap() = Some(p.grow(1));
            }
            u64::from(i)
        })
        .max_capacity(8)
        .build()
        .unwrap(),
    );
    me.set(Arc::downgrade(&pool)).unwrap();
    assert_eq!(pool.grow(1).unwrap(), 3);
    assert!(matches!(
        seen.lock().unwrap().take(),
        Some(Err(PoolError::GrowReentered { .. }))
    ));
    assert_eq!(pool.capacity(), 3);
}

#[test]
fn grow_under_concurrent_gets_and_puts() {
    let (cap, max, rounds) = if MIRI {
        (8, 32, 20)
    } else {
        (64, 64 * 64, 20_000)
    };
    let pool = Arc::new(
        PoolBuilder::<u64>::with_fn(cap, u64::from)
            .max_capacity(max)
            .cache_size(8)
            .build()
            .unwrap(),
    );
    let threads = if MIRI { 2 } else { 4 };
    std::thread::scope(|s| {
        for t in 0..threads {
            let pool = &pool;
            s.spawn(move || {
                let mut cache = LocalCache::new(pool.clone());
                let mut hs = Vec::new();
                for r in 0..rounds {
                    let n = 1 + (r + t) % 9;
                    if t % 2 == 0 {
                        // Implicit cache.
                        if pool.get_bulk(&mut hs, n).is_ok() {
                            for h in hs.iter_mut() {
                                let i = pool.index_of(h);
                                assert_eq!(*pool.get_ref(h) % 1_000_000, u64::from(i));
                                *pool.get_mut(h) += 1_000_000;
                            }
                            pool.put_bulk(&mut hs);
                        }
                    } else if cache.get_bulk(&mut hs, n).is_ok() {
                        for h in hs.iter_mut() {
                            let i = pool.index_of(h);
                            assert!(i < max);
                            assert_eq!(*pool.get_ref(h) % 1_000_000, u64::from(i));
                        }
                        cache.put_bulk(&mut hs);
                    }
                    let (a, c) = (pool.available(), pool.capacity() as usize);
                    assert!(a <= c && c <= max as usize);
                    assert!(pool.in_use() <= c);
                }
                pool.flush();
            });
        }
        let pool = &pool;
        s.spawn(move || {
            let mut c = cap;
            while c < max {
                let n = (max / 16).min(max - c);
                c = pool.grow(n).unwrap();
                std::thread::yield_now();
            }
        });
    });
    assert_eq!(pool.capacity(), max);
    let mut pool = Arc::into_inner(pool).unwrap();
    let report = pool.audit().unwrap();
    assert_eq!(report.capacity, max as usize);
    assert_eq!(pool.available(), max as usize);
}

#[test]
fn concurrent_grow_calls_take_turns() {
    let max = if MIRI { 16 } else { 4096 };
    let pool = PoolBuilder::<u64>::with_fn(1, u64::from)
        .max_capacity(max)
        .build()
        .unwrap();
    let ok = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                match pool.grow(3) {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(PoolError::GrowBeyondMax { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            });
        }
    });
    assert_eq!(pool.capacity(), 1 + 3 * ok.load(Ordering::Relaxed) as u32);
    assert!(pool.capacity() > max - 3);
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, pool.capacity() as usize).unwrap();
    let mut idx: Vec<u64> = hs.iter().map(|h| *pool.get_ref(h)).collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..u64::from(pool.capacity())).collect::<Vec<_>>());
    pool.put_bulk(&mut hs);
}

/// The tests that take hugetlb pages run one at a time (the shortage test must not take
/// the pages the other one is about to grow into).
static HUGETLB: Mutex<()> = Mutex::new(());

/// Each backing grows (those this machine has; hugetlb only with free 2 MiB pages).
#[test]
#[cfg_attr(
    miri,
    ignore = "mmap reservations (PROT_NONE, mprotect) are not interpreted by Miri"
)]
fn every_backing_grows() {
    let _one = HUGETLB.lock().unwrap_or_else(|e| e.into_inner());
    let mut backings = vec![Backing::Pages4K, Backing::Thp, Backing::Heap];
    if idxpool::region::free_hugepages_2m().unwrap_or(0) >= 4 {
        backings.push(Backing::Hugetlb2M);
    }
    for b in backings {
        for prefault in [false, true] {
            let built = PoolBuilder::<[u8; 1000]>::zeroed(100)
                .max_capacity(10_000)
                .backing(BackingPolicy::Require(b))
                .prefault(prefault)
                .build();
            let pool = match built {
                Ok(p) => p,
                Err(PoolError::BackingUnavailable { .. }) if b != Backing::Pages4K => continue,
                Err(e) => panic!("{b}: {e}"),
            };
            assert_eq!(pool.backing().backing, b);
            if b != Backing::Heap {
                assert_eq!(pool.backing().mapped_bytes % b.page_size(), 0);
            }
            assert!(pool.backing().mapped_bytes >= 100 * pool.stride());
            pool.grow(4900).unwrap();
            pool.grow(5000).unwrap();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 10_000).unwrap();
            for h in hs.iter_mut() {
                let o = pool.get_mut(h);
                assert_eq!(o[999], 0, "{b}");
                o[999] = 1;
            }
            pool.put_bulk(&mut hs);
        }
    }
}

/// A hugetlb pool that asks for more huge pages than the machine has: a typed error from
/// `grow` (never a SIGBUS later), and the pool unchanged.
#[test]
#[cfg_attr(miri, ignore = "hugetlb")]
fn hugetlb_shortage_is_a_typed_error() {
    let _one = HUGETLB.lock().unwrap_or_else(|e| e.into_inner());
    let Some(free) = idxpool::region::free_hugepages_2m() else {
        eprintln!("skip: no hugetlb support");
        return;
    };
    let total: usize = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(free);
    // One object per 2 MiB page: growing by `total + 1` objects needs more pages than exist.
    let built = PoolBuilder::<[u8; 2 << 20]>::zeroed(1)
        .max_capacity(total as u32 + 8)
        .stride(idxpool::StrideMode::Natural)
        .backing(BackingPolicy::Require(Backing::Hugetlb2M))
        .build();
    let Ok(pool) = built else {
        eprintln!("skip: no free 2 MiB page");
        return;
    };
    let err = pool.grow(total as u32 + 1).unwrap_err();
    assert!(
        matches!(
            err,
            PoolError::BackingUnavailable {
                backing: Backing::Hugetlb2M,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(pool.capacity(), 1);
    assert_eq!(pool.available(), 1);
    let h = pool.get().unwrap();
    pool.put(h);
}
