//! A multi-producer, multi-consumer channel of [`Handle`]s with close: the pipeline's
//! hand-over between threads when several stages feed or drain it (an RX thread and workers),
//! and a worker must tell "nothing yet" from "no more".
//!
//! * **Sized to the pool, never full.** The queue has a slot for every object the pool can
//!   ever hold ([`Pool::max_capacity`]), and handles are unique, so a send cannot find it
//!   full: there is no backpressure arm. Backpressure is the pool's own: a producer that
//!   outruns its consumers runs the pool dry and waits in [`Pool::get_wait`], which a put
//!   wakes only when objects reach the common ring: buffers a consumer thread puts back stay
//!   in that thread's cache up to its flush threshold, so size the caches well below the
//!   pool (`capacity / threads`, or 0) or [`Pool::flush`] after a burst; with a cache that
//!   can hold the whole pool the producers wait for ever. 16 bytes per
//!   object (crossbeam's `ArrayQueue` slot: a stamp and the 4-byte handle).
//! * **Close.** Dropping the last [`Sender`] disconnects the channel, as crossbeam-channel and
//!   `std::sync::mpsc` do: receivers drain what is inside, then get `Disconnected`.
//!   [`Receiver::close`] does the same from the receiving side (tokio's `close`): later sends
//!   give their handle back. Dropping the last [`Receiver`] makes every later send give its
//!   handle back too.
//! * **Nothing is lost.** Handles left inside go back to the pool ([`Pool::put_bulk`], reset
//!   hooks run) when the last receiver drops and when the channel itself drops (the last half
//!   of either side), whichever comes first for each handle. A handle of another pool is
//!   refused with [`SendError::ForeignHandle`], given back untouched.
//! * **Waiting.** [`Receiver::recv`] blocks (parks), [`Receiver::recv_timeout`] up to a
//!   duration, [`Receiver::recv_async`] is a future for any executor (waker-based,
//!   cancel-safe). A send pays for waiting receivers only when there is one: one SeqCst fence
//!   and one load of the waiter count, then the lock and the wake-ups when it is not zero.
//!
//! # Algorithm
//!
//! The queue is crossbeam's bounded MPMC `ArrayQueue` (Vyukov's bounded queue with per-slot
//! stamps); this module adds the close and the waiting. Waiting is the classic handshake
//! (the pool's waiting get uses the same, `wait.rs`): a receiver registers itself (under the
//! waiter lock, the waiter count incremented with SeqCst), issues a SeqCst fence, and tries the
//! queue and the disconnect flags once more before it parks; a sender pushes, issues a SeqCst
//! fence, and reads the waiter count. The two fences forbid both sides missing each other (the
//! store-buffering outcome), so a receiver that parks is woken by the push it did not see. A
//! wake-up wakes every waiter (each removes itself and re-checks): a woken receiver that
//! finds the handle taken by another parks again, and one that is dropped or times out after
//! its wake-up leaves no other waiter asleep. The disconnect is the same handshake with the
//! sender count (or the close flag) in place of the push. Loom models:
//! tests/loom.rs, `channel_*`.
//!
//! ```
//! use std::sync::Arc;
//! use idxpool::{HandleChannel, PacketBuf, PoolBuilder};
//!
//! let pool = Arc::new(PoolBuilder::packet_bufs(256, 2048, 128).build()?);
//! let (tx, rx) = HandleChannel::new(pool.clone())?;
//! let producers: Vec<_> = (0..2u8).map(|k| {
//!     let (tx, pool) = (tx.clone(), pool.clone());
//!     std::thread::spawn(move || {
//!         for i in 0..100u8 {
//!             let mut h = pool.get_wait(std::time::Duration::from_secs(5)).unwrap();
//!             pool.get_mut(&mut h).extend_from_slice(&[k, i]).unwrap();
//!             tx.send(h).unwrap();
//!         }
//!     })
//! }).collect();
//! drop(tx);                                    // the producers hold the others
//! let mut got = 0;
//! for h in &rx {                               // ends when every sender is gone and it is empty
//!     assert_eq!(pool.get_ref(&h).len(), 2);
//!     pool.put(h);
//!     got += 1;
//! }
//! assert_eq!(got, 200);
//! producers.into_iter().for_each(|t| t.join().unwrap());
//! assert_eq!(pool.in_use(), 0);
//! # Ok::<(), idxpool::PoolError>(())
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(loom)]
use loom::sync::{Arc, Mutex};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex};

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::pool::Pool;
use crate::repr::{Repr, ReprImpl};
use crate::sync::{current_thread, fence, park, Ordering, Thread};

