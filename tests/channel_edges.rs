//! The handle channel against what a caller can do at the edges: a send racing the last
//! receiver's drop (nothing may stay stranded inside while senders live), a waker (user code)
//! that panics inside a send or the last sender's drop (contained, as the pool's own waiting
//! get contains it: never an unwind out of a send that delivered, never an abort), and send
//! bursts of handles of several pools. Small sizes under Miri.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::thread;

use idxpool::channel::{SendBulkError, SendError};
use idxpool::{HandleChannel, Pool, PoolBuilder};

/// Runs the tests of this binary one at a time: one of them forks, and a child forked while
/// another test's thread holds a lock of the runtime (the panic output's, the allocator's)
/// would wait for it for ever.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool(n: u32) -> Arc<Pool<u64>> {
    Arc::new(
        PoolBuilder::<u64>::with_default(n)
            .cache_size(0)
            .build()
            .unwrap(),
    )
}

struct Boom;
impl Wake for Boom {
    fn wake(self: Arc<Self>) {
        panic!("this waker panics");
    }
}

/// A send whose check saw a receiver, racing that receiver's drop: the handle it pushes after
/// the receiver's drain must not stay inside while senders live (the pool would count it in
/// use for as long as the sender lives: a producer that keeps its sender loses it to the
/// program). Either the drain sees the push or the sender sees the drop and gives it back.
#[test]
fn a_send_racing_the_last_receivers_drop_strands_nothing() {
    let _serial = serial();
    let rounds = if cfg!(miri) { 20 } else { 3000 };
    let p = pool(4);
    for round in 0..rounds {
        let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
        let go = Arc::new(std::sync::Barrier::new(2));
        let (pp, g) = (p.clone(), go.clone());
        let sender = thread::spawn(move || {
            g.wait();
            loop {
                // Empty while the channel holds all four (the receiver takes nothing).
                let Ok(h) = pp.get() else {
                    thread::yield_now();
                    continue;
                };
                match tx.send(h) {
                    Ok(()) => {}
                    Err(e) => {
                        pp.put(e.into_inner());
                        break;
                    }
                }
            }
            tx // kept alive: the channel itself is not dropped yet
        });
        go.wait();
        drop(rx);
        let tx = sender.join().unwrap();
        assert_eq!(
            (tx.channel().len(), p.in_use()),
            (0, 0),
            "round {round}: a handle stranded inside a channel with no receiver"
        );
        drop(tx);
    }
}

/// Registers a waker that panics, as a receive future polled by a faulty executor would; the
/// future stays pending (never polled again) for as long as the caller keeps it.
fn park_a_panicking_waker<P: idxpool::PoolRef<T = u64>>(
    rx: &idxpool::channel::Receiver<P>,
) -> std::pin::Pin<Box<idxpool::channel::RecvFuture<'_, P>>> {
    let waker = Waker::from(Arc::new(Boom));
    let mut fut = Box::pin(rx.recv_async());
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    fut
}

/// A send that delivered its handle must return `Ok`, not unwind with the user's waker
/// panic (the caller would take it for a failed send); the handle is received.
#[test]
#[cfg_attr(
    miri,
    ignore = "the waker's panic payload is leaked on purpose (its drop is user code)"
)]
fn a_panicking_waker_does_not_unwind_out_of_a_send() {
    let _serial = serial();
    let p = pool(4);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let pending = park_a_panicking_waker(&rx);
    let r = catch_unwind(AssertUnwindSafe(|| tx.send(p.get().unwrap())));
    assert!(
        matches!(r, Ok(Ok(()))),
        "a send that delivered unwound with the waker's panic"
    );
    p.put(rx.try_recv().unwrap());
    drop(pending);
    drop((tx, rx));
    assert_eq!(p.in_use(), 0);
}

