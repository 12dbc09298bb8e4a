//! Loom models of the handle channel's close and waiting protocol (src/channel.rs): a send
//! racing the last sender's drop, a receiver parking while the last sender drops, an async
//! receive, the last receiver's drop racing a send, two receivers and one handle, and a
//! dropped future. Under `--cfg loom` the channel's queue is a loom mutex around a `VecDeque`
//! (crossbeam's atomics are not loom's), so these check the close flags, the waiter count,
//! the SeqCst fences and the wake-ups, not crossbeam's queue.
//!
//! Run with `scripts/loom.sh`. A lost wake-up shows as a deadlock (every thread parked), a
//! lost handle as a failed final count.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use idxpool::channel::{RecvError, TryRecvError};
use idxpool::{Backing, BackingPolicy, HandleChannel, PoolBuilder};
// The pool is held by a std `Arc` (what `PoolRef` admits); its count is not part of the
// protocol under test. The channel's halves share their state through loom's `Arc`.
use loom::thread;
use std::sync::Arc;

fn model(bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 10_000;
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        b.preemption_bound = bound;
    }
    let runs = std::sync::Arc::new(StdAtomicUsize::new(0));
    let r = runs.clone();
    b.check(move || {
        r.fetch_add(1, Relaxed);
        f()
    });
    println!(
        "loom explored {} executions (preemption bound {:?})",
        runs.load(Relaxed),
        b.preemption_bound
    );
}

fn pool<B: idxpool::NamedBrand>(capacity: u32) -> idxpool::Pool<u64, B> {
    PoolBuilder::<u64>::with_default(capacity)
        .cache_size(0)
        .backing(BackingPolicy::Require(Backing::Heap))
        .max_threads(1)
        .build_named::<B>()
        .unwrap()
}

idxpool::brand!(ChanLast);
idxpool::brand!(ChanPark);
idxpool::brand!(ChanAsync);
idxpool::brand!(ChanRxDrop);
idxpool::brand!(ChanTwo);
idxpool::brand!(ChanFuture);

#[test]
fn channel_send_then_last_sender_drop_vs_try_recv() {
    // The last handle is sent and the sender dropped while the receiver polls: it must get
    // the handle before (never instead of) the disconnect.
    model(None, || {
        let pool = Arc::new(pool::<ChanLast>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let t = thread::spawn(move || {
            tx.send(h).unwrap();
            drop(tx);
        });
        let mut got = 0;
        loop {
            match rx.try_recv() {
                Ok(h) => {
                    pool.put(h);
                    got += 1;
                }
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(got, 1);
        assert_eq!(pool.available(), 1);
    });
}

#[test]
fn channel_parked_receiver_vs_send_and_disconnect() {
    // A blocking receive parks while the handle is sent and the last sender drops: woken for
    // the handle, then for the disconnect (a lost wake-up deadlocks).
    model(Some(3), || {
        let pool = Arc::new(pool::<ChanPark>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let t = thread::spawn(move || {
            tx.send(h).unwrap();
        });
        let h = rx.recv().unwrap();
        pool.put(h);
        assert_eq!(rx.recv(), Err(RecvError));
        t.join().unwrap();
        assert_eq!(pool.available(), 1);
    });
}

#[test]
fn channel_async_receive_vs_send() {
    model(Some(3), || {
        let pool = Arc::new(pool::<ChanAsync>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let t = thread::spawn(move || tx.send(h).unwrap());
        let h = loom::future::block_on(rx.recv_async()).unwrap();
        pool.put(h);
        assert_eq!(loom::future::block_on(rx.recv_async()), Err(RecvError));
        t.join().unwrap();
    });
}

#[test]
fn channel_last_receiver_drop_vs_send() {
    // Whichever wins, the handle ends in the pool while the sender still lives: refused and
    // put back by the sender, drained by the receiver's drop, or, pushed after that drain,
    // given back by the sender itself (it re-reads the receiver count after its push).
    model(None, || {
        let pool = Arc::new(pool::<ChanRxDrop>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let p = pool.clone();
        let t = thread::spawn(move || {
            if let Err(e) = tx.send(h) {
                p.put(e.into_inner());
            }
            tx
        });
        drop(rx);
        let tx = t.join().unwrap();
        assert_eq!(
            pool.available(),
            1,
            "nothing stranded inside while a sender lives"
        );
        drop(tx);
    });
}

#[test]
fn channel_two_receivers_one_handle() {
    // Two blocked receivers, one handle, then the disconnect: exactly one gets it, both
    // return (wake-all: the one that loses the race parks again and sees the disconnect).
    model(Some(2), || {
        let pool = Arc::new(pool::<ChanTwo>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let (rx2, p) = (rx.clone(), pool.clone());
        let other = thread::spawn(move || rx2.recv().map(|h| p.put(h)).is_ok());
        let sender = thread::spawn(move || tx.send(h).unwrap());
        let mine = rx.recv().map(|h| pool.put(h)).is_ok();
        let theirs = other.join().unwrap();
        sender.join().unwrap();
        assert!(mine ^ theirs, "exactly one receiver got the handle");
        assert_eq!(pool.available(), 1);
    });
}

#[test]
fn channel_dropped_future_keeps_the_other_receiver_awake() {
    // A future registered as a waiter and dropped while the send happens: the blocked
    // receiver still gets the handle.
    model(Some(2), || {
        let pool = Arc::new(pool::<ChanFuture>(1));
        let (tx, rx) = HandleChannel::new(pool.clone()).unwrap();
        let h = pool.get().unwrap();
        let rx2 = rx.clone();
        let t = thread::spawn(move || {
            let waker = futures_noop_waker();
            let mut fut = pin!(rx2.recv_async());
            if let Poll::Ready(r) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                return r.ok();
            }
            None // dropped while pending
        });
        tx.send(h).unwrap();
        let got = match t.join().unwrap() {
            Some(h) => h,
            None => rx.recv().unwrap(),
        };
        pool.put(got);
        assert_eq!(pool.available(), 1);
    });
}

fn futures_noop_waker() -> std::task::Waker {
    use std::task::{RawWaker, RawWakerVTable, Waker};
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: every function of the vtable ignores its data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

idxpool::brand!(RingAbandon);

#[test]
fn handle_ring_produce_then_drop_vs_try_consume() {
    // The SPSC ring's "other half gone": the last produce is consumed before Disconnected.
    model(None, || {
        let pool = Arc::new(pool::<RingAbandon>(1));
        let (mut tx, mut rx) =
            idxpool::HandleRing::new(pool.clone(), 2, idxpool::handle_ring::Zeroing::Immediate)
                .unwrap();
        let h = pool.get().unwrap();
        let t = thread::spawn(move || {
            tx.produce(h).unwrap();
            drop(tx);
        });
        let mut got = 0;
        loop {
            match rx.try_consume() {
                Ok(h) => {
                    pool.put(h);
                    got += 1;
                }
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(got, 1);
    });
}
