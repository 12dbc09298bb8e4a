//! AF_XDP's frame addressing over a pool's region, frame offset = `index x stride` (see the
//! [`xdp` module docs](crate::xdp)), in the kernel's two address modes:
//!
//! * **aligned chunks** (the default): a power-of-two stride (2,048 or 4,096); a descriptor's
//!   address is the frame's offset plus the packet's offset in it, so the frame is
//!   `addr >> log2(stride)` and the packet offset `addr & (stride - 1)`;
//! * **unaligned chunks** (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`): any stride; the low 48 bits of an
//!   address are the base offset and the high 16 bits an offset added to it.

use crate::error::PoolError;

/// Bits of an unaligned-mode address that hold the base offset (`XSK_UNALIGNED_BUF_ADDR_MASK`).
const UNALIGNED_ADDR_BITS: u32 = 48;

/// The pool index <-> UMEM frame offset mapping of a pool used as an AF_XDP UMEM.
///
/// ```
/// use idxpool::xdp::FrameMap;
/// use idxpool::StrideMode;
/// // Aligned mode wants power-of-two frames: a natural stride (the default pads 2 KiB to an
/// // odd number of cache lines, 2112 bytes, which needs unaligned mode).
/// let pool = idxpool::PoolBuilder::<[u8; 2048]>::zeroed(1024)
///     .stride(StrideMode::Natural)
///     .build()?;
/// let m = FrameMap::of_pool(&pool)?;
/// assert!(m.aligned());
/// assert_eq!(m.offset(3), Some(3 * 2048));
/// // An RX descriptor of frame 3 whose packet starts 256 bytes in (XDP_PACKET_HEADROOM):
/// assert_eq!(m.locate(3 * 2048 + 256)?, (3, 256));
/// assert!(m.locate(1024 * 2048).is_err()); // past the last frame
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMap {
    stride: u64,
    capacity: u32,
    /// log2(stride) when the stride is a power of two (aligned chunk mode).
    shift: Option<u32>,
}

impl FrameMap {
    /// The mapping of `capacity` frames of `stride` bytes from offset 0.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a 0 stride or a UMEM over 2^48 bytes (unaligned mode).
    pub fn new(stride: usize, capacity: u32) -> Result<Self, PoolError> {
        let stride = stride as u64;
        if stride == 0
            || stride
                .checked_mul(u64::from(capacity))
                .is_none_or(|len| len > 1 << UNALIGNED_ADDR_BITS)
        {
            return Err(PoolError::config(format!(
                "xdp frame map: {capacity} frames of {stride} bytes: stride must be positive and \
                 the UMEM at most 2^48 bytes"
            )));
        }
        Ok(FrameMap {
            stride,
            capacity,
            shift: stride.is_power_of_two().then(|| stride.trailing_zeros()),
        })
    }

    /// The mapping of the objects a pool has now (`pool.stride()`, `pool.capacity()`). After
    /// [`crate::Pool::grow`], make a new map (and register the grown region again).
    ///
    /// # Errors
    /// As [`FrameMap::new`].
    pub fn of_pool<T: ?Sized + crate::Element, B: crate::Brand, R: crate::repr::Repr>(
        pool: &crate::Pool<T, B, R>,
    ) -> Result<Self, PoolError> {
        FrameMap::new(pool.stride(), pool.capacity())
    }

    /// Bytes per frame (the pool's stride).
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// True for power-of-two frames (aligned mode), else `XDP_UMEM_UNALIGNED_CHUNK_FLAG`.
    pub fn aligned(&self) -> bool {
        self.shift.is_some()
    }

    /// The UMEM offset of frame `index` (a fill-ring entry), or None past the last frame.
    #[inline]
    pub fn offset(&self, index: u32) -> Option<u64> {
        (index < self.capacity).then(|| u64::from(index) * self.stride)
    }

    /// The frame and the offset within it of a descriptor address (RX or completion ring).
    ///
    /// # Errors
    /// [`PoolError::IndexOutOfRange`] past the last frame (a corrupt descriptor: never a handle).
    #[inline]
    pub fn locate(&self, addr: u64) -> Result<(u32, u32), PoolError> {
        self.split(addr).ok_or_else(|| {
            let (index, _) = self.split_unchecked(addr);
            PoolError::IndexOutOfRange {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                capacity: self.capacity,
            }
        })
    }

    /// [`FrameMap::locate`] with None past the last frame (no error built).
    #[inline(always)]
    pub(crate) fn split(&self, addr: u64) -> Option<(u32, u32)> {
        let (index, within) = self.split_unchecked(addr);
        (index < u64::from(self.capacity)).then_some((index as u32, within as u32))
    }

    #[inline(always)]
    fn split_unchecked(&self, addr: u64) -> (u64, u64) {
        match self.shift {
            Some(s) => (addr >> s, addr & (self.stride - 1)),
            None => {
                let base = addr & ((1 << UNALIGNED_ADDR_BITS) - 1);
                let total = base + (addr >> UNALIGNED_ADDR_BITS);
                (total / self.stride, total % self.stride)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_frames_round_trip() {
        let m = FrameMap::new(4096, 300).unwrap();
        assert!(m.aligned());
        for i in 0..300 {
            let off = m.offset(i).unwrap();
            assert_eq!(m.locate(off).unwrap(), (i, 0));
            assert_eq!(m.locate(off + 256 + 14).unwrap(), (i, 270));
            assert_eq!(m.locate(off + 4095).unwrap(), (i, 4095));
        }
        assert_eq!(m.offset(300), None);
        assert!(m.locate(300 * 4096).is_err());
        assert!(m.locate(u64::MAX).is_err());
    }

    #[test]
    fn unaligned_frames_round_trip() {
        let m = FrameMap::new(2176, 50).unwrap(); // 2048 + 128: not a power of two
        assert!(!m.aligned());
        for i in 0..50 {
            let off = m.offset(i).unwrap();
            assert_eq!(m.locate(off).unwrap(), (i, 0));
            // The kernel's unaligned form: base in the low 48 bits, offset in the high 16.
            assert_eq!(m.locate(off | (300 << 48)).unwrap(), (i, 300));
            assert_eq!(m.locate(off + 2175).unwrap(), (i, 2175));
        }
        assert!(m.locate(50 * 2176).is_err());
    }

    #[test]
    fn bad_layouts_are_errors() {
        assert!(FrameMap::new(0, 10).is_err());
        assert!(FrameMap::new(1 << 30, 1 << 20).is_err());
        assert!(FrameMap::new(2048, 0).is_ok());
    }

    #[test]
    fn a_pool_region_maps_onto_its_frames() {
        let pool = crate::PoolBuilder::<[u8; 2048]>::zeroed(64)
            .build()
            .unwrap();
        let m = FrameMap::of_pool(&pool).unwrap();
        let h = pool.get().unwrap();
        let i = pool.index_of(&h);
        let off = pool.as_ptr(&h).as_ptr() as u64 - pool.base().as_ptr() as u64;
        assert_eq!(
            m.offset(i),
            Some(off),
            "frame offset = the object's offset in the region"
        );
        assert_eq!(m.locate(off + 100).unwrap(), (i, 100));
        pool.put(h);
    }
}
