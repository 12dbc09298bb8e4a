//! `fork()`: the `pthread_atfork` handlers, and the locks they can hold across it.
//!
//! `fork()` copies the process with the calling thread only: a lock another thread held stays held
//! in the child by a thread that does not exist there. So the **prepare** handler takes every lock
//! of the crate, in one global order; the **parent** handler releases them; the **child** handler
//! repairs what another thread left half-done (a ring reservation, the waiter queue), then releases
//! them. The locks are [`RawLock`]s (spin locks that yield), since a lock taken by one handler is
//! released by another, which no `std` guard allows. All are on cold paths, never on a cached get
//! or put.
//!
//! Participants (global locks, owned rings, pool cores) list themselves ([`register`],
//! [`GlobalLock`]); this module names none. A pool is listed as raw pointers into its boxed lock
//! parts, never as the core, whose last drop holds `&mut` on it while it unlists. **The lock
//! order** (followed by every path nesting two of these locks, so prepare cannot deadlock), the
//! no-user-code rule and the child's repairs: DESIGN.md, "Fork". Prepare skips a lock the forking
//! thread holds itself.
//!
//! Not under Miri or loom, nor off unix: no handlers, [`register`] does nothing. Forks bypassing
//! libc's `fork()` (raw `clone`/`SYS_fork`) do not run the handlers.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Spin-wait helper: crossbeam's exponential `Backoff`; under loom a plain yield, so the model
/// checker can schedule the awaited thread. (Here, not in `sync`: this module imports nothing of
/// the crate.)
pub(crate) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Self {
        Backoff {
            #[cfg(not(loom))]
            inner: crossbeam_utils::Backoff::new(),
        }
    }

    /// Waits a little, escalating to `thread::yield_now`, so a thread waiting for a preempted peer
    /// lets it run: no livelock.
    #[inline]
    pub(crate) fn snooze(&self) {
        #[cfg(not(loom))]
        {
            if self.inner.is_completed() {
                std::thread::yield_now();
            } else {
                self.inner.snooze();
            }
        }
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}

/// A key of the calling thread, never 0, even, never reused: a process-wide counter taken on first
/// call (a thread-local without destructor, readable during thread exit). A forked child's thread
/// keeps the forking thread's key.
pub(crate) fn thread_key() -> usize {
    thread_local! {
        static KEY: usize = NEXT_KEY.fetch_add(1, Ordering::Relaxed) << 1;
    }
    KEY.try_with(|k| *k).unwrap_or(usize::MAX - 1)
}

/// The counter of [`thread_key`].
static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

/// Keys below this were handed out before the latest `fork()` that made this process: their
/// threads, except the forking one, do not exist here. 0 if no fork made it. Set by the child
/// handler.
static FORK_FLOOR: AtomicUsize = AtomicUsize::new(0);

/// Set in a lock word taken by the prepare handler (thread keys are even).
const BY_FORK: usize = 1;

/// A spin lock (spins, then yields: [`Backoff`]) whose word is its holder's [`thread_key`], 0 when
/// free; the prepare handler can take it and the after-fork handlers release it.
pub(crate) struct RawLock(AtomicUsize);

impl RawLock {
    pub(crate) const fn new() -> Self {
        RawLock(AtomicUsize::new(0))
    }

    /// Takes the lock, waiting for its holder.
    pub(crate) fn lock(&self) {
        self.take(thread_key());
    }

    fn take(&self, word: usize) {
        let b = Backoff::new();
        while self
            .0
            .compare_exchange_weak(0, word, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            b.snooze();
        }
    }

