//! The reset hook (`PoolBuilder::on_put`): it runs exactly once per object
//! given back, on every path that gives objects back, and on none that moves free objects; a
//! panic inside it loses no object and counts none twice; it never sees another pool's object;
//! it may re-enter the pool.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock, Weak};

use idxpool::handle_ring::Zeroing;
use idxpool::{Handle, HandleRing, LocalCache, Pool, PoolBuilder, PoolError, Pooled, Stats};

/// What a user writes into an object; the hook resets it to 0.
const DIRTY: u64 = 0xdead_beef;

/// A run-time pool of `cap` u64 whose hook zeroes the object and counts its calls.
fn counting_pool(cap: u32, cache: u32) -> (Pool<u64>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let pool = PoolBuilder::<u64>::with_default(cap)
        .cache_size(cache)
        .on_put(move |v: &mut u64| {
            *v = 0;
            c.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    (pool, calls)
}

/// Every object of `pool` is free and clean: all of them can be taken at once (no object lost
/// or duplicated: distinct indices), and each reads 0 (the hook ran on it).
fn assert_whole_and_clean(pool: &Pool<u64>) {
    pool.flush();
    let cap = pool.capacity() as usize;
    assert_eq!(pool.available(), cap, "every object back");
    let calls_before = pool.stats();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, cap).unwrap();
    let mut idx: Vec<u32> = hs.iter().map(|h| pool.index_of(h)).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), cap, "no object handed out twice");
    assert!(
        hs.iter().all(|h| *pool.get_ref(h) == 0),
        "every object reset"
    );
    assert!(pool.get().is_err());
    // Give them back without dirtying them (the hook runs again: harmless).
    pool.put_bulk(&mut hs);
    let _ = calls_before;
}

#[test]
fn every_put_path_runs_the_hook_once_per_object() {
    let (pool, calls) = counting_pool(256, 16);
    let dirty = |pool: &Pool<u64>, hs: &mut [Handle<u64>]| {
        for h in hs.iter_mut() {
            *pool.get_mut(h) = DIRTY;
        }
    };
    let mut expect = 0;
    let mut check = |n: usize, what: &str| {
        expect += n;
        assert_eq!(calls.load(SeqCst), expect, "{what}");
    };

    // Pool::put, try_put.
    let mut h = pool.get().unwrap();
    *pool.get_mut(&mut h) = DIRTY;
    pool.put(h);
    check(1, "put");
    let mut h = pool.get().unwrap();
    assert_eq!(*pool.get_ref(&h), 0, "get sees the reset object");
    *pool.get_mut(&mut h) = DIRTY;
    assert!(pool.try_put(h).is_ok());
    check(1, "try_put");

    // Pool::put_bulk (a burst larger than the cache: the flush path too).
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 40).unwrap();
    dirty(&pool, &mut hs);
    pool.put_bulk(&mut hs);
    assert!(hs.is_empty());
    check(40, "put_bulk");

    // Pool::put_from (the caller's table).
    let mut table: Vec<Option<Handle<u64>>> = (0..24).map(|_| None).collect();
    pool.get_into(&mut table).unwrap();
    for h in table.iter_mut().flatten() {
        *pool.get_mut(h) = DIRTY;
    }
    pool.put_from(&mut table).unwrap();
    assert!(table.iter().all(Option::is_none), "slots emptied");
    check(24, "put_from");
    // A failed put_from (an empty slot) runs no hook.
    assert!(matches!(
        pool.put_from(&mut table),
        Err(PoolError::SlotEmpty { .. })
    ));
    check(0, "failed put_from");

    // LocalCache: put, put_bulk, put_bulk_tail, put_array, put_from.
    let mut c = pool.local_cache();
    let mut h = c.get().unwrap();
    *pool.get_mut(&mut h) = DIRTY;
    c.put(h);
    check(1, "LocalCache::put");
    c.get_bulk(&mut hs, 20).unwrap();
    dirty(&pool, &mut hs);
    c.put_bulk_tail(&mut hs, 5);
    check(5, "LocalCache::put_bulk_tail");
    c.put_bulk(&mut hs);
    check(15, "LocalCache::put_bulk");
    let mut arr = c.get_array::<8>().unwrap();
    dirty(&pool, &mut arr);
    c.put_array(arr);
    check(8, "LocalCache::put_array");
    c.get_into(&mut table[..16]).unwrap();
    for h in table.iter_mut().flatten() {
        *pool.get_mut(h) = DIRTY;
    }
    c.put_from(&mut table[..16]).unwrap();
    check(16, "LocalCache::put_from");
    // Its drop flushes free objects: no hook.
    drop(c);
    check(0, "LocalCache drop (flush)");

    // The guard's drop.
    {
        let mut g = pool.get_pooled().unwrap();
        *g = DIRTY;
    }
    check(1, "Pooled drop");
    // into_handle gives the handle up: the hook runs at its put only.
    let g = Pooled::get(&pool).unwrap();
    let h = g.into_handle();
    check(0, "Pooled::into_handle");
    pool.put(h);
    check(1, "put after into_handle");

    // Flushes and the thread cache move free objects: no hook.
    pool.flush();
    check(0, "flush");
    assert_whole_and_clean(&pool);
    // (assert_whole_and_clean put `cap` objects back.)
    check(256, "the check's own put_bulk");
}

