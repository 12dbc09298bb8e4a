//! The common pool: a lock-free bounded ring with DPDK `rte_ring` semantics, generic over its
//! entry type (`u32` indices for the index pool, pointers for the pointer twin).
//!
//! * Slot count is a power of two; usable capacity is `size - 1`, or exactly the requested count
//!   with [`RingFlags::exact_size`] (as `RING_F_EXACT_SZ`).
//! * Producer and consumer each have a `head` (reservation) and a `tail` (completion) counter of
//!   32 bits that wrap freely: counts are differences modulo 2^32, slot = counter & mask.
//! * Producer and consumer state sit on separate cache lines (`CachePadded`).
//! * Multi-producer: reserve by CAS on `prod.head`, copy, then wait until `prod.tail` reaches our
//!   reservation and publish with a release store (rte_ring's c11 algorithm). The wait uses
//!   `Backoff` and falls back to `yield_now`, so a preempted peer is scheduled instead of
//!   spun against: no livelock with more threads than cores.
//! * Single-producer / single-consumer modes skip the CAS and the wait.
//! * Bulk moves all `n` entries or none; burst moves as many as possible.

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::error::PoolError;
use crate::repr::copy_entries;
use crate::sync::{AtomicU32, Backoff, Ordering};

/// Ring creation options (rte_ring's `RING_F_SP_ENQ`, `RING_F_SC_DEQ`, `RING_F_EXACT_SZ`).
///
/// ```
/// use idxpool::ring::{Ring, RingFlags};
/// let exact = RingFlags { exact_size: true, ..RingFlags::default() };
/// assert_eq!(Ring::<u32>::new(100, exact)?.capacity(), 100);
/// assert_eq!(Ring::<u32>::new(100, RingFlags::default())?.capacity(), 127);
/// let spsc = RingFlags { single_producer: true, single_consumer: true, ..RingFlags::default() };
/// assert!(Ring::<u32>::new(8, spsc).is_err()); // single-thread modes need `unsafe`:
/// // SAFETY: this ring is only used from this thread.
/// let r = unsafe { Ring::<u32>::with_start_counter(8, spsc, 0)? };
/// assert_eq!(r.flags(), spsc);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFlags {
    /// Only one thread ever enqueues: no CAS on the producer head, no wait on its tail. Two
    /// enqueuing threads would write the same slots: only the `unsafe`
    /// [`Ring::with_start_counter`] accepts it ([`Ring::new`] refuses it).
    pub single_producer: bool,
    /// Only one thread ever dequeues (as `single_producer`, for the consumer side).
    pub single_consumer: bool,
    /// Usable capacity is exactly the requested count (the slot count is the next power of two
    /// at or above it), instead of `size - 1`.
    pub exact_size: bool,
}

/// Whether a transfer is all-or-nothing (bulk) or best-effort (burst).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Behavior {
    /// Move exactly `n` entries or none.
    Bulk,
    /// Move as many as possible, up to `n`.
    Burst,
}

/// Which side of the ring a head/tail move is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Producers: `prod.head`/`prod.tail`, bounded by `cons.tail`.
    Prod,
    /// Consumers: `cons.head`/`cons.tail`, bounded by `prod.tail`.
    Cons,
}

/// Result of a ring transfer, with DPDK's out-values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Transfer {
    /// Entries moved.
    pub(crate) n: usize,
    /// After an enqueue: free slots left (rte_ring's `free_space`). After a dequeue: entries
    /// left (rte_ring's `available`). A snapshot, exact only when no other thread is active.
    pub(crate) remaining: usize,
}

#[repr(C)]
struct HeadTail {
    head: AtomicU32,
    tail: AtomicU32,
    /// Producer side only: threads waiting for entries (the pool's waiter queue, wait.rs),
    /// beside the counters a put into the ring has just written, so that the put's check for
    /// waiters reads no other line. Unused on the consumer side and by rings without waiters.
    waiting: AtomicU32,
}

