//! A shared pool across a real `fork()`: the child inherits copies of the parent's attachment
//! and of its handles, and attaches the region anew. "No two live `&mut T` to one object in
//! this process" must hold in the child too, whatever the parent does with the object the copy
//! names (here: the honest parent puts it back, and the child's new attachment gets it).
//!
//! Its own test binary, its tests one at a time ([`serial`]: no other test's thread is inside
//! the crate at a fork). Not under Miri (no `fork`, no file mappings).

#![cfg(all(target_os = "linux", not(miri)))]

use std::panic::{catch_unwind, AssertUnwindSafe};

use idxpool::shared::{fingerprint, SharedOptions, SharedPool};

type Obj = [u64; 8];

/// Child exit codes, checked by the parent.
const CHILD_OK: i32 = 0;
const CHILD_ALIASED: i32 = 2;
const CHILD_FAILED: i32 = 5;
/// A hung child is killed by its alarm (SIGALRM), which the parent reports. No timing asserted.
const CHILD_ALARM_SECS: u32 = 20;

/// Runs the tests of this binary one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Names(String);
impl Drop for Names {
    fn drop(&mut self) {
        let _ = SharedPool::<u8>::remove(&self.0);
    }
}

/// The parent holds object X through attachment `a` and forks. The child attaches anew (`b`),
/// as the module docs say a child should; then the parent puts X back (honest), and `b`'s gets
/// reach X. The child's copy of `a` still holds a copy of the parent's handle to X: `b` must
/// not hand X out while that copy lives, or the copy must refuse to give a reference: never
/// both (two live `&mut T` to X in the child, one through each attachment).
#[test]
fn a_forked_child_never_holds_two_live_references_to_one_object() {
    let _serial = serial();
    let n = format!("idxpool-fork-{}-copy", std::process::id());
    let _names = Names(n.clone());
    let fp = fingerprint("shared_fork::Obj v1");
    let opts = SharedOptions {
        cache_size: Some(0),
        ..SharedOptions::default()
    };
    let a = SharedPool::<Obj>::create(&n, 8, fp, opts).unwrap();
    let mut ha = a.get().unwrap();
    let x = ha.index();
    a.get_mut(&mut ha)[0] = 0xAAAA;
    let mut to_child = [0i32; 2];
    let mut to_parent = [0i32; 2];
    // SAFETY: two fresh pipes; the descriptors are checked below.
    assert_eq!(unsafe { libc::pipe(to_child.as_mut_ptr()) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::pipe(to_parent.as_mut_ptr()) }, 0);
    // SAFETY: the child runs the pool's own code and leaves with `_exit`; the tests of this
    // binary run one at a time, so no other test's thread is inside the crate at the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(CHILD_ALARM_SECS) };
        let code = catch_unwind(AssertUnwindSafe(|| {
            let Ok(b) = SharedPool::<Obj>::attach(&n, fp) else {
                return CHILD_FAILED;
            };
            let mut byte = 0u8;
            // Tell the parent b is attached, then wait for its put of X.
            // SAFETY: valid descriptors and one-byte buffers.
            unsafe {
                libc::write(to_parent[1], (&byte as *const u8).cast(), 1);
                libc::read(to_child[0], (&mut byte as *mut u8).cast(), 1);
            }
            // The copy's reference first, live across b's gets.
            let Ok(mine) = catch_unwind(AssertUnwindSafe(|| a.get_mut(&mut ha) as *mut Obj)) else {
                return CHILD_OK; // the copy refuses to give a reference
            };
            let mut got = Vec::new();
            let mut aliased = false;
            while let Ok(mut h) = b.get() {
                if h.index() == x {
                    // Two mappings of one file: the same object at two addresses. Written
                    // through b's reference, read through the copy's.
                    b.get_mut(&mut h)[0] = 0xBBBB;
                    // SAFETY: the copy gave `mine` as a live `&mut Obj` (the claim under test).
                    aliased = unsafe { (*mine)[0] } == 0xBBBB;
                }
                got.push(h);
            }
            b.put_bulk(&mut got);
            if aliased {
                CHILD_ALIASED
            } else {
                CHILD_OK
            }
        }))
        .unwrap_or(CHILD_FAILED);
        // SAFETY: leaves the child at once, running no destructor of the parent's state.
        unsafe { libc::_exit(code) };
    }
    let mut byte = 0u8;
    // SAFETY: valid descriptors and one-byte buffers.
    unsafe { libc::read(to_parent[0], (&mut byte as *mut u8).cast(), 1) };
    a.put(ha); // honest: X is free again
               // SAFETY: as above.
    unsafe { libc::write(to_child[1], (&byte as *const u8).cast(), 1) };
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status),
        "the child did not exit (status {status:#x}; SIGALRM = hung)"
    );
    let code = libc::WEXITSTATUS(status);
    assert_ne!(
        code, CHILD_ALIASED,
        "the child held two live &mut to object {x}: its copy of the parent's attachment and \
         its own attachment"
    );
    assert_eq!(code, CHILD_OK, "child exit code");
}