#[test]
fn byte_buffers_get_their_slice() {
    let lens = Arc::new(AtomicUsize::new(0));
    let l = lens.clone();
    let pool = PoolBuilder::bytes(32, 300, 64)
        .cache_size(8)
        .on_put(move |b: &mut [u8]| {
            l.store(b.len(), SeqCst);
            b[..16].fill(0);
        })
        .build()
        .unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 32).unwrap();
    for h in hs.iter_mut() {
        pool.get_mut(h).fill(0xff);
    }
    pool.put_bulk(&mut hs);
    assert_eq!(lens.load(SeqCst), 300);
    pool.get_bulk(&mut hs, 32).unwrap();
    for h in &hs {
        let b = pool.get_ref(h);
        assert!(b[..16].iter().all(|&x| x == 0), "header reset");
        assert!(b[16..].iter().all(|&x| x == 0xff), "the rest untouched");
    }
    pool.put_bulk(&mut hs);
}

#[test]
fn handle_ring_drop_and_thread_exit() {
    let (pool, calls) = counting_pool(128, 16);
    let pool = Arc::new(pool);
    // Handles left in a handle ring go back through put_bulk when it is dropped.
    let (mut tx, rx) = HandleRing::new(pool.clone(), 16, Zeroing::Batched).unwrap();
    for _ in 0..10 {
        let mut h = pool.get().unwrap();
        *pool.get_mut(&mut h) = DIRTY;
        assert!(tx.produce(h).is_ok());
    }
    let before = calls.load(SeqCst);
    drop(tx);
    drop(rx);
    assert_eq!(calls.load(SeqCst), before + 10, "handle ring drop");

    // A thread's puts run the hook; its exit flushes its cache without running it again.
    let p = pool.clone();
    let before = calls.load(SeqCst);
    std::thread::spawn(move || {
        let mut hs = Vec::new();
        p.get_bulk(&mut hs, 12).unwrap();
        for h in hs.iter_mut() {
            *p.get_mut(h) = DIRTY;
        }
        p.put_bulk(&mut hs);
        // An Arc-held guard, dropped on this thread.
        let mut g = Pooled::get(p.clone()).unwrap();
        *g = DIRTY;
    })
    .join()
    .unwrap();
    assert_eq!(calls.load(SeqCst), before + 13, "puts of the thread only");
    assert_whole_and_clean(&pool);
}