type H<T, B, R> = Handle<T, B, R>;

/// What a slot of the queue holds: the handle's bare entry. A handle carries its object
/// type's auto traits; the bare entry does not, so the channel is `Send`/`Sync` when `P` is
/// (`P: Send + Sync` already needs `T: Send`: `Pool<T>` is `Sync` only then), and its
/// documented auto-trait bounds name `P` alone.
type Slot<P> = <<P as PoolRef>::R as ReprImpl>::Entry;

/// The bounded MPMC queue: crossbeam's `ArrayQueue`; under loom, a loom mutex around a
/// `VecDeque` of the same capacity (crossbeam's atomics are not loom's), so that the models
/// check this module's close and waiting protocol over a queue with the same contract.
#[cfg(not(loom))]
struct Queue<E>(crossbeam_queue::ArrayQueue<E>);

#[cfg(not(loom))]
impl<E> Queue<E> {
    fn new(cap: usize) -> Self {
        Queue(crossbeam_queue::ArrayQueue::new(cap))
    }
    #[inline(always)]
    fn push(&self, e: E) -> Result<(), E> {
        self.0.push(e)
    }
    #[inline(always)]
    fn pop(&self) -> Option<E> {
        self.0.pop()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(loom)]
struct Queue<E>(Mutex<std::collections::VecDeque<E>>, usize);

#[cfg(loom)]
impl<E> Queue<E> {
    fn new(cap: usize) -> Self {
        Queue(Mutex::new(std::collections::VecDeque::new()), cap)
    }
    fn push(&self, e: E) -> Result<(), E> {
        let mut q = self.0.lock().unwrap();
        if q.len() == self.1 {
            return Err(e);
        }
        q.push_back(e);
        Ok(())
    }
    fn pop(&self) -> Option<E> {
        self.0.lock().unwrap().pop_front()
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// A receiver waiting for a handle or the disconnect.
enum Waiter {
    Thread(Thread),
    Task(Waker),
}

impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Thread(t) => t.unpark(),
            Waiter::Task(w) => w.wake(),
        }
    }
}

#[derive(Default)]
struct Waiters {
    next_id: u64,
    list: Vec<(u64, Waiter)>,
}

/// A channel of handles of one pool: the state its [`Sender`]s and [`Receiver`]s share
/// ([`HandleChannel::new`] makes one and returns its first two halves). See the
/// [module](crate::channel) for the semantics.
///
/// ```
/// use idxpool::{channel::TryRecvError, HandleChannel, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(8).build()?;
/// let (tx, rx) = HandleChannel::new(&pool)?;
/// tx.send(pool.get()?).unwrap();
/// assert_eq!(rx.channel().len(), 1);
/// let h = rx.try_recv().unwrap();
/// pool.put(h);
/// drop(tx);                                              // the last sender
/// assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Disconnected);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct HandleChannel<P: PoolRef> {
    queue: Queue<Slot<P>>,
    senders: AtomicUsize,
    receivers: AtomicUsize,
    closed: AtomicBool,
    /// Registered waiters: `waiters.list.len()`, kept beside the lock so that a send reads it
    /// without taking the lock.
    waiting: AtomicUsize,
    waiters: Mutex<Waiters>,
    pool: P,
}

/// The sending half: `Clone` (one more sender), `Send` and `Sync` (several threads may send
/// through one). The channel disconnects when the last one drops.
pub struct Sender<P: PoolRef> {
    chan: Arc<HandleChannel<P>>,
}

/// The receiving half: `Clone` (one more receiver: each handle goes to one of them), `Send`
/// and `Sync`. When the last one drops, the handles inside go back to the pool and later
/// sends give theirs back.
pub struct Receiver<P: PoolRef> {
    chan: Arc<HandleChannel<P>>,
}

