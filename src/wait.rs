//! Waiting on exhaustion: the pool's queue of waiting getters and the handshake with the puts that
//! reach the common ring.
//!
//! A get that finds the pool empty may wait ([`crate::Pool::get_wait`],
//! [`crate::Pool::get_bulk_wait`], the future [`GetWait`]): it registers in the queue, in arrival
//! order, and sleeps (parked thread, or pending future keeping its `Waker`) until a put that
//! reached the ring wakes it, its timeout passes or (the future) it is dropped.
//!
//! The argument (the handshake's SeqCst order, who is woken, the default cache size) is DESIGN.md,
//! "Waiting on exhaustion"; what the code must keep:
//!
//! * **Zero cost when nobody waits.** The cached put does nothing new. Only an operation whose
//!   cache token went to the ring (flush, uncached put, failed get giving back its refill,
//!   thread-exit flush) loads the waiter count, after its token is gone, from the producer line it
//!   just wrote. Wakers are user code: they run outside any token and the queue lock.
//! * **No lost wake-up** (loom: `waiter_handshake_*` in tests/loom.rs). A put CASes `prod.head`
//!   (SeqCst), publishes `prod.tail`, then loads the count (SeqCst); a waiter increments the count
//!   (SeqCst, under the lock), reads `prod.head`, waits for `prod.tail` to reach it
//!   (`settle_producers`), retries, then sleeps. Single-producer rings store `prod.head` plainly:
//!   their put fences (SeqCst) before the load.
//! * **Who is woken.** From the front, unwoken waiters until their requests add up to the entries
//!   in the ring. A woken waiter retries from the ring only (refilling its cache would hoard what
//!   others are owed); one that fails or leaves while entries remain passes the wake-up on. One
//!   that has not retried by the second put after its wake-up (an abandoned future) stops holding
//!   back those behind, and a blocked thread retries every [`RECHECK`] unwoken. FIFO, but
//!   non-waiting gets may barge and a large bulk request may be overtaken.
//! * **What a waiter may rely on.** It is woken when objects reach the common ring. Objects idle in
//!   other threads' caches stay there (DPDK's answer): up to `threads x fill limit`. A future's own
//!   thread puts through to the ring while a waiter is left (`Pool::pin_thread_cache`), so another
//!   task of that thread can serve it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::pool::Pool;
use crate::repr::Repr;
use crate::ring::Ring;
use crate::sync::{current_thread, Ordering, Thread};

/// How a waiter is woken.
enum Wake {
    /// A thread blocked in `get_wait`: unparked.
    Thread(Thread),
    /// A pending future: its waker (taken out when woken; set again at the next poll).
    Waker(Option<Waker>),
}

/// One registered waiter.
struct Entry {
    id: u64,
    /// The registering thread's key (`fork::thread_key`): in a forked child, waiters of threads
    /// that do not exist there are dropped.
    #[cfg_attr(not(all(unix, not(miri), not(loom))), allow(dead_code))]
    key: usize,
    /// Objects it asks for.
    n: usize,
    /// Woken and not yet retried: a put skips it.
    notified: bool,
    /// The round ([`Inner::round`]) of its wake-up, while `notified`.
    round: u64,
    wake: Wake,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Calls of [`WaitQueue::wake`] so far: a woken waiter is owed its objects in the next round
    /// only.
    round: u64,
    entries: VecDeque<Entry>,
}

/// Something to wake, taken out of the queue under its lock and woken after it.
enum Wakeup {
    Thread(Thread),
    Waker(Waker),
}

impl Wakeup {
    /// Wakes, containing a panic of the waker (user code) instead of unwinding into the put: that
    /// put has moved its objects into the ring but may not have emptied the caller's `Vec` or table
    /// yet, so an unwind left handles of free objects with the caller (duplicate handle, two live
    /// `&mut T`: tests/waker_panic.rs), aborted in a thread-exit flush (TLS destructor), and
    /// skipped the round's later waiters. The payload is leaked, not dropped (its drop is user code
    /// too).
    fn wake_contained(self) {
        if let Err(payload) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || self.wake()))
        {
            std::mem::forget(payload);
        }
    }

    fn wake(self) {
        match self {
            Wakeup::Thread(t) => t.unpark(),
            Wakeup::Waker(w) => w.wake(),
        }
    }
}

