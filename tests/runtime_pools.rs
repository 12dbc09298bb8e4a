//! Pools in real programs: run-time pools (`Pool<T>`, in an `Arc`) created from configuration,
//! several of one `T` alive at once, stored in structs with their caches, moved with their
//! caches and handle rings into `std::thread::spawn` (no `static`, no `scope`); foreign handles
//! rejected naming both pools; RAII guards returning objects on drop and on panic; the leak
//! report of a pool dropped with objects out. No `unsafe`, no user-declared brand. Also run
//! under Miri (scripts/miri.sh).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use idxpool::handle_ring::Zeroing;
use idxpool::{Handle, HandleRing, LocalCache, Pool, PoolBuilder, PoolError, Pooled};

/// A run-time pool shared by reference counting (what `DynPool` was before).
type DynPool<T> = Arc<Pool<T>>;
type DynHandle<T> = Handle<T>;
type DynLocalCache<T> = LocalCache<Arc<Pool<T>>>;

fn new_pool<T>(b: PoolBuilder<'_, T>) -> Result<DynPool<T>, PoolError> {
    Ok(Arc::new(b.build()?))
}

/// `audit` needs `&mut Pool`: the only reference, which proves quiescence.
fn audit<T>(p: &mut DynPool<T>) -> Result<idxpool::AuditReport, PoolError> {
    match Arc::get_mut(p) {
        Some(p) => p.audit(),
        None => Err(PoolError::AuditFailed(
            "other references to the pool exist".into(),
        )),
    }
}

const N: u64 = if cfg!(miri) { 40 } else { 20_000 };

fn pool(name: &str, capacity: u32, cache: u32) -> DynPool<[u64; 4]> {
    new_pool(
        PoolBuilder::<[u64; 4]>::with_default(capacity)
            .cache_size(cache)
            .name(name),
    )
    .unwrap()
}

fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The library-style struct of the issue: built from a config value, any number of instances.
struct BufferManager {
    pool: DynPool<[u64; 4]>,
}

impl BufferManager {
    fn new(name: &str, buffers: u32) -> Result<Self, PoolError> {
        Ok(BufferManager {
            pool: new_pool(PoolBuilder::with_default(buffers).cache_size(8).name(name))?,
        })
    }
    fn alloc(&self, tag: u64) -> Result<DynHandle<[u64; 4]>, PoolError> {
        let mut h = self.pool.get()?;
        *self.pool.get_mut(&mut h) = [tag; 4];
        Ok(h)
    }
    fn free(&self, h: DynHandle<[u64; 4]>) -> u64 {
        let v = self.pool.get_ref(&h)[0];
        self.pool.put(h);
        v
    }
}

fn exercise_manager(name: &str) {
    let m = BufferManager::new(name, 32).unwrap();
    let mut held = Vec::new();
    for i in 0..32 {
        held.push(m.alloc(i).unwrap());
    }
    assert!(matches!(m.alloc(99), Err(PoolError::Exhausted { .. })));
    for (i, h) in held.into_iter().enumerate() {
        assert_eq!(m.free(h), i as u64);
    }
    assert_eq!(m.pool.in_use(), 0);
    // A reload: drop and build again under the same name, as often as wanted.
    drop(m);
    let again = BufferManager::new(name, 16).unwrap();
    let h = again.alloc(5).unwrap();
    assert_eq!(again.free(h), 5);
}

// Two tests of the same library type, run in parallel by the test harness.
#[test]
fn library_struct_instance_one() {
    exercise_manager("mgr-one");
}

#[test]
fn library_struct_instance_two() {
    exercise_manager("mgr-two");
}

#[test]
fn two_pools_of_one_type_alive_at_once_in_threads() {
    let a = BufferManager::new("par-a", 64).unwrap();
    let b = BufferManager::new("par-b", 64).unwrap();
    let ta = std::thread::spawn(move || {
        for i in 0..N {
            let h = a.alloc(i).unwrap();
            assert_eq!(a.free(h), i);
        }
        a
    });
    let tb = std::thread::spawn(move || {
        for i in 0..N {
            let h = b.alloc(i + 1).unwrap();
            assert_eq!(b.free(h), i + 1);
        }
        b
    });
    let (a, b) = (ta.join().unwrap(), tb.join().unwrap());
    assert!(!Arc::ptr_eq(&a.pool, &b.pool));
    assert_eq!(a.pool.in_use() + b.pool.in_use(), 0);
}

