//! A reset hook (user code) that panics while a thread is already unwinding: the guard's drop,
//! the handle channel's drains and the handle ring's drop put objects back from destructors,
//! and a second panic there would abort the process (a panic while panicking). Contained as the channel contains a
//! waker's panic: every object is back in its pool, the first panic goes on, no abort. Each
//! case runs in a forked child, whose death by SIGABRT the parent sees.
#![cfg(all(unix, not(miri)))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use idxpool::handle_ring::Zeroing;
use idxpool::{HandleChannel, HandleRing, PacketBuf, Pool, PoolBuilder};

/// One test at a time: a child forked while another test's thread holds a lock of the runtime
/// (the panic output's, the allocator's) would wait for it for ever.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Packet buffers whose reset hook always panics; no cache, so the counts are exact.
fn pool() -> Arc<Pool<PacketBuf>> {
    Arc::new(
        PoolBuilder::packet_bufs(8, 256, 32)
            .cache_size(0)
            .on_put(|_b: &mut PacketBuf| panic!("the reset hook fails"))
            .build()
            .unwrap(),
    )
}

/// Runs `case` in a forked child: exit 0 when it returns true, 2 when false, SIGABRT on an
/// abort. The parent asserts a clean exit 0.
fn in_child(case: fn() -> bool) {
    let _serial = serial();
    // SAFETY: the child runs only `case` (its own pool) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(20) };
        let code = if case() { 0 } else { 2 };
        // SAFETY: leaves at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child died or failed (status {status:#x}; signal {}: 6 = SIGABRT, a panic while \
         panicking)",
        if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            0
        }
    );
}

#[test]
fn a_guard_dropped_during_unwind_with_a_panicking_hook_does_not_abort() {
    in_child(|| {
        let p = pool();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut g = p.get_pooled().unwrap();
            g.extend_from_slice(b"abc").unwrap();
            panic!("the worker fails"); // the guard drops during the unwind
        }));
        r.is_err() && p.in_use() == 0 && p.available() == 8
    });
}

#[test]
fn the_last_receiver_dropped_during_unwind_with_a_panicking_hook_does_not_abort() {
    in_child(|| {
        let p = pool();
        let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
        for _ in 0..3 {
            tx.send(p.get().unwrap()).unwrap();
        }
        let r = catch_unwind(AssertUnwindSafe(move || {
            let _rx = rx; // the last receiver, dropped by the unwind with 3 handles inside
            panic!("the consumer fails");
        }));
        let closed = tx.channel().is_closed();
        drop(tx);
        r.is_err() && closed && p.in_use() == 0 && p.available() == 8
    });
}

#[test]
fn the_channel_dropped_during_unwind_with_a_panicking_hook_does_not_abort() {
    in_child(|| {
        let p = pool();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let (tx, rx) = HandleChannel::new(p.clone()).unwrap();
            tx.send(p.get().unwrap()).unwrap();
            // Both halves drop during the unwind (the sender last: the channel's own drop
            // finds the handle if the receiver's drain did not).
            let _both = (rx, tx);
            panic!("the stage fails");
        }));
        r.is_err() && p.in_use() == 0 && p.available() == 8
    });
}

#[test]
fn a_handle_ring_dropped_during_unwind_with_a_panicking_hook_does_not_abort() {
    in_child(|| {
        let p = pool();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let (mut tx, rx) = HandleRing::new(p.clone(), 4, Zeroing::Immediate).unwrap();
            tx.produce(p.get().unwrap()).unwrap();
            // Both halves drop during the unwind: the ring gives the handle inside back.
            let _both = (tx, rx);
            panic!("the stage fails");
        }));
        r.is_err() && p.in_use() == 0 && p.available() == 8
    });
}