#[test]
fn the_pool_drop_runs_no_hook() {
    let (pool, calls) = counting_pool(64, 16);
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 20).unwrap();
    pool.put_bulk(&mut hs);
    let c = pool.local_cache();
    drop(pool.get_pooled().unwrap());
    let n = calls.load(SeqCst);
    drop(c);
    drop(pool);
    assert_eq!(calls.load(SeqCst), n);
}

/// A hook that panics on the `nth` call (0-based), once.
fn panicking_pool(cap: u32, cache: u32, nth: usize) -> (Pool<u64>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let pool = PoolBuilder::<u64>::with_default(cap)
        .cache_size(cache)
        .on_put(move |v: &mut u64| {
            let k = c.fetch_add(1, SeqCst);
            if k == nth {
                panic!("hook panics on call {k}");
            }
            *v = 0;
        })
        .build()
        .unwrap();
    (pool, calls)
}

/// After a caught hook panic: every object is back exactly once (the counts are whole, all of
/// them can be taken at once, distinct), and the put was counted once per object.
fn assert_nothing_lost(pool: &Pool<u64>, put_objs: u64) {
    pool.flush();
    assert_eq!(pool.in_use(), 0);
    assert_eq!(pool.available(), pool.capacity() as usize);
    if Stats::COUNTING {
        assert_eq!(pool.stats().put_objs, put_objs, "no object counted twice");
    }
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, pool.capacity() as usize).unwrap();
    let mut idx: Vec<u32> = hs.iter().map(|h| pool.index_of(h)).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), pool.capacity() as usize);
    assert!(pool.get().is_err());
    hs.into_iter().for_each(|h| pool.put(h));
}

#[test]
fn a_panicking_hook_loses_no_object_on_put() {
    let (pool, _) = panicking_pool(32, 8, 0);
    let h = pool.get().unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| pool.put(h)));
    assert!(r.is_err(), "the panic goes on to the caller");
    assert_nothing_lost(&pool, 1);
}

#[test]
fn a_panicking_hook_loses_no_object_on_put_bulk() {
    // Panics in the middle of a burst of 20 (cache 8: the burst also overflows the cache).
    let (pool, calls) = panicking_pool(64, 8, 7);
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 20).unwrap();
    for h in hs.iter_mut() {
        *pool.get_mut(h) = DIRTY;
    }
    let r = catch_unwind(AssertUnwindSafe(|| pool.put_bulk(&mut hs)));
    assert!(r.is_err());
    assert!(hs.is_empty(), "the handles moved into the pool");
    assert_eq!(calls.load(SeqCst), 8, "the hook stopped at the panic");
    assert_nothing_lost(&pool, 20);
    // Objects whose hook never ran come back as they were put (not reset): a documented
    // consequence, and the next put resets them.
}

#[test]
fn a_panicking_hook_loses_no_object_on_guard_drop() {
    let (pool, _) = panicking_pool(16, 4, 0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut g = pool.get_pooled().unwrap();
        *g = DIRTY;
    }));
    assert!(r.is_err());
    assert_nothing_lost(&pool, 1);
}

#[test]
fn a_panicking_hook_loses_no_object_on_put_from_and_local_cache() {
    let (pool, _) = panicking_pool(64, 16, 3);
    let mut table: Vec<Option<Handle<u64>>> = (0..10).map(|_| None).collect();
    pool.get_into(&mut table).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| pool.put_from(&mut table)));
    assert!(r.is_err());
    assert!(table.iter().all(Option::is_none), "the table is emptied");
    assert_nothing_lost(&pool, 10);

    let (pool, _) = panicking_pool(64, 16, 5);
    let mut c = pool.local_cache();
    let mut hs = Vec::new();
    c.get_bulk(&mut hs, 12).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| c.put_bulk(&mut hs)));
    assert!(r.is_err());
    assert!(hs.is_empty());
    // The burst went back through the pool's zero-size cache (the ring), not this cache:
    // what this cache holds is what it held before (its refill's rest).
    assert_eq!(
        pool.in_use(),
        c.len(),
        "only the cache's own objects are out"
    );
    // The cache goes on working after the panic.
    let h = c.get().unwrap();
    c.put(h);
    drop(c);
    assert_nothing_lost(&pool, 13);
}