    /// Takes the lock if it is free.
    pub(crate) fn try_lock(&self) -> bool {
        self.0
            .compare_exchange(0, thread_key(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the calling thread holds the lock.
    pub(crate) fn held_by_me(&self) -> bool {
        self.0.load(Ordering::Relaxed) == thread_key()
    }

    /// Whether the lock is held by a thread that does not exist here (a parent's thread other than
    /// the forking one). Never released then. Only a lock kept out of the order (`grow`'s) can be
    /// so.
    pub(crate) fn holder_is_gone(&self) -> bool {
        let key = self.0.load(Ordering::Acquire) & !BY_FORK;
        key != 0 && key != thread_key() && key < FORK_FLOOR.load(Ordering::Relaxed)
    }

    /// Releases the lock (taken by this thread with [`RawLock::lock`]).
    pub(crate) fn unlock(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// The prepare handler's take: waits for another holder, but skips a lock the calling thread
    /// holds (it forks inside the critical section, and goes on with it in both processes).
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    pub(crate) fn fork_take(&self) {
        let me = thread_key();
        if self.0.load(Ordering::Relaxed) & !BY_FORK != me {
            self.take(me | BY_FORK);
        }
    }

    /// Whether [`RawLock::fork_take`] took the lock (not skipped it).
    #[cfg(test)]
    pub(crate) fn taken_by_fork(&self) -> bool {
        self.0.load(Ordering::Relaxed) & BY_FORK != 0
    }

    /// The parent's and child's release: only what [`RawLock::fork_take`] took.
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    pub(crate) fn fork_release(&self) {
        if self.0.load(Ordering::Relaxed) & BY_FORK != 0 {
            self.0.store(0, Ordering::Release);
        }
    }
}

/// Data under a [`RawLock`] (a `Mutex` the fork handlers can hold; never poisoned: nothing panics
/// under these locks, and a guard's drop releases while unwinding too).
pub(crate) struct Lock<T> {
    raw: RawLock,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds the lock (one thread at a time).
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    pub(crate) const fn new(t: T) -> Self {
        Lock {
            raw: RawLock::new(),
            data: UnsafeCell::new(t),
        }
    }

    /// Takes the lock (spins, then yields, while another thread holds it).
    pub(crate) fn lock(&self) -> LockGuard<'_, T> {
        self.raw.lock();
        LockGuard(self)
    }

    /// Takes the lock if it is free.
    pub(crate) fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        self.raw.try_lock().then(|| LockGuard(self))
    }

    /// The lock itself, for the fork handlers.
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    pub(crate) fn raw(&self) -> &RawLock {
        &self.raw
    }

    /// Whether `data` is this lock's data (a `&mut` to it proves the lock held).
    pub(crate) fn holds(&self, data: &T) -> bool {
        std::ptr::eq(self.data.get(), data)
    }

    /// Runs `f` on the data when the prepare handler holds the lock for the calling thread
    /// ([`RawLock::fork_take`]: the child handler, and the parent's before it releases); else
    /// `None`, `f` not run. While `f` runs the word is the thread's key alone, so a nested call
    /// finds no fork hold.
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    pub(crate) fn with_fork_hold<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let me = thread_key();
        let held = me | BY_FORK;
        let word = &self.raw.0;
        if word
            .compare_exchange(held, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // SAFETY: this thread holds the lock through fork_take (a guard would have left the word
        // without the fork bit, and fork_take skips a lock its thread holds); a nested call fails
        // the exchange above, so no reference to the data is live.
        let r = f(unsafe { &mut *self.data.get() });
        word.store(held, Ordering::Release);
        Some(r)
    }
}

/// Holds a [`Lock`]; releases it on drop.
pub(crate) struct LockGuard<'a, T>(&'a Lock<T>);

impl<T> Deref for LockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held by this guard.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for LockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held by this guard.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for LockGuard<'_, T> {
    fn drop(&mut self) {
        self.0.raw.unlock();
    }
}

/// A process-wide [`Lock`] in a `static` (leak hook, handle space, thread-id allocator): it lists
/// itself with the fork handlers when first taken. Prepare takes the globals after the participant
/// list and before every pool's locks; none nests another, so their mutual order is free.
pub(crate) struct GlobalLock<T> {
    lock: Lock<T>,
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    listed: AtomicBool,
}

impl<T> GlobalLock<T> {
    pub(crate) const fn new(t: T) -> Self {
        GlobalLock {
            lock: Lock::new(t),
            listed: AtomicBool::new(false),
        }
    }