#[test]
fn a_foreign_handle_is_rejected_naming_both_pools() {
    let a = pool("foreign-a", 8, 4);
    let b = pool("foreign-b", 8, 4);
    let mut ha = a.get().unwrap();
    let hb = b.get().unwrap();
    assert!(a.owns(&ha) && !b.owns(&ha));

    // Typed errors.
    match b.try_get_mut(&mut ha) {
        Err(PoolError::ForeignHandle { handle_pool, pool }) => {
            assert_eq!(handle_pool, "'foreign-a'");
            assert_eq!(pool, "'foreign-b'");
        }
        other => panic!("expected ForeignHandle, got {other:?}"),
    }
    assert!(matches!(
        b.try_get_ref(&ha),
        Err(PoolError::ForeignHandle { .. })
    ));
    let ha = b.try_put(ha).unwrap_err(); // handed back, not lost
    assert_eq!(b.in_use(), 1);

    // Panicking forms name both pools.
    let msg = |f: &mut dyn FnMut()| panic_message(catch_unwind(AssertUnwindSafe(f)).unwrap_err());
    let m = msg(&mut || {
        let _ = b.get_ref(&ha);
    });
    assert!(
        m.contains("'foreign-a'") && m.contains("'foreign-b'"),
        "{m}"
    );
    let mut slot = Some(ha);
    let m = msg(&mut || b.put(slot.take().unwrap()));
    assert!(m.contains("handle of pool 'foreign-a'"), "{m}");
    // The panicking put consumed the handle: that object is leaked in a (reported, not
    // unsafe); b is untouched.
    assert_eq!(a.in_use(), 1);
    assert_eq!(b.in_use(), 1);

    // Caches, resolvers and bulk puts check too; a bulk put with one foreign handle moves
    // nothing.
    let mut cache = b.local_cache();
    let mut mixed = vec![a.get().unwrap(), hb];
    let m = msg(&mut || cache.put_bulk(&mut mixed));
    assert!(m.contains("given to pool 'foreign-b'"), "{m}");
    assert_eq!(mixed.len(), 2);
    let objs = b.resolver();
    let m = msg(&mut || {
        let _ = objs.get_ref(&mixed[0]);
    });
    assert!(m.contains("'foreign-a'"), "{m}");
    let hb = mixed.pop().unwrap();
    let ha2 = mixed.pop().unwrap();
    cache.put(hb);
    a.put(ha2);
    drop(cache);
    assert_eq!(b.in_use(), 0);
}

/// The non-panicking forms give a foreign handle back untouched: `LocalCache::try_put` and
/// `Pooled::new` (which consumed it and panicked before), with nothing moved in either pool.
#[test]
fn try_put_and_pooled_new_give_a_foreign_handle_back() {
    let a = pool("back-a", 8, 4);
    let b = pool("back-b", 8, 4);
    let mut cache = b.local_cache();
    let ha = a.get().unwrap();
    let ha = cache.try_put(ha).unwrap_err();
    assert_eq!((a.in_use(), b.in_use(), cache.len()), (1, 0, 0));
    let ha = Pooled::new(&*b, ha).unwrap_err();
    assert_eq!((a.in_use(), b.in_use()), (1, 0));
    // Still a's, and a takes it: through a guard this time.
    drop(Pooled::new(&*a, ha).unwrap());
    assert_eq!(a.in_use(), 0);
    // The cache's own handle goes back through try_put.
    let hb = cache.get().unwrap();
    cache.try_put(hb).unwrap();
    drop(cache);
    assert_eq!(b.in_use(), 0);
}

#[test]
fn a_handle_that_outlives_its_pool_is_rejected_by_a_new_pool() {
    let old = pool("outlived", 4, 0);
    let h = old.get().unwrap();
    drop(old); // reported as a leak; its range of the handle space is quarantined for good
    let new = pool("outlived", 4, 0);
    match new.check(&h) {
        Err(PoolError::ForeignHandle { handle_pool, .. }) => {
            assert_eq!(handle_pool, "'outlived' (dropped)")
        }
        other => panic!("expected ForeignHandle, got {other:?}"),
    }
    let h = new.try_put(h).unwrap_err();
    drop(h);
    assert_eq!(new.in_use(), 0);
}

