//! The handle channel: close from either side, waiting receives (blocking, timed, async),
//! bulk and burst, nothing lost when a side drops with handles inside, foreign handles
//! refused. Small sizes under Miri (scripts/miri.sh).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use idxpool::channel::{RecvError, RecvTimeoutError, SendBulkError, SendError, TryRecvError};
use idxpool::{HandleChannel, PacketBuf, Pool, PoolBuilder};

const N: u32 = if cfg!(miri) { 16 } else { 1024 };
/// A generous bound for "this thread must finish": a hang fails instead of stalling the run.
const LONG: Duration = Duration::from_secs(60);

fn pool(n: u32) -> Arc<Pool<u64>> {
    Arc::new(
        PoolBuilder::<u64>::with_default(n)
            .cache_size(0)
            .build()
            .unwrap(),
    )
}

/// Runs `f` on a thread and fails the test if it does not finish within `LONG`.
fn finishes<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(LONG).expect("hung")
}

struct ThreadWaker(thread::Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor: polls `fut` on this thread, parking between polls.
fn block_on<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

#[test]
fn receivers_drain_then_see_the_disconnect() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let tx2 = tx.clone();
    tx.send(p.get().unwrap()).unwrap();
    tx2.send(p.get().unwrap()).unwrap();
    drop(tx);
    p.put(rx.try_recv().unwrap()); // a sender remains
    drop(tx2);
    assert!(!rx.channel().is_empty());
    let h = rx.recv().unwrap();
    p.put(h);
    assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Disconnected);
    assert_eq!(rx.recv().unwrap_err(), RecvError);
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(1)).unwrap_err(),
        RecvTimeoutError::Disconnected
    );
    assert_eq!(p.in_use(), 0);
}

#[test]
fn empty_is_not_disconnected() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(5)).unwrap_err(),
        RecvTimeoutError::Timeout
    );
    let mut out = Vec::new();
    assert_eq!(rx.try_recv_burst(&mut out, 4), Err(TryRecvError::Empty));
    assert_eq!(
        rx.recv_burst_timeout(&mut out, 4, Duration::from_millis(1)),
        Err(RecvTimeoutError::Timeout)
    );
    assert!(out.is_empty());
    drop(tx);
    assert_eq!(
        rx.try_recv_burst(&mut out, 4),
        Err(TryRecvError::Disconnected)
    );
}

#[test]
fn a_blocked_receiver_wakes_at_the_last_senders_drop() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let tx2 = tx.clone();
    let waiting = thread::spawn(move || rx.recv().map(|h| p.put(h)));
    thread::sleep(Duration::from_millis(20)); // likely parked by now; correct either way
    drop(tx);
    drop(tx2);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    thread::spawn(move || done_tx.send(waiting.join().unwrap()).unwrap());
    assert_eq!(done_rx.recv_timeout(LONG).expect("hung"), Err(RecvError));
}

#[test]
fn a_blocked_receiver_wakes_at_a_send_and_at_close() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let rx2 = rx.clone();
    let pp = p.clone();
    let got = finishes(move || {
        let t = thread::spawn(move || rx2.recv().map(|h| pp.put(h)).is_ok());
        thread::sleep(Duration::from_millis(10));
        tx.send(p.get().unwrap()).unwrap();
        let first = t.join().unwrap();
        // close from a receiver: a blocked receiver wakes, later sends come back.
        let rx3 = rx.clone();
        let t = thread::spawn(move || rx3.recv());
        thread::sleep(Duration::from_millis(10));
        rx.close();
        let second = t.join().unwrap();
        let back = tx.send(p.get().unwrap()).unwrap_err();
        assert!(matches!(back, SendError::Disconnected(_)));
        p.put(back.into_inner());
        assert!(rx.channel().is_closed() && rx.channel().is_disconnected());
        (first, second, p.in_use())
    });
    assert_eq!(got, (true, Err(RecvError), 0));
}

