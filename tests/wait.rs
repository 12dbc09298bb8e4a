//! Waiting on exhaustion: blocking and async gets woken by puts and flushes,
//! timeouts, cancellation (no object and no wake-up lost), FIFO order, and short stress runs.
//! No test asserts on a duration: sleeps only make the interesting interleaving likely.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use idxpool::{LocalCache, Pool, PoolBuilder, PoolError};

const LONG: Duration = Duration::from_secs(60);

fn pool(cap: u32, cache: u32) -> Pool<u64> {
    PoolBuilder::<u64>::with_default(cap)
        .cache_size(cache)
        .build()
        .unwrap()
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
fn counting() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}
fn woken(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

fn poll<F: Future + Unpin>(f: &mut F, w: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(w))
}

#[test]
fn blocking_waiter_is_woken_by_a_put() {
    for cache in [0, 4] {
        let pool = pool(8, cache);
        let mut all = Vec::new();
        pool.get_bulk(&mut all, 8).unwrap();
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                start.wait();
                let h = pool.get_wait(LONG).unwrap();
                pool.put(h);
                pool.flush();
            });
            start.wait();
            std::thread::sleep(Duration::from_millis(20));
            // Uncached pools put into the ring; cached ones flush when the cache overflows.
            pool.put_bulk(&mut all);
            pool.flush();
            t.join().unwrap();
        });
        assert!(pool.is_full(), "cache {cache}: no object lost");
    }
}

#[test]
fn waiter_is_woken_by_another_threads_flush() {
    // The objects sit in the putter's cache until it flushes: the flush wakes the waiter.
    let pool = pool(16, 8);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 16).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let h = pool.get_wait(LONG).unwrap();
            pool.put(h);
        });
        let mut few: Vec<_> = all.drain(..4).collect();
        let p = &pool;
        let putter = s.spawn(move || {
            let pool = p;
            // Fewer than the fill limit: they stay in this thread's cache.
            pool.put_bulk(&mut few);
            rx.recv().unwrap();
            pool.flush(); // now they reach the ring
            rx.recv().unwrap();
        });
        std::thread::sleep(Duration::from_millis(20));
        tx.send(()).unwrap();
        waiter.join().unwrap();
        tx.send(()).unwrap();
        putter.join().unwrap();
    });
    pool.put_bulk(&mut all);
    assert!(pool.is_full());
}

#[test]
fn waiter_is_woken_by_a_thread_exit_and_a_local_cache_drop() {
    let pool = pool(16, 8);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 16).unwrap();
    std::thread::scope(|s| {
        let w1 = s.spawn(|| pool.get_wait(LONG).unwrap());
        let mut two: Vec<_> = all.drain(..2).collect();
        // This thread's cache holds them until the thread exits (flush at exit).
        let p = &pool;
        s.spawn(move || p.put_bulk(&mut two)).join().unwrap();
        let h = w1.join().unwrap();
        pool.put(h);
        let w2 = s.spawn(|| pool.get_wait(LONG).unwrap());
        let mut local = LocalCache::new(&pool);
        let mut three: Vec<_> = all.drain(..3).collect();
        local.put_bulk(&mut three);
        std::thread::sleep(Duration::from_millis(10));
        drop(local); // flushes into the ring
        pool.put(w2.join().unwrap());
    });
    pool.put_bulk(&mut all);
    pool.flush();
    assert!(pool.is_full());
}

