//! Packet buffers: a pool object that carries its data's offset and length, so that one 4-byte
//! [`crate::Handle`] names a buffer *and* the packet in it, as DPDK's `rte_mbuf` (`data_off`,
//! `data_len`, headroom 128) and VPP's `vlib_buffer_t` (`current_data`, `current_length`,
//! `pre_data`) do with 8-byte pointers and process-local indices.
//!
//! A [`PacketBuf`] is an unsized pool object: a 16-byte header (data offset, data length,
//! default headroom, a tag word for the application) followed by the *room* (DPDK's
//! `data_room_size`: headroom + data + tailroom), all in the object. The pool is a plain
//! [`Pool`]`<PacketBuf>` built by [`PoolBuilder::packet_bufs`], so every companion
//! ([`crate::LocalCache`], [`crate::Pooled`], [`crate::HandleRing`],
//! [`crate::HandleChannel`], the [`crate::Mempool`] trait) works unchanged.
//!
//! ```text
//!  object:  | off len headroom tag | <- headroom -> | data (len bytes) | <- tailroom -> |
//!             16-byte header        ^ room[0]        ^ room[off]        ^ room[off+len]  ^ room[capacity]
//! ```
//!
//! ```
//! use idxpool::{packet::DEFAULT_HEADROOM, PacketBuf, PoolBuilder};
//! let pool = PoolBuilder::packet_bufs(64, 2048, DEFAULT_HEADROOM).build()?;
//! let mut b = pool.get_pooled()?;
//! assert!(b.is_empty() && b.headroom() == DEFAULT_HEADROOM);
//! b.append(5)?.copy_from_slice(b"hello");         // into the tailroom
//! b.prepend(2)?.copy_from_slice(&[0xab, 0xcd]);   // into the headroom
//! assert_eq!(&b[..], b"\xab\xcdhello");           // Deref to the data only
//! b.strip_front(2)?;                               // DPDK's adj
//! assert_eq!(b.as_slice(), b"hello");
//! assert!(b.prepend(1000).is_err());               // does not fit: the buffer is unchanged
//! assert_eq!(b.as_slice(), b"hello");
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! # Invariants
//!
//! The header's fields are private and every method keeps `off + len <= capacity` and
//! `headroom <= capacity` (`capacity` is the room's length, fixed by the pool), so the data
//! window of every `&PacketBuf` a safe caller can reach lies inside the object. The accessors
//! still slice with checked indexing: a header written behind the type's back (a kernel or a
//! peer writing bytes it was told not to) panics, never reads outside the object
//! (tests/packet_buf.rs). An unsized object cannot be moved or swapped out of its slot
//! (`std::mem::swap` needs `Sized`), so a buffer never meets another pool's room length.
//!
//! # Reset
//!
//! A buffer comes out of its pool empty, at its default headroom, with tag 0: every get form
//! (one, bulk, burst, array, table, guard, waiting, through a [`crate::LocalCache`] or the
//! implicit cache) resets the buffers it hands out, in line, as DPDK's `rte_pktmbuf_alloc`
//! does; the builder writes the header of every new object (at build and in [`Pool::grow`]).
//! A buffer given back dirty, by any put path or by a thread whose handles were dropped with
//! a ring or channel, is therefore clean at the next get, whichever thread gets it. The put
//! runs no hook for it (a pool of packet buffers puts as a pool of `u64` does); a user's
//! [`PoolBuilder::on_put`] hook, if any, runs on a buffer reset first. Free buffers keep the
//! header of their last use until a get takes them ([`Pool::obj_iter`] sees it).

use std::alloc::Layout;
use std::fmt;

use crate::builder::{Init, PoolBuilder};
use crate::cache::CACHE_LINE;
use crate::element::Element;
use crate::error::PoolError;
use crate::error::RoomOp as Op;
pub use crate::error::{End, RoomError};
use crate::on_put::PutHook;
#[cfg(doc)]
use crate::pool::Pool;
use crate::pool::UninitObject;

/// Bytes of the header before the room.
pub const HEADER: usize = 16;

