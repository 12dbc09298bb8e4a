//! The one error type of the crate.

/// The memory behind a region.
///
/// ```
/// use idxpool::{Backing, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(1024).build()?;
/// let b: Backing = pool.backing().backing; // hugetlb 2 MiB, THP or 4 KiB pages
/// assert!(b.page_size() >= 4096 && b.page_size().is_power_of_two());
/// assert_eq!(Backing::Hugetlb2M.page_size(), 2 << 20);
/// println!("{b}");
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backing {
    /// hugetlbfs pages of 2 MiB (`MAP_HUGETLB | MAP_HUGE_2MB`) from `/proc/sys/vm/nr_hugepages`:
    /// never swapped or split; the mmap fails up front when the reserve is short (no SIGBUS later).
    Hugetlb2M,
    /// hugetlbfs pages of 1 GiB (`MAP_HUGE_1GB`); only tried when asked for.
    Hugetlb1G,
    /// Transparent huge pages: a 2 MiB-aligned anonymous mapping advised `MADV_HUGEPAGE`, backed by
    /// 2 MiB pages when the kernel can (`AnonHugePages` in `/proc/meminfo`), else 4 KiB.
    Thp,
    /// Normal anonymous pages (4 KiB on x86-64).
    Pages4K,
    /// The global allocator (`std::alloc::alloc_zeroed`): under Miri (no mmap flags), or on request
    /// for tiny pools.
    Heap,
}