#[test]
fn timeouts_take_nothing() {
    let pool = pool(4, 0);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 4).unwrap();
    let e = pool.get_wait(Duration::from_millis(5)).unwrap_err();
    assert!(matches!(e, PoolError::Timeout { requested: 1, .. }), "{e}");
    assert!(e.to_string().contains("timed out"));
    let e = pool.get_wait(Duration::ZERO).unwrap_err();
    assert!(matches!(e, PoolError::Timeout { .. }));
    let mut out = Vec::new();
    let e = pool
        .get_bulk_wait(&mut out, 2, Duration::from_millis(5))
        .unwrap_err();
    assert!(matches!(e, PoolError::Timeout { requested: 2, .. }));
    assert!(out.is_empty());
    // A request no wait can serve fails at once.
    let e = pool.get_bulk_wait(&mut out, 5, LONG).unwrap_err();
    assert!(matches!(e, PoolError::Exhausted { requested: 5, .. }));
    // Some free but not enough: the bulk waits, then times out, taking nothing.
    pool.put(all.pop().unwrap());
    let e = pool
        .get_bulk_wait(&mut out, 2, Duration::from_millis(5))
        .unwrap_err();
    assert!(matches!(e, PoolError::Timeout { .. }));
    assert!(out.is_empty());
    assert_eq!(pool.available(), 1);
    pool.put_bulk(&mut all);
    // A pool with objects answers at once.
    let h = pool.get_wait(Duration::ZERO).unwrap();
    pool.put(h);
    pool.get_bulk_wait(&mut out, 4, Duration::ZERO).unwrap();
    pool.put_bulk(&mut out);
    assert!(pool.is_full());
}

#[test]
fn bulk_waiter_gets_all_at_once() {
    let pool = pool(8, 0);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 8).unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut out = Vec::new();
            pool.get_bulk_wait(&mut out, 5, LONG).unwrap();
            out
        });
        for h in all.drain(..) {
            std::thread::sleep(Duration::from_millis(1));
            pool.put(h);
        }
        let mut out = w.join().unwrap();
        assert_eq!(out.len(), 5);
        pool.put_bulk(&mut out);
    });
    assert!(pool.is_full());
}

#[test]
fn futures_are_woken_in_fifo_order() {
    let pool = pool(3, 0);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 3).unwrap();
    let ws: Vec<_> = (0..3).map(|_| counting()).collect();
    let mut fs: Vec<_> = (0..3).map(|_| pool.get_async()).collect();
    for (f, (_, w)) in fs.iter_mut().zip(&ws) {
        assert!(poll(f, w).is_pending());
    }
    for k in 0..3 {
        pool.put(all.pop().unwrap());
        let counts: Vec<_> = ws.iter().map(|(c, _)| woken(c)).collect();
        let expect: Vec<_> = (0..3).map(|i| usize::from(i <= k)).collect();
        assert_eq!(counts, expect, "put {k} wakes waiter {k} only");
    }
    for (f, (_, w)) in fs.iter_mut().zip(&ws) {
        let Poll::Ready(Ok(h)) = poll(f, w) else {
            panic!("woken future not ready")
        };
        all.push(h);
    }
    pool.put_bulk(&mut all);
    assert!(pool.is_full());
}

#[test]
fn a_dropped_woken_future_passes_its_wake_up_on() {
    let pool = pool(1, 0);
    let h = pool.get().unwrap();
    let (c1, w1) = counting();
    let (c2, w2) = counting();
    let mut f1 = pool.get_async();
    let mut f2 = pool.get_async();
    assert!(poll(&mut f1, &w1).is_pending());
    assert!(poll(&mut f2, &w2).is_pending());
    pool.put(h);
    assert_eq!(
        (woken(&c1), woken(&c2)),
        (1, 0),
        "the first waiter is woken"
    );
    drop(f1); // cancelled after its wake-up: the object and the wake-up go to f2
    assert_eq!(woken(&c2), 1, "wake-up passed on");
    let Poll::Ready(Ok(h)) = poll(&mut f2, &w2) else {
        panic!("f2 not served")
    };
    pool.put(h);
    assert!(pool.is_full());
    // A future dropped before it was ever woken takes nothing either.
    let h = pool.get().unwrap();
    let mut f3 = pool.get_async();
    assert!(poll(&mut f3, &w1).is_pending());
    drop(f3);
    pool.put(h);
    assert!(pool.is_full());
    // And one never polled registers nothing.
    drop(pool.get_async());
    let h = pool.get_wait(Duration::ZERO).unwrap();
    pool.put(h);
}