/// Default headroom: the data starts at object byte 128 (`HEADER` + 112), a cache-line
/// boundary, as DPDK's `RTE_PKTMBUF_HEADROOM` (128) and VPP's `pre_data` (128) leave room for
/// headers prepended later (encapsulation).
pub const DEFAULT_HEADROOM: usize = 112;

/// The largest room a [`PacketBuf`] can have: offsets and lengths are stored as `u32`.
pub const MAX_ROOM: usize = u32::MAX as usize - HEADER;

/// The header as the initialiser writes it (the first [`HEADER`] bytes of a [`PacketBuf`]).
#[repr(C)]
struct Header {
    off: u32,
    len: u32,
    headroom: u32,
    tag: u32,
}

/// A packet buffer: the data window `[off, off + len)` of a fixed room, with the headroom
/// before it and the tailroom after it, as DPDK's `rte_mbuf` and VPP's `vlib_buffer_t`.
/// Lives only in a [`Pool`]`<PacketBuf>` ([`PoolBuilder::packet_bufs`]); reached as
/// `&mut PacketBuf` through [`Pool::get_mut`], a [`crate::Resolver`] or a [`crate::Pooled`]
/// guard. `Deref`/`DerefMut` give the data only (`&[u8]` of [`PacketBuf::len`] bytes).
///
/// Operations that grow or shrink the window ([`prepend`](Self::prepend),
/// [`append`](Self::append), [`strip_front`](Self::strip_front),
/// [`strip_back`](Self::strip_back)) check the room first: when it is short they return a
/// [`RoomError`] with the numbers and leave the buffer unchanged (DPDK's
/// `rte_pktmbuf_prepend` returns NULL and leaves the mbuf unchanged too). Each is one compare
/// and one or two stores.
///
/// ```
/// use idxpool::{PacketBuf, PoolBuilder};
/// let pool = PoolBuilder::packet_bufs(8, 256, 32).build()?;
/// let mut h = pool.get()?;
/// let b: &mut PacketBuf = pool.get_mut(&mut h);
/// assert_eq!((b.len(), b.headroom(), b.tailroom(), b.capacity()), (0, 32, 224, 256));
/// b.extend_from_slice(b"payload")?;
/// b.prepend(4)?.copy_from_slice(&7u32.to_be_bytes()); // a header in front
/// b.set_tag(3);                                        // e.g. the input port
/// assert_eq!((b.len(), b.headroom()), (11, 28));
/// pool.put(h);
/// let h = pool.get()?;                                 // back empty, at the default headroom
/// assert_eq!((pool.get_ref(&h).len(), pool.get_ref(&h).headroom(), pool.get_ref(&h).tag()), (0, 32, 0));
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[repr(C)]
pub struct PacketBuf {
    /// Start of the data in `room` (the headroom in front of it).
    off: u32,
    /// Bytes of data.
    len: u32,
    /// The default headroom: where `reset` puts the data.
    headroom: u32,
    /// A word for the application (input port, socket, flow hash): DPDK's `port`/`hash`.
    tag: u32,
    room: [u8],
}

// A packet buffer's pointer carries the room's length as its metadata (the object's length
// less the header): `size_of_val` is `HEADER + room` rounded to 4, which the builder makes
// equal to the object's size (room a multiple of 8). Every byte of the room is initialised
// (the region is zero-filled and only ever written through `&mut`), and the header is
// written by the builder's initialiser before any handle exists.
// The element trait is sealed; the packet buffer is one of its kinds.
impl crate::element::sealed::Sealed for PacketBuf {}

impl Element for PacketBuf {
    #[inline(always)]
    fn fixed_layout() -> Option<Layout> {
        None
    }
    #[inline(always)]
    fn from_addr(p: *mut u8, len: usize) -> *mut PacketBuf {
        std::ptr::slice_from_raw_parts_mut(p, len.saturating_sub(HEADER)) as *mut PacketBuf
    }
    #[inline(always)]
    fn needs_drop() -> bool {
        false
    }
    // Every get hands a buffer out reset (DPDK's `rte_pktmbuf_alloc`): three stores in line,
    // where a reset on put would run as a hook (an out-of-line call per burst and a call
    // through a pointer per buffer) and would have to check a run-time pool's handles first.
    const RESET_ON_GET: bool = true;
    #[inline(always)]
    fn reset_on_get(b: &mut PacketBuf) {
        b.reset();
    }
}

