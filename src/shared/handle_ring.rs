//! Handle channels: MPMC rings in the region that carry handles between processes.
//!
//! Channel `c` is a [`crate::ring::Ring`] of `u32` object indices placed in the region with
//! `Ring::from_raw_parts`, sized to hold every object of the pool, so a send never fails for
//! lack of room. A handle in a channel is marked [`IN_CHANNEL`] in the owner table: the sender
//! gives it up before the enqueue, the receiver claims it after the dequeue. Object contents
//! written before `send` are visible after `recv` (release/acquire on the ring's tails).

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

use bytemuck::Pod;

use super::owner::{FREE, IN_CHANNEL};
use super::{SharedHandle, SharedPool};
use crate::ring::{Ring, RingState};

impl<T: Pod> SharedPool<T> {
    fn chan(&self, chan: u32) -> &Ring<u32> {
        self.chans.get(chan as usize).unwrap_or_else(|| {
            panic!(
                "idxpool shared: channel {chan} out of range ({} channels)",
                self.chans.len()
            )
        })
    }

    /// Sends a held object to channel `chan`: ownership passes to whichever attachment
    /// receives it.
    ///
    /// # Panics
    /// When `chan` is out of range, or this attachment does not hold the object.
    pub fn send(&self, chan: u32, h: SharedHandle<T>) {
        let ring = self.chan(chan);
        let e = self.check_handle(&h, "send");
        self.release_to_channel(e);
        self.enqueue_all(ring, &[e]);
    }

    /// Sends every handle of `v` to channel `chan`, in order, with one ring operation (drains
    /// `v`).
    ///
    /// # Panics
    /// As [`SharedPool::send`].
    pub fn send_bulk(&self, chan: u32, v: &mut Vec<SharedHandle<T>>) {
        let ring = self.chan(chan);
        for h in v.iter() {
            self.check_handle(h, "send");
        }
        let idx: Vec<u32> = v.drain(..).map(SharedHandle::into_raw).collect();
        for &e in &idx {
            self.release_to_channel(e);
        }
        self.enqueue_all(ring, &idx);
    }

    fn release_to_channel(&self, e: u32) {
        self.check_held(e, "send");
        // Marked first, enqueued second: a kill in between leaves the object marked in a
        // channel but in none (audit: lost_in_channel), never in two places.
        self.owners()[e as usize].store(IN_CHANNEL, Ordering::Release);
    }

    /// Receives one handle from channel `chan`, if any; this attachment now holds it.
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn recv(&self, chan: u32) -> Option<SharedHandle<T>> {
        let ring = self.chan(chan);
        loop {
            let mut b = [MaybeUninit::<u32>::uninit()];
            if ring.dequeue_burst(&mut b) == 0 {
                return None;
            }
            // SAFETY: dequeue_burst wrote one entry.
            let e = unsafe { b[0].assume_init() };
            if self.claim(e, IN_CHANNEL) {
                return Some(SharedHandle::new(e, self.serial));
            }
        }
    }

    /// Receives up to `max` handles from channel `chan` with one ring operation, appending
    /// them to `out`; returns how many.
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn recv_burst(&self, chan: u32, out: &mut Vec<SharedHandle<T>>, max: usize) -> usize {
        let ring = self.chan(chan);
        let mut buf = [MaybeUninit::<u32>::uninit(); 64];
        let mut total = 0;
        while total < max {
            let want = (max - total).min(buf.len());
            let n = ring.dequeue_burst(&mut buf[..want]);
            for b in &buf[..n] {
                // SAFETY: the first n entries were written by dequeue_burst.
                let e = unsafe { b.assume_init() };
                if self.claim(e, IN_CHANNEL) {
                    out.push(SharedHandle::new(e, self.serial));
                    total += 1;
                }
            }
            if n < want {
                break;
            }
        }
        total
    }

