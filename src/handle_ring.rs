//! Moving handles between threads: a bounded single-producer / single-consumer ring of
//! [`crate::Handle`]s in the style of Linux's `ptr_ring` (2017), e.g. an RX thread handing filled
//! buffers to a worker that frees them (`examples/pktpipe`).
//!
//! # Algorithm (ptr_ring)
//!
//! * An array of `size` slots (any `size >= 1`). A slot holds the handle's entry (never 0 / null)
//!   or the empty sentinel 0 / null.
//! * The sides share **only the slots**: no head/tail counters. Each keeps a private position in
//!   its own half ([`Producer`], [`Consumer`]) on its own cache line. The producer stores into an
//!   empty slot (Relaxed load, Release store); the consumer takes a full one (Acquire load).
//! * **Batched zeroing**: the consumer empties consumed slots lazily, `batch` at a time, in reverse
//!   order. With immediate zeroing an almost full ring has both sides writing the same cache line;
//!   with batching the producer waits until a whole batch (two cache lines of entries: 32 u32 or 16
//!   pointers) is free, and the slot it waits on is written last. The batch falls to 1 where it
//!   would exceed half the ring (`__ptr_ring_set_size`). [`Zeroing`] switches it.
//!
//! # Semantics the caller can rely on
//!
//! * A produce into a full ring **hands the handle(s) back** (`Err(handle)`, or they stay in the
//!   caller's `Vec`/array); nothing is dropped.
//! * With batching, **after one consume the next produce may still fail**; after
//!   [`HandleRing::batch`] consumes it succeeds. With [`Zeroing::Immediate`] each consume frees its
//!   slot.
//! * The ring holds up to `size` handles (no reserved slot).
//! * Bulk operations move all `n` handles or none; burst operations as many as possible.
//! * Dropping both halves returns the handles left to the pool with [`crate::Pool::put_bulk`] (on
//!   the thread dropping the last half). The ring borrows the pool (`'p`), which outlives it.
//!
//! ```
//! use idxpool::{PoolBuilder, HandleRing, handle_ring::Zeroing};
//!
//! PoolBuilder::<[u8; 64]>::zeroed(256).cache_size(32).scoped(|pool| {
//!     let (mut tx, mut rx) = HandleRing::new(&pool, 128, Zeroing::Batched).unwrap();
//!     std::thread::scope(|s| {
//!         s.spawn(|| {
//!             for _ in 0..1000 {
//!                 let mut h = pool.get().unwrap();
//!                 pool.get_mut(&mut h)[0] = 7;
//!                 let mut h = Some(h);
//!                 while let Some(x) = h.take() {
//!                     if let Err(back) = tx.produce(x) {
//!                         h = Some(back); // full: the handle comes back
//!                         std::thread::yield_now();
//!                     }
//!                 }
//!             }
//!         });
//!         let mut got = 0;
//!         while got < 1000 {
//!             match rx.consume() {
//!                 Some(h) => { assert_eq!(pool.get_ref(&h)[0], 7); pool.put(h); got += 1; }
//!                 None => std::thread::yield_now(),
//!             }
//!         }
//!     });
//! }).unwrap();
//! ```

use std::fmt;
use std::num::NonZeroU32;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

#[cfg(loom)]
use loom::sync::Arc;
#[cfg(not(loom))]
use std::sync::Arc;

use crate::brand::Brand;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::repr::{Index, ObjPtr, Offset, Pointer, Repr};
use crate::sync::{AtomicPtr, AtomicU32, Ordering};

/// Cache-line size assumed by the batch rule (`SMP_CACHE_BYTES` on x86-64 and most arm64).
const LINE: usize = 64;

/// How the consumer empties consumed slots.
///
/// ```
/// use idxpool::{handle_ring::Zeroing, HandleRing, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(128).build()?;
/// let (tx, _rx) = HandleRing::new(&pool, 64, Zeroing::Batched)?;
/// assert_eq!(tx.ring().batch(), 32); // two cache lines of 4-byte entries
/// let (tx, _rx) = HandleRing::new(&pool, 64, Zeroing::Immediate)?;
/// assert_eq!(tx.ring().batch(), 1);
/// assert!(HandleRing::new(&pool, 64, Zeroing::BatchOf(0)).is_err());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zeroing {
    /// Each consumed slot is emptied at once (batch 1): the naive ring.
    Immediate,
    /// ptr_ring's rule: batches of two cache lines of entries (`128 / entry size`), or 1 where that
    /// would exceed half the ring.
    Batched,
    /// An explicit batch, also 1 where it would exceed half the ring. `BatchOf(0)` is rejected.
    BatchOf(usize),
}