/// A forked child that only drops its copies of the parent's attachments (leaving a scope
/// runs their `Drop`; the child never calls the pool) must leave the parent's state alone.
/// Before, the copy's drop flushed and freed the parent's process slot, dropped the parent's
/// liveness lock (the child shares the parent's open file description) and, for the
/// creator's copy, removed the region's name: a later attachment claimed the parent's slot,
/// took the object the parent held as an orphan, and wrote through it while the parent held
/// `&mut` to it.
#[test]
fn a_forked_childs_drop_of_its_copies_leaves_the_parent_attached() {
    let _serial = serial();
    let n = format!("idxpool-fork-{}-drop", std::process::id());
    let _names = Names(n.clone());
    let fp = fingerprint("shared_fork::Obj v1");
    let opts = SharedOptions {
        cache_size: Some(0),
        max_processes: 4,
        ..SharedOptions::default()
    };
    let c = SharedPool::<Obj>::create(&n, 8, fp, opts).unwrap();
    let a = SharedPool::<Obj>::attach(&n, fp).unwrap();
    let mut held = a.get().unwrap();
    a.get_mut(&mut held)[0] = 111;
    // SAFETY: the child drops two values and leaves with `_exit`; the tests of this binary run
    // one at a time, so no other test's thread is inside the crate at the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(CHILD_ALARM_SECS) };
        let code = catch_unwind(AssertUnwindSafe(|| {
            drop(a);
            drop(c);
            CHILD_OK
        }))
        .unwrap_or(CHILD_FAILED);
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == CHILD_OK);
    let slots: Vec<_> = a.processes().iter().map(|p| p.slot).collect();
    assert!(
        slots.contains(&a.slot()),
        "the parent's slot {} is still claimed: {slots:?}",
        a.slot()
    );
    assert!(
        a.processes().iter().all(|p| p.alive),
        "the parent's slots stay alive"
    );
    let b = SharedPool::<Obj>::attach(&n, fp).expect("the region's name is still there");
    assert!(b.slot() != a.slot() && b.slot() != c.slot());
    assert_eq!(
        b.reclaim_in_use_of_dead(),
        0,
        "nothing of the parent is orphaned"
    );
    let mut got = Vec::new();
    while let Ok(mut h) = b.get() {
        assert_ne!(
            b.get_mut(&mut h)[0],
            111,
            "the parent's object handed out again"
        );
        got.push(h);
    }
    assert_eq!(got.len(), 7);
    b.put_bulk(&mut got);
    assert_eq!(a.get_mut(&mut held)[0], 111);
    a.put(held);
}

/// A process attached to the region forks a child that never touches the pool (a worker, a
/// daemon's helper), then dies. Its slot's liveness lock belongs to an open file description
/// the child inherited: while the idle child lived, the dead process's slot read as alive, and
/// a ring lock it died holding was never taken over (every other process's get spun until the
/// idle child exited). The fork handler points the child's copy of the descriptor elsewhere,
/// so the lock dies with the process that took it.
#[test]
fn an_idle_forked_child_does_not_keep_a_dead_attachment_alive() {
    let _serial = serial();
    let n = format!("idxpool-fork-{}-idle", std::process::id());
    let _names = Names(n.clone());
    let fp = fingerprint("shared_fork::Obj v1");
    let opts = SharedOptions {
        cache_size: Some(0),
        max_processes: 4,
        ..SharedOptions::default()
    };
    let c = SharedPool::<Obj>::create(&n, 8, fp, opts).unwrap();
    let mut pipe = [0i32; 2];
    // SAFETY: a fresh pipe; checked.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the child attaches, forks an idle grandchild and leaves with `_exit`; the tests
    // of this binary run one at a time.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(CHILD_ALARM_SECS) };
        let Ok(a) = SharedPool::<Obj>::attach(&n, fp) else {
            // SAFETY: leaves at once.
            unsafe { libc::_exit(CHILD_FAILED) };
        };
        // SAFETY: the grandchild writes its pid, sleeps (until killed, or its alarm) and
        // leaves.
        let g = unsafe { libc::fork() };
        if g == 0 {
            // SAFETY: async-signal-safe calls only; a valid descriptor and a 4-byte buffer.
            // The pid it writes tells the test that the fork (and its handlers) is over here.
            unsafe {
                libc::alarm(CHILD_ALARM_SECS);
                let me = libc::getpid();
                libc::write(pipe[1], (&me as *const i32).cast(), 4);
                libc::pause();
                libc::_exit(0);
            }
        }
        // Dies attached, as a killed process would.
        std::mem::forget(a);
        // SAFETY: leaves at once.
        unsafe { libc::_exit(CHILD_OK) };
    }
    let mut g = 0i32;
    // SAFETY: a valid descriptor and a 4-byte buffer.
    assert_eq!(
        unsafe { libc::read(pipe[0], (&mut g as *mut i32).cast(), 4) },
        4
    );
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let others: Vec<_> = c
        .processes()
        .into_iter()
        .filter(|p| p.slot != c.slot())
        .collect();
    // SAFETY: g is the idle grandchild (not ours to reap: it is re-parented when its parent
    // exits); a signal to it ends it.
    unsafe { libc::kill(g, libc::SIGKILL) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == CHILD_OK);
    assert_eq!(others.len(), 1, "the dead attachment's slot: {others:?}");
    assert!(
        !others[0].alive,
        "a dead attachment reads as alive while its idle forked child lives: {others:?}"
    );
}