    /// Empties channel `chan`, returning the objects in it to the common ring, also when a
    /// process killed inside a send or receive on it left its ring wedged (head != tail): the
    /// ring is reset to empty and usable again. Returns how many objects came back.
    ///
    /// Meant for a channel that a dead process used alone on one side (a per-process inbox,
    /// as `examples/multiproc.rs` sets up), after [`SharedPool::reclaim_dead`]: a death inside
    /// an operation on such a channel then costs that channel's contents only, instead of
    /// wedging every process. Objects a dead sender had reserved room for but not published
    /// are not in the ring: [`SharedPool::audit`] lists them as `lost_in_channel` and
    /// [`SharedPool::repair_lost`] returns them.
    ///
    /// # Panics
    /// When `chan` is out of range.
    ///
    /// # Safety
    /// No other attachment, in any process, may operate on channel `chan` during the call
    /// (afterwards it may).
    pub unsafe fn reset_channel(&self, chan: u32) -> usize {
        let ring = self.chan(chan);
        let [_, prod_tail, _, _] = ring.counters();
        let off = self.sections.chan_slots + chan as u64 * self.sections.chan_stride;
        let (entries, _) = self.ring_entries(ring, off);
        let mut back = Vec::with_capacity(entries.len());
        for e in entries {
            // Entries a receiver already claimed are its own (or, if it died, an orphan for
            // reclaim_in_use_of_dead): only IN_CHANNEL ones come back here.
            if e < self.params.capacity
                && self.owners()[e as usize]
                    .compare_exchange(IN_CHANNEL, FREE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                back.push(e);
            }
        }
        let state = self
            .at::<RingState>(self.sections.chan_states + chan as u64 * self.sections.state_stride);
        // SAFETY: the channel's state lies at its computed in-bounds, aligned offset; the
        // caller guarantees nobody operates on the channel meanwhile, and no reference to the
        // state outlives a ring call, so overwriting it in place races with nothing.
        unsafe { state.write(RingState::new(prod_tail)) };
        self.enqueue_all(&self.ring, &back);
        back.len()
    }

    /// Handles waiting in channel `chan` (snapshot).
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn channel_count(&self, chan: u32) -> usize {
        self.chan(chan).count()
    }

    /// Number of channels.
    pub fn channels(&self) -> u32 {
        self.chans.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;
    use std::sync::atomic::AtomicU32;

    use super::*;
    use crate::shared::SharedOptions;

    #[test]
    fn reset_channel_unwedges_a_ring_a_dead_receiver_reserved() {
        let name = format!("idxpool-unit-{}-reset", std::process::id());
        let pool =
            SharedPool::<u64>::create(&name, 32, 1, SharedOptions::new().cache_size(4).channels(2))
                .unwrap();
        let mut v = Vec::new();
        pool.get_bulk(&mut v, 5).unwrap();
        pool.send_bulk(1, &mut v);
        // A receiver that died after reserving 2 entries (cons.head moved), before publishing
        // (cons.tail did not): the consumer half of the state starts halfway through it.
        let state = pool.sections.chan_states + pool.sections.state_stride;
        let cons_head = pool
            .at::<u8>(state)
            .wrapping_add(size_of::<RingState>() / 2);
        // SAFETY: the consumer head is the first u32 of the second half of the RingState, an
        // AtomicU32 inside the mapping; nothing else uses the channel.
        unsafe { (*cons_head.cast::<AtomicU32>()).fetch_add(2, Ordering::SeqCst) };
        let a = pool.audit();
        assert_eq!(a.stuck_rings.len(), 1, "{a}");
        assert!(a.stuck_rings[0].starts_with("channel 1"), "{a}");
        // SAFETY: nothing else uses channel 1.
        assert_eq!(unsafe { pool.reset_channel(1) }, 5);
        let a = pool.audit();
        assert!(a.is_consistent(), "{a}");
        // The channel works again.
        let h = pool.get().unwrap();
        pool.send(1, h);
        let h = pool.recv(1).unwrap();
        pool.put(h);
        assert_eq!(pool.available(), 32);
        let _ = SharedPool::<u8>::remove(&name);
    }
}
