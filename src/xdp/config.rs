//! [`XdpSocket`](super::XdpSocket)'s settings, UMEM checks, frames, counters; AF_XDP's presence.

use std::io;

use crate::error::{PoolError, UmemFault};
use crate::handle::Handle;
use crate::pool::Pool;
use crate::xdp::sys;
use crate::xdp::{FrameMap, RxObject};

/// `XDP_UMEM_MIN_CHUNK_SIZE`: the smallest frame the kernel takes.
const MIN_CHUNK: u32 = 2048;

/// Where the XDP program runs ([`XdpConfig::mode`]).
///
/// ```
/// let cfg = idxpool::xdp::XdpConfig::new("eth0");
/// assert_eq!(cfg.mode, idxpool::xdp::XdpMode::Auto);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// The driver's mode when it has one, else the generic (SKB) hook: libxdp's choice.
    Auto,
    /// The generic hook (`XDP_FLAGS_SKB_MODE`): every driver, a copy per packet.
    Skb,
    /// The driver's hook (`XDP_FLAGS_DRV_MODE`): veth has one.
    Drv,
}

/// Settings of an [`XdpSocket`](super::XdpSocket).
///
/// ```
/// use idxpool::xdp::{XdpConfig, XdpMode};
/// let mut cfg = XdpConfig::new("xdp0");
/// cfg.mode = XdpMode::Skb; // the generic hook: any driver, one copy into the UMEM
/// cfg.tx = true;           // a TX ring too
/// assert_eq!((cfg.queue, cfg.fill_size, cfg.burst), (0, 2048, 64));
/// ```
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// The interface (e.g. one end of a veth pair).
    pub ifname: String,
    /// Its receive queue (0 on veth).
    pub queue: u32,
    /// UMEM frame size: 0 (default) or the stride ([`UmemFault::FrameSizeNotStride`]).
    pub frame_size: u32,
    /// Bytes at the start of each frame the kernel never writes (the UMEM's `frame_headroom`,
    /// before [`crate::xdp::XDP_PACKET_HEADROOM`]). Default 0. A [`crate::PacketBuf`]'s 16-byte
    /// header is added to it: received data starts at room byte `frame_headroom + 256`.
    pub frame_headroom: u32,
    /// Fill and completion ring sizes (powers of two). Default 2048 each.
    pub fill_size: u32,
    /// See `fill_size`.
    pub comp_size: u32,
    /// RX and TX ring sizes (powers of two). Default 2048 each.
    pub rx_size: u32,
    /// See `rx_size`.
    pub tx_size: u32,
    /// Open the RX side (fill and RX rings used). Default true.
    pub rx: bool,
    /// Open the TX side. Default false.
    pub tx: bool,
    /// Where the program runs. Default [`XdpMode::Auto`].
    pub mode: XdpMode,
    /// Load libxdp's default redirect program (queue -> socket through an `XSKMAP`) with the
    /// socket in its map. False for TX only or a program of the caller's. Default true.
    pub load_program: bool,
    /// Bind with `XDP_COPY` (never zero-copy). Default false (the kernel picks).
    pub force_copy: bool,
    /// Frames kept in the fill ring: 0 (default): min(fill ring size, 3/4 of the pool).
    pub lend: u32,
    /// Most frames moved per ring operation (one `get_burst`, one producer store). Default 64.
    pub burst: u32,
    /// Recycle TX completions: [`XdpSocket::complete`](super::XdpSocket::complete) moves them
    /// straight to the fill ring up to the lend target, with no handle, put or get (DPDK
    /// 23.11's `rte_eth_recycle_mbufs`, without a driver's help): no `on_put` hook, no
    /// [`crate::PacketBuf`] reset (its header is written on receive). Needs RX; default false.
    pub recycle_tx: bool,
}

impl XdpConfig {
    /// The defaults for interface `ifname`.
    pub fn new(ifname: &str) -> Self {
        XdpConfig {
            ifname: ifname.to_string(),
            queue: 0,
            frame_size: 0,
            frame_headroom: 0,
            fill_size: 2048,
            comp_size: 2048,
            rx_size: 2048,
            tx_size: 2048,
            rx: true,
            tx: false,
            mode: XdpMode::Auto,
            load_program: true,
            force_copy: false,
            lend: 0,
            burst: 64,
            recycle_tx: false,
        }
    }
}

/// A received packet (or a frame to transmit): handle, offset in the object, length. Put
/// `handle` back into the pool when done (or transmit it).
///
/// ```
/// use idxpool::{PoolBuilder, StrideMode};
/// use idxpool::xdp::Frame;
/// let pool = PoolBuilder::<[u8; 2048]>::zeroed(4).stride(StrideMode::Natural).build()?;
/// let mut h = pool.get()?;
/// pool.get_mut(&mut h)[..6].copy_from_slice(&[0xff; 6]); // a broadcast destination
/// let f = Frame { handle: h, offset: 0, len: 64 };        // what XdpSocket::transmit takes
/// assert_eq!(pool.get_ref(&f.handle)[0], 0xff);
/// pool.put(f.handle);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[must_use = "the frame's handle owns a pool object: put it back into the pool"]
#[derive(Debug)]
pub struct Frame<
    T: ?Sized,
    B = crate::brand::Runtime,
    R: crate::repr::Repr = crate::repr::DefaultRepr,