/// The mutable state of a ring: producer and consumer head/tail counters, each pair on its own
/// cache line.
#[repr(C)]
pub(crate) struct RingState {
    prod: CachePadded<HeadTail>,
    cons: CachePadded<HeadTail>,
}

impl RingState {
    /// All four counters at `start`.
    pub(crate) fn new(start: u32) -> Self {
        let ht = || {
            CachePadded::new(HeadTail {
                head: AtomicU32::new(start),
                tail: AtomicU32::new(start),
                waiting: AtomicU32::new(0),
            })
        };
        RingState {
            prod: ht(),
            cons: ht(),
        }
    }
}

/// A bounded lock-free MPMC (or SP/SC) ring of `Copy` entries.
///
/// ```
/// use std::mem::MaybeUninit;
/// use idxpool::ring::{Ring, RingFlags};
/// let ring: Ring<u32> = Ring::new(4, RingFlags::default())?;
/// assert_eq!((ring.capacity(), ring.size()), (7, 8)); // size - 1 usable
/// assert!(ring.enqueue_bulk(&[1, 2, 3]));
/// let mut out = [MaybeUninit::uninit(); 2];
/// assert_eq!(ring.dequeue_burst(&mut out), 2);
/// // SAFETY: dequeue_burst wrote the first 2 entries.
/// assert_eq!(unsafe { [out[0].assume_init(), out[1].assume_init()] }, [1, 2]);
/// assert_eq!(ring.count(), 1);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Ring<E> {
    state: NonNull<RingState>,
    slots: NonNull<MaybeUninit<E>>,
    size: usize,
    mask: u32,
    capacity: u32,
    flags: RingFlags,
    /// Invariant in `E` (entries go in through `&self` and come out as `E`: a covariant
    /// `Ring<&'static str>` would pass for a `Ring<&'a str>` and give back dangling entries).
    _invariant: std::marker::PhantomData<fn(E) -> E>,
    /// Under loom only: one tracked cell per slot, accessed with every slot copy, so that loom
    /// checks that the head/tail protocol orders each slot write before the reads of it and each
    /// read before the next write (the slots are plain memory that loom cannot see).
    #[cfg(loom)]
    shadow: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: entries are plain Copy values moved between threads through the slots; the head/tail
// protocol gives every slot one writer or readers at a time, with release/acquire ordering
// between the writer and later readers. E: Send is required for moving them across threads.
unsafe impl<E: Send> Send for Ring<E> {}
// SAFETY: as above: all shared mutation goes through atomics or through slots reserved by them.
unsafe impl<E: Send> Sync for Ring<E> {}

