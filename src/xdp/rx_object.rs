//! [`RxObject`]: the object types a kernel receiver may write into, and what a receive does
//! to each (features `uring` or `xdp`).

use crate::element::Element;
use crate::packet::{PacketBuf, HEADER};

/// An object type the kernel receivers ([`crate::uring::UringRx`] with feature `uring`,
/// `XdpSocket` with feature `xdp`) can lend to the kernel: every [`bytemuck::Pod`] type (any
/// bytes the kernel writes are a valid object), and [`PacketBuf`], whose 16-byte header the
/// receivers keep out of the kernel's reach and fill from each completion or descriptor.
///
/// * A `Pod` object is lent from its first byte (past the receiver's headroom); the packet's
///   length travels beside the handle (`Packet::len`, `Frame::len`), and an io_uring receiver
///   with a headroom of at least 4 stamps it in the object's first 4 bytes
///   ([`crate::uring::payload`]).
/// * A [`PacketBuf`] is lent from past its header ([`RxObject::FRONT`] bytes, plus the
///   receiver's headroom inside the room): on receive its data window is set to the packet
///   (`off` = where the kernel wrote it in the room, `len` = the bytes written), so a bare
///   `Handle<PacketBuf>` describes its packet (DPDK's `rte_mbuf` `data_off`/`data_len`, set by
///   the PMD from the descriptor).
///
/// # Sealed
/// Implemented for every `Pod` type and for [`PacketBuf`] only: the receivers' unsafe code
/// trusts [`RxObject::FRONT`] to name the bytes no kernel may write.
///
/// ```
/// use idxpool::xdp::RxObject;
/// use idxpool::PacketBuf;
/// fn front<T: RxObject + ?Sized>() -> u32 { T::FRONT }
/// assert_eq!(front::<[u8; 2048]>(), 0);
/// assert_eq!(front::<PacketBuf>(), 16); // the header: the kernel never writes it
/// ```
///
/// The receivers' unchecked header write takes a proof that only the crate can make, so no
/// caller outside it can give a buffer a window its room does not hold:
///
/// ```compile_fail,E0277
/// use idxpool::xdp::RxObject;
/// let pool = idxpool::PoolBuilder::packet_bufs(4, 256, 32).build().unwrap();
/// let mut h = pool.get().unwrap();
/// pool.get_mut(&mut h).received_fitting(0, 100_000, 0, Default::default());
/// ```
pub trait RxObject: Element + sealed::Sealed {
    /// Bytes at the start of each object the kernel must never write (the object's own
    /// header): 0 for `Pod` types, [`HEADER`] (16) for [`PacketBuf`].
    const FRONT: u32;

    /// Records a packet of `len` bytes the kernel wrote at byte `FRONT + off` of the object.
    /// `stamp`: a `Pod` object gets `len` in its first 4 bytes (io_uring with a headroom of
    /// at least 4); a [`PacketBuf`] gets its data window `[off, off + len)` of the room and
    /// `tag` (the io_uring socket id; 0 for AF_XDP), or, when that window does not fit the
    /// room, an empty window at its default headroom and `tag`: every field a get's reset
    /// sets is written either way.
    #[doc(hidden)]
    fn received(&mut self, stamp: bool, off: u32, len: u32, tag: u32);

    /// [`RxObject::received`] without a stamp, for a receiver that has checked that the
    /// window `[off, off + len)` fits the bytes past `FRONT` (AF_XDP: the frame ledger checks
    /// every descriptor against the object's size): the fields are written with no compare.
    /// A window that does not fit would be a bug of the caller: not undefined behaviour in
    /// Rust (the buffer's accessors slice with checked indexing and would panic), but a
    /// transmit of such a buffer would describe bytes past its room to the kernel. Hence the
    /// token and the debug assertion. Callable only inside the crate (`sealed::Checked` cannot be made outside it):
    /// no safe caller outside can set a window the room does not hold.
    #[doc(hidden)]
    fn received_fitting(&mut self, off: u32, len: u32, tag: u32, checked: sealed::Checked);
}

pub(crate) mod sealed {
    /// Every `Pod` type and `PacketBuf` (see [`super::RxObject`], "Sealed").
    pub trait Sealed {}
    impl<T: bytemuck::Pod> Sealed for T {}
    impl Sealed for crate::packet::PacketBuf {}

    /// The proof a caller of [`super::RxObject::received_fitting`] holds: made only inside the
    /// crate, by a receiver that has checked the window.
    #[derive(Clone, Copy)]
    pub struct Checked(pub(crate) ());
}

impl<T: bytemuck::Pod> RxObject for T {
    const FRONT: u32 = 0;

    #[inline(always)]
    fn received(&mut self, stamp: bool, _off: u32, len: u32, _tag: u32) {
        if stamp {
            // The receiver checked at construction that its headroom (>= 4 here) is below
            // the object's size, so bytes 0..4 exist and the kernel never writes them.
            if let Some(b) = bytemuck::bytes_of_mut(self).get_mut(..4) {
                b.copy_from_slice(&len.to_le_bytes());
            }
        }
    }

    #[inline(always)]
    fn received_fitting(&mut self, _off: u32, _len: u32, _tag: u32, _: sealed::Checked) {}
}

impl RxObject for PacketBuf {
    const FRONT: u32 = HEADER as u32;

    #[inline(always)]
    fn received(&mut self, _stamp: bool, off: u32, len: u32, tag: u32) {
        // The receivers lend `[off, capacity)` of the room and the kernel writes at most that
        // much, so this fits; a window that does not (a misbehaving kernel) leaves the buffer
        // empty at its default headroom, never out of the room and never with the window of
        // its last use (a frame recycled from TX passed no get, so no reset).
        if self.set_data(off as usize, len as usize).is_err() {
            self.reset();
        }
        self.set_tag(tag);
    }

    #[inline(always)]
    fn received_fitting(&mut self, off: u32, len: u32, tag: u32, _: sealed::Checked) {
        self.set_fitting(off, len, tag);
    }
}