    /// Takes the lock, listing it with the fork handlers first if it is not yet.
    pub(crate) fn lock(&'static self) -> LockGuard<'static, T> {
        #[cfg(all(unix, not(miri), not(loom)))]
        if !self.listed.load(Ordering::Acquire) {
            handlers::list_global(&self.lock.raw, &self.listed);
        }
        self.lock.lock()
    }
}

/// Something a fork must take, release or repair (a ring's state, a pool's core).
#[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
pub(crate) trait Participant {
    /// In the prepare handler: takes this participant's locks, in the module's order.
    fn fork_prepare(&self) {}
    /// In the parent after the fork: releases them.
    fn fork_parent(&self) {}
    /// In the child after the fork, single-threaded, locks held: repairs what a vanished thread
    /// left half-done, then releases the locks.
    fn fork_child(&self) {}
}

#[cfg(all(unix, not(miri), not(loom)))]
pub(crate) use handlers::{register, unregister};

#[cfg(all(unix, not(miri), not(loom)))]
pub(crate) use handlers::register_owned;

#[cfg(not(all(unix, not(miri), not(loom))))]
/// Without fork handlers (Miri, loom, non-unix): nothing is listed.
///
/// # Safety
/// None needed here; the contract of the real one: `p` stays valid until [`unregister`].
pub(crate) unsafe fn register(p: *const dyn Participant) {
    let _ = p;
}

#[cfg(not(all(unix, not(miri), not(loom))))]
/// Without fork handlers: nothing to unlist.
pub(crate) fn unregister(key: *const ()) {
    let _ = key;
}

#[cfg(all(unix, not(miri), not(loom)))]
mod handlers {
    use super::{Participant, RawLock};
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    /// A listed participant `p`, found again by `key` to unlist. A ring lists its own (heap) state;
    /// a pool lists a part the list owns (`owned`, which `p` points into) of raw pointers into the
    /// pool's heap parts, never the core (its last drop holds `&mut` on it while it unlists).
    struct Member {
        key: *const (),
        p: *const dyn Participant,
        #[allow(dead_code)] // held for `p`, dropped with the member
        owned: Option<Box<dyn Participant>>,
    }

    /// The live participants, in registration order, under `LIST`.
    struct List(UnsafeCell<Vec<Member>>);
    // SAFETY: the Vec is only touched with LIST held (or by the single-threaded child, LIST taken
    // by prepare).
    unsafe impl Sync for List {}

    static MEMBERS: List = List(UnsafeCell::new(Vec::new()));
    static LIST: RawLock = RawLock::new();

    /// The global locks ([`super::GlobalLock`]), listed when first taken, under `LIST`.
    struct Globals(UnsafeCell<([*const RawLock; MAX_GLOBALS], usize)>);
    // SAFETY: as `List`: touched only with LIST held (or by the single-threaded child).
    unsafe impl Sync for Globals {}
    const MAX_GLOBALS: usize = 8;
    static GLOBALS: Globals = Globals(UnsafeCell::new(([std::ptr::null(); MAX_GLOBALS], 0)));

    /// The listed global locks, in the order they were listed.
    ///
    /// # Safety
    /// LIST is held by the caller (or by the prepare handler, for the child handler).
    unsafe fn globals<'a>() -> &'a [*const RawLock] {
        // SAFETY: the caller's contract.
        let (all, n) = unsafe { &*GLOBALS.0.get() };
        &all[..*n]
    }

    /// Lists a global lock (once: `listed` says it is), installing the handlers.
    pub(super) fn list_global(lock: &'static RawLock, listed: &AtomicBool) {
        install();
        LIST.lock();
        if !listed.load(Ordering::Relaxed) {
            // SAFETY: LIST held.
            let (all, n) = unsafe { &mut *GLOBALS.0.get() };
            // The crate has four global locks; more would be a bug of this module's caller.
            assert!(*n < MAX_GLOBALS, "idxpool: too many global locks");
            all[*n] = lock;
            *n += 1;
            listed.store(true, Ordering::Release);
        }
        LIST.unlock();
    }

    /// Whether the handlers are installed: `NONE`, `DONE`, or the pid of the process whose
    /// thread is installing them now.
    static HANDLERS: AtomicI32 = AtomicI32::new(NONE);
    const NONE: i32 = 0;
    const DONE: i32 = -1;