/// The longest a blocked waiter sleeps before retrying from the ring unwoken: the bound on its wait
/// behind a woken future that never retries (module docs).
const RECHECK: Duration = Duration::from_millis(100);

/// Wake-ups taken per round of the lock: a fixed array, so nothing is allocated under the lock (a
/// global allocator may use the pool).
const ROUND: usize = 8;

/// The queue of waiting getters of one pool, in arrival order. Its waiter count lives on the ring's
/// producer line ([`Ring::waiting`]).
pub(crate) struct WaitQueue {
    /// A leaf lock of crate::fork's order (loom's `Mutex` under loom). Boxed: the fork handlers
    /// reach it by raw pointer (`CoreLocks`).
    #[cfg(not(loom))]
    inner: Box<crate::fork::Lock<Inner>>,
    #[cfg(loom)]
    inner: crate::sync::Mutex<Inner>,
    /// Waiters registered and waits timed out since build (metrics `idxpool_waits_total` /
    /// `idxpool_wait_timeouts_total`; touched only on waiting paths).
    waits: std::sync::atomic::AtomicU64,
    timeouts: std::sync::atomic::AtomicU64,
}

impl WaitQueue {
    pub(crate) fn new() -> Self {
        WaitQueue {
            #[cfg(not(loom))]
            inner: Box::new(crate::fork::Lock::new(Inner::default())),
            #[cfg(loom)]
            inner: crate::sync::Mutex::new(Inner::default()),
            waits: std::sync::atomic::AtomicU64::new(0),
            timeouts: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// `(waits, timeouts)` since the pool was built.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.waits.load(Relaxed), self.timeouts.load(Relaxed))
    }

    #[cfg(not(loom))]
    fn lock(&self) -> crate::fork::LockGuard<'_, Inner> {
        self.inner.lock()
    }

    #[cfg(loom)]
    fn lock(&self) -> crate::sync::MutexGuard<'_, Inner> {
        // No user code runs under this lock: never poisoned, and a poisoned queue is still
        // consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter for `n` objects at the back; returns its id. Then waits for the puts
    /// already reserved in the ring (the handshake, module docs).
    fn register<E: Copy>(&self, ring: &Ring<E>, n: usize, wake: Wake) -> u64 {
        self.waits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut entry = Some(Entry {
            id: 0,
            key: crate::fork::thread_key(),
            n,
            notified: false,
            round: 0,
            wake,
        });
        // Nothing is allocated or freed under the lock: a global allocator may use this pool, and
        // its puts and failed gets take this lock (tests/reentrant_alloc.rs). A full queue is
        // regrown outside, then moved.
        let mut spare: Option<VecDeque<Entry>> = None;
        let mut old: Option<VecDeque<Entry>> = None;
        let id = loop {
            let mut q = self.lock();
            if q.entries.len() == q.entries.capacity() {
                match spare.take() {
                    Some(mut bigger) if bigger.capacity() > q.entries.len() => {
                        bigger.extend(q.entries.drain(..)); // within its capacity
                        old = Some(std::mem::replace(&mut q.entries, bigger));
                    }
                    _ => {
                        let want = (q.entries.len() * 2).max(4);
                        drop(q);
                        drop(old.take());
                        spare = Some(VecDeque::with_capacity(want));
                        continue;
                    }
                }
            }
            let id = q.next_id;
            q.next_id += 1;
            let mut e = entry.take().expect("pushed once");
            e.id = id;
            q.entries.push_back(e); // within its capacity: no allocation
            ring.waiting().fetch_add(1, Ordering::SeqCst);
            crate::sync::seq_cst_fence_under_loom();
            break id;
        };
        drop((spare, old)); // freed after the lock
        ring.settle_producers();
        id
    }