impl PacketBuf {
    /// Bytes of data ([`DerefMut`](std::ops::DerefMut) gives exactly these).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the buffer holds no data.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The room's size in bytes: headroom + length + tailroom, fixed by the pool
    /// ([`PoolBuilder::packet_bufs`]'s `room`, rounded up to 8). DPDK's `buf_len`.
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.room.len()
    }

    /// Free bytes in front of the data (DPDK's `rte_pktmbuf_headroom`).
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        self.off as usize
    }

    /// Free bytes after the data (DPDK's `rte_pktmbuf_tailroom`).
    #[inline(always)]
    pub fn tailroom(&self) -> usize {
        self.room.len().saturating_sub(self.end())
    }

    /// The headroom a fresh buffer has (the pool's, from [`PoolBuilder::packet_bufs`]).
    #[inline(always)]
    pub fn default_headroom(&self) -> usize {
        self.headroom as usize
    }

    /// The application's word (0 in a fresh buffer): an input port, socket or flow hash.
    #[inline(always)]
    pub fn tag(&self) -> u32 {
        self.tag
    }

    /// Sets the application's word.
    #[inline(always)]
    pub fn set_tag(&mut self, tag: u32) {
        self.tag = tag;
    }

    #[inline(always)]
    fn end(&self) -> usize {
        self.off as usize + self.len as usize
    }

    /// The data.
    ///
    /// # Panics
    /// Never for a header kept by this type's methods; only if bytes of the header were
    /// written behind its back (see the module's Invariants).
    #[inline(always)]
    pub fn as_slice(&self) -> &[u8] {
        &self.room[self.off as usize..self.end()]
    }

    /// The data, writable.
    ///
    /// # Panics
    /// As [`PacketBuf::as_slice`].
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let end = self.end();
        &mut self.room[self.off as usize..end]
    }

    /// The whole room (headroom, data and tailroom), for receivers that let a device or the
    /// kernel write anywhere in it; [`PacketBuf::set_data`] then says where the data is.
    #[inline(always)]
    pub fn room_mut(&mut self) -> &mut [u8] {
        &mut self.room
    }

    /// The tailroom, writable: write into its front, then [`PacketBuf::append`] that many
    /// bytes to make them data (as `Vec::spare_capacity_mut`; these bytes are initialised).
    #[inline(always)]
    pub fn spare_mut(&mut self) -> &mut [u8] {
        let end = self.end().min(self.room.len());
        &mut self.room[end..]
    }

    /// Grows the data by `n` bytes at the front, into the headroom, and returns them (their
    /// old contents: whatever the room held). DPDK's `rte_pktmbuf_prepend`, VPP's
    /// `vlib_buffer_push_uninit`.
    ///
    /// # Errors
    /// [`RoomError`] (`End::Front`) when the headroom is shorter than `n`: unchanged.
    #[doc(alias = "push_front")]
    #[inline]
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8], RoomError> {
        let head = self.off as usize;
        if n > head {
            return Err(self.err(Op::Prepend, n, head));
        }
        // n <= off <= u32::MAX.
        self.off -= n as u32;
        self.len += n as u32;
        let off = self.off as usize;
        Ok(&mut self.room[off..off + n])
    }

    /// Grows the data by `n` bytes at the back, into the tailroom, and returns them (their
    /// old contents: whatever the room held). DPDK's `rte_pktmbuf_append`, VPP's
    /// `vlib_buffer_put_uninit`.
    ///
    /// # Errors
    /// [`RoomError`] (`End::Back`) when the tailroom is shorter than `n`: unchanged.
    #[inline]
    pub fn append(&mut self, n: usize) -> Result<&mut [u8], RoomError> {
        let end = self.end();
        let tail = self.room.len().saturating_sub(end);
        if n > tail {
            return Err(self.err(Op::Append, n, tail));
        }
        // end + n <= room.len() <= MAX_ROOM: fits u32.
        self.len += n as u32;
        Ok(&mut self.room[end..end + n])
    }

    /// Appends a copy of `data` (all of it, or nothing).
    ///
    /// # Errors
    /// [`RoomError`] (`End::Back`) when the tailroom is shorter than `data`: unchanged.
    #[inline]
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<(), RoomError> {
        self.append(data.len())?.copy_from_slice(data);
        Ok(())
    }

    /// Removes `n` bytes from the front of the data (they become headroom). DPDK's
    /// `rte_pktmbuf_adj`, VPP's `vlib_buffer_advance` with `n > 0`.
    ///
    /// # Errors
    /// [`RoomError`] (`End::Front`) when the data is shorter than `n`: unchanged.
    #[doc(alias = "adj")]
    #[inline]
    pub fn strip_front(&mut self, n: usize) -> Result<(), RoomError> {
        if n > self.len as usize {
            return Err(self.err(Op::StripFront, n, self.len as usize));
        }
        self.off += n as u32;
        self.len -= n as u32;
        Ok(())
    }

    /// Removes `n` bytes from the back of the data (they become tailroom). DPDK's
    /// `rte_pktmbuf_trim`.
    ///
    /// # Errors
    /// [`RoomError`] (`End::Back`) when the data is shorter than `n`: unchanged.
    #[doc(alias = "trim")]
    #[inline]
    pub fn strip_back(&mut self, n: usize) -> Result<(), RoomError> {
        if n > self.len as usize {
            return Err(self.err(Op::StripBack, n, self.len as usize));
        }
        self.len -= n as u32;
        Ok(())
    }

    /// Keeps the first `len` bytes of data; no effect when the data is already shorter
    /// (as `Vec::truncate`). Never fails.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len as usize {
            self.len = len as u32;
        }
    }

    /// Removes all data; the offset (so the headroom) stays (as `Vec::clear`). Never fails.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Back to a fresh buffer's state: no data, at the default headroom, tag 0 (DPDK's
    /// `rte_pktmbuf_reset`). Every get of the pool does this to the buffers it hands out. The
    /// room's bytes are not cleared.
    #[inline]
    pub fn reset(&mut self) {
        self.off = self.headroom;
        self.len = 0;
        self.tag = 0;
    }

    /// Makes `room[off..off + len]` the data, for receivers whose device or kernel wrote the
    /// packet into [`PacketBuf::room_mut`] (a completion's length, a descriptor's offset).
    ///
    /// # Errors
    /// [`RoomError`] when `off + len` exceeds the capacity: unchanged.
    #[inline]
    pub fn set_data(&mut self, off: usize, len: usize) -> Result<(), RoomError> {
        match off.checked_add(len) {
            Some(end) if end <= self.room.len() => {
                // end <= room.len() <= MAX_ROOM: both fit u32.
                self.off = off as u32;
                self.len = len as u32;
                Ok(())
            }
            _ => Err(RoomError {
                op: Op::SetData,
                asked: off.saturating_add(len),
                available: self.room.len(),
            }),
        }
    }

    /// Data window `room[off..off + len]` and tag, for a receiver that has checked the
    /// window against the object's size (the AF_XDP frame ledger): no compare. A window past
    /// the room would break no Rust memory rule (every accessor slices with checked indexing
    /// and would panic), but an AF_XDP transmit would hand the kernel a descriptor past the
    /// room: only the crate calls this, behind `RxObject::received_fitting`'s token.
    #[inline(always)]
    #[cfg_attr(not(any(feature = "uring", feature = "xdp")), allow(dead_code))]
    pub(crate) fn set_fitting(&mut self, off: u32, len: u32, tag: u32) {
        debug_assert!(off as usize + len as usize <= self.room.len());
        self.off = off;
        self.len = len;
        self.tag = tag;
    }

    #[cold]
    fn err(&self, op: Op, asked: usize, available: usize) -> RoomError {
        RoomError {
            op,
            asked,
            available,
        }
    }
}