/// A pool and its cache in one struct, used from a spawned thread.
struct Worker {
    pool: DynPool<[u64; 4]>,
    cache: DynLocalCache<[u64; 4]>,
}

impl Worker {
    fn new(pool: &DynPool<[u64; 4]>) -> Self {
        Worker {
            pool: pool.clone(),
            cache: LocalCache::new(pool.clone()),
        }
    }
    /// The burst loop of the issue: a `&mut T` held while the same cache allocates.
    fn burst(&mut self, n: usize) -> u64 {
        let objs = self.pool.resolver(); // borrows the pool, not the cache
        let mut first = self.cache.get().unwrap();
        let head = objs.get_mut(&mut first);
        let mut burst = Vec::new();
        self.cache.get_bulk(&mut burst, n).unwrap();
        for (k, h) in burst.iter_mut().enumerate() {
            objs.get_mut(h)[0] = k as u64;
            head[0] += 1; // still valid after the gets
        }
        let sum = burst.iter().map(|h| objs.get_ref(h)[0]).sum::<u64>() + head[0];
        self.cache.put_bulk(&mut burst);
        self.cache.put(first);
        sum
    }
}

#[test]
fn a_pool_and_its_cache_in_one_struct_in_a_spawned_thread() {
    let pool = pool("worker", 64, 16);
    let mut w = Worker::new(&pool);
    let t = std::thread::spawn(move || {
        let mut total = 0;
        for _ in 0..(N / 100).max(3) {
            total += w.burst(8);
        }
        (total, w)
    });
    let (total, w) = t.join().unwrap();
    assert!(total > 0);
    drop(w);
    assert_eq!(pool.in_use(), 0);
    assert_eq!(pool.available(), 64);
}

/// The spawned pipeline of the issue: RX thread -> ring -> worker thread, all
/// `std::thread::spawn`, no `static`, no `scope`.
#[test]
fn spawned_pipeline_with_a_handle_ring() {
    let pool = pool("pipeline", 256, 32);
    let (mut tx, mut rx) = HandleRing::new(pool.clone(), 64, Zeroing::Batched).unwrap();
    let mut rx_cache = LocalCache::new(pool.clone());
    let mut work_cache = LocalCache::new(pool.clone());
    let producer = std::thread::spawn(move || {
        let mut burst = Vec::new();
        let mut sent = 0u64;
        while sent < N {
            let want = 8.min((N - sent) as usize);
            let got = rx_cache.get_burst(&mut burst, want);
            for h in burst.iter_mut() {
                rx_cache.pool().get_mut(h)[0] = sent;
                sent += 1;
            }
            debug_assert!(got <= want);
            while !burst.is_empty() {
                if tx.produce_burst(&mut burst) == 0 {
                    std::thread::yield_now();
                }
            }
        }
        sent
    });
    let consumer = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut seen = 0u64;
        while seen < N {
            if rx.consume_burst(&mut got, 16) == 0 {
                std::thread::yield_now();
                continue;
            }
            for h in got.iter() {
                assert_eq!(work_cache.pool().get_ref(h)[0], seen, "FIFO");
                seen += 1;
            }
            work_cache.put_bulk(&mut got);
        }
        seen
    });
    assert_eq!(producer.join().unwrap(), N);
    assert_eq!(consumer.join().unwrap(), N);
    let mut pool = pool;
    let report = audit(&mut pool).unwrap();
    assert_eq!(report.in_use, 0);
}

