//! io_uring provided-buffer rings fed from a pool (feature **`uring`**): the kernel receives
//! straight into pool objects, and every completion comes back as a [`Handle`].
//!
//! # Mechanism (DESIGN.md, "Feeding the kernel")
//!
//! [`UringRx`] owns an io_uring instance, a [`crate::LocalCache`] of the pool and one
//! provided-buffer ring (`IORING_REGISTER_PBUF_RING`) per **buffer group**:
//!
//! * **Groups** ([`BidMap`]) of `G` indices, `G` a power of two up to [`MAX_GROUP_SIZE`]: a
//!   group's ring holds all its buffers, so never overflows; one receive per group and socket.
//! * **Lending in bulk.** [`UringRx::poll`] first re-arms: one `get_burst`, one ring entry per
//!   handle, one release store per touched ring's tail. The handles are given up, counted by
//!   [`crate::Pool::lent_to_kernel`] and recorded in a per-group bitmap.
//! * **Completions are handles.** Group and bid give the index; the bitmap must say it is lent
//!   (else [`RxStats::bad_completions`]: never a second handle); it comes back as a [`Packet`].
//! * **Nothing is lost.** A receive ended by `ENOBUFS` leaves the datagram in the socket and is
//!   re-armed by the next poll. [`UringRx::close`] and end of file reap the last completions;
//!   drop cancels and reaps every receive, unregisters the rings and returns every buffer.
//!
//! With a `headroom` of at least 4 ([`RxConfig::headroom`]) the received length is stamped in
//! the object's first 4 bytes (little endian), so a bare handle knows its length ([`payload`]).
//!
//! # Packet buffers
//!
//! A [`crate::PacketBuf`]'s room is lent from `headroom` on, and each completion sets its header
//! (see [`RxObject`]): data offset `headroom`, length `res`, tag the socket's id ([`SockId`]`.0`).
//!
//! ```
//! use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
//! use idxpool::{packet::DEFAULT_HEADROOM, uring::{RxConfig, UringRx}, PoolBuilder};
//! if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
//! let pool = Arc::new(PoolBuilder::packet_bufs(64, 2048, DEFAULT_HEADROOM).build()?);
//! let cfg = RxConfig { headroom: DEFAULT_HEADROOM as u32, ..RxConfig::default() };
//! let mut rx = UringRx::new(pool.clone(), cfg)?;
//! let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
//! let id = rx.recv_multishot(sock.as_raw_fd())?;
//! sock.send_to(b"hello", sock.local_addr().unwrap()).unwrap();
//! let mut packets = Vec::new();
//! while packets.is_empty() { rx.poll(&mut packets, Some(Duration::from_millis(10)))?; }
//! let mut h = packets.pop().unwrap().handle; // the length travels in the buffer
//! let b = pool.get_mut(&mut h);
//! assert_eq!((b.as_slice(), b.headroom()), (&b"hello"[..], DEFAULT_HEADROOM));
//! assert_eq!(b.tag(), id.0 as u32); // the socket's id
//! b.prepend(4)?.copy_from_slice(b"hdr:"); // room in front, as an mbuf's
//! assert_eq!(b.as_slice(), b"hdr:hello");
//! pool.put(h);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! ```no_run
//! # use std::{os::fd::AsRawFd, sync::Arc};
//! # use idxpool::uring::{RxConfig, UringRx};
//! let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(4096).build()?);
//! let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let mut rx = UringRx::new(pool.clone(), RxConfig::default())?;
//! rx.recv_multishot(sock.as_raw_fd())?;
//! let mut packets = Vec::with_capacity(256);
//! rx.poll(&mut packets, Some(std::time::Duration::from_millis(10)))?;
//! for p in packets.drain(..) {
//!     println!("{} bytes: {:?}", p.len, &rx.bytes(&p)[..p.len.min(8) as usize]);
//!     pool.put(p.handle); // back to the pool; the kernel gets it at a later re-arm
//! }
//! # Ok::<(), idxpool::PoolError>(())
//! ```

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{cqueue, opcode, types, IoUring};

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::local::LocalCache;
use crate::owned::PoolRef;
use crate::pool::Pool;
use crate::repr::{Repr, ReprImpl};