#[test]
fn close_keeps_what_is_inside() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    tx.send(p.get().unwrap()).unwrap();
    rx.close();
    let back = tx.send(p.get().unwrap()).unwrap_err();
    assert!(matches!(back, SendError::Disconnected(_)));
    p.put(back.into_inner());
    let h = rx.try_recv().unwrap();
    p.put(h);
    assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Disconnected);
    let mut v = vec![p.get().unwrap()];
    assert_eq!(tx.send_bulk(&mut v), Err(SendBulkError::Disconnected));
    assert_eq!(v.len(), 1);
    p.put_bulk(&mut v);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn async_receive_woken_by_send_and_by_disconnect() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let pp = p.clone();
    let r = finishes(move || {
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            tx.send(pp.get().unwrap()).unwrap();
            thread::sleep(Duration::from_millis(10));
            drop(tx);
        });
        let h = block_on(rx.recv_async()).unwrap();
        p.put(h);
        let end = block_on(rx.recv_async());
        sender.join().unwrap();
        (end, p.in_use())
    });
    assert_eq!(r, (Err(RecvError), 0));
}

#[test]
fn a_dropped_future_loses_no_handle_and_no_wake_up() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    {
        let mut fut = pin!(rx.recv_async());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    } // dropped while registered
    let rx2 = rx.clone();
    let pp = p.clone();
    let r = finishes(move || {
        let t = thread::spawn(move || rx2.recv().map(|h| pp.put(h)).is_ok());
        thread::sleep(Duration::from_millis(10));
        tx.send(p.get().unwrap()).unwrap();
        (t.join().unwrap(), p)
    });
    assert!(r.0);
    assert_eq!(r.1.in_use(), 0);
    drop(rx);
}

#[test]
fn last_receiver_gone_sends_give_the_handle_back_and_inside_goes_home() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let rx2 = rx.clone();
    for _ in 0..3 {
        tx.send(p.get().unwrap()).unwrap();
    }
    drop(rx);
    assert_eq!(p.in_use(), 3, "a receiver remains");
    drop(rx2);
    assert_eq!(
        p.in_use(),
        0,
        "the last receiver gave the handles inside back"
    );
    let h = p.get().unwrap();
    let back = tx.send(h).unwrap_err();
    assert!(matches!(back, SendError::Disconnected(_)));
    assert_eq!(p.in_use(), 1);
    p.put(back.into_inner());
    assert!(tx.channel().is_closed());
}