#[test]
fn handles_left_in_a_ring_go_home_when_both_halves_drop() {
    let pool = pool("ring-left", 16, 0);
    let (mut tx, rx) = HandleRing::new(pool.clone(), 8, Zeroing::Immediate).unwrap();
    let mut v = Vec::new();
    pool.get_bulk(&mut v, 5).unwrap();
    assert!(tx.produce_bulk(&mut v));
    assert_eq!(pool.in_use(), 5);
    let t = std::thread::spawn(move || drop(tx));
    t.join().unwrap();
    drop(rx);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn guards_return_objects_on_drop_and_on_panic() {
    // Run-time pool.
    let p = pool("guards", 4, 2);
    {
        let mut g = p.get_pooled().unwrap();
        g[0] = 7;
        assert_eq!(p.in_use(), 1);
    }
    assert_eq!(p.in_use(), 0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut g = p.get_pooled().unwrap();
        g[1] = 1;
        panic!("boom");
    }));
    assert!(r.is_err());
    assert_eq!(p.in_use(), 0, "returned while unwinding");
    let h = p.get_pooled().unwrap().into_handle();
    assert_eq!(p.in_use(), 1);
    let g = Pooled::new(&*p, h).unwrap();
    assert_eq!(g.len(), 4);
    drop(g);
    assert_eq!(p.in_use(), 0);

    // Branded (scoped) pool; cached (LIFO), so the object put is the next one got.
    PoolBuilder::<[u64; 4]>::with_default(4)
        .cache_size(4)
        .scoped(|pool| {
            {
                let mut g = Pooled::get(&pool).unwrap();
                g[0] = 3;
                assert_eq!(pool.in_use(), 1);
            }
            assert_eq!(pool.in_use(), 0);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let _g = Pooled::get(&pool).unwrap();
                panic!("boom");
            }));
            assert!(r.is_err());
            assert_eq!(pool.in_use(), 0);
            let h = Pooled::get(&pool).unwrap().into_handle();
            let g = Pooled::new(&pool, h).unwrap();
            assert_eq!(g[0], 3, "the object comes back as it was put");
            drop(g);
            let h = pool.get_pooled().unwrap().into_handle();
            assert_eq!(pool.in_use(), 1);
            drop(Pooled::new(&pool, h).unwrap());
            assert_eq!(pool.in_use(), 0);
        })
        .unwrap();
}

#[test]
fn a_pool_dropped_with_objects_out_is_reported() {
    let seen: Arc<Mutex<Vec<(String, usize, usize)>>> = Arc::default();
    let s = seen.clone();
    idxpool::leaks::set_leak_hook(move |r| {
        if r.pool.starts_with("leaky-") {
            s.lock()
                .unwrap()
                .push((r.pool.to_string(), r.in_use, r.capacity));
        }
    });
    let p = pool("leaky-dyn", 8, 4);
    let h = p.get().unwrap();
    let _kept = p.get().unwrap();
    drop(h); // dropped without put: leaked
    drop(p);
    PoolBuilder::<u64>::with_default(4)
        .name("leaky-scoped")
        .scoped(|pool| {
            let _ = pool.get().unwrap();
        })
        .unwrap();
    let clean = pool("leaky-clean", 4, 0);
    let h = clean.get().unwrap();
    clean.put(h);
    drop(clean);
    idxpool::leaks::clear_leak_hook();
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("leaky-dyn".to_string(), 2, 8),
            ("leaky-scoped".to_string(), 1, 4)
        ]
    );
}

#[test]
fn audit_needs_the_only_reference() {
    let mut p = pool("audit-only", 8, 4);
    let c = LocalCache::new(p.clone());
    assert!(matches!(audit(&mut p), Err(PoolError::AuditFailed(_))));
    drop(c);
    assert_eq!(audit(&mut p).unwrap().in_use, 0);
}

/// Stats add up: operations of exited threads' caches and of dropped local caches stay in the
/// pool's totals; `stats_reset` starts from 0; without the feature, `Stats` says so.
#[test]
fn stats_after_threads_exit_equal_the_operations_done() {
    let p = pool("stats-sum", 256, 16);
    let per: u64 = if cfg!(miri) { 10 } else { 500 };
    let mut joins = Vec::new();
    for t in 0..3u64 {
        let p = p.clone();
        joins.push(std::thread::spawn(move || {
            if t == 0 {
                // An explicit cache, dropped at the end of the thread.
                let mut c = p.local_cache();
                for _ in 0..per {
                    let h = c.get().unwrap();
                    c.put(h);
                }
            } else {
                // The implicit per-thread cache, flushed and freed at thread exit.
                for _ in 0..per {
                    let mut v = Vec::new();
                    p.get_bulk(&mut v, 2).unwrap();
                    p.put_bulk(&mut v);
                }
            }
        }));
    }
    for j in joins {
        j.join().unwrap();
    }
    let s = p.stats();
    if idxpool::stats::Stats::COUNTING {
        assert!(s.is_counting());
        assert_eq!(s.get_success_bulk, 3 * per);
        assert_eq!(s.get_success_objs, per + 2 * 2 * per);
        assert_eq!(s.put_bulk, 3 * per);
        assert_eq!(s.put_objs, per + 2 * 2 * per);
        assert_eq!(s.get_fail_bulk, 0);
        // Every refill came from the ring and every flush went back to it: the ring is full
        // again, so what left it came back.
        assert_eq!(s.get_common_pool_objs, s.put_common_pool_objs);
        p.stats_reset();
        assert_eq!(p.stats(), idxpool::stats::Stats::default());
        let h = p.get().unwrap();
        p.put(h);
        assert_eq!(p.stats().get_success_objs, 1);
        assert_eq!(p.stats().put_objs, 1);
    } else {
        assert!(!s.is_counting());
        assert_eq!(s, idxpool::stats::Stats::default());
        assert!(s.to_string().contains("`stats` feature"), "{s}");
    }
    assert_eq!(p.available(), 256);
}