/// The last sender dropped while its thread unwinds (a producer that panicked) wakes the
/// waiting receivers; a waker that panics there must not abort the process (a panic while
/// panicking). Run in a forked child, whose death by SIGABRT the parent sees.
#[cfg(all(unix, not(miri)))]
#[test]
fn a_panicking_waker_in_the_last_senders_drop_during_unwind_does_not_abort() {
    let _serial = serial();
    // SAFETY: the child runs only the code below (its own pool) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(20) };
        let p = pool(4);
        let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
        let _pending = park_a_panicking_waker(&rx);
        let r = catch_unwind(AssertUnwindSafe(move || {
            let _tx = tx; // the last sender, dropped by the unwind
            panic!("a producer fails");
        }));
        let code = if r.is_err() && rx.channel().is_disconnected() {
            0
        } else {
            2
        };
        // SAFETY: leaves at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child died (status {status:#x}; signal {}: 6 = SIGABRT, a panic while panicking)",
        if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            0
        }
    );
}

/// Held: a send refused because the receivers are gone gives the handle back untouched, and a
/// handle of a pool of the same type is refused before the close is looked at (the caller
/// learns the precise reason); a burst with one foreign handle sends nothing.
#[test]
fn refusals_are_precise_and_lose_nothing() {
    let _serial = serial();
    let (a, b) = (pool(4), pool(4));
    let (tx, rx) = HandleChannel::new(a.clone()).unwrap();
    let mut burst = vec![a.get().unwrap(), b.get().unwrap(), a.get().unwrap()];
    assert_eq!(
        tx.send_bulk(&mut burst),
        Err(SendBulkError::ForeignHandle { index: 1 })
    );
    assert_eq!((burst.len(), tx.channel().len()), (3, 0));
    rx.close();
    let hb = burst.remove(1);
    let hb = match tx.send(hb) {
        Err(SendError::ForeignHandle(h)) => h,
        other => panic!("{other:?}"),
    };
    assert_eq!(tx.send_bulk(&mut burst), Err(SendBulkError::Disconnected));
    assert_eq!(burst.len(), 2);
    a.put_bulk(&mut burst);
    b.put(hb);
    drop((tx, rx));
    assert_eq!((a.in_use(), b.in_use()), (0, 0));
}

/// Held: a receive future that was polled once and then kept pending, never polled again
/// (an abandoned task), keeps its registration, and later sends still reach a blocking
/// receiver.
#[test]
fn a_forgotten_future_does_not_block_other_receivers() {
    let _serial = serial();
    let p = pool(4);
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let abandoned = {
        struct Nop;
        impl Wake for Nop {
            fn wake(self: Arc<Self>) {}
        }
        let waker = Waker::from(Arc::new(Nop));
        let mut fut = Box::pin(rx.recv_async());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        fut
    };
    let (rx2, pp) = (rx.clone(), p.clone());
    let t = thread::spawn(move || rx2.recv().map(|h| pp.put(h)).is_ok());
    tx.send(p.get().unwrap()).unwrap();
    assert!(t.join().unwrap());
    assert_eq!(p.in_use(), 0);
    drop(abandoned);
}

/// The pipeline a new user writes first (README's shape, the module docs' backpressure
/// advice): producers wait in `get_wait` for buffers that consumers on other threads put
/// back, with the builder's default cache size. A cache as large as the pool (DPDK's rule
/// allows 64 for 64 objects) keeps the consumers' puts in their own thread caches, off the
/// ring, and the producers' waits time out although every buffer is idle; the default keeps
/// each cache's flush threshold at most an eighth of the pool.
#[test]
#[cfg_attr(miri, ignore = "threads waiting seconds")]
fn a_pipeline_with_default_caches_does_not_starve_its_producers() {
    let _serial = serial();
    let p = Arc::new(PoolBuilder::packet_bufs(64, 256, 32).build().unwrap());
    let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
    let producers: Vec<_> = (0..3u8)
        .map(|k| {
            let (tx, p) = (tx.clone(), p.clone());
            thread::spawn(move || {
                for i in 0..50u8 {
                    let mut h = p.get_wait(std::time::Duration::from_secs(10))?;
                    p.get_mut(&mut h).extend_from_slice(&[k, i]).unwrap();
                    tx.send(h).unwrap();
                }
                Ok::<(), idxpool::PoolError>(())
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, p) = (rx.clone(), p.clone());
            thread::spawn(move || rx.iter().map(|h| p.put(h)).count())
        })
        .collect();
    drop(rx);
    let waits: Vec<_> = producers.into_iter().map(|t| t.join().unwrap()).collect();
    let got: usize = consumers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        waits.iter().all(Result::is_ok),
        "producers starved: {waits:?}"
    );
    assert_eq!(got, 150);
}

