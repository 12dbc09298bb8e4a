//! Implicit per-thread caches: objects a thread holds in its cache go back to the ring when it
//! exits; caches of live threads are counted by `available()`.

use idxpool::{FlushPolicy, PoolBuilder};

idxpool::brand!(ExitPool);

#[test]
fn exiting_threads_leave_nothing_stranded() {
    let mut pool = PoolBuilder::<u64>::with_default(256)
        .cache_size(32)
        .build_named::<ExitPool>()
        .unwrap();
    for round in 0..20 {
        std::thread::scope(|s| {
            let mut joins = Vec::new();
            for t in 0..4 {
                let pool = &pool;
                joins.push(s.spawn(move || {
                    let mut v = Vec::new();
                    pool.get_bulk(&mut v, 10 + t).unwrap();
                    for h in v.iter_mut() {
                        *pool.get_mut(h) = round;
                    }
                    pool.put_bulk(&mut v);
                    // The thread's cache now holds objects; it exits without flushing.
                    assert!(pool.ring_count() < 256);
                }));
            }
            // A native join waits for the thread's TLS destructors, which flush its cache (the
            // end of a scope alone does not).
            for j in joins {
                j.join().unwrap();
            }
        });
        assert_eq!(
            pool.ring_count(),
            256,
            "round {round}: caches flushed at exit"
        );
        assert_eq!(pool.available(), 256);
    }
    let report = pool.audit().unwrap();
    assert_eq!(report.in_ring, 256);
    assert_eq!(report.in_use, 0);
}

#[test]
fn live_thread_caches_are_counted_and_flush_makes_them_reachable() {
    PoolBuilder::<u64>::with_default(64)
        .cache_size(16)
        .policy(FlushPolicy::Dpdk2607)
        .scoped(|pool| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            std::thread::scope(|s| {
                let pool2 = &pool;
                s.spawn(move || {
                    let pool = pool2;
                    let h = pool.get().unwrap(); // refills this thread's cache
                    pool.put(h);
                    done_tx.send(()).unwrap();
                    rx.recv().unwrap(); // hold the cache while the main thread looks
                    pool.flush();
                    done_tx.send(()).unwrap();
                    rx.recv().unwrap();
                });
                done_rx.recv().unwrap();
                assert_eq!(pool.available(), 64, "cache of the live thread is counted");
                assert!(pool.ring_count() < 64);
                let held = 64 - pool.ring_count();
                // This thread can only reach the ring.
                let mut c = pool.local_cache();
                let mut v = Vec::new();
                let err = c.get_bulk(&mut v, 64).unwrap_err();
                assert!(matches!(err, idxpool::PoolError::Exhausted { requested: 64, available } if available == 64 - held));
                tx.send(()).unwrap();
                done_rx.recv().unwrap(); // the other thread flushed
                c.get_bulk(&mut v, 64).unwrap();
                c.put_bulk(&mut v);
                tx.send(()).unwrap();
            });
        })
        .unwrap();
}

#[test]
fn dropping_a_pool_with_outstanding_handles_retires_its_brand() {
    idxpool::brand!(Retiring);
    let pool = PoolBuilder::<u64>::with_default(8)
        .build_named::<Retiring>()
        .unwrap();
    let h = pool.get().unwrap();
    drop(pool);
    let again = PoolBuilder::<u64>::with_default(8).build_named::<Retiring>();
    assert!(matches!(again, Err(idxpool::PoolError::BrandInUse { .. })));
    let _ = h.into_raw();

    idxpool::brand!(Reusable);
    let pool = PoolBuilder::<u64>::with_default(8)
        .build_named::<Reusable>()
        .unwrap();
    let h = pool.get().unwrap();
    pool.put(h);
    drop(pool);
    let again = PoolBuilder::<u64>::with_default(8).build_named::<Reusable>();
    assert!(again.is_ok(), "all objects home: the brand is free again");
}

#[test]
fn objects_are_dropped_once_with_the_pool() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Counted(#[allow(dead_code)] u64);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }
    PoolBuilder::<Counted>::with_fn(100, |i| Counted(i as u64))
        .scoped(|pool| {
            let h = pool.get().unwrap();
            pool.put(h);
        })
        .unwrap();
    assert_eq!(DROPS.load(Ordering::Relaxed), 100);
}

/// A thread with a small stack (32 KiB) takes its first implicit cache and a `LocalCache`:
/// a cache (8 KiB of entries inline) is made in place on the heap, never on the stack.
#[test]
fn a_thread_with_a_small_stack_takes_its_first_caches() {
    let pool = PoolBuilder::<u64>::with_default(1024)
        .cache_size(512)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(32 * 1024)
            .spawn_scoped(s, || {
                let h = pool.get().unwrap();
                pool.put(h);
                let mut c = idxpool::LocalCache::new(&pool);
                let h = c.get().unwrap();
                c.put(h);
            })
            .unwrap()
            .join()
            .unwrap();
    });
    assert_eq!(pool.in_use(), 0);
}