    /// Clears the waiter's `notified` mark before it retries; a future gives its current waker
    /// (cloned before the lock: user code). The replaced waker is dropped after the lock.
    fn rearm(&self, id: u64, waker: Option<&Waker>) {
        let mut fresh = waker.map(|w| Some(w.clone()));
        {
            let mut q = self.lock();
            if let Some(e) = q.entries.iter_mut().find(|e| e.id == id) {
                e.notified = false;
                if let (Wake::Waker(slot), Some(new)) = (&mut e.wake, fresh.as_mut()) {
                    let keep = matches!((&*slot, &*new), (Some(a), Some(b)) if a.will_wake(b));
                    if !keep {
                        std::mem::swap(slot, new);
                    }
                }
            }
        }
        drop(fresh);
    }

    /// Removes the waiter (served, timed out or cancelled).
    fn leave<E: Copy>(&self, ring: &Ring<E>, id: u64) {
        let gone = {
            let mut q = self.lock();
            let pos = q.entries.iter().position(|e| e.id == id);
            let gone = pos.and_then(|p| q.entries.remove(p));
            if gone.is_some() {
                ring.waiting().fetch_sub(1, Ordering::SeqCst);
            }
            gone
        };
        drop(gone); // its waker, after the lock
    }

    /// Wakes waiters for the entries in the ring less those owed to woken waiters not yet retried:
    /// from the front (with `behind`, after that waiter), unwoken ones until their requests add up
    /// to that count. Wakers run after the lock.
    ///
    /// A woken waiter is owed its objects in the next call only: one that has not retried by the
    /// call after (an abandoned future; rarely a long-descheduled thread) no longer holds back
    /// those behind, which are woken instead. It keeps its wake-up and retries whenever it runs; a
    /// wrong guess costs one spurious wake-up (tests/wait.rs,
    /// `a_woken_future_never_polled_again_holds_back_no_later_waiter`).
    #[cold]
    #[inline(never)]
    pub(crate) fn wake<E: Copy>(&self, ring: &Ring<E>, behind: Option<u64>) {
        let mut budget = ring.count();
        let mut from = 0usize;
        let mut first = true;
        while budget > 0 {
            let mut out: [Option<Wakeup>; ROUND] = Default::default();
            let mut k = 0;
            let more = {
                let mut q = self.lock();
                if first {
                    first = false;
                    q.round += 1;
                    let last = q.round - 1;
                    let owed: usize = q
                        .entries
                        .iter()
                        .filter(|e| e.notified && e.round == last)
                        .map(|e| e.n)
                        .sum();
                    budget = budget.saturating_sub(owed);
                }
                let round = q.round;
                let start = match behind {
                    Some(id) => match q.entries.iter().position(|e| e.id == id) {
                        Some(p) => p + 1,
                        None => 0,
                    },
                    None => 0,
                };
                let mut i = start.max(from);
                while i < q.entries.len() && budget > 0 && k < ROUND {
                    let e = &mut q.entries[i];
                    i += 1;
                    if e.notified {
                        continue;
                    }
                    e.notified = true;
                    e.round = round;
                    budget = budget.saturating_sub(e.n.max(1));
                    out[k] = match &mut e.wake {
                        Wake::Thread(t) => Some(Wakeup::Thread(t.clone())),
                        Wake::Waker(w) => w.take().map(Wakeup::Waker),
                    };
                    k += 1;
                }
                from = i;
                i < q.entries.len() && budget > 0
            };
            for w in out.into_iter().flatten() {
                w.wake_contained();
            }
            if !more {
                break;
            }
        }
    }
}

impl<E: Copy + Send + 'static> crate::pool::Waiters<E> for WaitQueue {
    fn wake_for(&self, ring: &Ring<E>) {
        self.wake(ring, None);
    }

    /// The fork's prepare handler: the queue lock (crate::fork, a leaf of its order).
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_prepare(&self) {
        self.inner.raw().fork_take();
    }

    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_parent(&self) {
        self.inner.raw().fork_release();
    }

    /// In the child: waiters of threads that do not exist there are taken out (woken, they would
    /// hold back their entries from the child's waiters for ever) and the ring's waiter count set
    /// to those left (the forking thread's). Their entries are leaked: a `Waker`'s drop is user
    /// code, not to run in the handler. Then the lock is released.
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_child(&self, waiting: &crate::sync::AtomicU32) {
        let me = crate::fork::thread_key();
        // Nothing when the prepare handler skipped the lock (held by the forking thread: never).
        self.inner.with_fork_hold(|q| {
            let mut i = 0;
            while i < q.entries.len() {
                if q.entries[i].key == me {
                    i += 1;
                } else if let Some(dead) = q.entries.remove(i) {
                    std::mem::forget(dead); // no allocation, no user code
                }
            }
            waiting.store(q.entries.len() as u32, Ordering::SeqCst);
        });
        self.inner.raw().fork_release();
    }
}