#[test]
fn channel_dropped_full_gives_everything_back() {
    let p = pool(N);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, N as usize).unwrap();
    tx.send_bulk(&mut hs).unwrap(); // every handle of the pool in flight at once
    assert!(hs.is_empty());
    assert_eq!(tx.channel().len(), N as usize);
    drop(tx); // disconnected, still holding N
    assert_eq!(p.in_use(), N as usize);
    drop(rx);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn senders_dropped_last_also_give_everything_back() {
    let p = pool(8);
    let (tx, rx) = HandleChannel::new(&*p).unwrap();
    drop(rx);
    // A send racing the last receiver's drop may land inside: model it by a send that
    // passed the check (simulated: the receiver count is re-read only at the send). Here the
    // plain case: everything refused, nothing inside.
    let h = p.get().unwrap();
    p.put(tx.send(h).unwrap_err().into_inner());
    drop(tx);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn foreign_handles_are_refused_typed_and_untouched() {
    let a = pool(8);
    let b = pool(8);
    let (tx, rx) = HandleChannel::new(a.clone()).unwrap();
    let hb = b.get().unwrap();
    let back = tx.send(hb).unwrap_err();
    assert!(matches!(back, SendError::ForeignHandle(_)));
    assert_eq!(format!("{back}"), "sending another pool's handle");
    b.put(back.into_inner());
    let mut v = vec![a.get().unwrap(), b.get().unwrap(), a.get().unwrap()];
    assert_eq!(
        tx.send_bulk(&mut v),
        Err(SendBulkError::ForeignHandle { index: 1 })
    );
    assert_eq!(v.len(), 3, "nothing sent");
    let hb = v.remove(1);
    b.put(hb);
    tx.send_bulk(&mut v).unwrap();
    let mut out = Vec::new();
    assert_eq!(rx.try_recv_burst(&mut out, 8), Ok(2));
    a.put_bulk(&mut out);
    assert_eq!((a.in_use(), b.in_use()), (0, 0));
}

#[test]
fn bursts_and_the_iterator() {
    let p = pool(16);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, 10).unwrap();
    tx.send_bulk(&mut hs).unwrap();
    let mut out = Vec::new();
    assert_eq!(rx.recv_burst(&mut out, 4), Ok(4));
    assert_eq!(rx.try_recv_burst(&mut out, 4), Ok(4));
    assert_eq!(rx.recv_burst_timeout(&mut out, 4, LONG), Ok(2));
    assert_eq!(rx.recv_burst(&mut out, 0), Ok(0));
    assert_eq!(out.len(), 10);
    tx.send_bulk(&mut out).unwrap();
    drop(tx);
    let n = rx.iter().map(|h| p.put(h)).count();
    assert_eq!(n, 10);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn packet_buffers_travel_with_their_length() {
    let p = Arc::new(PoolBuilder::packet_bufs(8, 256, 64).build().unwrap());
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let mut g = p.get_pooled().unwrap();
    g.extend_from_slice(b"datagram").unwrap();
    tx.send(g.into_handle()).unwrap();
    let h = rx.recv().unwrap();
    let b: &PacketBuf = p.get_ref(&h);
    assert_eq!((b.as_slice(), b.headroom()), (&b"datagram"[..], 64));
    p.put(h);
}

#[test]
fn sized_to_the_pools_maximum() {
    let p = Arc::new(
        PoolBuilder::<u64>::with_default(4)
            .max_capacity(12)
            .cache_size(0)
            .build()
            .unwrap(),
    );
    let (tx, _rx) = HandleChannel::new(p.clone()).unwrap();
    p.grow(8).unwrap();
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, 12).unwrap();
    tx.send_bulk(&mut hs).unwrap();
    assert_eq!(tx.channel().len(), 12);
}

#[test]
fn many_producers_one_consumer_order_per_sender_and_sum() {
    let producers: u64 = if cfg!(miri) { 2 } else { 8 };
    let per: u64 = if cfg!(miri) { 20 } else { 5_000 };
    let p = pool(N);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let ts: Vec<_> = (0..producers)
        .map(|k| {
            let (tx, p) = (tx.clone(), p.clone());
            thread::spawn(move || {
                for i in 0..per {
                    let mut h = p.get_wait(LONG).unwrap();
                    *p.get_mut(&mut h) = k << 32 | i;
                    tx.send(h).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let (sum, n) = finishes(move || {
        let mut next = vec![0u64; producers as usize];
        let (mut sum, mut n) = (0u64, 0u64);
        let mut out = Vec::new();
        while rx.recv_burst(&mut out, 32).is_ok() {
            for h in out.drain(..) {
                let v = *p.get_ref(&h);
                let (k, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                assert_eq!(i, next[k], "FIFO per sender");
                next[k] += 1;
                sum += i;
                n += 1;
                p.put(h);
            }
        }
        assert_eq!(p.in_use(), 0);
        (sum, n)
    });
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(n, producers * per);
    assert_eq!(sum, producers * per * (per - 1) / 2);
}

#[test]
fn many_producers_many_consumers_conserve() {
    let per: u64 = if cfg!(miri) { 10 } else { 5_000 };
    let p = pool(N);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let prods: Vec<_> = (0..3)
        .map(|_| {
            let (tx, p) = (tx.clone(), p.clone());
            thread::spawn(move || {
                for _ in 0..per {
                    tx.send(p.get_wait(LONG).unwrap()).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let cons: Vec<_> = (0..2)
        .map(|_| {
            let (rx, p) = (rx.clone(), p.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while let Ok(h) = rx.recv_timeout(LONG) {
                    p.put(h);
                    n += 1;
                }
                n
            })
        })
        .collect();
    drop(rx);
    prods.into_iter().for_each(|t| t.join().unwrap());
    let total: u64 = finishes(move || cons.into_iter().map(|t| t.join().unwrap()).sum());
    assert_eq!(total, 3 * per);
    assert_eq!(p.in_use(), 0);
}