/// A refused send: the handle comes back untouched.
///
/// ```
/// use idxpool::{channel::SendError, HandleChannel, PoolBuilder};
/// let a = PoolBuilder::<u64>::with_default(4).build()?;
/// let b = PoolBuilder::<u64>::with_default(4).build()?;
/// let (tx, rx) = HandleChannel::new(&a)?;
/// let h = match tx.send(b.get()?) {
///     Err(SendError::ForeignHandle(h)) => h,            // b's handle, refused
///     other => panic!("{other:?}"),
/// };
/// b.put(h);
/// drop(rx);                                             // no receiver left
/// let h = tx.send(a.get()?).unwrap_err().into_inner();
/// a.put(h);
/// assert_eq!((a.in_use(), b.in_use()), (0, 0));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(PartialEq, Eq)]
pub enum SendError<H> {
    /// Every receiver is gone, or one closed the channel.
    Disconnected(H),
    /// The handle is another pool's (run-time pools; brands cannot get here).
    ForeignHandle(H),
    /// The queue was full: only possible after `unsafe` code made a duplicate handle (the
    /// queue has a slot for every object of the pool).
    Full(H),
}

impl<H> SendError<H> {
    /// The handle that was not sent.
    pub fn into_inner(self) -> H {
        match self {
            SendError::Disconnected(h) | SendError::ForeignHandle(h) | SendError::Full(h) => h,
        }
    }
}

impl<H> fmt::Debug for SendError<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Disconnected(_) => "Disconnected(..)",
            SendError::ForeignHandle(_) => "ForeignHandle(..)",
            SendError::Full(_) => "Full(..)",
        })
    }
}

impl<H> fmt::Display for SendError<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Disconnected(_) => "sending on a disconnected handle channel",
            SendError::ForeignHandle(_) => "sending another pool's handle",
            SendError::Full(_) => "handle channel full (a duplicate handle)",
        })
    }
}

impl<H> std::error::Error for SendError<H> {}

/// A refused [`Sender::send_bulk`]: every handle is still in the caller's `Vec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendBulkError {
    /// Every receiver is gone, or one closed the channel.
    #[error("sending on a disconnected handle channel")]
    Disconnected,
    /// The handle at `index` of the `Vec` is another pool's.
    #[error("handle {index} of the burst is another pool's")]
    ForeignHandle {
        /// Its position in the caller's `Vec`.
        index: usize,
    },
    /// The queue was full (only after `unsafe` code made duplicate handles); the handles
    /// not sent are still in the `Vec`, those sent were removed from it.
    #[error("handle channel full (duplicate handles)")]
    Full,
}

/// [`Receiver::try_recv`] found nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// Nothing inside now; senders remain.
    #[error("handle channel empty")]
    Empty,
    /// Nothing inside, and every sender is gone (or the channel was closed): nothing ever
    /// will be.
    #[error("handle channel empty and disconnected")]
    Disconnected,
}

/// [`Receiver::recv`] found the channel empty and disconnected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("handle channel empty and disconnected")]
pub struct RecvError;

/// [`Receiver::recv_timeout`] found nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvTimeoutError {
    /// Nothing arrived within the timeout; senders remain.
    #[error("timed out waiting on a handle channel")]
    Timeout,
    /// Empty and disconnected.
    #[error("handle channel empty and disconnected")]
    Disconnected,
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// The most objects the pool can ever hold: its [`crate::PoolBuilder::max_capacity`]
    /// (the capacity when it cannot grow).
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(8).max_capacity(64).build()?;
    /// assert_eq!((pool.capacity(), pool.max_capacity()), (8, 64));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn max_capacity(&self) -> u32 {
        self.geometry.capacity
    }
}

impl<P: PoolRef> HandleChannel<P> {
    /// Handles inside now (a snapshot).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no handle is inside now (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pool whose handles the channel carries (as held).
    pub fn pool(&self) -> &P {
        &self.pool
    }

