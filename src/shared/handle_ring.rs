//! Handle channels: rings in the region carrying handles between processes.
//!
//! Channel `c` is a recoverable ring (`xring`, id `1 + c`) of object indices that holds every
//! object: a send never lacks room. A handle in a channel is marked [`IN_CHANNEL`] in the owner
//! table: the send's record sets the mark as it publishes the entries, the receive's record claims
//! them as it takes them, both under the channel's lock, so the next user completes one whose
//! process was killed. Contents written before `send` are visible after `recv` (release/acquire).

use bytemuck::Pod;

use super::owner::{FREE, IN_CHANNEL};
use super::xring::{XRing, REC_BATCH};
use super::{SharedHandle, SharedPool};

impl<T: Pod> SharedPool<T> {
    fn chan(&self, chan: u32) -> &XRing {
        self.chans.get(chan as usize).unwrap_or_else(|| {
            panic!(
                "idxpool shared: channel {chan} out of range ({} channels)",
                self.chans.len()
            )
        })
    }

    /// Sends a held object to channel `chan`: whichever attachment receives it now owns it.
    ///
    /// # Panics
    /// When `chan` is out of range, or as [`SharedPool::put`] (a handle not this attachment's).
    pub fn send(&self, chan: u32, h: SharedHandle<T>) {
        let ring = self.chan(chan);
        let e = self.check_handle(&h, "send");
        self.unmark_held(e);
        self.enq_held(ring, &[e], IN_CHANNEL);
    }

    /// Sends every handle of `v` to channel `chan`, in order (drains `v`), in recoverable
    /// chunks of 64. Every handle is checked before any is sent.
    ///
    /// # Panics
    /// As [`SharedPool::send`] (then nothing was sent and `v` is unchanged).
    pub fn send_bulk(&self, chan: u32, v: &mut Vec<SharedHandle<T>>) {
        let ring = self.chan(chan);
        for h in v.iter() {
            self.check_handle(h, "send");
        }
        let idx: Vec<u32> = v.drain(..).map(SharedHandle::into_raw).collect();
        for &e in &idx {
            self.unmark_held(e);
        }
        self.enq_held(ring, &idx, IN_CHANNEL);
    }

    /// Receives one handle from channel `chan`, if any; this attachment now holds it.
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn recv(&self, chan: u32) -> Option<SharedHandle<T>> {
        let ring = self.chan(chan);
        loop {
            let mut one = None;
            if self.deq_held(ring, 1, IN_CHANNEL, |e| one = Some(e)) == 0 {
                return None;
            }
            if let Some(e) = one {
                return Some(SharedHandle::new(e, self.serial));
            }
        }
    }

    /// Receives up to `max` handles from `chan` into `out` (one ring op per 64); returns how many.
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn recv_burst(&self, chan: u32, out: &mut Vec<SharedHandle<T>>, max: usize) -> usize {
        let ring = self.chan(chan);
        let mut total = 0;
        while total < max {
            let want = (max - total).min(REC_BATCH as usize) as u32;
            let n = self.deq_held(ring, want, IN_CHANNEL, |e| {
                out.push(SharedHandle::new(e, self.serial));
                total += 1;
            });
            if n < want {
                break;
            }
        }
        total
    }

    /// Empties channel `chan` into the common ring, e.g. the inbox of a dead process (its
    /// unprocessed work); returns how many came back. Only about the objects: a death inside a send
    /// or receive does not wedge the channel (the next operation completes it).
    ///
    /// # Panics
    /// When `chan` is out of range.
    pub fn reset_channel(&self, chan: u32) -> usize {
        let ring = self.chan(chan);
        let mut back = Vec::new();
        let mut total = 0;
        loop {
            back.clear();
            let n = self.deq_held(ring, REC_BATCH, IN_CHANNEL, |e| back.push(e));
            for &e in &back {
                self.unmark_held(e);
            }
            self.enq_held(&self.ring, &back, FREE);
            total += back.len();
            if n < REC_BATCH {
                return total;
            }
        }
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