/// A channel whose queue cannot be allocated (a pool that may grow far, an address-space
/// limit) is refused with the documented `PoolError::SizeOverflow`, not an allocation failure
/// that aborts the process. Run in a forked child under `RLIMIT_AS`: its own pool (may grow to
/// 2^24 objects, so the queue wants 256 MiB) is built first, then the limit leaves 64 MiB.
#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn a_queue_that_cannot_be_allocated_is_a_typed_error_not_an_abort() {
    let _serial = serial();
    // SAFETY: the child runs only the code below (its own pool) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(60) };
        let p = PoolBuilder::<u64>::with_default(8)
            .max_capacity(1 << 24)
            .cache_size(0)
            .build()
            .unwrap();
        // The address space now (statm's first field: pages), plus 64 MiB.
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().next().unwrap().parse().unwrap();
        let limit = pages * 4096 + (64 << 20);
        let rl = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: a plain system call on a valid struct.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) } == 0;
        let code = match HandleChannel::new(&p) {
            Err(idxpool::PoolError::SizeOverflow { .. }) if set => 0,
            Ok(_) => 3,
            _ => 2,
        };
        // SAFETY: leaves at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child died or failed (status {status:#x}; exit 3: the queue was allocated, the \
         limit did not bite; signal {}: 6 = SIGABRT, the allocation failure aborted)",
        if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            0
        }
    );
}

/// A waker whose drop is user code that reaches the channel again: it owns the last sender
/// (whose drop wakes the waiters), or closes the channel. The channel drops a waiter's waker
/// after its lock, as the pool's waiting get does (wait.rs): never under it, where the
/// re-entry would wait for ever on a lock its own thread holds. Both routes: the future's
/// drop, and a second poll with another waker. Each runs on a thread of its own, and a hang
/// fails the test instead of hanging the run.
#[test]
fn a_waker_whose_drop_uses_the_channel_does_not_deadlock() {
    use std::sync::mpsc;
    use std::sync::Mutex;
    let _serial = serial();

    /// Runs `f` on a thread; true when it returns within a minute.
    fn finishes(f: impl FnOnce() + Send + 'static) -> bool {
        let (done, wait) = mpsc::channel();
        thread::spawn(move || {
            f();
            let _ = done.send(());
        });
        wait.recv_timeout(std::time::Duration::from_secs(60))
            .is_ok()
    }
    /// A waker that runs `on_drop` when its last clone goes.
    struct OnDrop(Mutex<Option<Box<dyn FnOnce() + Send>>>);
    impl Wake for OnDrop {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(f) = self.0.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
                f();
            }
        }
    }
    struct Nop;
    impl Wake for Nop {
        fn wake(self: Arc<Self>) {}
    }

    // The future's drop drops the channel's clone of a waker that owns the last sender.
    let p = pool(4);
    let pp = p.clone();
    assert!(
        finishes(move || {
            let (tx, rx) = HandleChannel::new(pp).unwrap();
            let waker = Waker::from(Arc::new(OnDrop(Mutex::new(Some(Box::new(move || {
                drop(tx)
            }))))));
            let mut fut = Box::pin(rx.recv_async());
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(waker);
            drop(fut);
            assert!(matches!(
                rx.try_recv(),
                Err(idxpool::channel::TryRecvError::Disconnected)
            ));
        }),
        "the future's drop deadlocked"
    );
    assert_eq!(p.in_use(), 0);

    // A second poll, with another waker, drops the first one, which closes the channel.
    let pp = p.clone();
    assert!(
        finishes(move || {
            let (_tx, rx) = HandleChannel::new(pp).unwrap();
            let rx2 = rx.clone();
            let a = Waker::from(Arc::new(OnDrop(Mutex::new(Some(Box::new(move || {
                rx2.close()
            }))))));
            let b = Waker::from(Arc::new(Nop));
            let mut fut = Box::pin(rx.recv_async());
            assert!(fut.as_mut().poll(&mut Context::from_waker(&a)).is_pending());
            drop(a);
            let second = fut.as_mut().poll(&mut Context::from_waker(&b));
            assert!(matches!(second, std::task::Poll::Ready(Err(_))), "closed");
        }),
        "the second poll deadlocked"
    );
    assert_eq!(p.in_use(), 0);
}