impl Zeroing {
    /// `"batch"` / `"nobatch"` / `"batch=N"`, as the benchmarks print it.
    pub fn name(&self) -> String {
        match self {
            Zeroing::Immediate => "nobatch".into(),
            Zeroing::Batched => "batch".into(),
            Zeroing::BatchOf(n) => format!("batch={n}"),
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::repr::Index {}
    impl Sealed for crate::repr::Offset {}
    impl Sealed for crate::repr::Pointer {}
}

/// An entry representation a [`HandleRing`] can store in an atomic slot with an empty sentinel:
/// [`Index`] and [`Offset`] (`AtomicU32`, 0 = empty), [`Pointer`] (`AtomicPtr`, null = empty).
/// Sealed.
///
/// ```
/// use idxpool::handle_ring::{SlotRepr, Zeroing};
/// use idxpool::{HandleRing, Index, Offset, Pointer, PoolBuilder};
/// fn ring_ready<R: SlotRepr>() {}
/// ring_ready::<Offset>();
/// ring_ready::<Index>();
/// ring_ready::<Pointer>();
/// // Pointer entries take 8-byte slots: batches of 16 instead of 32.
/// PoolBuilder::<u64>::with_default(64).repr::<Pointer>().scoped(|pool| {
///     let (tx, _rx) = HandleRing::new(&pool, 64, Zeroing::Batched).unwrap();
///     assert_eq!(tx.ring().batch(), 16);
/// })?;
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub trait SlotRepr: Repr + sealed::Sealed {
    /// The atomic slot type.
    #[doc(hidden)]
    type Slot: Send + Sync;
    /// An empty slot.
    #[doc(hidden)]
    fn empty() -> Self::Slot;
    /// The entry in the slot, or None if it is empty.
    #[doc(hidden)]
    fn load(slot: &Self::Slot, order: Ordering) -> Option<Self::Entry>;
    /// Stores an entry.
    #[doc(hidden)]
    fn store(slot: &Self::Slot, e: Self::Entry, order: Ordering);
    /// Empties the slot.
    #[doc(hidden)]
    fn clear(slot: &Self::Slot, order: Ordering);
}

/// Index and Offset entries are both `NonZeroU32`: the same `AtomicU32` slots, 0 = empty.
macro_rules! u32_slot_repr {
    ($($r:ty),*) => {$(
        impl SlotRepr for $r {
            type Slot = AtomicU32;
            #[inline(always)]
            fn empty() -> AtomicU32 {
                AtomicU32::new(0)
            }
            #[inline(always)]
            fn load(slot: &AtomicU32, order: Ordering) -> Option<NonZeroU32> {
                NonZeroU32::new(slot.load(order))
            }
            #[inline(always)]
            fn store(slot: &AtomicU32, e: NonZeroU32, order: Ordering) {
                slot.store(e.get(), order)
            }
            #[inline(always)]
            fn clear(slot: &AtomicU32, order: Ordering) {
                slot.store(0, order)
            }
        }
    )*};
}
u32_slot_repr!(Index, Offset);

// ObjPtr is #[repr(transparent)] over NonNull<u8> (src/repr/); checked here at compile time.
const _: () = assert!(std::mem::size_of::<ObjPtr>() == std::mem::size_of::<NonNull<u8>>());

impl SlotRepr for Pointer {
    type Slot = AtomicPtr<u8>;
    #[inline(always)]
    fn empty() -> AtomicPtr<u8> {
        AtomicPtr::new(std::ptr::null_mut())
    }
    #[inline(always)]
    fn load(slot: &AtomicPtr<u8>, order: Ordering) -> Option<ObjPtr> {
        // Every non-null value in a slot was stored from an ObjPtr by `store` below.
        NonNull::new(slot.load(order)).map(ObjPtr)
    }
    #[inline(always)]
    fn store(slot: &AtomicPtr<u8>, e: ObjPtr, order: Ordering) {
        slot.store(e.0.as_ptr(), order)
    }
    #[inline(always)]
    fn clear(slot: &AtomicPtr<u8>, order: Ordering) {
        slot.store(std::ptr::null_mut(), order)
    }
}

/// The shared part of a handle ring: the slots, and the pool its handles go back to on drop. Made
/// by [`HandleRing::new`] (which returns the two halves); reached through [`Producer::ring`] /
/// [`Consumer::ring`].
///
/// `P` is how the ring holds its pool ([`PoolRef`]): `&Pool`, or `Arc<Pool>` for `'static` halves
/// (`std::thread::spawn`). Algorithm and guarantees: [module docs](self).
///
/// ```
/// use std::sync::Arc;
/// use idxpool::{handle_ring::Zeroing, HandleRing, PoolBuilder};
/// let pool = Arc::new(PoolBuilder::<u64>::with_default(64).build()?);
/// let (mut tx, mut rx) = HandleRing::new(pool.clone(), 8, Zeroing::Batched)?;
/// let mut h = pool.get()?;
/// *pool.get_mut(&mut h) = 7;
/// assert!(tx.produce(h).is_ok());
/// let worker = std::thread::spawn(move || {
///     let h = rx.consume().expect("produced before the spawn");
///     let (pool, v) = (rx.ring().pool(), *rx.ring().pool().get_ref(&h));
///     pool.put(h);
///     v
/// });
/// assert_eq!(worker.join().unwrap(), 7);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct HandleRing<P: PoolRef>
where
    P::R: SlotRepr,
{
    /// `off + size` slots are used from `off`, so that slot 0 starts a 128-byte block.
    slots: Box<[<P::R as SlotRepr>::Slot]>,
    off: usize,
    size: usize,
    batch: usize,
    zeroing: Zeroing,
    pool: P,
}

type H<T, B, R> = Handle<T, B, R>;

/// Whether the other half is gone (this half holds the only reference). Its drop decremented the
/// count with Release; the Acquire fence after seeing 1 makes its last produce visible here.
#[inline]
fn abandoned<X>(ring: &Arc<X>) -> bool {
    if Arc::strong_count(ring) == 1 {
        crate::sync::fence(Ordering::Acquire);
        true
    } else {
        false
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> HandleRing<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    /// Creates a ring of `size` slots for handles of `pool` and returns its producer and consumer
    /// halves (each `Send` when `T: Send`; each used by one thread at a time).
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] when `size` is 0 or `zeroing` is `BatchOf(0)`;
    /// [`PoolError::SizeOverflow`] when the slot array cannot be allocated.
    // Returns the two halves, not Self (as std::sync::mpsc::channel does).
    #[allow(clippy::type_complexity, clippy::new_ret_no_self)]
    pub fn new(
        pool: P,
        size: usize,
        zeroing: Zeroing,
    ) -> Result<(Producer<P>, Consumer<P>), PoolError> {
        if size == 0 {
            return Err(PoolError::config("handle ring size is 0"));
        }
        let want = match zeroing {
            Zeroing::Immediate => 1,
            Zeroing::Batched => 2 * LINE / std::mem::size_of::<R::Entry>(),
            Zeroing::BatchOf(0) => return Err(PoolError::config("handle ring batch is 0")),
            Zeroing::BatchOf(n) => n,
        };
        // __ptr_ring_set_size: batching too much on a small ring makes it bursty.
        let batch = if want > size / 2 { 1 } else { want };
        // Pad so that slot 0 can start a 2-line block (not under loom: every atomic is modelled).
        let pad = if cfg!(loom) {
            0
        } else {
            (2 * LINE / std::mem::size_of::<R::Slot>()).saturating_sub(1)
        };
        let total = size
            .checked_add(pad)
            .ok_or_else(|| PoolError::overflow("handle ring slot count"))?;
        let mut v: Vec<R::Slot> = Vec::new();
        v.try_reserve_exact(total).map_err(|e| {
            PoolError::overflow(format!(
                "handle ring of {size} slots cannot be allocated: {e}"
            ))
        })?;
        v.extend((0..total).map(|_| R::empty()));
        let slots = v.into_boxed_slice();
        let off = if pad == 0 {
            0
        } else {
            let addr = slots.as_ptr() as usize;
            let misalign = addr % (2 * LINE);
            // Slots are size_of::<Slot>()-aligned, so the distance is a whole number of slots.
            ((2 * LINE - misalign) % (2 * LINE)) / std::mem::size_of::<R::Slot>()
        };
        debug_assert!(off <= pad);
        let ring = Arc::new(HandleRing {
            slots,
            off,
            size,
            batch,
            zeroing,
            pool,
        });
        let producer = Producer {
            pos: CachePadded::new(0),
            ring: ring.clone(),
        };
        let consumer = Consumer {
            pos: CachePadded::new(ConsPos { head: 0, tail: 0 }),
            ring,
        };
        Ok((producer, consumer))
    }

    /// Slot count: the most handles the ring holds.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Consumed slots emptied at a time (1 = no batching); after this many consumes a produce into
    /// a full ring succeeds.
    #[inline]
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The zeroing option the ring was created with.
    pub fn zeroing(&self) -> Zeroing {
        self.zeroing
    }

    /// The pool the ring's handles belong to (as held: `&&Pool` or `&Arc<Pool>`).
    pub fn pool(&self) -> &P {
        &self.pool
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> &R::Slot {
        debug_assert!(i < self.size);
        // SAFETY: callers pass i < size (positions wrap at size), and off + size <= slots.len()
        // (`new`).
        unsafe { self.slots.get_unchecked(self.off + i) }
    }

    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        let n = i + 1;
        if n >= self.size {
            0
        } else {
            n
        }
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> Drop for HandleRing<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    fn drop(&mut self) {
        // Both halves are gone (Arc's release/acquire orders their last writes); the consumer
        // emptied its consumed slots in its Drop, so every full slot is a handle never consumed.
        let mut left: Vec<H<T, B, R>> = Vec::new();
        for i in 0..self.size {
            if let Some(e) = R::load(self.slot(i), Ordering::Acquire) {
                R::clear(self.slot(i), Ordering::Relaxed);
                left.push(Handle::from_entry(e));
            }
        }
        if !left.is_empty() {
            // A reset hook's panic during an unwind is contained (the handles are back).
            crate::guard::put_in_drop(|| self.pool.pool().put_bulk(&mut left));
        }
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> fmt::Debug for HandleRing<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleRing")
            .field("repr", &R::NAME)
            .field("size", &self.size)
            .field("batch", &self.batch)
            .field("zeroing", &self.zeroing)
            .finish()
    }
}

/// The producing half of a handle ring: owned by one thread at a time (`Send` when `T: Send`), its
/// position private on its own cache line.
///
/// ```
/// use idxpool::{handle_ring::Zeroing, HandleRing, PoolBuilder};
/// let pool = PoolBuilder::<u32>::with_default(64).build()?;
/// let (mut tx, mut rx) = HandleRing::new(&pool, 2, Zeroing::Immediate)?;
/// let mut hs = Vec::new();
/// pool.get_bulk(&mut hs, 3)?;
/// assert_eq!(tx.produce_burst(&mut hs), 2); // the ring holds 2: one stays in `hs`
/// assert!(tx.is_full());
/// let back = tx.produce(hs.pop().unwrap()).unwrap_err(); // full: the handle comes back
/// pool.put(back);
/// assert_eq!(rx.drain_into(&mut hs), 2);
/// pool.put_bulk(&mut hs);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Producer<P: PoolRef>
where
    P::R: SlotRepr,
{
    pos: CachePadded<usize>,
    ring: Arc<HandleRing<P>>,
}

impl<P, T: ?Sized + crate::element::Element, B, R> Producer<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    /// The shared ring (size, batch, pool).
    pub fn ring(&self) -> &HandleRing<P> {
        &self.ring
    }

    /// True when the [`Consumer`] is gone: nothing produced now will be consumed (rtrb's
    /// `is_abandoned`); the ring's contents go back to the pool when this half drops.
    ///
    /// ```
    /// use idxpool::{handle_ring::Zeroing, HandleRing, PoolBuilder};
    /// let pool = PoolBuilder::<u64>::with_default(8).build()?;
    /// let (tx, rx) = HandleRing::new(&pool, 4, Zeroing::Immediate)?;
    /// assert!(!tx.is_abandoned());
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline]
    pub fn is_abandoned(&self) -> bool {
        abandoned(&self.ring)
    }

    /// True when the next produce would fail (a snapshot: the consumer may free slots any time).
    #[inline]
    pub fn is_full(&self) -> bool {
        R::load(self.ring.slot(*self.pos), Ordering::Relaxed).is_some()
    }

    /// Moves `h` into the ring (`ptr_ring_produce`).
    ///
    /// # Errors
    /// The ring is full: `h` comes back unchanged.
    ///
    /// # Panics
    /// Run-time pools: when `h` is another pool's (the ring gives its handles to its pool).
    #[inline]
    #[track_caller]
    pub fn produce(&mut self, h: H<T, B, R>) -> Result<(), H<T, B, R>> {
        let ring = &*self.ring;
        crate::pool::check_owned::<B, R>(&ring.pool.pool().geometry, h.entry());
        let pos = *self.pos;
        let slot = ring.slot(pos);
        // The slot is empty once the consumer cleared it; coherence on this location orders its
        // read of the old entry before our store.
        if R::load(slot, Ordering::Relaxed).is_some() {
            return Err(h);
        }
        // Release: the consumer's Acquire load sees everything before, including writes to the
        // object.
        R::store(slot, h.into_entry(), Ordering::Release);
        *self.pos = ring.next(pos);
        Ok(())
    }

    /// The identity check of run-time pools for a batch (nothing for brands).
    #[inline(always)]
    #[track_caller]
    fn check_all(&self, hs: &[H<T, B, R>]) {
        crate::pool::check_owned_all::<B, R>(
            &self.ring.pool.pool().geometry,
            crate::pool::entries_of(hs),
        );
    }

    /// Free slots from the producer's position, up to `max` (a slot stays free until we fill it:
    /// only the producer fills).
    #[inline]
    fn free_run(&self, max: usize) -> usize {
        let ring = &*self.ring;
        let mut pos = *self.pos;
        let max = max.min(ring.size); // each slot once
        let mut k = 0;
        while k < max && R::load(ring.slot(pos), Ordering::Relaxed).is_none() {
            k += 1;
            pos = ring.next(pos);
        }
        k
    }

    #[inline]
    fn store_run(&mut self, handles: impl Iterator<Item = H<T, B, R>>) {
        let ring = &*self.ring;
        let mut pos = *self.pos;
        for h in handles {
            R::store(ring.slot(pos), h.into_entry(), Ordering::Release);
            pos = ring.next(pos);
        }
        *self.pos = pos;
    }

    /// Moves every handle of `handles` into the ring (leaving the Vec empty; true) or none (false).
    /// Bulk: all or nothing; an empty Vec succeeds.
    ///
    /// # Panics
    /// Run-time pools: when one of the handles is another pool's (nothing is moved).
    #[must_use = "on false the handles are still in the Vec"]
    #[inline]
    #[track_caller]
    pub fn produce_bulk(&mut self, handles: &mut Vec<H<T, B, R>>) -> bool {
        self.check_all(handles);
        let n = handles.len();
        if n > self.ring.size || self.free_run(n) < n {
            return false;
        }
        self.store_run(handles.drain(..));
        true
    }

    /// Moves as many handles as fit from the front of `handles` into the ring, in order; returns
    /// how many. Burst: best effort.
    ///
    /// # Panics
    /// As [`Producer::produce_bulk`].
    #[inline]
    #[track_caller]
    pub fn produce_burst(&mut self, handles: &mut Vec<H<T, B, R>>) -> usize {
        self.check_all(handles);
        let k = self.free_run(handles.len());
        if k > 0 {
            self.store_run(handles.drain(..k));
        }
        k
    }

    /// Moves all `N` handles into the ring, or none.
    ///
    /// # Errors
    /// Fewer than `N` free slots: the array comes back unchanged.
    ///
    /// # Panics
    /// As [`Producer::produce_bulk`].
    #[inline]
    #[track_caller]
    pub fn produce_array<const N: usize>(
        &mut self,
        handles: [H<T, B, R>; N],
    ) -> Result<(), [H<T, B, R>; N]> {
        self.check_all(&handles);
        if N > self.ring.size || self.free_run(N) < N {
            return Err(handles);
        }
        self.store_run(handles.into_iter());
        Ok(())
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> fmt::Debug for Producer<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("pos", &*self.pos)
            .field("ring", &*self.ring)
            .finish()
    }
}

struct ConsPos {
    /// Next slot to take (ptr_ring's consumer_head).
    head: usize,
    /// First consumed slot not yet emptied (ptr_ring's consumer_tail); `tail <= head`.
    tail: usize,
}

/// The consuming half of a handle ring: owned by one thread at a time (`Send` when `T: Send`), its
/// positions private on their own cache line. Dropping it empties the slots consumed but not yet
/// emptied.
///
/// ```
/// use idxpool::{handle_ring::Zeroing, HandleRing, PoolBuilder};
/// let pool = PoolBuilder::<u32>::with_default(64).build()?;
/// let (mut tx, mut rx) = HandleRing::new(&pool, 16, Zeroing::Immediate)?;
/// let mut hs = Vec::new();
/// pool.get_bulk(&mut hs, 4)?;
/// assert!(tx.produce_bulk(&mut hs));
/// assert!(!rx.consume_bulk(&mut hs, 5)); // all or nothing: only 4 are there
/// assert!(rx.consume_bulk(&mut hs, 4));
/// assert!(rx.consume().is_none());
/// pool.put_bulk(&mut hs);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Consumer<P: PoolRef>
where
    P::R: SlotRepr,
{
    pos: CachePadded<ConsPos>,
    ring: Arc<HandleRing<P>>,
}

impl<P, T: ?Sized + crate::element::Element, B, R> Consumer<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    /// The shared ring (size, batch, pool).
    pub fn ring(&self) -> &HandleRing<P> {
        &self.ring
    }

