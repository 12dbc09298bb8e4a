//! A one-shot leak hook that clears itself (found by attack): the report held the
//! hook's read lock while calling it, and the hook's `clear_leak_hook` waited for the write lock
//! on the same thread, forever. Its own binary: it installs the process-wide hook.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_leak_hook_may_clear_itself() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        idxpool::leaks::set_leak_hook(|_| {
            CALLS.fetch_add(1, Ordering::SeqCst);
            idxpool::leaks::clear_leak_hook(); // one shot
        });
        for _ in 0..2 {
            let pool = idxpool::PoolBuilder::<u64>::with_default(4)
                .build()
                .unwrap();
            let _ = pool.get().unwrap().into_raw(); // leaked on purpose
            drop(pool);
        }
        tx.send(()).unwrap();
    });
    // A hang is a failure, not a stuck test run.
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the pool's drop hung in a hook that cleared itself");
    assert_eq!(
        CALLS.load(Ordering::SeqCst),
        1,
        "one shot: the second drop has no hook"
    );
}