/// The burst loop with a branded pool: a `&mut T` from `LocalCache::get_mut` is tied to the
/// pool and the handle, not the cache, so the cache keeps allocating while it lives.
#[test]
fn a_branded_local_cache_allocates_while_a_reference_lives() {
    PoolBuilder::<[u64; 4]>::with_default(64)
        .cache_size(8)
        .scoped(|pool| {
            let mut cache = pool.local_cache();
            let mut first = cache.get().unwrap();
            let head = pool.get_mut(&mut first);
            let mut burst = Vec::new();
            for k in 0..4u64 {
                cache.get_bulk(&mut burst, 8).unwrap();
                for h in burst.iter_mut() {
                    pool.get_mut(h)[0] = k;
                    head[0] += 1;
                }
                cache.put_bulk(&mut burst);
            }
            assert_eq!(head[0], 32);
            cache.put(first);
            drop(cache);
            assert_eq!(pool.in_use(), 0);
        })
        .unwrap();
}

idxpool::brand!(ArcPool);

/// Item 2 for branded pools: a pool in an `Arc` whose cache, resolver and ring halves are
/// `'static` and move into `std::thread::spawn`.
#[test]
fn a_branded_pool_in_an_arc_feeds_spawned_threads() {
    let pool = Arc::new(
        PoolBuilder::<[u64; 4]>::with_default(128)
            .cache_size(16)
            .build_named::<ArcPool>()
            .unwrap(),
    );
    let (mut tx, mut rx) = idxpool::HandleRing::new(pool.clone(), 32, Zeroing::Batched).unwrap();
    let mut cache = LocalCache::new(pool.clone());
    let n = N.min(5_000);
    let producer = std::thread::spawn(move || {
        let mut burst = Vec::new();
        let mut seq = 0u64;
        while seq < n {
            let got = cache.get_burst(&mut burst, 8.min((n - seq) as usize));
            for h in burst.iter_mut() {
                cache.pool().get_mut(h)[0] = seq;
                seq += 1;
            }
            debug_assert!(got <= 8);
            while !burst.is_empty() {
                if tx.produce_burst(&mut burst) == 0 {
                    std::thread::yield_now();
                }
            }
        }
    });
    let worker = std::thread::spawn(move || {
        let objs = rx.ring().pool().clone();
        let mut cache = LocalCache::new(objs.clone());
        let mut got = Vec::new();
        let mut seen = 0u64;
        while seen < n {
            if rx.consume_burst(&mut got, 8) == 0 {
                std::thread::yield_now();
                continue;
            }
            for h in got.iter() {
                assert_eq!(objs.get_ref(h)[0], seen);
                seen += 1;
            }
            cache.put_bulk(&mut got);
        }
    });
    producer.join().unwrap();
    worker.join().unwrap();
    let mut pool = Arc::try_unwrap(pool).expect("every companion is gone");
    assert_eq!(pool.audit().unwrap().in_use, 0);
}

#[test]
fn huge_dyn_requests_fail_or_clamp_without_allocating() {
    // Found by attack: `get_burst(usize::MAX)` panicked ("capacity overflow") and
    // `get_burst(1 << 40)` aborted the process: a scratch Vec was reserved for `n` before `n`
    // was compared with the pool.
    let p = pool("huge", 64, 32);
    let mut v = Vec::new();
    for n in [usize::MAX, usize::MAX / 2, 1 << 40, 65] {
        match p.get_bulk(&mut v, n) {
            Err(PoolError::Exhausted { requested, .. }) => assert_eq!(requested, n),
            other => panic!("get_bulk({n}): {other:?}"),
        }
        assert!(v.is_empty());
    }
    for n in [usize::MAX, 1 << 40] {
        let got = p.get_burst(&mut v, n);
        assert_eq!(got, 64);
        assert_eq!(v.len(), 64);
        p.put_bulk(&mut v);
    }
    let mut c = p.local_cache();
    for n in [usize::MAX, 1 << 40] {
        assert!(matches!(
            c.get_bulk(&mut v, n),
            Err(PoolError::Exhausted { requested, .. }) if requested == n
        ));
        assert_eq!(c.get_burst(&mut v, n), 64);
        c.put_bulk(&mut v);
    }
    drop(c);
    assert_eq!(p.in_use(), 0);
}