    /// True when the [`Producer`] is gone: once the ring is empty nothing more will come (its
    /// handles are all visible here then).
    #[inline]
    pub fn is_abandoned(&self) -> bool {
        abandoned(&self.ring)
    }

    /// A handle, or why there is none: [`TryRecvError::Empty`] (more may come) or
    /// [`TryRecvError::Disconnected`] (the producer is gone and the ring empty), as
    /// [`crate::channel::Receiver::try_recv`]. The producer's count is read only when the slot is
    /// empty.
    ///
    /// ```
    /// use idxpool::{channel::TryRecvError, handle_ring::Zeroing, HandleRing, PoolBuilder};
    /// let pool = PoolBuilder::<u64>::with_default(8).build()?;
    /// let (mut tx, mut rx) = HandleRing::new(&pool, 4, Zeroing::Batched)?;
    /// assert_eq!(rx.try_consume().unwrap_err(), TryRecvError::Empty);
    /// tx.produce(pool.get()?).unwrap();
    /// drop(tx);
    /// pool.put(rx.try_consume().unwrap());                  // drained first
    /// assert_eq!(rx.try_consume().unwrap_err(), TryRecvError::Disconnected);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// [`TryRecvError::Empty`]: crate::channel::TryRecvError::Empty
    /// [`TryRecvError::Disconnected`]: crate::channel::TryRecvError::Disconnected
    #[inline]
    pub fn try_consume(&mut self) -> Result<H<T, B, R>, crate::channel::TryRecvError> {
        if let Some(h) = self.consume() {
            return Ok(h);
        }
        if self.is_abandoned() {
            // The producer's last store precedes its drop, made visible by `abandoned`'s Acquire
            // fence.
            return self
                .consume()
                .ok_or(crate::channel::TryRecvError::Disconnected);
        }
        Err(crate::channel::TryRecvError::Empty)
    }