/// Runs a waiting get: `first` (through the caller's cache; returned unless `Exhausted`), then,
/// registered, `retry` (ring only) at each wake-up until it succeeds or `timeout` passes.
pub(crate) fn wait_blocking<X, E: Copy>(
    queue: &WaitQueue,
    ring: &Ring<E>,
    n: usize,
    capacity: usize,
    timeout: Duration,
    first: impl FnOnce() -> Result<X, PoolError>,
    mut retry: impl FnMut() -> Result<X, PoolError>,
) -> Result<X, PoolError> {
    match first() {
        Err(PoolError::Exhausted { .. }) if n <= capacity => {}
        other => return other, // served, or a request that no wait can serve
    }
    let start = Instant::now();
    let deadline = start.checked_add(timeout);
    let id = queue.register(ring, n, Wake::Thread(current_thread()));
    let mut woken = false;
    loop {
        if woken {
            // Before the retry: a put from now on wakes us again.
            queue.rearm(id, None);
        }
        woken = true;
        match retry() {
            Err(PoolError::Exhausted { .. }) => {}
            done => {
                queue.leave(ring, id);
                if ring.count() > 0 {
                    queue.wake(ring, None);
                }
                return done;
            }
        }
        if ring.count() > 0 {
            // Too few for us: let the waiters behind try.
            queue.wake(ring, Some(id));
        }
        let now = Instant::now();
        let left = match deadline {
            Some(d) if now >= d => {
                queue.leave(ring, id);
                if ring.count() > 0 {
                    queue.wake(ring, None);
                }
                queue
                    .timeouts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(PoolError::Timeout {
                    requested: n,
                    waited: now - start,
                });
            }
            Some(d) => Some(d - now),
            None => None,
        };
        // At most RECHECK at a time: a retry serves this waiter from objects owed to an abandoned
        // woken future even when no later put comes.
        crate::sync::park(Some(left.map_or(RECHECK, |l| l.min(RECHECK))));
    }
}

