//! AF_XDP over a pool's region: the pool **is** the UMEM (DESIGN.md, "Feeding the kernel").
//!
//! An AF_XDP UMEM is one registered region of equal frames, and its fill, completion, RX and
//! TX rings carry **byte offsets within the UMEM**. When the UMEM is a pool's region (base =
//! [`crate::Pool::base`], frame size = [`crate::Pool::stride`]), a frame offset is
//! `index x stride`: the pool's own addressing.
//!
//! * [`FrameMap`]: that mapping both ways, in the kernel's aligned and unaligned chunk modes
//!   (with feature `uring` or `xdp`).
//! * [`RxObject`]: the object types a kernel receiver writes into: every `Pod` type, and
//!   [`crate::PacketBuf`], whose header the receivers keep out of the kernel's reach and fill
//!   from each completion or descriptor (with feature `uring` or `xdp`).
//! * `FrameLedger` (feature `xdp`): which frames are lent to the kernel and to which ring;
//!   the one place where a descriptor becomes a handle again, after validation.
//! * `XdpSocket` (feature `xdp`, links the system's libxdp): an AF_XDP socket whose UMEM is
//!   the pool's region, its fill ring fed from a [`crate::LocalCache`] in bursts, RX
//!   descriptors returned as handles, TX frames lent and their completions returned to the
//!   pool, and a drop that closes the socket before giving every lent frame back.

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