    /// Whether sends are refused now: every receiver gone, or [`Receiver::close`] called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.receivers.load(Ordering::Acquire) == 0
    }

    /// Whether receivers will get nothing more once it is empty: every sender gone, or
    /// closed.
    pub fn is_disconnected(&self) -> bool {
        self.senders.load(Ordering::SeqCst) == 0 || self.closed.load(Ordering::SeqCst)
    }

    /// Registers a waiter; the caller issues the SeqCst fence and re-checks before it parks.
    fn register(&self, w: Waiter) -> u64 {
        let mut ws = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        let id = ws.next_id;
        ws.next_id += 1;
        ws.list.push((id, w));
        self.waiting.fetch_add(1, Ordering::SeqCst);
        id
    }

    /// Whether waiter `id` is still registered (no wake-up has removed it).
    fn is_registered(&self, id: u64) -> bool {
        let ws = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        ws.list.iter().any(|(k, _)| *k == id)
    }

    /// Removes waiter `id` if a wake-up has not already. Its waker is dropped after the lock:
    /// the drop is user code, which may use this channel again (drop the last sender, close
    /// it) and so take the lock (tests/channel_edges.rs).
    fn deregister(&self, id: u64) {
        let gone = {
            let mut ws = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            let i = ws.list.iter().position(|(k, _)| *k == id);
            let gone = i.map(|i| ws.list.swap_remove(i));
            if gone.is_some() {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
            }
            gone
        };
        drop(gone);
    }

    /// After a push (or a disconnect) and its SeqCst fence: wakes every waiter, if any.
    #[inline(always)]
    fn wake_if_waiting(&self) {
        if self.waiting.load(Ordering::Relaxed) != 0 {
            self.wake_all();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_all(&self) {
        // The waiters are taken out in chunks onto the stack, so the list keeps its capacity
        // and a receiver that parks again allocates nothing (tests/channel_alloc.rs). Only
        // as many as were listed at the call are woken: receivers that register meanwhile
        // cannot keep this sender waking for ever.
        const CHUNK: usize = 8;
        let mut left = usize::MAX;
        while left > 0 {
            let mut batch: [Option<Waiter>; CHUNK] = Default::default();
            let mut n = 0;
            {
                let mut ws = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
                left = left.min(ws.list.len());
                while n < CHUNK.min(left) {
                    let (_, w) = ws.list.swap_remove(0);
                    batch[n] = Some(w);
                    n += 1;
                }
                self.waiting.fetch_sub(n, Ordering::SeqCst);
            }
            left -= n;
            // Outside the lock: a waker is user code. A panic of one is contained here, as
            // the pool's waiting get contains it (wait.rs): it does not keep the other
            // waiters asleep, does not unwind out of a send that delivered its handle (the
            // caller would take it for a failed send), and does not abort the process from
            // the last sender's drop on a thread that is unwinding already (a panic while
            // panicking). The payload is leaked, not dropped (its drop is user code too).
            // tests/channel_edges.rs.
            for w in batch.iter_mut().take(n).filter_map(Option::take) {
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()))
                {
                    std::mem::forget(p);
                }
            }
        }
    }

    /// After a push and its SeqCst fence: when the last receiver is gone, its drain may have
    /// run before the push (the send's check saw it still there); the sender gives back what
    /// is inside, so that nothing stays stranded while senders live. The receiver's drop
    /// decrements the count (SeqCst) before it drains, so one of the two sees the handle.
    #[inline(always)]
    fn drain_if_abandoned(&self) {
        if self.receivers.load(Ordering::SeqCst) == 0 {
            self.drain_to_pool();
        }
    }

    fn drain_to_pool(&self) {
        let mut v = Vec::new();
        while let Some(e) = self.queue.pop() {
            v.push(Handle::<P::T, P::B, P::R>::from_entry(e));
        }
        if !v.is_empty() {
            // From a drop (the last receiver's, the channel's) or a send: a reset hook's panic
            // during an unwind is contained (the handles are back either way).
            crate::guard::put_in_drop(|| self.pool.pool().put_bulk(&mut v));
        }
    }
}