> {
    /// The object holding the packet.
    pub handle: Handle<T, B, R>,
    /// Packet start in the object (received: `XDP_PACKET_HEADROOM` + frame headroom, copy mode).
    pub offset: u32,
    /// The packet's length in bytes.
    pub len: u32,
}

/// Counters of an [`XdpSocket`](super::XdpSocket) ([`stats`](super::XdpSocket::stats)).
///
/// ```
/// let s = idxpool::xdp::XdpStats::default();
/// assert_eq!(s.bad_descriptors, 0); // descriptors refused: never a handle
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Packets received (RX descriptors turned into handles).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Fill-ring refills that lent at least one frame (one producer store each).
    pub fill_bursts: u64,
    /// Frames lent on the fill ring in all.
    pub frames_filled: u64,
    /// Refills that found the pool empty (the kernel drops what it cannot place; nothing lost).
    pub fill_starved: u64,
    /// Frames handed to the TX ring.
    pub tx_frames: u64,
    /// TX completions reaped (returned to the pool, or recycled).
    pub tx_completed: u64,
    /// TX completions recycled ([`XdpConfig::recycle_tx`]), also in `tx_completed`/`frames_filled`.
    pub tx_recycled: u64,
    /// `sendto` kicks of the TX ring.
    pub tx_kicks: u64,
    /// Descriptors refused (RX or completion ring): never a handle.
    pub bad_descriptors: u64,
    /// RX descriptors still queued when the socket was dropped (their frames went back).
    pub discarded_at_drop: u64,
    /// Non-UMEM objects from the cache (a later `grow`'s): kept aside, back to the pool at drop.
    pub parked: u64,
}

/// The kernel's drop counters of an AF_XDP socket (`XDP_STATISTICS`, `struct xdp_statistics`;
/// [`XdpSocket::kernel_stats`](super::XdpSocket::kernel_stats)).
///
/// ```
/// let k = idxpool::xdp::KernelXdpStats::default();
/// assert_eq!(k.rx_fill_ring_empty_descs, 0); // packets dropped for want of a fill frame
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelXdpStats {
    /// Dropped for other reasons.
    pub rx_dropped: u64,
    /// Dropped because of an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was found empty (a packet dropped each time).
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was found empty.
    pub tx_ring_empty_descs: u64,
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

pub(crate) fn kernel(op: &'static str, rc: i32) -> PoolError {
    PoolError::Kernel {
        op,
        source: io::Error::from_raw_os_error(rc.abs()),
    }
}

/// Checks that the pool's region can be the UMEM of `cfg`; returns the frame map.
pub(crate) fn check_layout<T: ?Sized + RxObject, B: crate::Brand, R: crate::repr::Repr>(
    pool: &Pool<T, B, R>,
    cfg: &XdpConfig,
) -> Result<FrameMap, PoolError> {
    let fault = |fault| PoolError::Umem {
        pool: pool.name().to_string(),
        fault,
    };
    let stride = pool.stride();
    let page = page_size();
    if cfg.frame_size != 0 && cfg.frame_size as usize != stride {
        return Err(fault(UmemFault::FrameSizeNotStride {
            frame_size: cfg.frame_size,
            stride,
        }));
    }
    if stride < MIN_CHUNK as usize || stride > page {
        return Err(fault(UmemFault::ChunkSize {
            stride,
            min: MIN_CHUNK,
            max: page as u32,
        }));
    }
    if pool.object_size() != stride {
        return Err(fault(UmemFault::ObjectNotFrame {
            object_size: pool.object_size(),
            stride,
        }));
    }
    let base = pool.base().as_ptr() as usize;
    if !base.is_multiple_of(page) {
        return Err(fault(UmemFault::RegionNotPageAligned { base, page }));
    }
    // The object's own header (a `PacketBuf`'s) is registered as headroom too.
    let max_headroom = stride as u32 - sys::XDP_PACKET_HEADROOM - T::FRONT;
    if cfg.frame_headroom >= max_headroom {
        return Err(fault(UmemFault::Headroom {
            headroom: cfg.frame_headroom,
            max: max_headroom,
        }));
    }
    for (ring, size, used) in [
        ("fill", cfg.fill_size, true),
        ("completion", cfg.comp_size, true),
        ("rx", cfg.rx_size, cfg.rx),
        ("tx", cfg.tx_size, cfg.tx),
    ] {
        if used && !size.is_power_of_two() {
            return Err(fault(UmemFault::RingSize { ring, size }));
        }
    }
    if pool.capacity() == 0 {
        return Err(fault(UmemFault::Size {
            capacity: 0,
            stride,
        }));
    }
    FrameMap::of_pool(pool).map_err(|_| {
        fault(UmemFault::Size {
            capacity: pool.capacity(),
            stride,
        })
    })
}

/// True when AF_XDP sockets can be opened here: `socket(AF_XDP)` succeeds (not
/// `EAFNOSUPPORT`: no `CONFIG_XDP_SOCKETS`; not `EPERM`: no CAP_NET_RAW) and we are root
/// (attaching and binding need CAP_NET_ADMIN and CAP_BPF). `Err` says why not (to skip).
///
/// # Errors
/// The reason AF_XDP is unavailable.
pub fn available() -> Result<(), String> {
    // SAFETY: plain socket(2); the fd is closed at once.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!(
            "socket(AF_XDP) failed: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: attaching an XDP program needs CAP_NET_ADMIN and CAP_BPF".into());
    }
    Ok(())
}