impl<E: Copy> Ring<E> {
    /// Creates a ring that holds at least `count` entries (exactly `count` with `exact_size`).
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] when `count` is 0 or the slot count would exceed 2^32 (the
    /// counters are 32-bit); [`PoolError::SizeOverflow`] when the slot array cannot be allocated.
    pub fn new(count: u32, flags: RingFlags) -> Result<Self, PoolError> {
        if flags.single_producer || flags.single_consumer {
            return Err(PoolError::config(
                "a single-producer or single-consumer ring is unsound if two threads use that \
                 side: create it with the unsafe Ring::with_start_counter",
            ));
        }
        Self::create(count, flags, 0)
    }

    /// As [`Ring::new`], with any flags, and with all four head/tail counters starting at
    /// `start` instead of 0 (to test the wrap at 2^32 without 4 billion operations).
    ///
    /// # Errors
    /// As [`Ring::new`] for a bad `count`.
    ///
    /// # Safety
    /// With `flags.single_producer`, no two threads may enqueue at the same time for the
    /// ring's life (they would write the same slots and publish slots not yet written); with
    /// `flags.single_consumer`, likewise for dequeues. Without those flags, nothing.
    pub unsafe fn with_start_counter(
        count: u32,
        flags: RingFlags,
        start: u32,
    ) -> Result<Self, PoolError> {
        Self::create(count, flags, start)
    }

    /// The one constructor (the single-thread modes' contract is the caller's).
    fn create(count: u32, flags: RingFlags, start: u32) -> Result<Self, PoolError> {
        let (size, capacity) = Self::geometry(count, flags)?;
        let mut v: Vec<MaybeUninit<E>> = Vec::new();
        v.try_reserve_exact(size).map_err(|e| {
            PoolError::overflow(format!("ring of {size} slots cannot be allocated: {e}"))
        })?;
        // SAFETY: capacity was reserved; MaybeUninit needs no initialisation.
        unsafe { v.set_len(size) };
        let slots = Box::into_raw(v.into_boxed_slice()) as *mut MaybeUninit<E>;
        let state = Box::into_raw(Box::new(RingState::new(start)));
        // Private (heap) state: repaired in a forked child (crate::fork).
        // SAFETY: the state is freed only by drop, after it is unregistered.
        unsafe { crate::fork::register(state as *const dyn crate::fork::Participant) };
        Ok(Ring {
            state: NonNull::new(state).expect("Box pointer is non-null"),
            slots: NonNull::new(slots).expect("Box pointer is non-null"),
            size,
            mask: (size - 1) as u32,
            capacity,
            flags,
            _invariant: std::marker::PhantomData,
            #[cfg(loom)]
            shadow: (0..size).map(|_| loom::cell::UnsafeCell::new(())).collect(),
        })
    }

    fn geometry(count: u32, flags: RingFlags) -> Result<(usize, u32), PoolError> {
        if count == 0 {
            return Err(PoolError::config("ring count is 0"));
        }
        let (size, capacity) = if flags.exact_size {
            ((count as u64).next_power_of_two(), count)
        } else {
            let size = (count as u64 + 1).next_power_of_two();
            if size > 1 << 31 {
                return Err(PoolError::config(format!(
                    "ring of {count} entries needs more than 2^31 slots; use exact_size"
                )));
            }
            (size, (size - 1) as u32)
        };
        if size > 1u64 << 32 {
            return Err(PoolError::config("ring slot count exceeds 2^32"));
        }
        let size = usize::try_from(size).map_err(|_| PoolError::overflow("ring slot count"))?;
        Ok((size, capacity))
    }

    #[inline(always)]
    fn st(&self) -> &RingState {
        // SAFETY: state is a Box freed only by drop.
        unsafe { self.state.as_ref() }
    }

    /// Usable capacity (entries the ring can hold).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Slot count (a power of two).
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The flags the ring was created with.
    pub fn flags(&self) -> RingFlags {
        self.flags
    }

    /// Entries in the ring (a snapshot: exact when no transfer is in flight).
    #[inline]
    pub fn count(&self) -> usize {
        // prod.tail read between two equal reads of cons.tail: the difference is the count at
        // one instant. Two plain reads are not enough: if the reader is preempted between
        // them, the other tail moves on and a ring holding 2 entries read as 63 (prod.tail
        // first: the consumer overtakes the stale value, which wraps) or as 8 (cons.tail first)
        // (tests/stress.rs, ring_count_snapshot_never_exceeds_the_entries_in_circulation).
        let mut cons_tail = self.st().cons.tail.load(Ordering::Acquire);
        let mut prod_tail = self.st().prod.tail.load(Ordering::Acquire);
        for _ in 0..16 {
            let again = self.st().cons.tail.load(Ordering::Acquire);
            if again == cons_tail {
                break;
            }
            cons_tail = again;
            prod_tail = self.st().prod.tail.load(Ordering::Acquire);
        }
        // Under a storm of consumers the retries may run out: never report a negative count.
        let n = prod_tail.wrapping_sub(cons_tail);
        (if n > self.capacity { 0 } else { n }) as usize
    }

    /// Free slots (a snapshot).
    #[inline]
    pub fn free_count(&self) -> usize {
        self.capacity() - self.count()
    }

    /// The count of threads waiting for entries (wait.rs), on the producer counters' line.
    #[inline(always)]
    pub(crate) fn waiting(&self) -> &AtomicU32 {
        &self.st().prod.waiting
    }

    /// True when a waiter may be registered: the check of every put that reached the ring,
    /// after it (wait.rs, "the handshake"). One load of the producer line the put has just
    /// written; a SeqCst fence first in single-producer mode, whose head moves by a plain
    /// store.
    #[inline(always)]
    pub(crate) fn has_waiters(&self) -> bool {
        if self.flags.single_producer {
            crate::sync::fence(Ordering::SeqCst);
        }
        self.st().prod.waiting.load(Ordering::SeqCst) != 0
    }

    /// Waits until every enqueue that had reserved its slots when this call read `prod.head`
    /// (SeqCst, after the caller's registration as a waiter) has published them: afterwards a
    /// dequeue sees their entries. A producer preempted between its reservation and its
    /// publication is waited for with `Backoff` (yielding), as producers wait for each other.
    pub(crate) fn settle_producers(&self) {
        let st = self.st();
        let head = st.prod.head.load(Ordering::SeqCst);
        let backoff = Backoff::new();
        // tail trails head by less than 2^31: "not yet reached" is a positive difference.
        while (head.wrapping_sub(st.prod.tail.load(Ordering::Acquire)) as i32) > 0 {
            backoff.snooze();
        }
    }

    /// Enqueues all of `src` or nothing (rte_ring_enqueue_bulk). Returns true on success.
    #[inline]
    pub fn enqueue_bulk(&self, src: &[E]) -> bool {
        self.enqueue(src, Behavior::Bulk).n == src.len()
    }

    /// Enqueues as many of `src` as fit, in order (rte_ring_enqueue_burst). Returns how many.
    #[inline]
    pub fn enqueue_burst(&self, src: &[E]) -> usize {
        self.enqueue(src, Behavior::Burst).n
    }

    /// Dequeues exactly `dst.len()` entries or nothing (rte_ring_dequeue_bulk).
    #[inline]
    pub fn dequeue_bulk(&self, dst: &mut [MaybeUninit<E>]) -> bool {
        let n = dst.len();
        // SAFETY: dst is valid for n writes.
        unsafe {
            self.dequeue_raw(dst.as_mut_ptr().cast(), n, Behavior::Bulk)
                .n
                == n
        }
    }

    /// Dequeues up to `dst.len()` entries (rte_ring_dequeue_burst); returns how many were
    /// written to the front of `dst`.
    #[inline]
    pub fn dequeue_burst(&self, dst: &mut [MaybeUninit<E>]) -> usize {
        let n = dst.len();
        // SAFETY: dst is valid for n writes.
        unsafe {
            self.dequeue_raw(dst.as_mut_ptr().cast(), n, Behavior::Burst)
                .n
        }
    }

    /// Dequeues into `dst`: all of it or nothing (bulk), or up to its length (burst).
    #[inline]
    pub(crate) fn dequeue(&self, dst: &mut [MaybeUninit<E>], behavior: Behavior) -> Transfer {
        // SAFETY: dst is valid for dst.len() writes.
        unsafe { self.dequeue_raw(dst.as_mut_ptr().cast(), dst.len(), behavior) }
    }

    /// Every entry of a ring nobody else is using, in ring order, put back afterwards (for
    /// audits: the ring is unchanged); false with the entries when they could not all be put
    /// back (a ring in use by another thread).
    pub(crate) fn drain_and_restore(&self) -> (Vec<E>, bool) {
        let n = self.count();
        let mut buf: Vec<E> = Vec::with_capacity(n);
        // SAFETY: buf has capacity n: room for n writes.
        let got = unsafe { self.dequeue_raw(buf.as_mut_ptr(), n, Behavior::Bulk).n };
        // SAFETY: `got` entries were written.
        unsafe { buf.set_len(got) };
        let back = self.enqueue(&buf, Behavior::Bulk).n;
        (buf, back == got)
    }

    /// Enqueues `src` with the given behavior; reports entries moved and free space left.
    #[inline]
    pub(crate) fn enqueue(&self, src: &[E], behavior: Behavior) -> Transfer {
        // SAFETY: src is valid for src.len() reads.
        unsafe { self.enqueue_raw(src.as_ptr(), src.len(), behavior) }
    }

    /// Raw enqueue of `n` entries read from `src` (rte_ring's `__rte_ring_do_enqueue_elem`):
    /// reserve slots by moving `prod.head`, copy in, publish by moving `prod.tail`.
    ///
    /// # Safety
    /// `src` must be valid for `n` reads of `E`.
    pub(crate) unsafe fn enqueue_raw(
        &self,
        src: *const E,
        n: usize,
        behavior: Behavior,
    ) -> Transfer {
        self.transfer(Side::Prod, n, behavior, |head, k| {
            // SAFETY: slots [head, head + k) are reserved for us by move_head: consumers
            // finished reading them (cons.tail acquired there) and no other producer owns
            // them; k <= n, and the caller guarantees src for n reads.
            unsafe { self.copy_in(head, src, k) }
        })
    }

    /// Raw dequeue of up to `n` entries into `dst` (rte_ring's `__rte_ring_do_dequeue_elem`):
    /// reserve entries by moving `cons.head`, copy out, release the slots by moving `cons.tail`.
    ///
    /// # Safety
    /// `dst` must be valid for `n` writes of `E`.
    pub(crate) unsafe fn dequeue_raw(&self, dst: *mut E, n: usize, behavior: Behavior) -> Transfer {
        self.transfer(Side::Cons, n, behavior, |head, k| {
            // SAFETY: slots [head, head + k) were published by producers (prod.tail acquired
            // in move_head) and are reserved for us by the move of cons.head; k <= n, and the
            // caller guarantees dst for n writes.
            unsafe { self.copy_out(head, dst, k) }
        })
    }

    /// One transfer, either direction: reserve ([`Ring::move_head`]), `copy(head, k)` the `k`
    /// reserved entries, publish ([`Ring::update_tail`]).
    #[inline(always)]
    fn transfer(
        &self,
        side: Side,
        n: usize,
        behavior: Behavior,
        copy: impl FnOnce(u32, usize),
    ) -> Transfer {
        let (old_head, k, room) = match self.move_head(side, n, behavior) {
            Ok(r) => r,
            Err(remaining) => return Transfer { n: 0, remaining },
        };
        copy(old_head, k as usize);
        self.update_tail(side, old_head, k);
        Transfer {
            n: k as usize,
            remaining: room as usize,
        }
    }

    /// Reserves up to `n` slots (producer) or entries (consumer) by moving this side's head
    /// (rte_ring's `__rte_ring_move_prod_head` / `__rte_ring_move_cons_head`, one function for
    /// both as in rte_ring_c11_pvt.h's `__rte_ring_headtail_move_head`). Returns `(old_head,
    /// taken, room_left)`, or `Err(room)` when nothing is taken: the free slots (producer) or
    /// entries (consumer) seen.
    #[inline(always)]
    fn move_head(
        &self,
        side: Side,
        n: usize,
        behavior: Behavior,
    ) -> Result<(u32, u32, u32), usize> {
        if n == 0 {
            return Err(match side {
                Side::Prod => self.free_count(),
                Side::Cons => self.count(),
            });
        }
        let st = self.st();
        // `d` is this side's head/tail, `s` the other side's, whose tail bounds our head.
        let (d, s, single, cap) = match side {
            Side::Prod => (
                &st.prod,
                &st.cons,
                self.flags.single_producer,
                self.capacity,
            ),
            Side::Cons => (&st.cons, &st.prod, self.flags.single_consumer, 0),
        };
        let n32 = u32::try_from(n).unwrap_or(u32::MAX);
        let backoff = Backoff::new();
        loop {
            // (A) load-acquire of d.head, pairing with the AcqRel CAS (B) of another thread on
            // this side: a thread that sees another's head also sees an `s.tail` at least as new
            // as the one that thread computed its room from, so `cap + s_tail - old_head`
            // cannot underflow into a huge bogus room. With Relaxed, loom (tests/loom.rs) found
            // a producer overwriting unconsumed slots (and a consumer reading unpublished ones):
            // a fence between the two loads (rte_ring's C11 code) does not prevent that either.
            let old_head = d.head.load(Ordering::Acquire);
            // (C) load-acquire of s.tail, pairing with the other side's store-release (D) in
            // update_tail. Producer: the consumers' reads of the slots we are about to
            // overwrite happen before our writes. Consumer: the producers' slot writes are
            // visible before we read the slots.
            let s_tail = s.tail.load(Ordering::Acquire);
            // Producer: free slots = capacity + cons.tail - prod.head; consumer: entries =
            // prod.tail - cons.head (cap = 0).
            let room = cap.wrapping_add(s_tail).wrapping_sub(old_head);
            let take = match behavior {
                Behavior::Bulk if n32 > room || n32 as usize != n => 0,
                Behavior::Bulk => n32,
                Behavior::Burst => n32.min(room),
            };
            if take == 0 {
                return Err(room.min(self.capacity) as usize);
            }
            let new_head = old_head.wrapping_add(take);
            if single {
                d.head.store(new_head, Ordering::Relaxed);
                return Ok((old_head, take, room - take));
            }
            // (B) CAS AcqRel: see (A). SeqCst on the producer side: the waiter handshake
            // (wait.rs) orders it against a waiter's registration; on x86 and on arm64 with
            // LSE it is the same instruction as AcqRel.
            let order = match side {
                Side::Prod => Ordering::SeqCst,
                Side::Cons => Ordering::AcqRel,
            };
            if d.head
                .compare_exchange_weak(old_head, new_head, order, Ordering::Relaxed)
                .is_ok()
            {
                if side == Side::Prod {
                    // Loom models the CAS as AcqRel: the fence stands for its SeqCst (wait.rs).
                    crate::sync::seq_cst_fence_under_loom();
                }
                return Ok((old_head, take, room - take));
            }
            backoff.snooze();
        }
    }

    /// Publishes a transfer reserved by [`Ring::move_head`]: waits until earlier transfers of
    /// this side have published (multi-thread modes), then moves this side's tail past ours
    /// (rte_ring's `__rte_ring_update_tail`).
    #[inline(always)]
    fn update_tail(&self, side: Side, old_head: u32, n: u32) {
        let st = self.st();
        let (d, single) = match side {
            Side::Prod => (&st.prod, self.flags.single_producer),
            Side::Cons => (&st.cons, self.flags.single_consumer),
        };
        if !single {
            // (E) load-acquire of d.tail: the earlier transfers' slot accesses are ordered
            // before our release below (transitively visible to the other side).
            let backoff = Backoff::new();
            while d.tail.load(Ordering::Acquire) != old_head {
                backoff.snooze();
            }
        }
        // (D) store-release, pairing with the other side's (C) in move_head.
        d.tail.store(old_head.wrapping_add(n), Ordering::Release);
    }

    /// Copies `n` entries into the slots starting at counter `head`, wrapping at the end.
    ///
    /// # Safety
    /// The slots must be reserved for this producer, `src` valid for `n` reads, `n <= size`.
    #[inline]
    unsafe fn copy_in(&self, head: u32, src: *const E, n: usize) {
        let idx = (head & self.mask) as usize;
        let first = n.min(self.size - idx);
        let slots = self.slots.as_ptr().cast::<E>();
        // SAFETY: idx + first <= size and n - first <= idx, both within the slot array; the
        // caller guarantees src and exclusivity.
        unsafe {
            copy_entries(src, slots.add(idx), first);
            copy_entries(src.add(first), slots, n - first);
        }
        #[cfg(loom)]
        self.track_slots(head, n, true);
    }

    /// Copies `n` entries out of the slots starting at counter `head`.
    ///
    /// # Safety
    /// The slots must be published and reserved for this consumer, `dst` valid for `n` writes.
    #[inline]
    unsafe fn copy_out(&self, head: u32, dst: *mut E, n: usize) {
        let idx = (head & self.mask) as usize;
        let first = n.min(self.size - idx);
        let slots = self.slots.as_ptr().cast::<E>();
        // SAFETY: as in copy_in; published slots hold initialised entries.
        unsafe {
            copy_entries(slots.add(idx), dst, first);
            copy_entries(slots, dst.add(first), n - first);
        }
        #[cfg(loom)]
        self.track_slots(head, n, false);
    }

    /// Under loom: records a write (`copy_in`) or read (`copy_out`) of `n` slots from `head`;
    /// loom fails the model if it is not ordered after the conflicting accesses before it.
    #[cfg(loom)]
    fn track_slots(&self, head: u32, n: usize, write: bool) {
        for k in 0..n as u32 {
            let cell = &self.shadow[(head.wrapping_add(k) & self.mask) as usize];
            if write {
                cell.with_mut(|_| ());
            } else {
                cell.with(|_| ());
            }
        }
    }
}