#[test]
fn a_woken_bulk_waiter_that_cannot_be_served_passes_the_wake_up_back() {
    // Bulk waiter (3) first, single waiter second: one object arrives. The bulk waiter is
    // woken, cannot take 3, and the single waiter behind it gets the object.
    let pool = pool(3, 0);
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 3).unwrap();
    std::thread::scope(|s| {
        let bulk = s.spawn(|| {
            let mut out = Vec::new();
            pool.get_bulk_wait(&mut out, 3, LONG).map(|_| out)
        });
        std::thread::sleep(Duration::from_millis(20));
        let (c, w) = counting();
        let mut f = pool.get_async();
        assert!(poll(&mut f, &w).is_pending());
        pool.put(all.pop().unwrap());
        // Not a duration assert: wait for the hand-over to happen, however long it takes.
        while woken(&c) == 0 {
            std::thread::yield_now();
        }
        let Poll::Ready(Ok(h)) = poll(&mut f, &w) else {
            panic!("the single waiter is served")
        };
        all.push(h);
        pool.put_bulk(&mut all);
        let mut out = bulk.join().unwrap().unwrap();
        assert_eq!(out.len(), 3);
        pool.put_bulk(&mut out);
    });
    assert!(pool.is_full());
}

#[test]
fn many_waiters_many_putters_blocking() {
    // More threads than objects, each thread getting (waiting) and putting; with caches the
    // objects a thread holds in its cache reach the others at its next flush or its exit.
    for cache in [0, 2] {
        let pool = pool(4, cache);
        let threads = 6;
        let rounds = if cfg!(miri) { 5 } else { 300 };
        std::thread::scope(|s| {
            for t in 0..threads {
                let pool = &pool;
                s.spawn(move || {
                    let mut held = Vec::new();
                    for r in 0..rounds {
                        if (t + r) % 5 == 0 {
                            pool.get_bulk_wait(&mut held, 2, LONG).unwrap();
                        } else {
                            held.push(pool.get_wait(LONG).unwrap());
                        }
                        *pool.get_mut(&mut held[0]) += 1;
                        pool.put_bulk(&mut held);
                        if cache > 0 && r % 7 == 0 {
                            pool.flush();
                        }
                    }
                });
            }
        });
        assert!(pool.is_full(), "cache {cache}");
    }
}

#[test]
fn many_async_waiters_on_tokio() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let pool = Arc::new(pool(2, 0));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..8 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                for r in 0..200 {
                    if (t + r) % 9 == 0 {
                        // Cancelled by a timeout now and then: nothing may be lost.
                        if let Ok(h) =
                            tokio::time::timeout(Duration::from_micros(50), pool.get_async()).await
                        {
                            pool.put(h.unwrap());
                        }
                        continue;
                    }
                    let h = pool.get_async().await.unwrap();
                    tokio::task::yield_now().await;
                    pool.put(h);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert!(pool.is_full());
}

#[test]
fn async_waiter_woken_across_threads() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let pool = Arc::new(pool(1, 0));
    let h = pool.get().unwrap();
    let p2 = pool.clone();
    let putter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        p2.put(h);
    });
    let h = rt.block_on(pool.get_async()).unwrap();
    putter.join().unwrap();
    pool.put(h);
    assert!(pool.is_full());
}

#[test]
fn single_producer_ring_wakes_waiters_too() {
    // A single-producer ring moves prod.head with a plain store: the check for waiters issues
    // a SeqCst fence first (ring.rs `has_waiters`). One putter thread at a time, as the mode
    // requires.
    // SAFETY: only the putter thread below puts (no cache: every put reaches the ring); the
    // main thread only gets.
    let pool = unsafe {
        PoolBuilder::<u64>::with_default(2)
            .cache_size(0)
            .ring_modes(true, false)
    }
    .build()
    .unwrap();
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 2).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut held = all;
    std::thread::scope(|s| {
        let p = &pool;
        s.spawn(move || {
            for h in rx {
                p.put(h);
            }
        });
        for _ in 0..200 {
            tx.send(held.pop().unwrap()).unwrap();
            if held.is_empty() {
                held.push(pool.get_wait(LONG).unwrap());
            }
        }
        drop(tx);
    });
    // The putter is gone: this thread may put now.
    pool.put_bulk(&mut held);
    assert!(pool.is_full());
}

