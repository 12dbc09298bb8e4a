//! The receiver's configuration, its packets, socket ids and states, and its counters.

use crate::handle::Handle;
use crate::repr::Repr;

/// Settings of a [`UringRx`](super::UringRx).
#[derive(Clone, Debug)]
pub struct RxConfig {
    /// Submission queue entries of the io_uring instance (the completion queue gets 8 times as
    /// many, at least 4096). Default 256.
    pub ring_entries: u32,
    /// Buffers per group: a power of two of at most [`MAX_GROUP_SIZE`](super::MAX_GROUP_SIZE); 0 (the default) takes
    /// the smallest power of two that holds the whole pool, capped at [`MAX_GROUP_SIZE`](super::MAX_GROUP_SIZE).
    pub group_size: u32,
    /// Buffer group id of group 0 (default 0).
    pub bgid_base: u16,
    /// How many buffers to keep lent to the kernel; 0 (the default) means three quarters of
    /// the pool (the rest is for the application's packets in flight and the caches).
    pub lend: u32,
    /// Most buffers moved to the kernel by one re-arm (one `get_burst` and one tail publish
    /// per touched group). Default 256.
    pub burst: u32,
    /// Bytes at the start of each object the kernel does not write; at 4 or more the
    /// received length is stamped there ([`payload`](super::payload)). Default 0.
    pub headroom: u32,
    /// Completions a waiting [`UringRx::poll`](super::UringRx::poll) waits for (or its timeout): more per wake-up
    /// means fewer system calls per packet under load, at the price of latency when traffic
    /// is light (bounded by the timeout). Default 1.
    pub wait_batch: u32,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            ring_entries: 256,
            group_size: 0,
            bgid_base: 0,
            lend: 0,
            burst: 256,
            headroom: 0,
            wait_batch: 1,
        }
    }
}

/// Which socket a packet came from: returned by [`UringRx::recv_multishot`](super::UringRx::recv_multishot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SockId(pub usize);

/// A received datagram (or stream chunk): the handle of the pool object the kernel wrote, and
/// how many bytes it wrote (after the headroom). Put `handle` back into the pool when done.
#[must_use = "the packet's handle owns a pool object: put it back into the pool"]
#[derive(Debug)]
pub struct Packet<T, B = crate::brand::Runtime, R: Repr = crate::repr::DefaultRepr> {
    /// The object holding the data.
    pub handle: Handle<T, B, R>,
    /// Received bytes.
    pub len: u32,
    /// The socket it came from.
    pub sock: SockId,
}

/// What a socket's receive is doing ([`UringRx::sock_state`](super::UringRx::sock_state)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockState {
    /// Receiving (or waiting for buffers after `ENOBUFS`: re-armed by the next poll).
    Open,
    /// The peer closed the stream (a receive returned 0).
    Eof,
    /// A receive failed with this errno.
    Error(i32),
    /// [`UringRx::close`](super::UringRx::close) cancelled its receives.
    Closed,
}

/// Counters of a [`UringRx`](super::UringRx) since its creation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Packets received (completions that carried a buffer and data).
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Re-arms that lent at least one buffer.
    pub rearm_bursts: u64,
    /// Buffers lent to the kernel in all.
    pub buffers_lent: u64,
    /// Ring-tail stores (at most one per touched group per burst).
    pub tail_publishes: u64,
    /// Multishot receives that ended with `ENOBUFS` (the rings ran dry).
    pub enobufs: u64,
    /// Receives submitted again after they ended (`ENOBUFS`, or ended by the kernel).
    pub recv_rearms: u64,
    /// Completions naming a buffer that was not lent (ignored, nothing handed out).
    pub bad_completions: u64,
    /// Packets received while dropping the `UringRx` (their buffers went back to the pool).
    pub discarded_at_drop: u64,
}