impl std::ops::Deref for PacketBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for PacketBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for PacketBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for PacketBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl std::borrow::Borrow<[u8]> for PacketBuf {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for PacketBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for PacketBuf {}

impl PartialEq<[u8]> for PacketBuf {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for PacketBuf {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl std::hash::Hash for PacketBuf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBuf")
            .field("headroom", &self.headroom())
            .field("len", &self.len())
            .field("tailroom", &self.tailroom())
            .field("tag", &self.tag)
            .finish()
    }
}

/// Appends what fits of `buf` (possibly 0 bytes when the tailroom is full, which
/// `write_all` reports as `WriteZero`).
impl std::io::Write for PacketBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.tailroom());
        self.extend_from_slice(&buf[..n])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::WriteZero, e))?;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A user's reset hook ([`PoolBuilder::on_put`]) on a packet-buffer pool: [`PacketBuf::reset`]
/// first, so that the hook sees the buffer as the next get will hand it out. Without a user's
/// hook the pool has none: the get resets (`Element::RESET_ON_GET`).
fn reset_then(user: PutHook<PacketBuf>) -> PutHook<PacketBuf> {
    Box::new(move |b: &mut PacketBuf| {
        b.reset();
        user(b)
    })
}

impl<'a> PoolBuilder<'a, PacketBuf> {
    /// A pool of `capacity` packet buffers of `room` bytes each (headroom + data + tailroom,
    /// DPDK's `data_room_size`; rounded up to 8), each fresh buffer empty with `headroom`
    /// bytes in front of the data ([`DEFAULT_HEADROOM`]: data at object byte 128). Each
    /// object is [`HEADER`] + `room` bytes, cache-line aligned; `.stride(StrideMode::Natural)`
    /// keeps the stride at that size (AF_XDP frames: `room` 2032 for 2048-byte frames).
    /// Handles are `Handle<PacketBuf>` (4 bytes). Every get hands buffers out reset (empty, at
    /// `headroom`, tag 0); a [`PoolBuilder::on_put`] hook sees the buffer reset too, and what it
    /// writes into the header does not reach the next get (what it writes into the room does).
    ///
    /// # Errors (at build)
    /// [`PoolError::InvalidConfig`] when `room` is 0 or `headroom > room`;
    /// [`PoolError::SizeOverflow`] when `room` exceeds [`MAX_ROOM`]. Nothing is mapped.
    ///
    /// ```
    /// use idxpool::{PoolBuilder, PoolError, StrideMode};
    /// let pool = PoolBuilder::packet_bufs(1024, 2048, 112).cache_size(32).build()?;
    /// assert_eq!(pool.object_size(), 16 + 2048);
    /// let xsk = PoolBuilder::packet_bufs(64, 2032, 0).stride(StrideMode::Natural).build()?;
    /// assert_eq!(xsk.stride(), 2048);
    /// assert!(matches!(PoolBuilder::packet_bufs(8, 64, 65).build(), Err(PoolError::InvalidConfig { .. })));
    /// assert!(matches!(PoolBuilder::packet_bufs(8, usize::MAX, 0).build(), Err(PoolError::SizeOverflow { .. })));
    /// # Ok::<(), PoolError>(())
    /// ```
    pub fn packet_bufs(capacity: u32, room: usize, headroom: usize) -> Self {
        let rounded = room.checked_next_multiple_of(8).filter(|&r| r <= MAX_ROOM);
        let deferred = match rounded {
            None => Some(PoolError::overflow(format!(
                "packet buffer room of {room} bytes exceeds {MAX_ROOM}"
            ))),
            Some(0) => Some(PoolError::config("packet buffer room is 0")),
            Some(_) if headroom > room => Some(PoolError::config(format!(
                "packet buffer headroom {headroom} exceeds its room {room}"
            ))),
            Some(_) => None,
        };
        let room = rounded.unwrap_or(8);
        // headroom <= room <= MAX_ROOM when nothing is deferred; unused otherwise.
        let headroom = headroom.min(room) as u32;
        let layout = Layout::from_size_align(HEADER + room, CACHE_LINE)
            .expect("HEADER + MAX_ROOM rounded to a line is far below isize::MAX");
        let init = Init::Each(Box::new(move |_i, obj: UninitObject<'_>, written| {
            // The room's bytes are the region's zeroes; the header is written here.
            obj.into_uninit::<Header>().write(Header {
                off: headroom,
                len: 0,
                headroom,
                tag: 0,
            });
            written.store(true, std::sync::atomic::Ordering::Relaxed);
        }));
        let mut b = Self::with_layout(capacity, init, layout);
        b.deferred = deferred;
        b.reset = Some(reset_then);
        b
    }
}