/// Waiting gets (the protocol is in the module docs).
impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// [`Pool::get`] that waits, up to `timeout`, when the pool has no object for this caller: the
    /// thread parks in a FIFO queue until a put brings objects to the common ring, then retries
    /// from the ring. `Duration::MAX` waits for ever; a zero timeout tries once more after
    /// registering.
    ///
    /// A waiter is woken by objects reaching the common ring (an uncached put, a cache flush,
    /// [`Pool::flush`], a [`crate::LocalCache`] flushed or dropped, a thread's exit). A thread
    /// about to wait first flushes its own cache; objects in other threads' caches stay until their
    /// owner flushes (as in DPDK). Non-waiting gets may barge. The technique: SPDK's iobuf wait
    /// queue served on put, with a handshake on the ring's producer line (DESIGN.md, "Waiting").
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(1).cache_size(0).build()?;
    /// let h = pool.get()?;
    /// std::thread::scope(|s| {
    ///     s.spawn(|| pool.put(h)); // another thread gives it back
    ///     let h = pool.get_wait(Duration::from_secs(10)).unwrap(); // woken by that put
    ///     pool.put(h);
    /// });
    /// let h = pool.get()?;
    /// let err = pool.get_wait(Duration::from_millis(1)).unwrap_err();
    /// assert!(matches!(err, idxpool::PoolError::Timeout { requested: 1, .. }));
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// [`PoolError::Timeout`] (nothing taken) when `timeout` passed first. A pool cannot be dropped
    /// under a waiter (borrowed).
    #[must_use = "the handle owns an object: give it back with pool.put(h)"]
    pub fn get_wait(&self, timeout: Duration) -> Result<Handle<T, B, R>, PoolError> {
        wait_blocking(
            self.wait_queue(),
            &self.core.ring,
            1,
            self.capacity() as usize,
            timeout,
            || self.get().inspect_err(|_| self.flush_before_waiting()),
            || self.get_from_ring(),
        )
    }

    /// [`Pool::get_bulk`] that waits, up to `timeout`, until `n` objects can be taken at once (as
    /// [`Pool::get_wait`]): appends exactly `n` handles to `out`, or none.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).cache_size(0).build()?;
    /// let mut a = Vec::new();
    /// pool.get_bulk(&mut a, 4)?;
    /// std::thread::scope(|s| {
    ///     s.spawn(|| pool.put_bulk(&mut a));
    ///     let mut b = Vec::new();
    ///     pool.get_bulk_wait(&mut b, 3, Duration::MAX).unwrap();
    ///     assert_eq!(b.len(), 3);
    ///     pool.put_bulk(&mut b);
    /// });
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] at once when `n > capacity`; [`PoolError::Timeout`] when `timeout`
    /// passed first. `out` is unchanged on error.
    #[must_use = "on Ok, `out` holds objects that must be given back with pool.put_bulk"]
    pub fn get_bulk_wait(
        &self,
        out: &mut Vec<Handle<T, B, R>>,
        n: usize,
        timeout: Duration,
    ) -> Result<(), PoolError> {
        let cap = self.capacity() as usize;
        let (q, ring) = (self.wait_queue(), &self.core.ring);
        let first = self
            .get_bulk(out, n)
            .inspect_err(|_| self.flush_before_waiting());
        wait_blocking(
            q,
            ring,
            n,
            cap,
            timeout,
            || first,
            || self.get_bulk_from_ring(out, n),
        )
    }

    /// A future of one handle that waits, without blocking a thread, until the pool has an object
    /// for this caller (woken as [`Pool::get_wait`]). Runtime-agnostic; for a timeout, wrap it in
    /// the runtime's (e.g. `tokio::time::timeout`): dropping it is cancellation-safe.
    ///
    /// ```
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(async {
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).build()?;
    /// let h = pool.get_async().await?; // ready at once: the pool has objects
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// # }).unwrap();
    /// ```
    pub fn get_async(&self) -> impl Future<Output = Result<Handle<T, B, R>, PoolError>> + '_ {
        GetWait::new(self)
    }

    /// Gives the calling thread's cached objects to the ring before it waits: otherwise objects
    /// idle in waiting threads' caches would wait with them (a small pool's objects all there: none
    /// served; stress test `many_waiters_many_putters_blocking`). The flush checks for waiters, so
    /// they may serve an earlier waiter first (FIFO).
    #[cold]
    fn flush_before_waiting(&self) {
        self.flush();
    }

    /// The waiter queue.
    pub(crate) fn wait_queue(&self) -> &WaitQueue {
        let attached: &dyn std::any::Any = &*self.core.waiters;
        attached
            .downcast_ref()
            .expect("idxpool: every pool is built with wait.rs's queue")
    }

    /// Exactly `n` entries from the common ring into `dst`, or none (`Err(entries seen)`).
    fn ring_take(&self, dst: &mut [std::mem::MaybeUninit<R::Entry>]) -> Result<usize, usize> {
        let n = dst.len();
        let t = self.core.ring.dequeue(dst, crate::ring::Behavior::Bulk);
        if t.n == n {
            self.count_ring_get(n);
            Ok(n)
        } else {
            Err(t.remaining)
        }
    }

    /// `n` objects appended to `out` from the common ring only, or none (a bulk waiter's retry). No
    /// cache token, hence no waiter check: the waiter is one.
    fn get_bulk_from_ring(
        &self,
        out: &mut Vec<Handle<T, B, R>>,
        n: usize,
    ) -> Result<(), PoolError> {
        out.reserve(n); // get_into_vec's contract: room before
        self.get_into_vec(out, n, true, |dst| self.ring_take(dst))
            .map(|_| ())
    }

    /// One object from the common ring only (a waiter's retry: it must not refill its cache with
    /// objects others wait for).
    pub(crate) fn get_from_ring(&self) -> Result<Handle<T, B, R>, PoolError> {
        self.get_into_array::<1>(|dst| self.ring_take(dst))
            .map(|[h]| h)
    }
}