impl<P, T: ?Sized + Element, B: Brand, R: Repr> HandleChannel<P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    /// A channel for handles of `pool` (`&Pool` or `Arc<Pool>`), with one sender and one
    /// receiver; clone either for more. Its queue has a slot for each of the pool's
    /// [`Pool::max_capacity`] objects.
    ///
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the queue's slots cannot be allocated.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(pool: P) -> Result<(Sender<P>, Receiver<P>), PoolError> {
        let cap = pool.pool().max_capacity() as usize;
        // crossbeam allocates `cap` slots of a stamp and a handle; fail typed, not abort.
        let slot = std::mem::size_of::<usize>() + std::mem::size_of::<H<T, B, R>>();
        if cap
            .checked_mul(slot)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(PoolError::overflow(format!(
                "handle channel of {cap} slots"
            )));
        }
        // crossbeam's allocation is infallible (a failure aborts): the same size asked
        // fallibly first, and released, turns a request the allocator refuses (an
        // address-space limit, a pool that may grow to 2^31 objects) into the typed error.
        let mut probe: Vec<(usize, H<T, B, R>)> = Vec::new();
        if probe.try_reserve_exact(cap.max(1)).is_err() {
            return Err(PoolError::overflow(format!(
                "handle channel of {cap} slots: the allocator refused {} bytes",
                cap.saturating_mul(std::mem::size_of::<(usize, H<T, B, R>)>())
            )));
        }
        drop(probe);
        let chan = Arc::new(HandleChannel {
            queue: Queue::new(cap.max(1)),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            closed: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
            pool,
        });
        Ok((Sender { chan: chan.clone() }, Receiver { chan }))
    }

    fn try_recv(&self) -> Result<H<T, B, R>, TryRecvError> {
        if let Some(e) = self.queue.pop() {
            return Ok(Handle::from_entry(e));
        }
        if self.is_disconnected() {
            // The last send happened before the disconnect this load saw: one more pop
            // finds it.
            return self
                .queue
                .pop()
                .map(Handle::from_entry)
                .ok_or(TryRecvError::Disconnected);
        }
        Err(TryRecvError::Empty)
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<H<T, B, R>, RecvTimeoutError> {
        loop {
            match self.try_recv() {
                Ok(h) => return Ok(h),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let id = self.register(Waiter::Thread(current_thread()));
            fence(Ordering::SeqCst);
            match self.try_recv() {
                Err(TryRecvError::Empty) => {}
                r => {
                    self.deregister(id);
                    return r.map_err(|_| RecvTimeoutError::Disconnected);
                }
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        self.deregister(id);
                        // Woken just now or not: one more look before giving up, so that a
                        // wake-up meant for this waiter is never dropped with a handle
                        // inside.
                        return self.try_recv().map_err(|e| match e {
                            TryRecvError::Empty => RecvTimeoutError::Timeout,
                            TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                        });
                    }
                    Some(d - now)
                }
            };
            // Parks only while registered: a wake-up removes the waiter before it unparks, so
            // one that came since the registration is seen here and not slept through (even
            // if its unpark token was spent: loom's model, for one, clears it when a thread
            // blocks on a lock).
            if self.is_registered(id) {
                park(timeout);
            }
            self.deregister(id);
        }
    }
}

/// Every handle still inside goes back to the pool (the last half of either side dropped).
impl<P: PoolRef> Drop for HandleChannel<P> {
    fn drop(&mut self) {
        self.drain_to_pool();
    }
}

impl<P: PoolRef> fmt::Debug for HandleChannel<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleChannel")
            .field("pool", &self.pool.pool().name())
            .field("len", &self.queue.len())
            .field("senders", &self.senders.load(Ordering::Relaxed))
            .field("receivers", &self.receivers.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl<P, T: ?Sized + Element, B: Brand, R: Repr> Sender<P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    /// Sends `h` to one receiver. Never blocks; FIFO per sender.
    ///
    /// # Errors
    /// The handle back, untouched: [`SendError::ForeignHandle`] when it is another pool's,
    /// [`SendError::Disconnected`] when every receiver is gone or one closed the channel.
    #[inline]
    pub fn send(&self, h: H<T, B, R>) -> Result<(), SendError<H<T, B, R>>> {
        let c = &*self.chan;
        if !c.pool.pool().owns(&h) {
            return Err(SendError::ForeignHandle(h));
        }
        if c.is_closed() {
            return Err(SendError::Disconnected(h));
        }
        if let Err(e) = c.queue.push(h.into_entry()) {
            return Err(SendError::Full(Handle::from_entry(e)));
        }
        fence(Ordering::SeqCst);
        c.drain_if_abandoned();
        c.wake_if_waiting();
        Ok(())
    }

    /// Sends every handle of `hs` (all or none), emptying it; one wake-up check for the lot.
    ///
    /// # Errors
    /// Every handle stays in `hs`: [`SendBulkError::ForeignHandle`] naming the first foreign
    /// one, [`SendBulkError::Disconnected`].
    pub fn send_bulk(&self, hs: &mut Vec<H<T, B, R>>) -> Result<(), SendBulkError> {
        let c = &*self.chan;
        if let Some(index) = hs.iter().position(|h| !c.pool.pool().owns(h)) {
            return Err(SendBulkError::ForeignHandle { index });
        }
        if c.is_closed() {
            return Err(SendBulkError::Disconnected);
        }
        let mut full = false;
        let mut rest = Vec::new();
        for h in hs.drain(..) {
            if full {
                rest.push(h);
            } else if let Err(e) = c.queue.push(h.into_entry()) {
                full = true;
                rest.push(Handle::from_entry(e));
            }
        }
        fence(Ordering::SeqCst);
        c.drain_if_abandoned();
        c.wake_if_waiting();
        if full {
            *hs = rest;
            return Err(SendBulkError::Full);
        }
        Ok(())
    }

    /// The channel (its length, pool, state).
    pub fn channel(&self) -> &HandleChannel<P> {
        &self.chan
    }
}