#[test]
fn the_hook_never_sees_another_pools_object() {
    let (a, calls) = counting_pool(16, 4);
    let b = PoolBuilder::<u64>::with_default(16).build().unwrap();
    let mut hb = b.get().unwrap();
    *b.get_mut(&mut hb) = DIRTY;
    let hb = match a.try_put(hb) {
        Err(h) => h,
        Ok(()) => panic!("a foreign handle was accepted"),
    };
    assert_eq!(calls.load(SeqCst), 0);
    let r = catch_unwind(AssertUnwindSafe(|| a.put(hb)));
    assert!(r.is_err(), "a foreign handle panics");
    assert_eq!(calls.load(SeqCst), 0, "before the hook");
    // Bursts: the check covers the whole burst before any hook runs.
    let mut hs = vec![a.get().unwrap(), b.get().unwrap()];
    let mut table: Vec<Option<Handle<u64>>> = vec![Some(a.get().unwrap()), Some(b.get().unwrap())];
    assert!(matches!(
        a.put_from(&mut table),
        Err(PoolError::ForeignHandle { .. })
    ));
    assert_eq!(calls.load(SeqCst), 0);
    let r = catch_unwind(AssertUnwindSafe(|| a.put_bulk(&mut hs)));
    assert!(r.is_err());
    assert_eq!(calls.load(SeqCst), 0);
    assert_eq!(a.in_use(), 2, "nothing moved");
    // The handles of the panicked bursts are still held (not consumed): give them back.
    let bh = hs.pop().unwrap();
    b.put(bh);
    a.put(hs.pop().unwrap());
    b.put(table[1].take().unwrap());
    a.put(table[0].take().unwrap());
    assert_eq!(calls.load(SeqCst), 2);
    assert_eq!((a.in_use(), b.in_use()), (0, 1)); // hb was consumed by the panicking put
}

#[test]
fn the_hook_may_reenter_the_pool() {
    // The hook gets and puts an object of its own pool (no cache token is live while it runs).
    let slot: Arc<OnceLock<Weak<Pool<u64>>>> = Arc::new(OnceLock::new());
    let depth = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (s, d, c) = (slot.clone(), depth.clone(), calls.clone());
    let pool = Arc::new(
        PoolBuilder::<u64>::with_default(64)
            .cache_size(8)
            .on_put(move |v: &mut u64| {
                *v = 0;
                c.fetch_add(1, SeqCst);
                if d.fetch_add(1, SeqCst) == 0 {
                    if let Some(p) = s.get().and_then(Weak::upgrade) {
                        let mut hs = Vec::new();
                        p.get_bulk(&mut hs, 3).unwrap();
                        p.put_bulk(&mut hs); // the hook again, one level down
                        let mut lc = LocalCache::new(p.clone());
                        let h = lc.get().unwrap();
                        lc.put(h);
                    }
                }
                d.fetch_sub(1, SeqCst);
            })
            .build()
            .unwrap(),
    );
    slot.set(Arc::downgrade(&pool)).unwrap();
    let mut hs = Vec::new();
    for _ in 0..20 {
        pool.get_bulk(&mut hs, 30).unwrap();
        pool.put_bulk(&mut hs);
    }
    // 30 per burst, each with 4 nested calls (3 + 1).
    assert_eq!(calls.load(SeqCst), 20 * 30 * 5);
    pool.flush();
    assert_eq!(pool.available(), 64);
}