/// The future of [`Pool::get_async`]: resolves to one handle once a put brings an object to the
/// common ring for this caller, without blocking a thread. Runtime-agnostic: it keeps the task's
/// [`Waker`] only.
///
/// Cancellation-safe: dropping it takes nothing, and a wake-up it had received passes to the next
/// waiter. It borrows the pool, so a pool cannot be dropped under a waiter.
///
/// ```
/// use std::future::Future;
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
///
/// let pool = idxpool::PoolBuilder::<u64>::with_default(1).cache_size(0).build()?;
/// let h = pool.get()?; // the pool is empty now
/// let mut fut = Box::pin(pool.get_async());
/// struct Noop;
/// impl Wake for Noop { fn wake(self: Arc<Self>) {} }
/// let waker = Waker::from(Arc::new(Noop));
/// let mut cx = Context::from_waker(&waker);
/// assert!(fut.as_mut().poll(&mut cx).is_pending()); // registered as a waiter
/// pool.put(h);                                         // wakes it
/// let Poll::Ready(Ok(h)) = fut.as_mut().poll(&mut cx) else { panic!() };
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// The pool outlives the future:
///
/// ```compile_fail
/// let pool = idxpool::PoolBuilder::<u64>::with_default(1).build().unwrap();
/// let fut = pool.get_async();
/// drop(pool); // error: `pool` is borrowed by the future
/// drop(fut);
/// ```
#[must_use = "futures do nothing unless polled"]
pub(crate) struct GetWait<'p, T: ?Sized + Element, B: Brand, R: Repr> {
    pool: &'p Pool<T, B, R>,
    /// The waiter's id once registered.
    id: Option<u64>,
}

impl<'p, T: ?Sized + Element, B: Brand, R: Repr> GetWait<'p, T, B, R> {
    pub(crate) fn new(pool: &'p Pool<T, B, R>) -> Self {
        GetWait { pool, id: None }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Future for GetWait<'_, T, B, R> {
    type Output = Result<Handle<T, B, R>, PoolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let pool = this.pool;
        let (queue, ring) = (pool.wait_queue(), &pool.core.ring);
        let id = match this.id {
            None => {
                match pool.get() {
                    Err(PoolError::Exhausted { .. }) => pool.flush_before_waiting(),
                    done => return Poll::Ready(done),
                }
                let id = queue.register(ring, 1, Wake::Waker(Some(cx.waker().clone())));
                this.id = Some(id);
                id
            }
            Some(id) => {
                // Woken (or polled again): try first; only a failed try re-arms (clears the mark,
                // keeps the current waker) and retries before `Pending`, so a served wake-up locks
                // once (to leave).
                if let Ok(h) = pool.get_from_ring() {
                    this.id = None;
                    queue.leave(ring, id);
                    if ring.count() > 0 {
                        queue.wake(ring, None);
                    }
                    return Poll::Ready(Ok(h));
                }
                queue.rearm(id, Some(cx.waker()));
                id
            }
        };
        // This thread's puts now reach the ring, waking us: another task of this thread may put the
        // object back (single-threaded runtime).
        pool.pin_thread_cache();
        match pool.get_from_ring() {
            Err(PoolError::Exhausted { .. }) => {
                if ring.count() > 0 {
                    queue.wake(ring, Some(id));
                }
                Poll::Pending
            }
            done => {
                this.id = None;
                queue.leave(ring, id);
                if ring.count() > 0 {
                    queue.wake(ring, None);
                }
                Poll::Ready(done)
            }
        }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Drop for GetWait<'_, T, B, R> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let (queue, ring) = (self.pool.wait_queue(), &self.pool.core.ring);
            queue.leave(ring, id);
            // A wake-up it received (or entries it was owed) goes to the next waiters.
            if ring.count() > 0 {
                queue.wake(ring, None);
            }
        }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> std::fmt::Debug for GetWait<'_, T, B, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetWait")
            .field("pool", &self.pool.name())
            .field("registered", &self.id.is_some())
            .finish()
    }
}