    /// Installs the handlers once per process tree, before the first participant is listed. Not a
    /// `std::sync::Once`: a child forked while another thread ran its closure would inherit it
    /// "running" for ever. A child that sees another process's pid takes over (the fork came before
    /// `pthread_atfork`, which holds glibc's fork lock, registered anything; after it, the child
    /// handler set `DONE`).
    fn install() {
        let b = super::Backoff::new();
        loop {
            let state = HANDLERS.load(Ordering::Acquire);
            if state == DONE {
                return;
            }
            // SAFETY: getpid has no preconditions.
            let me = unsafe { libc::getpid() };
            if state == me {
                b.snooze(); // another thread of this process is installing them
                continue;
            }
            if HANDLERS
                .compare_exchange(state, me, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // SAFETY: the handlers are `extern "C" fn()`s that take and release the crate's
                // spin locks and write listed participants' state (no allocation, no user code). A
                // failure (ENOMEM) leaves forks unrepaired (children may wait on a lock), nothing
                // unsound. No crate lock is held here (glibc's handler lock is held while prepare
                // runs).
                let _ = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
                HANDLERS.store(DONE, Ordering::Release);
                return;
            }
        }
    }

    /// The members, with LIST held.
    ///
    /// # Safety
    /// LIST is held by the caller (or by the prepare handler, for the child handler).
    unsafe fn members<'a>() -> &'a [Member] {
        // SAFETY: the caller's contract.
        unsafe { &*MEMBERS.0.get() }
    }

    /// `pthread_atfork` prepare: every lock, in the module's order.
    extern "C" fn prepare() {
        LIST.fork_take();
        // SAFETY: LIST is held; listed globals are statics.
        for &l in unsafe { globals() } {
            // SAFETY: a static lock.
            unsafe { &*l }.fork_take();
        }
        // SAFETY: LIST is held; listed members are live (unlisted under LIST before freed).
        for m in unsafe { members() }.iter().rev() {
            // SAFETY: as above.
            unsafe { &*m.p }.fork_prepare();
        }
    }

    /// The end of both after-fork handlers: the listed globals in reverse order, then LIST.
    ///
    /// # Safety
    /// LIST is held (since prepare).
    unsafe fn release_globals_and_list() {
        // SAFETY: LIST is held (the contract); listed globals are statics.
        for &l in unsafe { globals() }.iter().rev() {
            // SAFETY: a static lock.
            unsafe { &*l }.fork_release();
        }
        LIST.fork_release();
    }

    extern "C" fn parent() {
        // SAFETY: LIST is held since prepare.
        for m in unsafe { members() } {
            // SAFETY: live, as in prepare.
            unsafe { &*m.p }.fork_parent();
        }
        // SAFETY: LIST is held since prepare.
        unsafe { release_globals_and_list() };
    }

    extern "C" fn child() {
        HANDLERS.store(DONE, Ordering::Relaxed);
        // Every key handed out so far belongs to a thread that is gone, but this one.
        let floor = super::NEXT_KEY.load(Ordering::Relaxed) << 1;
        super::FORK_FLOOR.store(floor, Ordering::Relaxed);
        // SAFETY: one thread; LIST is held since prepare (inherited).
        for m in unsafe { members() } {
            // SAFETY: live, as in prepare.
            unsafe { &*m.p }.fork_child();
        }
        // SAFETY: LIST is held since prepare.
        unsafe { release_globals_and_list() };
    }

    /// Lists `p` for the fork handlers (installing them on the first call).
    ///
    /// # Safety
    /// `p` stays valid until [`unregister`] is called with its address.
    pub(crate) unsafe fn register(p: *const dyn Participant) {
        add(Member {
            key: p.cast(),
            p,
            owned: None,
        });
    }

    /// Lists `part` (owned by the list until [`unregister`] with `key`).
    ///
    /// # Safety
    /// Whatever `part` points to stays valid until [`unregister`] is called with `key`.
    pub(crate) unsafe fn register_owned(key: *const (), part: Box<dyn Participant>) {
        add(Member {
            key,
            p: &*part as *const dyn Participant,
            owned: Some(part),
        });
    }

