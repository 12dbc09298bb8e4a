//! A child forked while other threads use a pool, with a real `fork()`: the child must never
//! wait for a thread that does not exist in it (a ring reservation, a lock).
//!
//! Its own test binary; its tests run one at a time (`serial`), so that the parent process has
//! no threads but the test harness's and the workers of the running test. Not under Miri (no
//! `fork`).

#![cfg(all(unix, not(miri)))]

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use idxpool::{BackingPolicy, PoolBuilder};

/// Child exit codes, checked by the parent.
const CHILD_OK: i32 = 0;
const CHILD_WRONG: i32 = 2;
/// A child still running after this many seconds is hung: `alarm` kills it (SIGALRM), which
/// the parent reports. Generous, so a loaded machine never trips it; no timing is asserted.
const CHILD_ALARM_SECS: u32 = 20;

/// Runs the tests of this binary one at a time (the leak hook is process-wide).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

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
    let _serial = serial();
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

/// Runs `f` on a new thread made with `pthread_create` itself, not `std::thread`, and returns
/// its result (false if it panicked or no thread could be made). For a forked child: std's
/// thread start and exit take a lock of std's own (the map of its stack-overflow handler),
/// which a parent thread starting or exiting at the fork leaves held in the child for ever
/// (seen: a child hung in `std::thread::spawn` under `set_current_info`). The crate's part of
/// a thread's life is the same on such a thread: its thread id at its first use of a pool, its
/// cache's flush and the id's release in its TLS destructors at exit.
fn on_a_raw_thread(f: &mut dyn FnMut() -> bool) -> bool {
    extern "C" fn start(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut` below, alive until the join.
        let f = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> bool>() };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(false);
        usize::from(ok) as *mut libc::c_void
    }
    let mut f = f;
    // SAFETY: pthread_t is a plain integer (or struct of integers) on the targets tested.
    let mut t: libc::pthread_t = unsafe { std::mem::zeroed() };
    // SAFETY: default attributes; `start` and its argument outlive the thread (joined below).
    let made = unsafe {
        libc::pthread_create(
            &mut t,
            std::ptr::null(),
            start,
            (&mut f as *mut &mut dyn FnMut() -> bool).cast(),
        )
    };
    if made != 0 {
        return false;
    }
    let mut ret = std::ptr::null_mut();
    // SAFETY: `t` is our joinable thread, joined once.
    let joined = unsafe { libc::pthread_join(t, &mut ret) };
    joined == 0 && !ret.is_null()
}

/// What a child of [`a_forked_child_never_waits_for_a_lock_held_by_a_parent_thread`] does, one
/// stage after the other; a hung child is reported with the stage it was in.
const STAGES: [&str; 7] = [
    "LocalCache::new / get / put / drop (the registry's cache list)",
    "a new thread that gets and puts (its thread id, its exit flush)",
    "a new run-time pool, built, used, audited and dropped (the handle space, the ring list)",
    "available() and cache_counts() (the thread slot locks, the cache list)",
    "stats() and stats_reset() (the stats totals)",
    "get_wait on a pool of one object, then a put (the waiter queue)",
    "set_leak_hook and clear_leak_hook (the hook's lock)",
];
/// Past the last stage.
const DONE: u32 = STAGES.len() as u32;

/// A page shared between the parent and its children (MAP_SHARED survives `fork`): the child
/// writes the stage it is in, the parent reads it after the child is gone.
struct StagePage(*mut AtomicU32);

impl StagePage {
    fn new() -> Self {
        // SAFETY: a fresh anonymous shared mapping of one page; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        StagePage(p.cast())
    }

    fn cell(&self) -> &AtomicU32 {
        // SAFETY: the mapping is page-aligned, zeroed, and lives until drop.
        unsafe { &*self.0 }
    }
}

impl Drop for StagePage {
    fn drop(&mut self) {
        // SAFETY: mapped in new, unmapped once.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

/// The child's work: every stage takes some lock of the pool (or the crate's global ones)
/// that a parent thread may have held at the fork. Returns the exit code.
fn child_locks_work(pool: &idxpool::Pool<u64>, one: &idxpool::Pool<u64>, stage: &AtomicU32) -> i32 {
    let ok = |c: bool| if c { CHILD_OK } else { CHILD_WRONG };
    stage.store(0, Ordering::SeqCst);
    {
        let mut c = pool.local_cache();
        let Ok(h) = c.get() else { return CHILD_WRONG };
        c.put(h);
    }
    stage.store(1, Ordering::SeqCst);
    let spawned = on_a_raw_thread(&mut || match pool.get() {
        Ok(h) => {
            pool.put(h);
            true
        }
        Err(_) => false,
    });
    if !spawned {
        return CHILD_WRONG;
    }
    stage.store(2, Ordering::SeqCst);
    {
        let Ok(mut p) = PoolBuilder::<u64>::with_default(64).build() else {
            return CHILD_WRONG;
        };
        let Ok(h) = p.get() else { return CHILD_WRONG };
        p.put(h);
        if !matches!(p.audit(), Ok(r) if r.in_use == 0) || p.available() != 64 {
            return CHILD_WRONG;
        }
    }
    stage.store(3, Ordering::SeqCst);
    let cap = pool.capacity() as usize;
    if pool.available() > cap || pool.cache_counts().len() > 64 + 1 {
        return CHILD_WRONG;
    }
    stage.store(4, Ordering::SeqCst);
    let _ = pool.stats();
    pool.stats_reset();
    stage.store(5, Ordering::SeqCst);
    // The object may be held by a parent thread (stranded): a timeout is a fine answer too.
    match one.get_wait(Duration::from_millis(5)) {
        Ok(h) => one.put(h),
        Err(idxpool::PoolError::Timeout { .. }) => {}
        Err(_) => return CHILD_WRONG,
    }
    stage.store(6, Ordering::SeqCst);
    idxpool::leaks::set_leak_hook(|_| {});
    idxpool::leaks::clear_leak_hook();
    stage.store(DONE, Ordering::SeqCst);
    ok(true)
}

/// Worker threads take every lock of the pool and of the crate, in loops (LocalCaches made and
/// dropped, short-lived threads that use the pool, run-time pools built and dropped, counts,
/// stats, waiting gets on a pool of one object, the leak hook set and cleared) while the main
/// thread forks again and again. Each child takes the same locks (`STAGES`) and must finish.
/// Before the prepare handler took these locks, a lock held by a parent thread at the fork
/// stayed held in the child, which then waited for ever (killed by its alarm) at the first
/// stage that needed it.
#[test]
fn a_forked_child_never_waits_for_a_lock_held_by_a_parent_thread() {
    let _serial = serial();
    let forks = 40;
    let pool = PoolBuilder::<u64>::with_default(4096)
        .cache_size(16)
        .max_threads(64)
        .build()
        .unwrap();
    let one = PoolBuilder::<u64>::with_default(1)
        .cache_size(0)
        .build()
        .unwrap();
    let page = StagePage::new();
    let stop = AtomicBool::new(false);
    let outcomes: Vec<String> = std::thread::scope(|s| {
        let (pool, one, stop) = (&pool, &one, &stop);
        // LocalCaches made and dropped (the registry's cache list).
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut c = pool.local_cache();
                if let Ok(h) = c.get() {
                    c.put(h);
                }
            }
        });
        // Short-lived threads that use the pool: a thread id at their first get, an exit
        // flush (slot lock, stats totals) and the id's release at their exit.
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::scope(|s2| {
                    for _ in 0..2 {
                        s2.spawn(|| {
                            if let Ok(h) = pool.get() {
                                pool.put(h);
                            }
                        });
                    }
                });
            }
        });
        // Run-time pools built and dropped: the handle space's table, the ring list.
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let p = PoolBuilder::<u64>::with_default(16)
                    .cache_size(0)
                    .build()
                    .unwrap();
                drop(p);
            }
        });
        // Counts and stats: every slot lock, the cache list, the stats totals.
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = pool.available();
                let _ = pool.cache_counts();
                let _ = pool.stats();
            }
        });
        // Two threads take turns with the one object, waiting for it: the waiter queue.
        for _ in 0..2 {
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(h) = one.get_wait(Duration::from_micros(200)) {
                        one.put(h);
                    }
                }
            });
        }
        // The leak hook set and cleared: its lock.
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                idxpool::leaks::set_leak_hook(|_| {});
                idxpool::leaks::clear_leak_hook();
            }
        });
        let mut outcomes = Vec::new();
        for k in 0..forks {
            std::thread::sleep(Duration::from_millis(2));
            page.cell().store(u32::MAX, Ordering::SeqCst);
            // SAFETY: the child only runs `child_locks_work` (the pool's own code, made for a
            // forked child; glibc keeps malloc usable after fork) and leaves with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: alarm and _exit are async-signal-safe.
                unsafe { libc::alarm(CHILD_ALARM_SECS) };
                let work =
                    std::panic::AssertUnwindSafe(|| child_locks_work(pool, one, page.cell()));
                let code = std::panic::catch_unwind(work).unwrap_or(3);
                // SAFETY: leaves the child at once, running no destructor of the parent's state.
                unsafe { libc::_exit(code) };
            }
            assert!(pid > 0, "fork failed: {}", std::io::Error::last_os_error());
            let mut status = 0;
            // SAFETY: pid is our child; status is a valid out-pointer.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
            let at = page.cell().load(Ordering::SeqCst);
            let stage = STAGES.get(at as usize).copied().unwrap_or("none");
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == CHILD_OK && at == DONE {
                continue;
            }
            outcomes.push(
                if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM {
                    format!("child {k}: hung in stage {at} ({stage}), killed by its alarm")
                } else {
                    format!("child {k}: wait status {status:#x} in stage {at} ({stage})")
                },
            );
            if outcomes.len() >= 3 {
                break; // enough to show the failure without waiting out every alarm
            }
        }
        stop.store(true, Ordering::Relaxed);
        outcomes
    });
    assert!(outcomes.is_empty(), "{outcomes:#?}");
    // The parent's pools are whole once the short-lived threads' exit flushes are done: they
    // run in those threads' TLS destructors, which may end after the scope has joined them.
    let cap = pool.capacity() as usize;
    for _ in 0..1_000_000 {
        if pool.available() == cap {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(pool.available(), cap);
    assert_eq!(one.available(), 1);
}

/// Forks; the child runs `work` under its alarm and leaves with its code; the parent waits for
/// it. `None` when the child completed with `CHILD_OK`, else what happened.
fn fork_and_wait(what: &str, work: impl FnOnce() -> i32) -> Option<String> {
    // SAFETY: the child runs only `work` (the pool's own code, made for a forked child) and
    // leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(CHILD_ALARM_SECS) };
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(3);
        // SAFETY: leaves the child at once, running no destructor of the parent's state.
        unsafe { libc::_exit(code) };
    }
    if pid < 0 {
        return Some(format!(
            "{what}: fork failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid {
        return Some(format!(
            "{what}: waitpid: {}",
            std::io::Error::last_os_error()
        ));
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == CHILD_OK {
        None
    } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM {
        Some(format!("{what}: the child hung (killed by its alarm)"))
    } else {
        Some(format!("{what}: child wait status {status:#x}"))
    }
}

/// A child's use of the crate from inside a callback of the parent: a new run-time pool, a
/// `LocalCache`, a thread, a waiting get, the leak hook, an audit. Returns the exit code.
fn child_fresh_work() -> i32 {
    let Ok(mut p) = PoolBuilder::<u64>::with_default(32).cache_size(4).build() else {
        return CHILD_WRONG;
    };
    {
        let mut c = p.local_cache();
        let Ok(h) = c.get() else { return CHILD_WRONG };
        c.put(h);
    }
    let threaded = on_a_raw_thread(&mut || p.get().map(|h| p.put(h)).is_ok());
    let Ok(h) = p.get_wait(Duration::from_millis(1)) else {
        return CHILD_WRONG;
    };
    p.put(h);
    idxpool::leaks::set_leak_hook(|_| {});
    idxpool::leaks::clear_leak_hook();
    let audited = matches!(p.audit(), Ok(r) if r.in_use == 0);
    if threaded && audited && p.available() == 32 {
        CHILD_OK
    } else {
        CHILD_WRONG
    }
}

/// What the callbacks' forks reported (`None`: the child completed), in order.
static CALLBACK_FORKS: Mutex<Vec<(&str, Option<String>)>> = Mutex::new(Vec::new());

fn fork_from(what: &'static str) {
    let outcome = fork_and_wait(what, child_fresh_work);
    CALLBACK_FORKS.lock().unwrap().push((what, outcome));
}

/// A waker that forks when it is woken.
struct ForkingWaker;

impl std::task::Wake for ForkingWaker {
    fn wake(self: Arc<Self>) {
        fork_from("a waker");
    }
}

/// A user may call `fork()` from code the pool calls back: the build's and `grow`'s
/// initialiser, the reset hook of a put, a waker woken by a put, the leak hook of a drop. The
/// prepare handler must not wait for a lock the forking thread holds itself, and the child
/// must be able to use the crate. Every callback runs outside the crate's fork-ordered locks
/// (`grow`'s own lock, held around its initialiser, is not one of them), so each fork
/// completes in both processes.
#[test]
fn a_fork_from_a_callback_of_the_pool_completes_in_parent_and_child() {
    let _serial = serial();
    // The initialiser, at build (object 3) and in `grow` (object 10).
    let pool = PoolBuilder::<u64>::with_fn(8, |i| {
        if i == 3 || i == 10 {
            fork_from(if i == 3 {
                "the build's initialiser"
            } else {
                "grow's initialiser"
            });
        }
        u64::from(i)
    })
    .max_capacity(16)
    .build()
    .unwrap();
    assert_eq!(pool.grow(8).unwrap(), 16);
    // The reset hook of a put (once).
    let once = AtomicBool::new(false);
    let hooked = PoolBuilder::<u64>::with_default(4)
        .on_put(move |_| {
            if !once.swap(true, Ordering::Relaxed) {
                fork_from("the reset hook");
            }
        })
        .build()
        .unwrap();
    let h = hooked.get().unwrap();
    hooked.put(h);
    // A waker, woken by a put while its future waits for the only object.
    let one = PoolBuilder::<u64>::with_default(1)
        .cache_size(0)
        .build()
        .unwrap();
    let h = one.get().unwrap();
    let waker = std::task::Waker::from(Arc::new(ForkingWaker));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(one.get_async());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    one.put(h); // wakes the future: its waker forks
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(h)) => one.put(h),
        other => panic!("the woken future: {other:?}"),
    }
    // The leak hook, called by the drop of a pool with an object out.
    idxpool::leaks::set_leak_hook(|r| {
        if r.pool == "fork-in-leak-hook" {
            fork_from("the leak hook");
        }
    });
    let leaky = PoolBuilder::<u64>::with_default(4)
        .name("fork-in-leak-hook")
        .build()
        .unwrap();
    drop(leaky.get().unwrap()); // never put back
    drop(leaky);
    idxpool::leaks::clear_leak_hook();
    let forks = std::mem::take(&mut *CALLBACK_FORKS.lock().unwrap());
    let callbacks: Vec<&str> = forks.iter().map(|f| f.0).collect();
    assert_eq!(
        callbacks,
        [
            "the build's initialiser",
            "grow's initialiser",
            "the reset hook",
            "a waker",
            "the leak hook"
        ]
    );
    let failed: Vec<String> = forks.into_iter().filter_map(|f| f.1).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(
        (pool.available(), one.available(), hooked.available()),
        (16, 1, 4)
    );
}

/// Set by the initialiser of [`a_forked_child_never_waits_for_a_grow_of_a_parent_thread`]
/// when it is inside `grow`; it then waits for `GROW_FORKED`.
static GROW_INSIDE: AtomicBool = AtomicBool::new(false);
static GROW_FORKED: AtomicBool = AtomicBool::new(false);

/// `grow` holds its own lock around the initialiser (user code: not a lock the fork handlers
/// take). A child forked while another thread is inside `grow` inherits that lock held by a
/// thread that does not exist in it: its own `grow` of that pool must say so
/// (`GrowInterrupted`) instead of waiting for ever (before: the child hung, killed by its
/// alarm), and the rest of the pool must work (the objects of the interrupted grow that did
/// not reach the ring are stranded, never named).
#[test]
fn a_forked_child_never_waits_for_a_grow_of_a_parent_thread() {
    let _serial = serial();
    let pool = PoolBuilder::<u64>::with_fn(8, |i| {
        if i == 9 {
            GROW_INSIDE.store(true, Ordering::SeqCst);
            while !GROW_FORKED.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
        u64::from(i)
    })
    .cache_size(0)
    .max_capacity(64)
    .build()
    .unwrap();
    let outcome = std::thread::scope(|s| {
        let grower = s.spawn(|| pool.grow(8));
        while !GROW_INSIDE.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let outcome = fork_and_wait("grow in a child", || {
            let interrupted = matches!(
                pool.grow(1),
                Err(idxpool::PoolError::GrowInterrupted { .. })
            );
            let mut v = Vec::new();
            let got = pool.get_burst(&mut v, 64);
            pool.put_bulk(&mut v);
            if interrupted && got == 8 && pool.capacity() == 8 {
                CHILD_OK
            } else {
                CHILD_WRONG
            }
        });
        GROW_FORKED.store(true, Ordering::SeqCst);
        assert_eq!(grower.join().unwrap().unwrap(), 16);
        outcome
    });
    assert_eq!(outcome, None);
    // The parent's pool grows on.
    assert_eq!(pool.grow(8).unwrap(), 24);
    assert_eq!(pool.available(), 24);
}