/// The bulk API of run-time pools checks every pool id before it converts anything:
/// `try_` forms give the typed error, the plain forms panic naming both pools, prefetch of a
/// foreign handle is a no-op; own handles round-trip through `get_mut_all` and `resolve_bulk`.
#[test]
fn bulk_access_of_run_time_pools_rejects_a_foreign_handle_first() {
    let a = pool("bulk-a", 16, 4);
    let b = pool("bulk-b", 16, 4);
    let mut hs = Vec::new();
    a.get_bulk(&mut hs, 8).unwrap();

    // Own handles: writes through get_mut_all reach each object; pointers match.
    for (k, o) in a.resolver().get_mut_all(&mut hs).enumerate() {
        o[0] = k as u64 + 100;
    }
    for (k, h) in hs.iter().enumerate() {
        assert_eq!(a.get_ref(h)[0], k as u64 + 100);
    }
    let mut ptrs = vec![std::ptr::NonNull::dangling(); 3];
    assert_eq!(a.resolver().try_resolve_bulk(&hs, &mut ptrs).unwrap(), 3);
    assert_eq!(a.resolver().resolve_bulk(&hs, &mut ptrs), 3);
    assert_eq!(ptrs[2], std::ptr::NonNull::from(a.get_ref(&hs[2])));
    a.resolver().prefetch_all(&hs);
    a.resolver().prefetch(&hs[0]);

    // A foreign handle in the middle of the batch.
    hs.insert(4, b.get().unwrap());
    let before: Vec<u64> = hs[..4].iter().map(|h| a.get_ref(h)[0]).collect();
    for e in [
        a.resolver()
            .try_get_mut_all(&mut hs)
            .map(|_| ())
            .unwrap_err(),
        a.resolver()
            .try_resolve_bulk(&hs, &mut [std::ptr::NonNull::dangling(); 16])
            .unwrap_err(),
    ] {
        match e {
            PoolError::ForeignHandle { handle_pool, pool } => {
                assert!(handle_pool.contains("'bulk-b'"), "{handle_pool}");
                assert!(pool.contains("'bulk-a'"), "{pool}");
            }
            other => panic!("expected ForeignHandle, got {other:?}"),
        }
    }
    // The foreign handle past `out.len()` is not converted, so not checked.
    let mut four = [std::ptr::NonNull::dangling(); 4];
    assert_eq!(a.resolver().try_resolve_bulk(&hs, &mut four).unwrap(), 4);
    // Prefetch skips the foreign handle (a hint has nothing to report).
    a.resolver().prefetch_all(&hs);
    a.prefetch(&hs[4]);
    let mut cache = a.local_cache();
    a.resolver().prefetch_all(&hs);
    // The panicking forms name both pools and write nothing.
    let msg = panic_message(
        catch_unwind(AssertUnwindSafe(|| {
            for o in a.resolver().get_mut_all(&mut hs) {
                o[0] = 0;
            }
        }))
        .unwrap_err(),
    );
    assert!(
        msg.contains("'bulk-a'") && msg.contains("'bulk-b'"),
        "{msg}"
    );
    let msg = panic_message(
        catch_unwind(AssertUnwindSafe(|| {
            a.resolver()
                .resolve_bulk(&hs, &mut [std::ptr::NonNull::dangling(); 16])
        }))
        .unwrap_err(),
    );
    assert!(msg.contains("'bulk-b'"), "{msg}");
    let after: Vec<u64> = hs[..4].iter().map(|h| a.get_ref(h)[0]).collect();
    assert_eq!(before, after, "nothing was written before the check");

    b.put(hs.remove(4));
    // A resolver's get_mut_all: references held while the cache allocates.
    let objs = a.resolver();
    let refs: Vec<&mut [u64; 4]> = objs.get_mut_all(&mut hs).collect();
    let extra = cache.get().unwrap();
    for r in refs {
        r[1] = 9;
    }
    cache.put(extra);
    assert!(hs.iter().all(|h| a.get_ref(h)[1] == 9));
    cache.put_bulk(&mut hs);
    drop(cache);
    assert!(a.is_full() && b.is_full());
}