pub use crate::xdp::{FrameMap, RxObject};

mod bidmap;
mod group;
mod rx_types;

pub use bidmap::BidMap;
use group::Group;
pub use rx_types::{Packet, RxConfig, RxStats, SockId, SockState};

/// The largest group: a provided-buffer ring has at most 32,768 entries (a `bid` is 16 bits).
pub const MAX_GROUP_SIZE: u32 = 1 << 15;

/// `user_data` of the cancellations this module submits (their completions are ignored).
const CANCEL_UD: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpState {
    /// Submitted, may complete again.
    Armed,
    /// Ended with `ENOBUFS`: submit again once the group has buffers.
    Starved,
    /// Ended by the kernel with data (multishot ended, e.g. on a full completion queue).
    Ended,
    /// A cancellation is in flight.
    Cancelling,
    /// Finished for good.
    Done,
}

struct Op {
    fd: RawFd,
    group: usize,
    sock: usize,
    state: OpState,
}

/// A receiver whose multishot receives pick pool objects from provided-buffer rings (see the
/// [module documentation](self)). `P` holds the pool ([`PoolRef`]), `'static` because the kernel
/// writes the region while the instance lives and `mem::forget` (safe) never closes it (a
/// leaked `Arc` keeps the pool mapped). Objects: [`RxObject`], e.g. `[u8; 2048]`, `PacketBuf`.
///
/// ```
/// use std::{net::UdpSocket, os::fd::AsRawFd, sync::Arc, time::Duration};
/// use idxpool::uring::{RxConfig, UringRx};
/// # if let Err(why) = idxpool::uring::available() { println!("skipped: {why}"); return Ok(()); }
/// let pool = Arc::new(idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).cache_size(0).build()?);
/// let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let mut rx = UringRx::new(pool.clone(), RxConfig::default())?; // holds a clone of the Arc
/// rx.recv_multishot(sock.as_raw_fd())?;
/// rx.poll(&mut Vec::new(), None)?; // lends 48 buffers (3/4 of the pool), arms the receive
/// assert_eq!(pool.lent_to_kernel(), 48);
/// peer.send_to(b"hello", sock.local_addr().unwrap()).unwrap();
/// let mut packets = Vec::new();
/// while packets.is_empty() { rx.poll(&mut packets, Some(Duration::from_millis(10)))?; }
/// let p = packets.pop().unwrap();
/// assert_eq!(rx.bytes(&p), b"hello");
/// assert_eq!(pool.lent_to_kernel(), 47); // the kernel used one buffer: now the packet's
/// pool.put(p.handle);
/// drop(rx); // cancels the receive, every lent buffer comes home
/// assert!(pool.is_full());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct UringRx<P: PoolRef + Clone + 'static>
where
    P::T: RxObject,
{
    // Dropped in this order after `Drop::drop` cancelled, reaped, unregistered and returned
    // everything: the io_uring instance, the rings' memory, the cache, the pool.
    ring: IoUring,
    groups: Vec<Group>,
    map: BidMap,
    ops: Vec<Op>,
    socks: Vec<SockState>,
    scratch: Vec<Handle<P::T, P::B, P::R>>,
    cache: Option<LocalCache<P>>,
    lend_target: u32,
    lent: u32,
    burst: u32,
    /// `RxConfig::headroom`: bytes before the data (for a `PacketBuf`, within its room).
    headroom: u32,
    /// Where the kernel writes in each object: `RxObject::FRONT` plus the headroom.
    lend_off: u32,
    /// Bytes lent per object: the object's size less `lend_off`.
    buf_len: u32,
    wait_batch: usize,
    stats: RxStats,
    pool: P,
}

