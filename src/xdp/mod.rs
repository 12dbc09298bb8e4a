//! AF_XDP over a pool's region: the pool **is** the UMEM (DESIGN.md, "Feeding the kernel").
//!
//! An AF_XDP UMEM (kernel docs, `af_xdp.rst`) is one registered region of equal frames, and its
//! fill, completion, RX and TX rings carry **byte offsets within the UMEM**. Over a pool's
//! region (base [`crate::Pool::base`], frame size [`crate::Pool::stride`]) a frame offset is
//! `index x stride`: the pool's own addressing.
//!
//! * [`FrameMap`]: that mapping both ways, aligned and unaligned chunk modes.
//! * [`RxObject`]: the object types a kernel receiver writes into (`Pod`, [`crate::PacketBuf`]).
//! * `FrameLedger` (feature `xdp`): which frames are lent to which ring; the one place where a
//!   descriptor becomes a handle again, after validation.
//! * `XdpSocket` (feature `xdp`, links libxdp): the socket, its fill ring fed from a
//!   [`crate::LocalCache`] in bursts, RX descriptors returned as handles, TX completions
//!   returned to the pool, and a drop that closes the socket before taking every frame back.
//!
//! [`FrameMap`] and [`RxObject`] need feature `uring` or `xdp`.

mod frame_map;
pub use frame_map::FrameMap;
mod rx_object;
pub use rx_object::RxObject;

#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
mod config;
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
mod ledger;
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
mod socket;
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
mod sys;

pub use crate::error::{DescriptorFault, UmemFault};
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
pub use config::{available, Frame, KernelXdpStats, XdpConfig, XdpMode, XdpStats};
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
pub use ledger::{FrameLedger, LentTo};
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
pub use socket::XdpSocket;
#[cfg(all(feature = "xdp", target_os = "linux", not(loom)))]
pub use sys::XDP_PACKET_HEADROOM;
