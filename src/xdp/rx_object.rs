//! [`RxObject`]: the object types a kernel receiver may write into (features `uring`, `xdp`).

use crate::element::Element;
use crate::packet::{PacketBuf, HEADER};

/// An object type the kernel receivers ([`crate::uring::UringRx`] with feature `uring`,
/// `XdpSocket` with feature `xdp`) can lend to the kernel: every [`bytemuck::Pod`] type (any
/// bytes the kernel writes are a valid object), and [`PacketBuf`].
///
/// * A `Pod` object is lent from its first byte (past the receiver's headroom); the length
///   travels beside the handle (`Packet::len`, `Frame::len`), or, with an io_uring headroom of
///   at least 4, in the object's first 4 bytes ([`crate::uring::payload`]).
/// * A [`PacketBuf`] is lent from past its 16-byte header ([`RxObject::FRONT`], plus the
///   receiver's headroom): the kernel never writes the header, and each receive sets the data
///   window to the packet, so a bare `Handle<PacketBuf>` describes its packet (DPDK's
///   `rte_mbuf` `data_off`/`data_len`, set by the PMD from the descriptor).
///
/// # Sealed
/// Only `Pod` types and [`PacketBuf`]: the receivers' unsafe code trusts [`RxObject::FRONT`]
/// to name the bytes no kernel may write.
///
/// ```
/// use idxpool::xdp::RxObject;
/// use idxpool::PacketBuf;
/// fn front<T: RxObject + ?Sized>() -> u32 { T::FRONT }
/// assert_eq!(front::<[u8; 2048]>(), 0);
/// assert_eq!(front::<PacketBuf>(), 16); // the header: the kernel never writes it
/// ```
///
/// The unchecked header write takes a proof only the crate can make, so no outside caller can
/// give a buffer a window its room does not hold:
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

    /// Records a packet of `len` bytes the kernel wrote at byte `FRONT + off`. With `stamp`, a
    /// `Pod` gets `len` in its first 4 bytes; a [`PacketBuf`] gets the data window
    /// `[off, off + len)` of its room and `tag` (io_uring socket id; 0 for AF_XDP), or, if that
    /// does not fit, an empty window at its default headroom: every field a get's reset sets
    /// is written either way.
    #[doc(hidden)]
    fn received(&mut self, stamp: bool, off: u32, len: u32, tag: u32);

    /// [`RxObject::received`] with no stamp or compare, once `[off, off + len)` is checked to fit
    /// past `FRONT` (the frame ledger). A misfit is no UB (checked slicing panics), but a
    /// transmit would show the kernel bytes past the room: hence a debug assertion and the
    /// crate-only `sealed::Checked` token.
    #[doc(hidden)]
    fn received_fitting(&mut self, off: u32, len: u32, tag: u32, checked: sealed::Checked);
}

pub(crate) mod sealed {
    /// Every `Pod` type and `PacketBuf` (see [`super::RxObject`], "Sealed").
    pub trait Sealed {}
    impl<T: bytemuck::Pod> Sealed for T {}
    impl Sealed for crate::packet::PacketBuf {}

    /// The proof of a checked window for [`super::RxObject::received_fitting`] (crate-only).
    #[derive(Clone, Copy)]
    pub struct Checked(pub(crate) ());
}

impl<T: bytemuck::Pod> RxObject for T {
    const FRONT: u32 = 0;

    #[inline(always)]
    fn received(&mut self, stamp: bool, _off: u32, len: u32, _tag: u32) {
        if stamp {
            // The receiver checked its headroom (>= 4 here) is below the object's size: bytes
            // 0..4 exist and the kernel never writes them.
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
        // `[off, capacity)` was lent, so this fits; else (a broken kernel) empty at the default
        // headroom, never its last window (a frame recycled from TX had no get, no reset).
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