impl<P: PoolRef + Clone + 'static> UringRx<P>
where
    P::T: RxObject,
{
    /// Sets up an io_uring instance and registers one provided-buffer ring per group
    /// ([`BidMap`]). Nothing is lent until the first [`UringRx::poll`] (or [`UringRx::rearm`]).
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad [`RxConfig`] (group size, headroom not below the
    /// object size, objects over 4 GiB); [`PoolError::Kernel`] when io_uring is unavailable
    /// (`io_uring_disabled`, seccomp, old kernel) or a ring cannot be registered (bgid in use).
    pub fn new(pool: P, cfg: RxConfig) -> Result<Self, PoolError> {
        let p = pool.pool();
        let cap = p.capacity();
        // The maximum: objects a later `grow` adds have their group and bid already.
        let max = p.geometry.capacity;
        let size = p.object_size();
        let front = <P::T as RxObject>::FRONT;
        let lend_off = u64::from(front) + u64::from(cfg.headroom);
        if size > u32::MAX as usize || lend_off >= size as u64 {
            return Err(PoolError::config(format!(
                "uring: headroom {} (after a {front}-byte object header) must be below the \
                 object size {size} (at most 4 GiB)",
                cfg.headroom
            )));
        }
        let group_size = match cfg.group_size {
            0 => max.max(1).next_power_of_two().min(MAX_GROUP_SIZE),
            g => g,
        };
        let map = BidMap::new(max, group_size, cfg.bgid_base)?;
        let cq = (cfg.ring_entries.max(1).saturating_mul(8)).max(4096);
        let ring = IoUring::builder()
            .setup_cqsize(cq)
            .build(cfg.ring_entries.max(1))
            .map_err(|source| PoolError::Kernel {
                op: "io_uring_setup",
                source,
            })?;
        let mut groups = Vec::with_capacity(map.groups() as usize);
        for k in 0..map.groups() {
            let len = map.group_len(k);
            let entries = len.next_power_of_two();
            let mut g = Group::new(map.bgid(k), k * group_size, len, entries)?;
            // SAFETY: the ring memory is page-aligned, holds `entries` slots, and lives until
            // the ring is unregistered (Drop) or the instance closed (`ring` drops first).
            unsafe {
                ring.submitter().register_buf_ring_with_flags(
                    g.mem.as_ptr() as u64,
                    entries as u16,
                    g.bgid,
                    0,
                )
            }
            .map_err(|source| PoolError::Kernel {
                op: "register_buf_ring",
                source,
            })?;
            g.registered = true;
            groups.push(g);
        }
        let lend_target = match cfg.lend {
            0 => (cap / 4 * 3).max(1),
            n => n.min(cap),
        };
        let burst = cfg.burst.clamp(1, lend_target.max(1));
        let mut scratch = Vec::new();
        scratch
            .try_reserve_exact(burst as usize)
            .map_err(|_| PoolError::overflow("uring burst"))?;
        Ok(UringRx {
            ring,
            groups,
            map,
            ops: Vec::new(),
            socks: Vec::new(),
            scratch,
            cache: Some(LocalCache::new(pool.clone())),
            lend_target,
            lent: 0,
            burst,
            headroom: cfg.headroom,
            // lend_off < size <= u32::MAX (checked above).
            lend_off: lend_off as u32,
            buf_len: size as u32 - lend_off as u32,
            wait_batch: cfg.wait_batch.max(1) as usize,
            stats: RxStats::default(),
            pool,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &Pool<P::T, P::B, P::R> {
        self.pool.pool()
    }

    /// The pool as held (`&Arc<Pool>` or `&&'static Pool`), e.g. to clone the `Arc`.
    pub fn pool_ref(&self) -> &P {
        &self.pool
    }

    /// The handle <-> `(bgid, bid)` mapping in use.
    pub fn bid_map(&self) -> BidMap {
        self.map
    }

    /// Buffers lent to the kernel now (in the rings, or picked and not yet reaped).
    pub fn lent(&self) -> u32 {
        self.lent
    }

    /// The counters since creation.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// The state of the receives of `sock`.
    pub fn sock_state(&self, sock: SockId) -> Option<SockState> {
        self.socks.get(sock.0).copied()
    }

    /// A packet's data as received: `len` bytes after the headroom (and a
    /// [`crate::PacketBuf`]'s header, whatever the application did with the header since).
    ///
    /// # Panics
    /// Run-time pools: when the packet's handle is another pool's ([`UringRx::try_bytes`]
    /// returns an error instead).
    pub fn bytes<'a>(&'a self, p: &'a Packet<P::T, P::B, P::R>) -> &'a [u8] {
        let len = p.len.min(self.buf_len) as usize;
        // SAFETY: the pool's handle (as_ptr checks run-time pools), owned by `p`, borrowed
        // shared for 'a; an RxObject is all initialised (Pod; PacketBuf: header built, room
        // zeroed); len <= buf_len = size - lend_off. (`bytes_of` would keep a bounds check.)
        unsafe {
            std::slice::from_raw_parts(
                self.pool()
                    .as_ptr(&p.handle)
                    .cast::<u8>()
                    .as_ptr()
                    .add(self.lend_off as usize),
                len,
            )
        }
    }

    /// [`UringRx::bytes`], with an error instead of a panic for another pool's handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`].
    pub fn try_bytes<'a>(&'a self, p: &'a Packet<P::T, P::B, P::R>) -> Result<&'a [u8], PoolError> {
        self.pool().check(&p.handle)?;
        Ok(self.bytes(p))
    }

    /// Arms a multishot `recv` per buffer group on `fd` (kept open by the caller while armed);
    /// returns the id its packets carry. Submitted at the next [`UringRx::poll`].
    ///
    /// # Errors
    /// [`PoolError::Kernel`] when the submission queue cannot take the requests.
    pub fn recv_multishot(&mut self, fd: RawFd) -> Result<SockId, PoolError> {
        let sock = self.socks.len();
        self.socks.push(SockState::Open);
        for group in 0..self.groups.len() {
            let op = self.ops.len();
            self.ops.push(Op {
                fd,
                group,
                sock,
                state: OpState::Armed,
            });
            self.push_recv(op)?;
        }
        Ok(SockId(sock))
    }

    fn push_recv(&mut self, op: usize) -> Result<(), PoolError> {
        let o = &self.ops[op];
        let e = opcode::RecvMulti::new(types::Fd(o.fd), self.groups[o.group].bgid)
            .build()
            .user_data(op as u64);
        self.push_sqe(&e)
    }

    fn push_sqe(&mut self, e: &io_uring::squeue::Entry) -> Result<(), PoolError> {
        loop {
            // SAFETY: the entry references no user memory (recv with buffer selection, or a
            // cancellation by user_data).
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            self.ring.submit().map_err(|source| PoolError::Kernel {
                op: "io_uring_enter (submit)",
                source,
            })?;
        }
    }

    /// Lends up to a burst of buffers toward the lend target. Returns how many. `poll` calls it.
    pub fn rearm(&mut self) -> u32 {
        let want = self.lend_target.saturating_sub(self.lent).min(self.burst);
        if want == 0 {
            return 0;
        }
        let Some(cache) = self.cache.as_mut() else {
            return 0;
        };
        // No reset on get: a buffer's header is written on receive (see get_burst_for_kernel).
        let got = cache.get_burst_for_kernel(&mut self.scratch, want as usize);
        if got == 0 {
            return 0;
        }
        let pool = self.pool.pool();
        let (lend_off, len) = (u64::from(self.lend_off), self.buf_len);
        for h in self.scratch.drain(..) {
            let index = pool.index_of(&h);
            let k = (index >> self.map.shift) as usize;
            let addr = pool.as_ptr(&h).cast::<u8>().as_ptr() as u64 + lend_off;
            let g = &mut self.groups[k];
            let bid = (index - g.first) as u16;
            g.push(addr, len, bid);
            // The kernel's now: the handle (no destructor) is given up, the lent bit records it.
            let _given_up = h.into_entry();
        }
        for g in &mut self.groups {
            if g.publish() {
                self.stats.tail_publishes += 1;
            }
        }
        self.lent += got as u32;
        pool.core
            .kernel_lent
            .fetch_add(got, std::sync::atomic::Ordering::Relaxed);
        self.stats.rearm_bursts += 1;
        self.stats.buffers_lent += got as u64;
        got as u32
    }

    /// One round: re-arms the rings ([`UringRx::rearm`]) and the receives that ran dry,
    /// submits, waits up to `wait` (`None`: no wait) for [`RxConfig::wait_batch`] completions,
    /// and appends a [`Packet`] per datagram to `out`. Returns how many.
    ///
    /// # Errors
    /// [`PoolError::Kernel`] when `io_uring_enter` fails (other than a timeout or an
    /// interrupted wait, which return normally).
    pub fn poll(
        &mut self,
        out: &mut Vec<Packet<P::T, P::B, P::R>>,
        wait: Option<Duration>,
    ) -> Result<usize, PoolError> {
        self.rearm();
        for op in 0..self.ops.len() {
            let o = &self.ops[op];
            let starved_with_buffers =
                o.state == OpState::Starved && self.groups[o.group].lent_count > 0;
            if o.state == OpState::Ended || starved_with_buffers {
                self.ops[op].state = OpState::Armed;
                self.stats.recv_rearms += 1;
                self.push_recv(op)?;
            }
        }
        self.enter(wait, self.wait_batch)?;
        Ok(self.reap(out))
    }

    fn enter(&mut self, wait: Option<Duration>, want: usize) -> Result<(), PoolError> {
        let r = match wait {
            None => self.ring.submit(),
            Some(d) if d.is_zero() => self.ring.submit(),
            Some(d) => {
                let ts = types::Timespec::from(d);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(source) => Err(PoolError::Kernel {
                op: "io_uring_enter",
                source,
            }),
        }
    }

    /// Turns every completion in the queue into packets (appended to `out`) and op states.
    fn reap(&mut self, out: &mut Vec<Packet<P::T, P::B, P::R>>) -> usize {
        let before = out.len();
        let mut returned = 0usize;
        let pool = self.pool.pool();
        let geometry = pool.geometry;
        let stamp = self.headroom >= 4;
        // A header (`PacketBuf`) is always written, a `Pod` only when stamped (const per type).
        let write = <P::T as RxObject>::FRONT > 0 || stamp;
        let headroom = self.headroom;
        let (base, stride, size) = (pool.base().as_ptr(), pool.stride(), pool.object_size());
        for cqe in self.ring.completion() {
            let ud = cqe.user_data();
            let Some(op) = (ud != CANCEL_UD)
                .then_some(ud as usize)
                .filter(|&op| op < self.ops.len())
            else {
                continue;
            };
            let (res, flags) = (cqe.result(), cqe.flags());
            let o = &mut self.ops[op];
            if let Some(bid) = cqueue::buffer_select(flags) {
                let g = &mut self.groups[o.group];
                if u32::from(bid) >= g.len || !g.take(bid) {
                    self.stats.bad_completions += 1;
                } else {
                    self.lent -= 1;
                    returned += 1;
                    let index = g.first + u32::from(bid);
                    let handle = Handle::from_entry(<P::R as ReprImpl>::encode(&geometry, index));
                    if res > 0 {
                        let len = res as u32;
                        if write {
                            let obj = <P::T as Element>::from_addr(
                                base.wrapping_add(index as usize * stride),
                                size,
                            );
                            // SAFETY: a pool object (bid lent from the pool's cache, taken
                            // back once: the lent bit); `handle`, just rebuilt, is its only
                            // one: the only reference, ending here. `FRONT` and a stamped
                            // `Pod`'s bytes 0..4 (headroom >= 4) were not lent.
                            unsafe { &mut *obj }.received(stamp, headroom, len, o.sock as u32);
                        }
                        self.stats.packets += 1;
                        self.stats.bytes += u64::from(len);
                        out.push(Packet {
                            handle,
                            len,
                            sock: SockId(o.sock),
                        });
                    } else if let Some(c) = self.cache.as_mut() {
                        c.put(handle);
                    } else {
                        pool.put(handle);
                    }
                }
            }
            if cqueue::more(flags) {
                continue;
            }
            // The request ended.
            let sock = o.sock;
            o.state = match res {
                r if r == -libc::ENOBUFS && o.state == OpState::Armed => {
                    self.stats.enobufs += 1;
                    OpState::Starved
                }
                r if r > 0 && o.state == OpState::Armed => OpState::Ended,
                0 => {
                    self.socks[sock] = SockState::Eof;
                    OpState::Done
                }
                r if r == -libc::ECANCELED || o.state == OpState::Cancelling => OpState::Done,
                r => {
                    self.socks[sock] = SockState::Error(-r);
                    OpState::Done
                }
            };
        }
        if returned > 0 {
            pool.core
                .kernel_lent
                .fetch_sub(returned, std::sync::atomic::Ordering::Relaxed);
        }
        out.len() - before
    }

    /// Cancels `sock`'s receives, appending their last packets to `out`; the caller closes the
    /// fd afterwards. Lent buffers stay lent (other sockets use them).
    ///
    /// # Errors
    /// [`PoolError::Kernel`] when `io_uring_enter` fails.
    pub fn close(
        &mut self,
        sock: SockId,
        out: &mut Vec<Packet<P::T, P::B, P::R>>,
    ) -> Result<usize, PoolError> {
        let before = out.len();
        self.cancel_where(|o| o.sock == sock.0)?;
        while self
            .ops
            .iter()
            .any(|o| o.sock == sock.0 && o.state == OpState::Cancelling)
        {
            self.enter(Some(Duration::from_millis(100)), 1)?;
            self.reap(out);
        }
        if let Some(s) = self.socks.get_mut(sock.0) {
            if *s == SockState::Open {
                *s = SockState::Closed;
            }
        }
        Ok(out.len() - before)
    }

    /// Submits a cancellation of every armed op matching `f` (ops not in flight are done).
    fn cancel_where(&mut self, f: impl Fn(&Op) -> bool) -> Result<(), PoolError> {
        for op in 0..self.ops.len() {
            if !f(&self.ops[op]) {
                continue;
            }
            match self.ops[op].state {
                OpState::Armed => {
                    self.ops[op].state = OpState::Cancelling;
                    let e = opcode::AsyncCancel::new(op as u64)
                        .build()
                        .user_data(CANCEL_UD);
                    self.push_sqe(&e)?;
                }
                OpState::Starved | OpState::Ended => self.ops[op].state = OpState::Done,
                OpState::Cancelling | OpState::Done => {}
            }
        }
        self.ring.submit().map_err(|source| PoolError::Kernel {
            op: "io_uring_enter (submit)",
            source,
        })?;
        Ok(())
    }

    /// The pool indices of every buffer lent now, in group order.
    pub fn lent_indices(&self) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.lent as usize);
        for g in &self.groups {
            v.extend(g.lent_bids().map(|b| g.first + u32::from(b)));
        }
        v
    }
}

impl<T: ?Sized + RxObject, B: Brand, R: Repr> UringRx<std::sync::Arc<Pool<T, B, R>>> {
    /// [`Pool::audit`] while buffers are lent, plus: each lent buffer named once, by the rings
    /// alone, their number `lent_to_kernel`. Flushes the cache; needs the only `Arc` (quiescence).
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] for a broken invariant, or when other references to the
    /// pool are alive.
    pub fn audit(&mut self) -> Result<crate::AuditReport, PoolError> {
        let lent = self.lent_indices();
        self.cache = None; // flushed into the ring, and its Arc released
        let r = match std::sync::Arc::get_mut(&mut self.pool) {
            Some(pool) => pool.audit_with_lent(Some(&lent)),
            None => Err(PoolError::AuditFailed(
                "uring: other references to the pool are alive".into(),
            )),
        };
        self.cache = Some(LocalCache::new(self.pool.clone()));
        r
    }
}

impl<P: PoolRef + Clone + 'static> Drop for UringRx<P>
where
    P::T: RxObject,
{
    fn drop(&mut self) {
        // 1. No request may still pick a buffer: cancel every receive, wait for its end.
        let mut discard = Vec::new();
        if self.cancel_where(|_| true).is_ok() {
            let mut spins = 0u32;
            while self.ops.iter().any(|o| o.state == OpState::Cancelling) {
                if self.enter(Some(Duration::from_millis(100)), 1).is_err() {
                    spins += 1;
                    if spins > 100 {
                        break;
                    }
                }
                self.reap(&mut discard);
            }
        }
        self.stats.discarded_at_drop += discard.len() as u64;
        let pool = self.pool.pool();
        // 2. Unregister the rings: the kernel reads them no more.
        for g in &mut self.groups {
            if g.registered {
                let _ = self.ring.submitter().unregister_buf_ring(g.bgid);
                g.registered = false;
            }
        }
        // 3. Every lent buffer back to the pool.
        let geometry = pool.geometry;
        let mut back: Vec<Handle<P::T, P::B, P::R>> =
            discard.into_iter().map(|p| p.handle).collect();
        let mut n = 0usize;
        for g in &mut self.groups {
            for bid in g.lent_bids().collect::<Vec<_>>() {
                g.take(bid);
                back.push(Handle::from_entry(<P::R as ReprImpl>::encode(
                    &geometry,
                    g.first + u32::from(bid),
                )));
                n += 1;
            }
        }
        pool.core
            .kernel_lent
            .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        self.lent = 0;
        match self.cache.as_mut() {
            Some(c) => c.put_bulk(&mut back),
            None => pool.put_bulk(&mut back),
        }
    }
}

impl<P: PoolRef + Clone + 'static> std::fmt::Debug for UringRx<P>
where
    P::T: RxObject,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringRx")
            .field("pool", &self.pool().name())
            .field("groups", &self.groups.len())
            .field("lent", &self.lent)
            .field("stats", &self.stats)
            .finish()
    }
}