/// The same for the owned companions: the owned cache and resolver forward the prefetch and
/// bulk conversions.
#[test]
fn owned_cache_and_resolver_prefetch_and_convert_in_bulk() {
    idxpool::brand!(ArcBulk);
    let pool = Arc::new(
        PoolBuilder::<[u64; 4]>::with_default(32)
            .cache_size(8)
            .build_named::<ArcBulk>()
            .unwrap(),
    );
    let mut cache = LocalCache::new(pool.clone());
    let objs = pool.resolver();
    let mut hs = Vec::new();
    cache.get_bulk(&mut hs, 8).unwrap();
    pool.resolver().prefetch_all(&hs);
    objs.prefetch_all(&hs);
    pool.prefetch(&hs[0]);
    objs.prefetch(&hs[0]);
    let mut p1 = [std::ptr::NonNull::dangling(); 8];
    let mut p2 = [std::ptr::NonNull::dangling(); 8];
    assert_eq!(pool.resolver().resolve_bulk(&hs, &mut p1), 8);
    assert_eq!(objs.resolve_bulk(&hs, &mut p2), 8);
    assert_eq!(p1, p2);
    for (k, o) in pool.resolver().get_mut_all(&mut hs).enumerate() {
        o[0] = k as u64;
    }
    for o in objs.get_mut_all(&mut hs).rev() {
        o[1] = o[0] * 2;
    }
    for (k, h) in hs.iter().enumerate() {
        assert_eq!(objs.get_ref(h)[..2], [k as u64, 2 * k as u64]);
        assert_eq!(std::ptr::NonNull::from(pool.get_ref(h)), p1[k]);
    }
    cache.put_bulk(&mut hs);
    drop(cache);
    assert!(pool.is_full());
}

/// Object size at run time. A byte-buffer pool (`Pool<[u8]>`) from a length
/// and an alignment taken from configuration, with the same handles, caches, ring, bulk,
/// prefetch and handle rings as a pool of a sized `T`.
#[test]
fn byte_buffer_pools_take_their_object_size_at_run_time() {
    let len = if cfg!(miri) { 40 } else { 2048 + 128 }; // "from configuration"
    let pool: Arc<Pool<[u8]>> = Arc::new(
        PoolBuilder::bytes(64, len, 64)
            .cache_size(8)
            .name("bytes")
            .build()
            .unwrap(),
    );
    assert_eq!(pool.object_size(), len);
    assert!(pool.stride() >= len && pool.stride().is_multiple_of(64));
    // Single, bulk, through the pool and a cache; each buffer is `len` bytes, disjoint.
    let mut h = pool.get().unwrap();
    assert_eq!(std::mem::size_of_val(&h), 4);
    pool.get_mut(&mut h).fill(0xaa);
    let mut cache = LocalCache::new(pool.clone());
    let mut burst = Vec::new();
    cache.get_bulk(&mut burst, 16).unwrap();
    let objs = pool.resolver();
    objs.prefetch_all(&burst);
    for (k, b) in objs.get_mut_all(&mut burst).enumerate() {
        assert_eq!(b.len(), len);
        assert!(b.iter().all(|&x| x == 0), "fresh buffers are zero");
        b.fill(k as u8);
    }
    for (k, h) in burst.iter().enumerate() {
        assert!(pool.get_ref(h).iter().all(|&x| x == k as u8));
    }
    assert!(pool.get_ref(&h).iter().all(|&x| x == 0xaa));
    // Through a handle ring and a guard.
    let (mut tx, mut rx) = HandleRing::new(pool.clone(), 4, Zeroing::Immediate).unwrap();
    tx.produce(h).unwrap();
    let h = rx.consume().unwrap();
    {
        let mut g = Pooled::new(&*pool, h).unwrap();
        g[0] = 1;
        assert_eq!(g.len(), len);
    }
    cache.put_bulk(&mut burst);
    drop((cache, tx, rx));
    assert_eq!(pool.in_use(), 0);
    // A handle of another byte pool is refused.
    let other = PoolBuilder::bytes(4, len, 8).build().unwrap();
    let mut foreign = other.get().unwrap();
    assert!(matches!(
        pool.try_get_mut(&mut foreign),
        Err(PoolError::ForeignHandle { .. })
    ));
    other.put(foreign);
    // Branded and index-entry byte pools too.
    let sum = PoolBuilder::bytes(8, 100, 4)
        .repr::<idxpool::Index>()
        .scoped(|p| {
            let mut h = p.get().unwrap();
            p.get_mut(&mut h)[99] = 7;
            let v = p.get_ref(&h)[99];
            p.put(h);
            v
        })
        .unwrap();
    assert_eq!(sum, 7);
}

