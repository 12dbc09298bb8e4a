//! A child forked while other threads use a pool (issue 25 item 9), with a real `fork()`.
//!
//! Its own test binary with one test: the parent process has no other test threads, only
//! the two workers this test starts. Not under Miri (no `fork`).

#![cfg(all(unix, not(miri)))]

use std::sync::atomic::{AtomicBool, Ordering};

use idxpool::{BackingPolicy, PoolBuilder};

/// Child exit codes, checked by the parent.
const CHILD_OK: i32 = 0;
const CHILD_WRONG: i32 = 2;
/// A child still running after this many seconds is hung: `alarm` kills it (SIGALRM), which
/// the parent reports. Generous, so a loaded machine never trips it; no timing is asserted.
const CHILD_ALARM_SECS: u32 = 20;

/// What a forked child does with the inherited pool: take everything it can reach, put it
/// back, several times, in bulk and one by one. Returns the exit code.
fn child_work<B: idxpool::NamedBrand>(pool: &idxpool::Pool<u64, B>) -> i32 {
    let cap = pool.capacity() as usize;
    let mut v = Vec::new();
    for round in 0..4 {
        let got = pool.get_burst(&mut v, cap);
        // Objects the parent's other threads held at the fork are stranded in the child, so
        // `got` may be below `cap`, but the ring must be empty now and take them all back.
        if got != v.len() || pool.ring_count() != 0 {
            return CHILD_WRONG;
        }
        let mut seen = vec![false; cap];
        for h in &v {
            let i = pool.index_of(h) as usize;
            if std::mem::replace(&mut seen[i], true) {
                return CHILD_WRONG; // an object handed out twice
            }
        }
        if round % 2 == 0 {
            pool.put_bulk(&mut v);
        } else {
            for h in v.drain(..) {
                pool.put(h);
            }
        }
        if pool.ring_count() != got {
            return CHILD_WRONG;
        }
        // One more get and put of the lot, all or nothing.
        if got > 0 && pool.get_bulk(&mut v, got).is_err() {
            return CHILD_WRONG;
        }
        pool.put_bulk(&mut v);
    }
    CHILD_OK
}

/// Two threads move large bulks through a cache-less pool (so they spend most of their time
/// between reserving a ring head and publishing its tail) while the main thread forks again
/// and again. Each child uses the pool and exits with a status the parent checks. Before the
/// fix, a child that inherited a reservation of a thread that does not exist in it waited in
/// `Ring::update_tail` forever (here: killed by its alarm; 2 of the first 7 children in a run
/// on 2 shared vCPUs); now the fork handler abandons those reservations and every child
/// completes.
#[test]
fn a_forked_child_never_hangs_on_a_reservation_of_a_parent_thread() {
    idxpool::brand!(Forked);
    let cap = 1u32 << 15;
    let bulk = 1usize << 12;
    let forks = 24;
    let pool = PoolBuilder::<u64>::with_default(cap)
        .cache_size(0)
        .backing(BackingPolicy::Require(idxpool::Backing::Heap))
        .build_named::<Forked>()
        .unwrap();
    let stop = AtomicBool::new(false);
    let outcomes: Vec<String> = std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut v = Vec::with_capacity(bulk);
                while !stop.load(Ordering::Relaxed) {
                    if pool.get_bulk(&mut v, bulk).is_ok() {
                        pool.put_bulk(&mut v);
                    }
                }
            });
        }
        let mut outcomes = Vec::new();
        for k in 0..forks {
            // Let the workers get going (and, after the first child, back in their loops).
            for _ in 0..1000 {
                std::hint::spin_loop();
            }
            // SAFETY: the child only runs `child_work` (the pool's own code, which is made for
            // a forked child; glibc keeps malloc usable after fork) and leaves with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: alarm and _exit are async-signal-safe.
                unsafe { libc::alarm(CHILD_ALARM_SECS) };
                let work = std::panic::AssertUnwindSafe(|| child_work(&pool));
                let code = std::panic::catch_unwind(work).unwrap_or(3);
                // SAFETY: leaves the child at once, running no destructor of the parent's state.
                unsafe { libc::_exit(code) };
            }
            assert!(pid > 0, "fork failed: {}", std::io::Error::last_os_error());
            let mut status = 0;
            // SAFETY: pid is our child; status is a valid out-pointer.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
            let outcome = if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == CHILD_OK {
                continue;
            } else if libc::WIFEXITED(status) {
                format!("child {k}: exit code {}", libc::WEXITSTATUS(status))
            } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM {
                format!("child {k}: hung (killed by its {CHILD_ALARM_SECS} s alarm)")
            } else {
                format!("child {k}: wait status {status:#x}")
            };
            outcomes.push(outcome);
            if outcomes.len() >= 2 {
                break; // enough to show the failure without waiting out every alarm
            }
        }
        stop.store(true, Ordering::Relaxed);
        outcomes
    });
    assert!(outcomes.is_empty(), "{outcomes:#?}");
    // The parent's pool is untouched by the children: everything is home.
    assert_eq!(pool.available(), cap as usize);
}
