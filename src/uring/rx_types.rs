//! The receiver's configuration, its packets, socket ids and states, and its counters.

use crate::handle::Handle;
use crate::repr::Repr;

/// Settings of a [`UringRx`](super::UringRx).
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{Packet, RxConfig, RxStats, SockId, SockState, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// // Lend half the pool, re-arm 16 buffers at a time, 64 bytes of headroom (the length stamp).
/// let config = RxConfig { lend: 32, burst: 16, headroom: 64, ..RxConfig::default() };
/// let mut rx = UringRx::new(pool.clone(), config)?;
/// let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
/// rx.recv_multishot(sock.as_raw_fd())?;
/// for _ in 0..4 {
///     rx.poll(&mut Vec::new(), None)?; // each poll lends at most one burst of 16
/// }
/// assert_eq!(pool.lent_to_kernel(), 32); // never more than `lend`
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RxConfig {
    /// Submission queue entries (completion queue: 8 times as many, at least 4096). Default 256.
    pub ring_entries: u32,
    /// Buffers per group: a power of two of at most [`MAX_GROUP_SIZE`](super::MAX_GROUP_SIZE);
    /// 0 (the default) takes the smallest one that holds the whole pool, capped at that.
    pub group_size: u32,
    /// Buffer group id of group 0 (default 0).
    pub bgid_base: u16,
    /// Buffers kept lent; 0 (default): 3/4 of the pool (the rest: packets in flight, caches).
    pub lend: u32,
    /// Most buffers lent by one re-arm (one `get_burst`, one tail store per group). Default 256.
    pub burst: u32,
    /// Bytes at the start of each object the kernel does not write; at 4 or more the length is
    /// stamped there ([`payload`](super::payload)). For a [`PacketBuf`](crate::PacketBuf)
    /// pool, the room's bytes before the data (its header is never lent either): the received
    /// buffer's [`headroom`](crate::PacketBuf::headroom), usually the pool's
    /// ([`DEFAULT_HEADROOM`](crate::packet::DEFAULT_HEADROOM)). Default 0.
    pub headroom: u32,
    /// Completions a waiting [`UringRx::poll`](super::UringRx::poll) waits for (or its
    /// timeout): more means fewer system calls under load, more latency when light. Default 1.
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

/// Which socket a packet came from ([`UringRx::recv_multishot`](super::UringRx::recv_multishot)).
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{Packet, RxConfig, RxStats, SockId, SockState, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// let mut rx = UringRx::new(pool.clone(), RxConfig::default())?;
/// let bind = || UdpSocket::bind("127.0.0.1:0").unwrap();
/// let (a, b) = (bind(), bind());
/// let ida: SockId = rx.recv_multishot(a.as_raw_fd())?;
/// let idb = rx.recv_multishot(b.as_raw_fd())?;
/// assert_ne!(ida, idb);
/// b.send_to(b"to b", b.local_addr().unwrap()).unwrap();
/// let mut packets: Vec<Packet<[u8; 2048]>> = Vec::new();
/// while packets.is_empty() { rx.poll(&mut packets, Some(Duration::from_millis(10)))?; }
/// let p = packets.pop().unwrap();
/// assert_eq!((p.sock, p.len), (idb, 4));
/// pool.put(p.handle);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SockId(pub usize);

/// A received datagram (or stream chunk) and its length after the headroom. Put `handle` back.
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{Packet, RxConfig, RxStats, SockId, SockState, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// let mut rx = UringRx::new(pool.clone(), RxConfig::default())?;
/// let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
/// rx.recv_multishot(sock.as_raw_fd())?;
/// sock.send_to(b"ping", sock.local_addr().unwrap()).unwrap();
/// let mut packets: Vec<Packet<[u8; 2048]>> = Vec::new();
/// while packets.is_empty() { rx.poll(&mut packets, Some(Duration::from_millis(10)))?; }
/// for p in packets.drain(..) {
///     assert_eq!(&pool.get_ref(&p.handle)[..p.len as usize], b"ping");
///     pool.put(p.handle); // the object goes back; the receiver lends it again later
/// }
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[must_use = "the packet's handle owns a pool object: put it back into the pool"]
#[derive(Debug)]
pub struct Packet<T: ?Sized, B = crate::brand::Runtime, R: Repr = crate::repr::DefaultRepr> {
    /// The object holding the data.
    pub handle: Handle<T, B, R>,
    /// Received bytes.
    pub len: u32,
    /// The socket it came from.
    pub sock: SockId,
}

/// What a socket's receive is doing ([`UringRx::sock_state`](super::UringRx::sock_state)).
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{Packet, RxConfig, RxStats, SockId, SockState, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// let mut rx = UringRx::new(pool.clone(), RxConfig::default())?;
/// let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let id = rx.recv_multishot(sock.as_raw_fd())?;
/// assert_eq!(rx.sock_state(id), Some(SockState::Open));
/// rx.close(id, &mut Vec::new())?; // cancels its receives, waits for their last completions
/// assert_eq!(rx.sock_state(id), Some(SockState::Closed));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
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
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{Packet, RxConfig, RxStats, SockId, SockState, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// let mut rx = UringRx::new(pool.clone(), RxConfig { burst: 16, ..RxConfig::default() })?;
/// let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
/// rx.recv_multishot(sock.as_raw_fd())?;
/// rx.poll(&mut Vec::new(), None)?; // one re-arm: a burst of 16 buffers
/// let s: RxStats = rx.stats();
/// assert_eq!((s.buffers_lent, s.rearm_bursts, s.packets), (16, 1, 0));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
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