    fn add(member: Member) {
        install();
        // Nothing is allocated with LIST held (a global allocator may take the crate's other
        // locks): a full list is regrown outside it.
        let mut spare: Option<Vec<Member>> = None;
        let mut old: Option<Vec<Member>> = None;
        let mut member = Some(member);
        loop {
            LIST.lock();
            // SAFETY: LIST held.
            let list = unsafe { &mut *MEMBERS.0.get() };
            if list.len() == list.capacity() {
                match spare.take() {
                    Some(mut bigger) if bigger.capacity() > list.len() => {
                        bigger.append(list); // within its capacity
                        old = Some(std::mem::replace(list, bigger));
                    }
                    _ => {
                        let want = (list.len() * 2).max(8);
                        LIST.unlock();
                        drop(old.take());
                        let mut v = Vec::new();
                        // Out of memory: not listed (a child may wait on its locks), never an
                        // abort.
                        if v.try_reserve_exact(want).is_err() {
                            return;
                        }
                        spare = Some(v);
                        continue;
                    }
                }
            }
            list.push(member.take().expect("pushed once")); // within its capacity
            LIST.unlock();
            break;
        }
        drop((spare, old)); // freed after the lock
    }

    /// Unlists the participant registered with `key` (before its memory is freed), keeping the
    /// others' order.
    pub(crate) fn unregister(key: *const ()) {
        LIST.lock();
        // SAFETY: LIST held.
        let list = unsafe { &mut *MEMBERS.0.get() };
        let gone = list
            .iter()
            .position(|m| m.key == key)
            .map(|i| list.remove(i)); // no allocation
        LIST.unlock();
        drop(gone); // an owned part is freed after the lock
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_prepare_take_skips_a_lock_of_its_own_thread_and_waits_for_another_holder() {
        // Held by this thread (a fork inside the critical section): skipped, and the after-fork
        // release leaves it to its holder.
        let l = Lock::new(5u32);
        let g = l.lock();
        l.raw().fork_take();
        assert!(!l.raw().taken_by_fork());
        l.raw().fork_release();
        assert_eq!(*g, 5); // still ours
        drop(g);
        // Held by another thread: waited for, then taken; released by fork_release.
        let held = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let g = l.lock();
            s.spawn(|| {
                l.raw().fork_take();
                held.store(1, Ordering::SeqCst);
                assert!(l.raw().taken_by_fork());
                l.raw().fork_release();
            });
            for _ in 0..100 {
                std::thread::yield_now();
            }
            assert_eq!(
                held.load(Ordering::SeqCst),
                0,
                "taken while another thread held it"
            );
            drop(g);
        });
        assert_eq!(held.load(Ordering::SeqCst), 1);
        *l.lock() += 1; // free again
        assert_eq!(*l.lock(), 6);
    }

    /// The child handler's access to a lock's data: only under the prepare handler's take, by its
    /// thread, never twice at once.
    #[test]
    fn the_fork_hold_lends_the_data_once_and_only_to_the_fork_take() {
        let l = Lock::new(1u32);
        assert_eq!(l.with_fork_hold(|v| *v), None, "free: no fork hold");
        let g = l.lock();
        l.raw().fork_take(); // skipped: this thread holds it
        assert_eq!(
            l.with_fork_hold(|v| *v),
            None,
            "a guard's lock: no fork hold"
        );
        drop(g);
        l.raw().fork_take();
        let nested = l.with_fork_hold(|v| {
            *v += 1;
            l.with_fork_hold(|w| *w)
        });
        assert_eq!(nested, Some(None), "a nested call finds no fork hold");
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(l.with_fork_hold(|v| *v), None, "another thread"));
        });
        assert_eq!(
            l.with_fork_hold(|v| *v),
            Some(2),
            "held again after the call"
        );
        l.raw().fork_release();
        assert_eq!(*l.lock(), 2);
    }

    #[test]
    fn a_failed_try_lock_leaves_the_holder_its_lock() {
        let l = Lock::new(1u32);
        let g = l.lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(l.try_lock().is_none());
                assert!(l.try_lock().is_none()); // still held: the failure released nothing
                assert!(!l.raw().held_by_me() && !l.raw().holder_is_gone());
            });
        });
        assert!(l.raw().held_by_me());
        drop(g);
        assert!(l.try_lock().is_some());
    }

    #[test]
    fn thread_keys_are_even_nonzero_and_distinct() {
        let mine = thread_key();
        let other = std::thread::spawn(thread_key).join().unwrap();
        assert!(mine != 0 && mine & BY_FORK == 0 && other & BY_FORK == 0);
        assert_ne!(mine, other);
        assert_eq!(mine, thread_key());
    }
}