    /// True when the next consume would find nothing (a snapshot).
    #[inline]
    pub fn is_empty(&self) -> bool {
        R::load(self.ring.slot(self.pos.head), Ordering::Relaxed).is_none()
    }

    /// Consumed slots not yet emptied (0..batch).
    pub fn pending(&self) -> usize {
        self.pos.head - self.pos.tail
    }

    /// Advances past the slot at `head`, emptying a batch when due (`__ptr_ring_discard_one`).
    #[inline(always)]
    fn discard_one(&mut self) {
        let ring = &*self.ring;
        let pos = &mut *self.pos;
        let head = pos.head;
        let mut next = head + 1;
        if next - pos.tail >= ring.batch || next >= ring.size {
            // Reverse order: the slot the producer may wait on (tail) is written last, so it
            // touches none of the batch's lines before all are written.
            let mut i = head + 1;
            while i > pos.tail {
                i -= 1;
                R::clear(ring.slot(i), Ordering::Relaxed);
            }
            pos.tail = next;
        }
        if next >= ring.size {
            next = 0;
            pos.tail = 0;
        }
        pos.head = next;
    }

    /// Empties every consumed slot now (what the next batch would do).
    fn flush_pending(&mut self) {
        let ring = &*self.ring;
        let pos = &mut *self.pos;
        let mut i = pos.head;
        while i > pos.tail {
            i -= 1;
            R::clear(ring.slot(i), Ordering::Relaxed);
        }
        pos.tail = pos.head;
    }