/// The received bytes of an object filled with a [`RxConfig::headroom`] of at least 4: the
/// stamped length, that many bytes after the headroom. For bare handles ([`crate::HandleRing`]).
///
/// ```
/// let pool = idxpool::PoolBuilder::<[u8; 64]>::zeroed(4).build()?;
/// let mut h = pool.get()?;
/// let obj = pool.get_mut(&mut h);
/// obj[..4].copy_from_slice(&3u32.to_le_bytes());
/// obj[16..19].copy_from_slice(b"abc");
/// assert_eq!(idxpool::uring::payload(&pool, &h, 16)?, b"abc");
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// # Errors
/// [`PoolError::InvalidConfig`] when `headroom` is below 4 or not below the object size, or
/// the stamped length does not fit after it (an object never filled by a receiver);
/// [`PoolError::ForeignHandle`] for another run-time pool's handle.
pub fn payload<'a, T: bytemuck::Pod, B: Brand, R: Repr>(
    pool: &'a Pool<T, B, R>,
    h: &'a Handle<T, B, R>,
    headroom: usize,
) -> Result<&'a [u8], PoolError> {
    let bytes = bytemuck::bytes_of(pool.try_get_ref(h)?);
    if headroom < 4 || headroom >= bytes.len() {
        return Err(PoolError::config(format!(
            "uring payload: headroom {headroom} must be in 4..{}",
            bytes.len()
        )));
    }
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    bytes
        .get(headroom..headroom.saturating_add(len))
        .ok_or_else(|| {
            PoolError::config(format!(
                "uring payload: stamped length {len} does not fit after headroom {headroom}"
            ))
        })
}