/// Every failure of idxpool, with the numbers needed to act on it.
///
/// Bad input never panics (in release builds), hangs or loses an object: it returns one of these.
/// Unlike DPDK (whose failed get is documented `-ENOENT` but returns `-ENOBUFS`), each cause has
/// its own variant.
///
/// Layout: `repr(u64)` (8-byte tag, then `repr(C)` fields) keeps the array of `Result<[Handle; N],
/// PoolError>` 8-aligned; at rustc's default offset 4, LLVM copies it in 8-byte pieces straddling
/// two entries (store-forwarding stalls, BENCHMARKS.md).
///
/// ```
/// use idxpool::{PoolBuilder, PoolError};
/// let pool = PoolBuilder::<u64>::with_default(2).cache_size(0).build()?;
/// let mut hs = Vec::new();
/// let err = pool.get_bulk(&mut hs, 3).unwrap_err();
/// assert!(matches!(err, PoolError::Exhausted { requested: 3, .. }));
/// assert!(hs.is_empty()); // nothing was taken
/// let zero = PoolBuilder::<u64>::with_default(0).build();
/// assert!(matches!(zero, Err(PoolError::InvalidConfig { .. })));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[repr(u64)]
pub enum PoolError {
    /// The pool configuration is invalid; `reason` says which field and why.
    #[error("invalid pool configuration: {reason}")]
    InvalidConfig {
        /// Human-readable description of the rejected setting.
        reason: String,
    },
    /// Size arithmetic (`capacity x stride`, padding, page rounding) overflowed `usize` or exceeds
    /// `isize::MAX` bytes (the most a Rust allocation may span).
    #[error("size overflow: {what}")]
    SizeOverflow {
        /// Which computation overflowed.
        what: String,
    },
    /// The demanded memory backing could not be mapped (or, with automatic backing, none could).
    #[error("{backing} backing unavailable: {source}")]
    BackingUnavailable {
        /// The backing that was tried last.
        backing: Backing,
        /// The OS error of the failed `mmap` / `madvise`, or a synthetic one explaining the cause.
        #[source]
        source: std::io::Error,
    },
    /// An all-or-nothing get could not be served: nothing was taken.
    #[error("pool exhausted: requested {requested} objects, {available} available to this caller")]
    Exhausted {
        /// Number of objects requested.
        requested: usize,
        /// Objects reachable by this caller then (its cache plus the ring; not other threads'
        /// caches, see `Pool::available`).
        available: usize,
    },
    /// A named brand is held by a live pool (or retired: a dropped pool's handles are outstanding);
    /// see [`crate::Brand`].
    #[error("brand {brand} is already claimed by {state}")]
    BrandInUse {
        /// Type name of the brand.
        brand: &'static str,
        /// `"a live pool"` or `"a dropped pool whose handles are still outstanding"`.
        state: &'static str,
    },
    /// A raw index does not name an object of this pool (`index >= capacity`).
    #[error("index {index} out of range for pool of capacity {capacity}")]
    IndexOutOfRange {
        /// The rejected 0-based index.
        index: u32,
        /// The pool's capacity.
        capacity: u32,
    },
    /// A put of an already free object (double free through raw indices), caught by debug checks'
    /// per-object state.
    #[error("double free of object {index} in pool {pool}")]
    DoubleFree {
        /// 0-based index of the object.
        index: u32,
        /// Name of the pool.
        pool: String,
    },
    /// `audit()` found a broken invariant.
    #[error("audit failed: {0}")]
    AuditFailed(String),
    /// A shared pool's region does not have the layout this process expects (attach): `field` names
    /// the header field (`magic`, `version`, `obj_size`, `stride`, a section offset, `file_len`,
    /// ...).
    #[error("shared pool layout mismatch: {field} is {found}, expected {expected}")]
    LayoutMismatch {
        /// Header field that differs.
        field: &'static str,
        /// Value this process expects.
        expected: u64,
        /// Value found in the region.
        found: u64,
    },
    /// A shared pool was created for another object type: its type fingerprint differs.
    #[error("shared pool type fingerprint mismatch: region has {found:#018x}, expected {expected:#018x}")]
    FingerprintMismatch {
        /// Fingerprint passed by this process.
        expected: u64,
        /// Fingerprint recorded by the creator.
        found: u64,
    },
    /// A shared pool's backing file could not be created, opened or mapped; `source.kind()` is
    /// `NotFound` (no such pool), `PermissionDenied`, `AlreadyExists` (create over an existing
    /// name), ...
    #[error("shared pool file {path}: {op} failed: {source}")]
    SharedFile {
        /// Path of the backing file.
        path: String,
        /// The operation that failed (`create`, `open`, `map`, ...).
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A handle of one run-time pool ([`crate::brand::Runtime`]) given to another pool (or after
    /// its pool was dropped): its entry is outside the pool's range of the handle space. Both pools
    /// are named.
    #[error("handle of pool {handle_pool} given to pool {pool}")]
    ForeignHandle {
        /// The pool that minted the handle (`(dropped)` when it no longer exists).
        handle_pool: String,
        /// The pool it was given to.
        pool: String,
    },
    /// The process-wide handle space of run-time pools (`u32::MAX` entries, DESIGN.md "Handle
    /// soundness") has no free aligned block of `block` entries: live pools and quarantined ranges
    /// (pools dropped with objects out) hold or split it. A pool needs `capacity x stride / 8`
    /// entries (offset) or `capacity` (index), rounded up to a power of two (at most 2^31: 16 GiB
    /// of offset-entry region per pool); blocks are aligned to their size, so a small live pool can
    /// leave no large block free (`largest_free`: the largest free piece).
    #[error("run-time handle space exhausted: {requested} entries requested (an aligned block of {block}), largest free range {largest_free}, {quarantined} quarantined by pools dropped with objects out")]
    HandleSpaceExhausted {
        /// Raw entries the new pool needs.
        requested: u64,
        /// The aligned power-of-two block those entries take (more than 2^31: never).
        block: u64,
        /// The largest free range now.
        largest_free: u64,
        /// Entries held by ranges of pools dropped with objects still out.
        quarantined: u64,
    },
    /// The layout exceeds what the entry representation can name: with [`crate::repr::Offset`]
    /// entries (the default) the last object must start at most `max_offset` bytes (just under 32
    /// GiB) from the base. Use fewer or smaller objects, or [`crate::repr::Index`] entries.
    #[error("{capacity} objects x stride {stride} exceed the {repr} representation: the last object must start at most {max_offset} bytes from the base")]
    ReprLimit {
        /// Name of the representation (`"offset"`).
        repr: &'static str,
        /// Requested capacity.
        capacity: u32,
        /// Stride in bytes.
        stride: usize,
        /// Largest start offset an entry can name.
        max_offset: u64,
    },
    /// Every process slot of a shared pool is held by a live process.
    #[error("all {slots} process slots of the shared pool are taken by live processes")]
    NoProcessSlot {
        /// Number of process slots in the region.
        slots: u32,
    },
    /// A system call feeding the kernel failed (feature `uring`: setup, buffer ring registration,
    /// submission); `op` names it.
    #[error("{op} failed: {source}")]
    Kernel {
        /// The operation that failed (`io_uring_setup`, `register_buf_ring`, `submit`, ...).
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A get into a caller's table (`get_into`) found a slot holding a handle: nothing taken, table
    /// unchanged (a get never overwrites, so never loses, a handle).
    #[error("table slot {index} of {len} already holds a handle: nothing was taken")]
    SlotOccupied {
        /// 0-based position of the first occupied slot in the table given.
        index: usize,
        /// Length of the table given.
        len: usize,
    },
    /// A put from a caller's table (`put_from`) found an empty slot: nothing put, table unchanged.
    #[error("table slot {index} of {len} holds no handle: nothing was put")]
    SlotEmpty {
        /// 0-based position of the first empty slot in the table given.
        index: usize,
        /// Length of the table given.
        len: usize,
    },
    /// [`crate::Pool::grow`] would pass the maximum reserved at build
    /// ([`crate::PoolBuilder::max_capacity`]): nothing mapped or added.
    #[error("cannot grow to {requested} objects: the pool reserved at most {max}")]
    GrowBeyondMax {
        /// The capacity the call asked for (current capacity + n).
        requested: u64,
        /// The maximum reserved at build.
        max: u32,
    },
    /// [`crate::Pool::grow`] called by the pool's own initialiser (inside a `grow` of the same
    /// pool): refused instead of deadlocking.
    #[error("pool {pool}: grow called from inside its own grow (the object initialiser)")]
    GrowReentered {
        /// The pool's name.
        pool: String,
    },
    /// [`crate::Pool::grow`] in a forked child on a pool another parent thread was growing at the
    /// `fork()`: that grow never completes here, so the pool cannot grow in this process (objects
    /// already in the ring are usable; nothing lost or named twice).
    #[error("pool {pool}: a grow in progress at the fork() that made this process never completes here; the pool cannot grow in this process")]
    GrowInterrupted {
        /// The pool's name.
        pool: String,
    },
    /// A waiting get ([`crate::Pool::get_wait`], [`crate::Pool::get_bulk_wait`]) timed out: nothing
    /// taken.
    #[error("timed out after {waited:?} waiting for {requested} objects")]
    Timeout {
        /// Number of objects requested.
        requested: usize,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// A [`crate::PacketBuf`] operation found too little room (headroom, tailroom or data): the
    /// buffer is unchanged. The operations return the small `Copy` [`crate::packet::RoomError`];
    /// `?` converts it.
    #[error("packet buffer: {0}")]
    NoRoom(RoomError),
    /// A pool's region cannot be an AF_XDP UMEM as configured (feature `xdp`,
    /// `idxpool::xdp::XdpSocket`): `fault` says why.
    #[error("AF_XDP UMEM over pool {pool}: {fault}")]
    Umem {
        /// The pool's name.
        pool: String,
        /// The rule broken.
        fault: UmemFault,
    },
    /// A frame descriptor refused (feature `xdp`): one the kernel (or a broken peer) returned on
    /// the RX or completion ring not naming a frame lent to that ring, or a TX one not fitting its
    /// frame. Never a handle: counted and dropped.
    #[error("AF_XDP descriptor addr {addr:#x} len {len} refused: {fault}")]
    BadDescriptor {
        /// The descriptor's address (UMEM offset).
        addr: u64,
        /// The descriptor's length.
        len: u32,
        /// Why it was refused.
        fault: DescriptorFault,
    },
}

/// Why a pool's region cannot be an AF_XDP UMEM ([`PoolError::Umem`]).
///
/// ```
/// # #[cfg(all(feature = "xdp", target_os = "linux"))] {
/// use std::sync::Arc;
/// use idxpool::{PoolBuilder, PoolError, error::UmemFault};
/// // The default stride pads a 2 KiB object to 2,112 bytes: the object does not fill its
/// // frame, so the region cannot be a UMEM (checked before any system call).
/// let pool = Arc::new(PoolBuilder::<[u8; 2048]>::zeroed(8).build().unwrap());
/// let err = idxpool::xdp::XdpSocket::new(pool, &idxpool::xdp::XdpConfig::new("lo")).unwrap_err();
/// assert!(matches!(err, PoolError::Umem { fault: UmemFault::ObjectNotFrame { .. }, .. }));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UmemFault {
    /// The configured frame size is not the pool's stride: a UMEM frame must be one object.
    #[error("frame size {frame_size} is not the pool's stride {stride}")]
    FrameSizeNotStride {
        /// The frame size asked for.
        frame_size: u32,
        /// The pool's stride.
        stride: usize,
    },
    /// The object does not fill its frame (`size_of::<T>() < stride`): the kernel writes anywhere
    /// in a frame (use `StrideMode::Natural`, or an object of the stride's size).
    #[error("object of {object_size} bytes does not fill its {stride}-byte frame")]
    ObjectNotFrame {
        /// `size_of::<T>()`.
        object_size: usize,
        /// The pool's stride.
        stride: usize,
    },
    /// The region's first object is not page aligned (the kernel pins the UMEM by pages).
    #[error("region base {base:#x} is not aligned to the {page}-byte page")]
    RegionNotPageAligned {
        /// Address of object 0.
        base: usize,
        /// The page size.
        page: usize,
    },
    /// The stride is outside the kernel's chunk sizes (`min..=max`).
    #[error("stride {stride} outside the chunk sizes {min}..={max}")]
    ChunkSize {
        /// The pool's stride.
        stride: usize,
        /// `XDP_UMEM_MIN_CHUNK_SIZE`.
        min: u32,
        /// The page size.
        max: u32,
    },
    /// The frame headroom leaves no room for a packet after the kernel's own 256 bytes.
    #[error("frame headroom {headroom} must be below {max}")]
    Headroom {
        /// The headroom asked for.
        headroom: u32,
        /// `stride - XDP_PACKET_HEADROOM`.
        max: u32,
    },
    /// A ring size is not a power of two (the kernel's rule).
    #[error("{ring} ring size {size} is not a power of two")]
    RingSize {
        /// `fill`, `completion`, `rx` or `tx`.
        ring: &'static str,
        /// The size asked for.
        size: u32,
    },
    /// The pool has no objects, or its region passes the 2^48 bytes a UMEM offset can name.
    #[error("{capacity} frames of {stride} bytes cannot be a UMEM")]
    Size {
        /// The pool's capacity.
        capacity: u32,
        /// The pool's stride.
        stride: usize,
    },
}

/// Why a frame descriptor was refused ([`PoolError::BadDescriptor`]).
///
/// ```
/// use idxpool::error::DescriptorFault;
/// // A frame returned twice, or never lent, or lent to the other ring:
/// let f = DescriptorFault::NotLent;
/// assert_eq!(f.to_string(), "frame not lent to this ring");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorFault {
    /// The address is past the last frame of the UMEM.
    #[error("past the last frame")]
    OutOfRange,
    /// The packet does not fit in its frame (offset + length past the frame's end).
    #[error("packet runs past its frame")]
    PastFrame,
    /// The frame is not lent to the ring that returned it (never lent, returned twice, or lent to
    /// the other ring): returning it would make a second handle.
    #[error("frame not lent to this ring")]
    NotLent,
    /// The packet starts in the object's header (a [`crate::PacketBuf`]'s 16 bytes, never written
    /// by the kernel).
    #[error("packet starts in the buffer's header")]
    InHeader,
    /// A packet of no bytes (nothing to transmit).
    #[error("empty packet")]
    Empty,
}

impl PoolError {
    pub(crate) fn config(reason: impl Into<String>) -> Self {
        PoolError::InvalidConfig {
            reason: reason.into(),
        }
    }
    pub(crate) fn overflow(what: impl Into<String>) -> Self {
        PoolError::SizeOverflow { what: what.into() }
    }
}

/// Which end of the data window an operation wanted room at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    /// The headroom side ([`crate::PacketBuf::prepend`], [`crate::PacketBuf::strip_front`]).
    Front,
    /// The tailroom side ([`crate::PacketBuf::append`], [`crate::PacketBuf::strip_back`]).
    Back,
}

/// What a [`crate::PacketBuf`] operation lacked: `asked` bytes at `end`, `available` there
/// (headroom, tailroom, or data length for a strip). The buffer is unchanged. Converts into
/// [`PoolError::NoRoom`] with `?`.
///
/// ```
/// use idxpool::packet::{End, RoomError};
/// use idxpool::PoolBuilder;
/// let pool = PoolBuilder::packet_bufs(4, 128, 16).build()?;
/// let mut b = pool.get_pooled()?;
/// let e: RoomError = b.prepend(17).unwrap_err();
/// assert_eq!((e.asked(), e.available(), e.end()), (17, 16, End::Front));
/// assert_eq!(e.to_string(), "prepend of 17 bytes: headroom is 16");
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoomError {
    pub(crate) op: RoomOp,
    pub(crate) asked: usize,
    pub(crate) available: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// The operation a [`RoomError`] reports.
pub(crate) enum RoomOp {
    Prepend,
    Append,
    StripFront,
    StripBack,
    SetData,
}

impl RoomError {
    /// Bytes the operation asked for.
    pub fn asked(&self) -> usize {
        self.asked
    }
    /// Bytes that were there (headroom, tailroom, or data length).
    pub fn available(&self) -> usize {
        self.available
    }
    /// The end of the data window the operation worked at.
    pub fn end(&self) -> End {
        match self.op {
            RoomOp::Prepend | RoomOp::StripFront => End::Front,
            RoomOp::Append | RoomOp::StripBack | RoomOp::SetData => End::Back,
        }
    }
}

impl std::fmt::Display for RoomError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (op, what) = match self.op {
            RoomOp::Prepend => ("prepend", "headroom"),
            RoomOp::Append => ("append", "tailroom"),
            RoomOp::StripFront => ("strip_front", "length"),
            RoomOp::StripBack => ("strip_back", "length"),
            RoomOp::SetData => ("set_data", "capacity"),
        };
        if self.op == RoomOp::SetData {
            // `asked` is where the window would end (offset + length), not a size.
            return write!(
                f,
                "set_data ending at byte {}: capacity is {}",
                self.asked, self.available
            );
        }
        write!(
            f,
            "{op} of {} bytes: {what} is {}",
            self.asked, self.available
        )
    }
}