/// A future that was woken and is never polled again (abandoned in a task, or passed to
/// `mem::forget`) holds its wake-up: the waiters behind it wait for the next puts. It must
/// not hold them back for good: a put counts the objects owed to a woken waiter only until
/// the put after the one that follows its wake-up (a waiter that retries at all does so by
/// then), so later puts wake the waiters behind it.
#[test]
fn a_woken_future_never_polled_again_holds_back_no_later_waiter() {
    let pool = pool(1, 0);
    let h = pool.get().unwrap();
    let (_ca, wa) = counting();
    let (cb, wb) = counting();
    let mut abandoned = Box::pin(pool.get_async());
    assert!(abandoned
        .as_mut()
        .poll(&mut Context::from_waker(&wa))
        .is_pending());
    let mut behind = pool.get_async();
    assert!(poll(&mut behind, &wb).is_pending());
    pool.put(h); // wakes the first waiter, which never retries
    assert_eq!(woken(&cb), 0, "FIFO: the first waiter is woken first");
    // Gets that do not wait take the object and put it back: each put reaches the ring.
    let mut puts = 1;
    while woken(&cb) == 0 && puts < 10 {
        let h = pool.get().unwrap();
        pool.put(h);
        puts += 1;
    }
    assert_eq!(woken(&cb), 1, "the waiter behind is woken by a later put");
    assert!(puts <= 3, "within two puts after the first ({puts} puts)");
    let Poll::Ready(Ok(h)) = poll(&mut behind, &wb) else {
        panic!("the waiter behind is not served")
    };
    pool.put(h);
    std::mem::forget(abandoned);
    assert!(pool.is_full());
}

/// The same abandoned future in front of a blocking waiter, and only one put: no later put
/// comes to age its wake-up, and the blocking waiter must still be served (a parked waiter
/// retries from the ring now and then, as a spurious wake-up would make it). Before, this
/// `get_wait(Duration::MAX)` slept for ever beside a free object in the ring. A hang fails
/// the test (the waiter runs on a thread of its own) instead of hanging the run.
#[test]
fn a_blocking_waiter_behind_an_abandoned_woken_future_is_served() {
    let pool = Arc::new(pool(1, 0));
    let h = pool.get().unwrap();
    let (_c, w) = counting();
    let mut abandoned = Box::pin(pool.get_async());
    assert!(abandoned
        .as_mut()
        .poll(&mut Context::from_waker(&w))
        .is_pending());
    let (done, wait) = std::sync::mpsc::channel();
    let p = pool.clone();
    std::thread::spawn(move || {
        let r = p.get_wait(Duration::MAX).map(|h| p.put(h));
        let _ = done.send(r.is_ok());
    });
    std::thread::sleep(Duration::from_millis(50)); // likely registered behind it by now
    pool.put(h); // wakes the abandoned future only
    assert_eq!(
        wait.recv_timeout(LONG),
        Ok(true),
        "the blocking waiter is served"
    );
    std::mem::forget(abandoned);
    assert!(pool.is_full());
}

/// A waiting future and the task that puts the object back, on one thread (a single-threaded
/// runtime), with the default cache: the put lands in that thread's cache, and only puts that
/// reach the common ring wake waiters. Before, the future was never woken (the object sat in
/// the cache of the very thread that waited for it). Now a thread whose future waits puts
/// through to the ring (its cache is bypassed) until no waiter is left. A hang fails the test
/// instead of hanging the run.
#[test]
fn a_future_is_woken_by_a_put_from_its_own_thread() {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let pool = PoolBuilder::<u64>::with_default(1024).build().unwrap();
        assert!(pool.cache_size() > 0);
        let mut all = Vec::new();
        pool.get_bulk(&mut all, 1024).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let waiter = async { pool.get_async().await.unwrap() };
            let putter = async {
                tokio::task::yield_now().await;
                pool.put(all.pop().unwrap());
            };
            let (h, ()) = tokio::join!(waiter, putter);
            pool.put(h);
        });
        // Once nobody waits, the thread's cache serves again.
        let h = pool.get().unwrap();
        pool.put(h);
        pool.put_bulk(&mut all);
        let _ = done.send(pool.is_full() || pool.available() == 1024);
    });
    assert_eq!(wait.recv_timeout(LONG), Ok(true), "the future is served");
}