/// True when io_uring can be used here: `/proc/sys/kernel/io_uring_disabled` is absent or 0
/// (1: a group only, 2: nobody) and an instance can be set up. `Err` says why not (to skip).
///
/// # Errors
/// The reason io_uring is unavailable.
pub fn available() -> Result<(), String> {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        let v = s.trim();
        if v != "0" {
            return Err(format!("/proc/sys/kernel/io_uring_disabled is {v}"));
        }
    }
    IoUring::new(2)
        .map(drop)
        .map_err(|e: io::Error| format!("io_uring_setup failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bid_map_round_trips_every_index() {
        for &(cap, g, base) in &[
            (1u32, 1u32, 0u16),
            (100, 32, 3),
            (65_536, 32_768, 0),
            (100_000, 32_768, 10),
            (70_001, 1024, 1),
        ] {
            let m = BidMap::new(cap, g, base).unwrap();
            assert_eq!(m.groups(), cap.div_ceil(g));
            let mut seen = std::collections::HashSet::new();
            for i in 0..cap {
                let (bgid, bid) = m.locate(i).unwrap();
                assert!(u32::from(bid) < g, "bid within the group");
                assert_eq!(u32::from(bgid - base), i / g);
                assert_eq!(m.index(bgid, bid), Some(i));
                assert!(seen.insert((bgid, bid)), "one name per index");
            }
            assert_eq!(m.locate(cap), None);
            let total: u32 = (0..m.groups()).map(|k| m.group_len(k)).sum();
            assert_eq!(total, cap);
            assert_eq!(m.index(base.wrapping_sub(1), 0), None);
            assert_eq!(m.index(m.bgid(m.groups()), 0), None);
        }
    }

    #[test]
    fn bid_map_rejects_bad_sizes() {
        assert!(BidMap::new(10, 3, 0).is_err());
        assert!(BidMap::new(10, 0, 0).is_err());
        assert!(BidMap::new(10, 65_536, 0).is_err());
        // 3 groups from bgid 65534 pass the 16-bit id.
        assert!(BidMap::new(3, 1, 65_534).is_err());
        assert!(BidMap::new(2, 1, 65_534).is_ok());
    }

    #[test]
    fn a_pool_of_more_than_65536_buffers_splits_into_groups_of_32768() {
        let m = BidMap::new(200_000, MAX_GROUP_SIZE, 0).unwrap();
        assert_eq!(m.groups(), 7);
        assert_eq!(m.locate(199_999), Some((6, (199_999 - 6 * 32_768) as u16)));
        assert_eq!(m.group_len(6), 200_000 - 6 * 32_768);
    }

    #[test]
    fn payload_rejects_bad_input() {
        let pool = crate::PoolBuilder::<[u8; 32]>::zeroed(2).build().unwrap();
        let mut h = pool.get().unwrap();
        assert!(payload(&pool, &h, 2).is_err(), "headroom below 4");
        assert!(
            payload(&pool, &h, 32).is_err(),
            "headroom not below the size"
        );
        pool.get_mut(&mut h)[..4].copy_from_slice(&100u32.to_le_bytes());
        assert!(payload(&pool, &h, 8).is_err(), "length past the object");
        pool.get_mut(&mut h)[..4].copy_from_slice(&24u32.to_le_bytes());
        assert_eq!(payload(&pool, &h, 8).unwrap().len(), 24);
        pool.put(h);
    }
}