impl<P: PoolRef> Clone for Sender<P> {
    fn clone(&self) -> Self {
        self.chan.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            chan: self.chan.clone(),
        }
    }
}

/// The last sender's drop disconnects the channel and wakes every waiting receiver.
impl<P: PoolRef> Drop for Sender<P> {
    fn drop(&mut self) {
        if self.chan.senders.fetch_sub(1, Ordering::SeqCst) == 1 {
            fence(Ordering::SeqCst);
            self.chan.wake_all();
        }
    }
}

impl<P: PoolRef> fmt::Debug for Sender<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Sender").field(&*self.chan).finish()
    }
}

impl<P, T: ?Sized + Element, B: Brand, R: Repr> Receiver<P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    /// A handle if one is inside, without waiting.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`]; [`TryRecvError::Disconnected`] when it is empty and every
    /// sender is gone (or it was closed).
    #[inline]
    pub fn try_recv(&self) -> Result<H<T, B, R>, TryRecvError> {
        self.chan.try_recv()
    }

    /// A handle, waiting (parked) until one is sent or the channel disconnects.
    ///
    /// # Errors
    /// [`RecvError`] when it is empty and disconnected.
    pub fn recv(&self) -> Result<H<T, B, R>, RecvError> {
        self.chan.recv_until(None).map_err(|_| RecvError)
    }

    /// A handle, waiting at most `timeout`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`]; [`RecvTimeoutError::Disconnected`] when empty and
    /// disconnected.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<H<T, B, R>, RecvTimeoutError> {
        // A deadline past what Instant can hold: wait without one.
        self.chan.recv_until(Instant::now().checked_add(timeout))
    }

    /// A future of a handle, for any executor: ready with a handle, or
    /// `Err(`[`RecvError`]`)` when empty and disconnected. Cancel-safe: dropping it loses no
    /// handle (nothing is taken before it is ready) and no other receiver's wake-up.
    ///
    /// ```
    /// # #[cfg(not(miri))] {
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let pool = std::sync::Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap());
    /// let (tx, rx) = idxpool::HandleChannel::new(pool.clone()).unwrap();
    /// let p = pool.clone();
    /// std::thread::spawn(move || tx.send(p.get().unwrap()).unwrap());
    /// let h = rt.block_on(rx.recv_async()).unwrap();
    /// pool.put(h);
    /// # }
    /// ```
    pub fn recv_async(&self) -> RecvFuture<'_, P> {
        RecvFuture {
            chan: &self.chan,
            id: None,
        }
    }

    /// Up to `max` handles appended to `out` without waiting: how many (at least 1).
    ///
    /// # Errors
    /// As [`Receiver::try_recv`] when none is there (`out` unchanged).
    pub fn try_recv_burst(
        &self,
        out: &mut Vec<H<T, B, R>>,
        max: usize,
    ) -> Result<usize, TryRecvError> {
        if max == 0 {
            return Ok(0);
        }
        out.push(self.chan.try_recv()?);
        Ok(1 + self.fill(out, max - 1))
    }

    /// Up to `max` handles appended to `out`, waiting for the first: how many (at least 1,
    /// or 0 when `max` is 0).
    ///
    /// # Errors
    /// [`RecvError`] when empty and disconnected (`out` unchanged).
    pub fn recv_burst(&self, out: &mut Vec<H<T, B, R>>, max: usize) -> Result<usize, RecvError> {
        if max == 0 {
            return Ok(0);
        }
        out.push(self.recv()?);
        Ok(1 + self.fill(out, max - 1))
    }

    /// [`Receiver::recv_burst`] waiting at most `timeout` for the first handle.
    ///
    /// # Errors
    /// As [`Receiver::recv_timeout`] (`out` unchanged).
    pub fn recv_burst_timeout(
        &self,
        out: &mut Vec<H<T, B, R>>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, RecvTimeoutError> {
        if max == 0 {
            return Ok(0);
        }
        out.push(self.recv_timeout(timeout)?);
        Ok(1 + self.fill(out, max - 1))
    }

    fn fill(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        let mut k = 0;
        while k < n {
            match self.chan.queue.pop() {
                Some(e) => out.push(Handle::from_entry(e)),
                None => break,
            }
            k += 1;
        }
        k
    }

    /// Refuses every later send (their handles come back as [`SendError::Disconnected`]);
    /// what is inside can still be received, then receivers see the disconnect. Wakes every
    /// waiting receiver.
    pub fn close(&self) {
        self.chan.closed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.chan.wake_all();
    }

    /// A blocking iterator: [`Receiver::recv`] until the channel is empty and disconnected.
    pub fn iter(&self) -> Iter<'_, P> {
        Iter { rx: self }
    }

    /// The channel (its length, pool, state).
    pub fn channel(&self) -> &HandleChannel<P> {
        &self.chan
    }
}