impl<E> Drop for Ring<E> {
    fn drop(&mut self) {
        crate::fork::unregister(self.state.as_ptr().cast());
        // SAFETY: state came from Box::into_raw in with_start_counter and is freed once.
        drop(unsafe { Box::from_raw(self.state.as_ptr()) });
        let slice = std::ptr::slice_from_raw_parts_mut(self.slots.as_ptr(), self.size);
        // SAFETY: slots came from Box::into_raw of a boxed slice of exactly `size` elements.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// A ring in a forked child: a transfer a thread that does not exist there had reserved (head
/// moved) but not published would make the next transfer on that side wait in
/// [`Ring::update_tail`] for ever. The child handler (one thread, no live transfer) sets each
/// side's head back to its tail: a dead producer's entries are dropped (stranded, never
/// duplicated), a dead consumer's are handed out again (DESIGN.md, "Fork", "The child's
/// repairs"). A ring has no lock: nothing to take in the prepare handler.
impl crate::fork::Participant for RingState {
    fn fork_child(&self) {
        for side in [&self.prod, &self.cons] {
            let tail = side.tail.load(Ordering::Relaxed);
            side.head.store(tail, Ordering::Relaxed);
        }
    }
}

impl<E> fmt::Debug for Ring<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ld = |a: &AtomicU32| a.load(Ordering::Relaxed);
        // SAFETY: state is valid for the ring's life.
        let st = unsafe { self.state.as_ref() };
        f.debug_struct("Ring")
            .field("size", &self.size)
            .field("capacity", &self.capacity)
            .field("prod_head", &ld(&st.prod.head))
            .field("prod_tail", &ld(&st.prod.tail))
            .field("cons_head", &ld(&st.cons.head))
            .field("cons_tail", &ld(&st.cons.tail))
            .field("flags", &self.flags)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn deq(r: &Ring<u32>, n: usize, b: Behavior) -> Vec<u32> {
        let mut v = vec![MaybeUninit::uninit(); n];
        // SAFETY: v has n slots.
        let got = unsafe { r.dequeue_raw(v.as_mut_ptr().cast(), n, b).n };
        // SAFETY: the first `got` were written.
        v[..got]
            .iter()
            .map(|x| unsafe { x.assume_init() })
            .collect()
    }

    #[test]
    fn capacity_rules() {
        let r = Ring::<u32>::new(1000, RingFlags::default()).unwrap();
        assert_eq!((r.size(), r.capacity()), (1024, 1023));
        let r = Ring::<u32>::new(1024, RingFlags::default()).unwrap();
        assert_eq!((r.size(), r.capacity()), (2048, 2047));
        let exact = RingFlags {
            exact_size: true,
            ..Default::default()
        };
        let r = Ring::<u32>::new(1000, exact).unwrap();
        assert_eq!((r.size(), r.capacity()), (1024, 1000));
        assert!(matches!(
            Ring::<u32>::new(0, exact),
            Err(PoolError::InvalidConfig { .. })
        ));
    }

    #[test]
    fn bulk_is_all_or_nothing_and_burst_best_effort() {
        let exact = RingFlags {
            exact_size: true,
            ..Default::default()
        };
        let r = Ring::<u32>::new(5, exact).unwrap();
        assert!(r.enqueue_bulk(&[1, 2, 3]));
        assert!(!r.enqueue_bulk(&[4, 5, 6]));
        assert_eq!(r.count(), 3);
        let t = r.enqueue(&[4, 5, 6], Behavior::Burst);
        assert_eq!(t, Transfer { n: 2, remaining: 0 });
        assert_eq!(r.count(), r.capacity());
        assert!(deq(&r, 6, Behavior::Bulk).is_empty());
        assert_eq!(deq(&r, 2, Behavior::Bulk), vec![1, 2]);
        assert_eq!(deq(&r, 10, Behavior::Burst), vec![3, 4, 5]);
        assert_eq!(r.count(), 0);
        assert!(r.enqueue_bulk(&[]));
        assert_eq!(r.enqueue_burst(&[]), 0);
        assert_eq!(deq(&r, 0, Behavior::Bulk).len(), 0);
    }

    #[test]
    fn counters_wrap_at_u32_max_and_stay_fifo() {
        for flags in [
            RingFlags::default(),
            RingFlags {
                single_producer: true,
                single_consumer: true,
                exact_size: false,
            },
        ] {
            // SAFETY: one thread.
            let r = unsafe { Ring::<u32>::with_start_counter(7, flags, u32::MAX - 20) }.unwrap();
            let mut next_in = 0u32;
            let mut next_out = 0u32;
            for round in 0..50 {
                let k = 1 + round % 7;
                let src: Vec<u32> = (next_in..next_in + k as u32).collect();
                assert!(r.enqueue_bulk(&src), "round {round}");
                next_in += k as u32;
                assert_eq!(r.count(), k);
                let out = deq(&r, k, Behavior::Bulk);
                let want: Vec<u32> = (next_out..next_out + k as u32).collect();
                assert_eq!(out, want);
                next_out += k as u32;
            }
            assert_eq!(r.count(), 0);
            assert_eq!(r.free_count(), r.capacity());
        }
    }

    #[test]
    fn mpmc_conserves_entries_with_more_threads_than_cores() {
        let r = Ring::<u32>::new(64, RingFlags::default()).unwrap();
        let threads = 8;
        let per = if cfg!(miri) { 50 } else { 20_000 };
        let seen: Vec<std::sync::atomic::AtomicU32> =
            (0..threads * per).map(|_| Default::default()).collect();
        std::thread::scope(|s| {
            for t in 0..threads {
                let r = &r;
                let seen = &seen;
                s.spawn(move || {
                    let mut next = (t * per) as u32;
                    let end = ((t + 1) * per) as u32;
                    let mut got = 0;
                    let mut buf = [MaybeUninit::<u32>::uninit(); 8];
                    while next < end || got < per {
                        if next < end {
                            let k = ((end - next) as usize).min(1 + (next as usize % 5));
                            let src: Vec<u32> = (next..next + k as u32).collect();
                            next += r.enqueue_burst(&src) as u32;
                        }
                        let want = buf.len().min(per - got);
                        let n = r.dequeue_burst(&mut buf[..want]);
                        for x in &buf[..n] {
                            // SAFETY: the first n entries were written.
                            let v = unsafe { x.assume_init() };
                            seen[v as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        got += n;
                        if n == 0 && next >= end {
                            // Others may hold our share; take whatever comes.
                            std::thread::yield_now();
                        }
                    }
                });
            }
        });
        assert_eq!(r.count(), 0);
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.load(std::sync::atomic::Ordering::Relaxed), 1, "entry {i}");
        }
    }
}