#[test]
fn threads_run_the_hook_once_per_put() {
    let (pool, calls) = counting_pool(512, 32);
    let pool = Arc::new(pool);
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let p = pool.clone();
            std::thread::spawn(move || {
                let mut c = LocalCache::new(p.clone());
                let mut hs = Vec::new();
                let mut puts = 0;
                for r in 0..rounds {
                    let n = 1 + (r * 7 + t) % 40;
                    if t == 0 {
                        p.get_bulk(&mut hs, n).unwrap();
                    } else {
                        c.get_bulk(&mut hs, n).unwrap();
                    }
                    for h in hs.iter_mut() {
                        assert_eq!(*p.get_ref(h), 0, "reset when put");
                        *p.get_mut(h) = DIRTY;
                    }
                    if t == 0 {
                        p.put_bulk(&mut hs);
                    } else {
                        c.put_bulk(&mut hs);
                    }
                    puts += n;
                }
                puts
            })
        })
        .collect();
    let puts: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(calls.load(SeqCst), puts);
    assert_whole_and_clean(&pool);
}

/// The table put of both identities with a hook, at every window shape: the hook runs once
/// per object put, none on a refused put (an empty slot, a foreign handle), and the object
/// comes back reset. (A run-time pool's table put folds the hook into its fused check's limit
/// and takes the hooked path after the refusal; a branded one tests the flag first.)
#[test]
fn table_puts_of_both_identities_run_the_hook_once_per_object() {
    fn run<B: idxpool::Brand>(pool: &Pool<u64, B>, calls: &AtomicUsize) {
        let mut c = pool.local_cache();
        for n in [1usize, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 100] {
            let mut t: Vec<Option<Handle<u64, B>>> = (0..n).map(|_| None).collect();
            for via_pool in [false, true] {
                c.get_into(&mut t).unwrap();
                for h in t.iter_mut().flatten() {
                    *pool.get_mut(h) = DIRTY;
                }
                let h = t[n / 2].take();
                let before = calls.load(SeqCst);
                let r = if via_pool {
                    pool.put_from(&mut t)
                } else {
                    c.put_from(&mut t)
                };
                assert!(
                    matches!(r, Err(PoolError::SlotEmpty { .. })),
                    "n={n}: {r:?}"
                );
                assert_eq!(
                    calls.load(SeqCst),
                    before,
                    "n={n}: a refused put runs no hook"
                );
                t[n / 2] = h;
                let r = if via_pool {
                    pool.put_from(&mut t)
                } else {
                    c.put_from(&mut t)
                };
                r.unwrap();
                assert_eq!(calls.load(SeqCst), before + n, "n={n}: once per object");
                assert!(t.iter().all(Option::is_none));
            }
        }
        pool.flush(); // the objects the pool's own puts left in this thread's cache
        let mut all: Vec<Option<Handle<u64, B>>> = (0..128).map(|_| None).collect();
        c.get_into(&mut all).unwrap();
        assert!(
            all.iter().flatten().all(|h| *pool.get_ref(h) == 0),
            "every object reset"
        );
        c.put_from(&mut all).unwrap();
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let hook = |calls: Arc<AtomicUsize>| {
        move |v: &mut u64| {
            *v = 0;
            calls.fetch_add(1, SeqCst);
        }
    };
    let rt = PoolBuilder::<u64>::with_default(128)
        .cache_size(16)
        .on_put(hook(calls.clone()))
        .build()
        .unwrap();
    run(&rt, &calls);
    // A foreign handle in a run-time pool's table: refused, no hook run.
    let other = PoolBuilder::<u64>::with_default(4).build().unwrap();
    let mut t: Vec<Option<Handle<u64>>> = (0..4).map(|_| None).collect();
    rt.get_into(&mut t).unwrap();
    let mine = t[2].replace(other.get().unwrap());
    let before = calls.load(SeqCst);
    let r = rt.put_from(&mut t);
    assert!(matches!(r, Err(PoolError::ForeignHandle { .. })), "{r:?}");
    assert_eq!(calls.load(SeqCst), before, "no hook on a refused put");
    other.put(t[2].take().unwrap());
    t[2] = mine;
    rt.put_from(&mut t).unwrap();
    PoolBuilder::<u64>::with_default(128)
        .cache_size(16)
        .on_put(hook(calls.clone()))
        .scoped(|p| run(&p, &calls))
        .unwrap();
}
