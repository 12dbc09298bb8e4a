//! A waker is user code, and a put that reaches the ring wakes waiters from inside its
//! adapter, after the objects moved but before the caller's `Vec` or table is emptied. A
//! waker that panicked unwound through that put (found by attack, session 8): the caller kept
//! handles of free objects, which the pool handed out again (two live `&mut T`: UB under
//! Miri), the other waiters of the round were never woken, and from a thread's exit flush (a
//! TLS destructor) the process aborted. The waker's panic is now contained where it is woken
//! (wait.rs, `Wakeup::wake_contained`): every put completes, every waiter is woken.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use idxpool::{Handle, LocalCache, PoolBuilder};

struct Boom;
impl Wake for Boom {
    fn wake(self: Arc<Self>) {
        panic!("this waker panics");
    }
}

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn boom() -> Waker {
    Waker::from(Arc::new(Boom))
}

#[test]
fn put_bulk_completes_when_a_waker_panics() {
    let pool = PoolBuilder::<u64>::with_default(1)
        .cache_size(0)
        .build()
        .unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 1).unwrap();
    let w = boom();
    let mut fut = Box::pin(pool.get_async());
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
    let r = catch_unwind(AssertUnwindSafe(|| pool.put_bulk(&mut hs)));
    assert!(r.is_ok(), "the put does not unwind");
    assert!(hs.is_empty(), "the Vec gave its handle up");
    drop(fut);
    assert_eq!(pool.in_use(), 0);
    let h = pool.get().unwrap();
    pool.put(h);
}

#[test]
fn put_from_completes_when_a_waker_panics() {
    let pool = PoolBuilder::<u64>::with_default(1)
        .cache_size(0)
        .build()
        .unwrap();
    let mut table: [Option<Handle<u64>>; 1] = [None];
    pool.get_into(&mut table).unwrap();
    let w = boom();
    let mut fut = Box::pin(pool.get_async());
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
    let r = catch_unwind(AssertUnwindSafe(|| pool.put_from(&mut table)));
    assert!(matches!(r, Ok(Ok(()))), "the put does not unwind");
    assert!(table[0].is_none(), "the slot gave its handle up");
    drop(fut);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn local_cache_overflow_completes_when_a_waker_panics() {
    let pool = PoolBuilder::<u64>::with_default(4)
        .cache_size(2)
        .build()
        .unwrap();
    let mut lc = LocalCache::new(&pool);
    let mut table: [Option<Handle<u64>>; 4] = Default::default();
    lc.get_into(&mut table).unwrap();
    let w = boom();
    let mut fut = Box::pin(pool.get_async());
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
    let r = catch_unwind(AssertUnwindSafe(|| lc.put_from(&mut table)));
    assert!(matches!(r, Ok(Ok(()))), "the put does not unwind");
    assert!(
        table.iter().all(Option::is_none),
        "every slot gave its handle up"
    );
    drop(fut);
    drop(lc);
    assert_eq!(pool.in_use(), 0);
}

/// The waiters woken in the same round as the panicking one are woken too.
#[test]
fn a_panicking_waker_does_not_swallow_the_others() {
    let pool = PoolBuilder::<u64>::with_default(2)
        .cache_size(0)
        .build()
        .unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let bad = boom();
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let good = Waker::from(count.clone());
    let mut f1 = Box::pin(pool.get_async());
    let mut f2 = Box::pin(pool.get_async());
    assert!(f1
        .as_mut()
        .poll(&mut Context::from_waker(&bad))
        .is_pending());
    assert!(f2
        .as_mut()
        .poll(&mut Context::from_waker(&good))
        .is_pending());
    pool.put_bulk(&mut hs); // two objects: both waiters are woken
    assert_eq!(count.0.load(SeqCst), 1, "the second waiter was woken");
    match f2.as_mut().poll(&mut Context::from_waker(&good)) {
        Poll::Ready(Ok(h)) => pool.put(h),
        other => panic!("the woken waiter is served: {other:?}"),
    }
    drop(f1);
    assert_eq!(pool.in_use(), 0);
}

/// A thread's exit flush (a TLS destructor) wakes a waiter whose waker panics: before the
/// fix, the process aborted ("thread local panicked on drop"), failing this whole test binary.
#[test]
fn a_thread_exit_that_wakes_a_panicking_waker_does_not_abort() {
    let pool = Arc::new(
        PoolBuilder::<u64>::with_default(4)
            .cache_size(4)
            .build()
            .unwrap(),
    );
    let p2 = pool.clone();
    let (filled, go) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let worker = std::thread::spawn(move || {
        let mut v = Vec::new();
        p2.get_bulk(&mut v, 4).unwrap();
        p2.put_bulk(&mut v); // four objects sit in this thread's cache
        filled.0.send(()).unwrap();
        go.1.recv().unwrap();
        // Exits: its cache goes to the ring from a TLS destructor, which wakes waiters.
    });
    filled.1.recv().unwrap();
    let w = boom();
    let mut fut = Box::pin(pool.get_async());
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
    go.0.send(()).unwrap();
    worker.join().expect("the worker exits cleanly");
    drop(fut);
    assert_eq!(pool.in_use(), 0, "the exit flush gave every object back");
}

/// A blocking waiter queued behind a panicking waker is served at once, not at its timeout.
#[test]
fn a_blocking_waiter_behind_a_panicking_waker_is_served() {
    let pool = Arc::new(
        PoolBuilder::<u64>::with_default(2)
            .cache_size(0)
            .build()
            .unwrap(),
    );
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let w = boom();
    let mut f1 = Box::pin(pool.get_async());
    assert!(f1.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
    let p2 = pool.clone();
    let (done, served) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = p2.get_wait(Duration::from_secs(600));
        let ok = r.is_ok();
        if let Ok(h) = r {
            p2.put(h);
        }
        done.send(ok).unwrap();
    });
    std::thread::sleep(Duration::from_millis(200)); // queued behind f1 (or served later: fine)
    pool.put_bulk(&mut hs);
    // A hang detector, not a timing assertion: a lost wake-up leaves the waiter parked for
    // its whole 600 s timeout.
    match served.recv_timeout(Duration::from_secs(120)) {
        Ok(ok) => assert!(ok, "the blocking waiter got an object"),
        Err(e) => panic!("the blocking waiter was not woken by the put: {e:?}"),
    }
    drop(f1);
    assert_eq!(pool.in_use(), 0);
}