/// Every object of a byte-buffer pool is aligned as asked, not only the first (found by
/// attack: `bytes(16, 17, 4096)` had a stride of 32).
#[test]
fn every_object_of_a_byte_buffer_pool_is_aligned() {
    for (len, align) in [
        (17usize, 4096usize),
        (8, 16),
        (100, 4096),
        (3, 2),
        (64, 128),
    ] {
        let p = PoolBuilder::bytes(16, len, align)
            .cache_size(0)
            .build()
            .unwrap();
        let mut hs = Vec::new();
        p.get_bulk(&mut hs, 16).unwrap();
        for h in &hs {
            let addr = p.as_ptr(h).cast::<u8>().as_ptr() as usize;
            assert_eq!(addr % align, 0, "len {len} align {align}");
        }
        p.put_bulk(&mut hs);
    }
}

/// `index_of` rejects another pool's handle like every other path (found by attack: it
/// returned a number out of range).
#[test]
fn index_of_rejects_a_foreign_handle() {
    let a = pool("idx-a", 8, 0);
    let b = pool("idx-b", 8, 0);
    let h = a.get().unwrap();
    assert!(a.index_of(&h) < 8);
    let r = catch_unwind(AssertUnwindSafe(|| b.index_of(&h)));
    assert!(panic_message(r.unwrap_err()).contains("'idx-a'"));
    a.put(h);
}

/// `check_raw` of another run-time pool's raw value says `ForeignHandle`, naming both
/// pools, as every other path does (found by attack: it said `IndexOutOfRange` with an index
/// the value does not have).
#[test]
fn check_raw_names_another_pools_raw_value_foreign() {
    let a = pool("raw-a", 8, 0);
    let b = pool("raw-b", 8, 0);
    let h = a.get().unwrap();
    let raw = h.into_raw();
    assert!(a.check_raw(raw).is_ok());
    match b.check_raw(raw) {
        Err(PoolError::ForeignHandle { handle_pool, pool }) => {
            assert!(handle_pool.contains("raw-a"), "{handle_pool}");
            assert!(pool.contains("raw-b"), "{pool}");
        }
        other => panic!("expected ForeignHandle, got {other:?}"),
    }
    // SAFETY: `raw` came from `into_raw` of a handle of `a`, rebuilt once.
    a.put(unsafe { idxpool::Handle::from_raw(raw) });
    assert_eq!(a.in_use(), 0);
}

#[test]
fn byte_buffer_pools_refuse_impossible_layouts() {
    for (len, align) in [(0usize, 8usize), (64, 3), (64, 0)] {
        match PoolBuilder::bytes(4, len, align).build() {
            Err(PoolError::InvalidConfig { .. }) => {}
            other => panic!("len {len} align {align}: expected InvalidConfig, got {other:?}"),
        }
    }
}

/// Found by attack (session 7): `LocalCache::put_array` with another pool's handle among this
/// pool's panicked and dropped the array, so this pool's own handles in it were lost (their
/// objects out for good). They now go back before the panic.
#[test]
fn a_put_array_with_a_foreign_handle_gives_this_pools_back() {
    let a = PoolBuilder::<u64>::with_default(8).build().unwrap();
    let b = PoolBuilder::<u64>::with_default(8).build().unwrap();
    let mut cb = b.local_cache();
    let (b1, b2, a1) = (cb.get().unwrap(), cb.get().unwrap(), a.get().unwrap());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb.put_array([b1, b2, a1])));
    let msg = r.expect_err("a foreign handle panics");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("idxpool"), "{msg}");
    assert_eq!(
        b.in_use(),
        cb.len(),
        "b's two objects are back (in b's cache)"
    );
    drop(cb);
    assert_eq!(b.in_use(), 0);
    // a's handle was consumed by the panic: its object stays out until `a` is dropped.
    assert_eq!(a.in_use(), 1);
}