    /// Takes the oldest handle, or None if the ring is empty (`ptr_ring_consume`).
    #[inline]
    pub fn consume(&mut self) -> Option<H<T, B, R>> {
        // Acquire pairs with the producer's Release store of the entry.
        let e = R::load(self.ring.slot(self.pos.head), Ordering::Acquire)?;
        self.discard_one();
        Some(Handle::from_entry(e))
    }

    /// True if `n` handles are ready: the `n`-th slot from the head is full (Acquire), so the ones
    /// before are (the producer fills in order, and fewer than `size - pending` slots ahead it can
    /// only hold the `n`-th next entry).
    #[inline]
    fn ready(&self, n: usize) -> bool {
        let ring = &*self.ring;
        if n == 0 {
            return true;
        }
        if n > ring.size - (self.pos.head - self.pos.tail) {
            return false;
        }
        let mut last = self.pos.head + n - 1;
        if last >= ring.size {
            last -= ring.size;
        }
        R::load(ring.slot(last), Ordering::Acquire).is_some()
    }

    /// Appends exactly `n` handles to `out` (oldest first; true) or none (false). Bulk: all or
    /// nothing; `n == 0` succeeds.
    #[must_use = "on true the handles were appended to `out`"]
    #[inline]
    pub fn consume_bulk(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> bool {
        if !self.ready(n) {
            return false;
        }
        out.reserve(n);
        for _ in 0..n {
            let h = self
                .consume()
                .expect("idxpool: handle ring slot empty after its successor was seen full");
            out.push(h);
        }
        true
    }

    /// Appends up to `n` handles to `out` (oldest first); returns how many. Burst: best effort.
    #[inline]
    pub fn consume_burst(&mut self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        let mut k = 0;
        while k < n {
            match self.consume() {
                Some(h) => out.push(h),
                None => break,
            }
            k += 1;
        }
        k
    }

    /// Takes exactly `N` handles, or none (None).
    #[inline]
    pub fn consume_array<const N: usize>(&mut self) -> Option<[H<T, B, R>; N]> {
        if !self.ready(N) {
            return None;
        }
        Some(std::array::from_fn(|_| {
            self.consume()
                .expect("idxpool: handle ring slot empty after its successor was seen full")
        }))
    }

    /// Appends every handle currently in the ring to `out`; returns how many.
    pub fn drain_into(&mut self, out: &mut Vec<H<T, B, R>>) -> usize {
        self.consume_burst(out, usize::MAX)
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> Drop for Consumer<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    fn drop(&mut self) {
        // Consumed-but-not-emptied slots must not look like handles to the ring's Drop.
        self.flush_pending();
    }
}

impl<P, T: ?Sized + crate::element::Element, B, R> fmt::Debug for Consumer<P>
where
    P: PoolRef<T = T, B = B, R = R>,
    B: Brand,
    R: SlotRepr,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("head", &self.pos.head)
            .field("tail", &self.pos.tail)
            .field("ring", &*self.ring)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::PoolBuilder;

    #[test]
    fn batch_rule_and_alignment() {
        PoolBuilder::<u64>::with_default(8)
            .cache_size(0)
            .scoped(|pool| {
                for (size, z, want) in [
                    (64, Zeroing::Batched, 32),
                    (63, Zeroing::Batched, 1),
                    (1024, Zeroing::Immediate, 1),
                    (8, Zeroing::BatchOf(4), 4),
                    (7, Zeroing::BatchOf(4), 1),
                    (1, Zeroing::Batched, 1),
                ] {
                    let (p, c) = HandleRing::new(&pool, size, z).unwrap();
                    assert_eq!(p.ring().batch(), want, "size {size} {z:?}");
                    let r = c.ring();
                    assert_eq!(r.slot(0) as *const _ as usize % 128, 0);
                    assert_eq!(r.size(), size);
                }
                assert!(HandleRing::new(&pool, 0, Zeroing::Batched).is_err());
                assert!(HandleRing::new(&pool, 8, Zeroing::BatchOf(0)).is_err());
            })
            .unwrap();
        PoolBuilder::<u64>::with_default(8)
            .cache_size(0)
            .repr::<crate::repr::Pointer>()
            .scoped(|pool| {
                let (p, c) = HandleRing::new(&pool, 64, Zeroing::Batched).unwrap();
                assert_eq!(p.ring().batch(), 16);
                assert_eq!(c.ring().slot(0) as *const _ as usize % 128, 0);
            })
            .unwrap();
    }
}