impl<P: PoolRef> Clone for Receiver<P> {
    fn clone(&self) -> Self {
        self.chan.receivers.fetch_add(1, Ordering::Relaxed);
        Receiver {
            chan: self.chan.clone(),
        }
    }
}

/// The last receiver's drop refuses later sends and gives every handle inside back to the
/// pool (a send racing the drop gives back what it finds inside after its push).
impl<P: PoolRef> Drop for Receiver<P> {
    fn drop(&mut self) {
        if self.chan.receivers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.chan.drain_to_pool();
        }
    }
}

impl<P: PoolRef> fmt::Debug for Receiver<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Receiver").field(&*self.chan).finish()
    }
}

/// [`Receiver::iter`].
pub struct Iter<'r, P: PoolRef> {
    rx: &'r Receiver<P>,
}

impl<P, T: ?Sized + Element, B: Brand, R: Repr> Iterator for Iter<'_, P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    type Item = H<T, B, R>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok()
    }
}

impl<'r, P, T: ?Sized + Element, B: Brand, R: Repr> IntoIterator for &'r Receiver<P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    type Item = H<T, B, R>;
    type IntoIter = Iter<'r, P>;
    fn into_iter(self) -> Iter<'r, P> {
        self.iter()
    }
}

/// [`Receiver::recv_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'r, P: PoolRef> {
    chan: &'r HandleChannel<P>,
    /// The waiter registered by the last `Pending`, if a wake-up has not removed it.
    id: Option<u64>,
}

impl<P, T: ?Sized + Element, B: Brand, R: Repr> Future for RecvFuture<'_, P>
where
    P: PoolRef<T = T, B = B, R = R>,
{
    type Output = Result<H<T, B, R>, RecvError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(id) = this.id.take() {
            this.chan.deregister(id);
        }
        match this.chan.try_recv() {
            Ok(h) => return Poll::Ready(Ok(h)),
            Err(TryRecvError::Disconnected) => return Poll::Ready(Err(RecvError)),
            Err(TryRecvError::Empty) => {}
        }
        let id = this.chan.register(Waiter::Task(cx.waker().clone()));
        fence(Ordering::SeqCst);
        match this.chan.try_recv() {
            Err(TryRecvError::Empty) => {
                this.id = Some(id);
                Poll::Pending
            }
            r => {
                this.chan.deregister(id);
                Poll::Ready(r.map_err(|_| RecvError))
            }
        }
    }
}

impl<P: PoolRef> Drop for RecvFuture<'_, P> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.chan.deregister(id);
        }
    }
}