impl std::error::Error for RoomError {}

impl From<RoomError> for PoolError {
    fn from(e: RoomError) -> Self {
        PoolError::NoRoom(e)
    }
}

#[cfg(test)]
mod tests {
    use super::PoolError;
    use crate::{Pool, PoolBuilder};

    /// Where the `Ok` array of a `Result<[E; N], PoolError>` sits, in bytes from its start.
    fn ok_offset<E: Copy + Default, const N: usize>() -> usize {
        let r: Result<[E; N], PoolError> = Ok([E::default(); N]);
        match &r {
            Ok(a) => a.as_ptr() as usize - (&r as *const _ as usize),
            Err(_) => unreachable!(),
        }
    }

    /// `get_array::<N>`'s array starts 8-aligned inside its `Result` (layout note on
    /// [`PoolError`]).
    #[test]
    fn get_array_result_keeps_the_array_8_aligned() {
        crate::brand!(Layout);
        let pool: Pool<u64, Layout> = PoolBuilder::<u64>::zeroed(8).build_named().unwrap();
        let h = pool.get().unwrap();
        assert_eq!(std::mem::size_of_val(&h), 4, "a handle is one 4-byte entry");
        pool.put(h);
        // Arrays up to the error's size share its space after its 8-byte tag (larger ones get a
        // separate 4-byte tag at 4 in any layout).
        assert!(4 * 8 < std::mem::size_of::<PoolError>());
        for off in [
            ok_offset::<u32, 1>(),
            ok_offset::<u32, 2>(),
            ok_offset::<u32, 3>(),
            ok_offset::<u32, 4>(),
            ok_offset::<u32, 8>(),
            ok_offset::<u64, 1>(),
            ok_offset::<u64, 4>(),
        ] {
            assert_eq!(off % 8, 0, "Ok array at offset {off}");
        }
    }
}