/// With the `stats` feature: an object a waiting get takes from the ring after its wait is
/// counted as got, as every other get's (it went uncounted: the counts of gets fell short of
/// the puts by every object served after a wait). Its first try, which found the pool empty,
/// stays counted as a failed get.
#[cfg(feature = "stats")]
#[test]
fn objects_served_after_a_wait_are_counted() {
    for cache in [0, 4] {
        let pool = pool(8, cache);
        let mut all = Vec::new();
        pool.get_bulk(&mut all, 8).unwrap();
        let before = pool.stats();
        std::thread::scope(|s| {
            let mut back = std::mem::take(&mut all);
            let p = &pool;
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                p.put_bulk(&mut back);
                p.flush();
            });
            let h = pool.get_wait(LONG).unwrap();
            let mut b = Vec::new();
            pool.get_bulk_wait(&mut b, 2, LONG).unwrap();
            pool.put(h);
            pool.put_bulk(&mut b);
        });
        pool.flush();
        let after = pool.stats();
        assert_eq!(
            after.get_success_objs - before.get_success_objs,
            3,
            "cache {cache}: {after}"
        );
    }
}

/// The pin of a waiting future's thread cache meets a waker (user code) that puts on that
/// thread while the pin flushes the cache: the flush wakes waiters, and the waker's put went
/// into the cache after it was emptied and before the pin, which then pinned a cache holding
/// an object (a fill limit of 0 under a length of 1: later one-slot puts appended past the
/// cache's array). The cache is emptied, pinned, and only then are the waiters woken; the
/// audit sees every cache within its threshold.
#[test]
fn a_waker_that_puts_during_the_pin_leaves_the_cache_within_its_limit() {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    struct PutOnWake(
        Arc<Pool<u64>>,
        std::sync::Mutex<Option<idxpool::Handle<u64>>>,
    );
    impl Wake for PutOnWake {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref()
        }
        fn wake_by_ref(self: &Arc<Self>) {
            if let Some(h) = self.1.lock().unwrap().take() {
                self.0.put(h)
            }
        }
    }
    let cap = 64u32;
    let mut pool = Arc::new(pool(cap, 4));
    let mut held = Vec::new();
    pool.get_bulk(&mut held, cap as usize).unwrap();
    let mut fut = Box::pin(pool.get_async());
    // The first poll on another thread: it registers (and pins that thread's cache).
    fut = std::thread::scope(|s| {
        s.spawn(move || {
            let w = Waker::from(Arc::new(Noop));
            assert!(fut.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
            fut
        })
        .join()
        .unwrap()
    });
    pool.put(held.pop().unwrap()); // this thread's cache holds one object
    let w = Waker::from(Arc::new(PutOnWake(
        pool.clone(),
        std::sync::Mutex::new(held.pop()),
    )));
    // The second poll here: the pin's flush wakes the future, whose waker puts here.
    let h = match fut.as_mut().poll(&mut Context::from_waker(&w)) {
        Poll::Ready(Ok(h)) => h,
        other => panic!("not served: {other:?}"),
    };
    drop((fut, w));
    held.push(h);
    for _ in 0..20 {
        let mut t = [held.pop()];
        pool.put_from(&mut t).unwrap();
    }
    Arc::get_mut(&mut pool)
        .unwrap()
        .audit()
        .expect("every cache within its threshold");
    for h in held.drain(..) {
        let mut t = [Some(h)];
        pool.put_from(&mut t).unwrap();
    }
    assert_eq!(pool.in_use(), 0);
    Arc::get_mut(&mut pool).unwrap().audit().unwrap();
}
