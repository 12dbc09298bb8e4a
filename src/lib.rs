//! # idxpool
//!
//! An index-based compact memory pool in the style of DPDK's `rte_mempool`.
//!
//! All objects of a pool are carved from one region (hugetlb, THP or 4 KiB pages) at `base + index
//! x stride`. Free objects are named by 32-bit entries in a lock-free common ring and per-thread
//! (or user-owned) LIFO caches, halving the bytes moved per get/put and the cache footprint against
//! DPDK's 8-byte pointers. Users hold 4-byte typed [`Handle`]s, turned into `&T` / `&mut T` on
//! demand. By default an entry is the object's byte offset / 8 ([`repr::Offset`]), so the
//! conversion is the store's addressing mode and costs what a pointer costs; [`repr::Index`] stores
//! indices.
//!
//! One pool type, [`Pool`]`<T, B = Runtime, R = Offset>`: the identity `B` ([`Runtime`]: any number
//! of pools, one range compare per handle use; or a compiler-checked brand: [`brand!`], [`Scoped`],
//! [`Unchecked`]) and the entry representation `R` ([`repr`]). Companions ([`LocalCache`],
//! [`HandleRing`]) are written once over how they hold the pool ([`PoolRef`], sealed: `&Pool` or
//! `Arc<Pool>`). The in-process pool and the multi-process `shared::SharedPool` share one
//! interface, [`Mempool`], over which generic code and the [`Pooled`] guard are written.
//!
//! ```
//! use std::sync::Arc;
//! use idxpool::{Handle, LocalCache, Pool, PoolBuilder};
//!
//! struct Packet { len: u16, data: [u8; 2046] }
//!
//! let pool: Arc<Pool<Packet>> = Arc::new(
//!     PoolBuilder::with_init(4096, |_i, slot| {
//!         slot.write(Packet { len: 0, data: [0; 2046] })    // once per object, at creation
//!     })
//!     .cache_size(256)
//!     .build()?,                                           // a run-time pool: no brand
//! );
//! println!("backing: {}", pool.backing());
//! let mut cache = LocalCache::new(pool.clone());           // explicit, no TLS lookup
//! let objs = pool.resolver();                              // handle -> &mut T in hot loops
//! let mut burst: Vec<Handle<Packet>> = Vec::with_capacity(32);
//! cache.get_bulk(&mut burst, 32)?;                          // all or nothing
//! for h in burst.iter_mut() {
//!     let p = objs.get_mut(h);                              // [base + entry x 8]
//!     p.len = 64;
//!     p.data[0] = 0xff;
//! }
//! cache.put_bulk(&mut burst);                               // always succeeds
//! drop(cache);
//! assert_eq!(pool.in_use(), 0);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! Modules: [`region`] (the mapping), [`ring`] (the common pool), [`cache`] (flush/refill
//! policies), [`handle`], [`mod@brand`] (identity and handle soundness), [`repr`] (entries),
//! [`element`] (sized objects and byte buffers), [`stats`]. DESIGN.md ([`design`]) explains the
//! invariants.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod audit;
pub mod brand;
mod builder;
#[cfg(feature = "bytes")]
mod bytes_glue;
pub mod cache;
pub mod channel;
pub mod element;
pub mod error;
mod fork;
mod grow;
mod guard;
pub mod handle;
pub mod handle_ring;
pub mod leaks;
mod local;
pub mod mempool;
#[cfg(feature = "metrics")]
mod metrics_export;
mod on_put;
pub mod owned;
pub mod packet;
mod pool;
pub mod region;
pub mod repr;
pub mod ring;
#[cfg(all(target_os = "linux", not(loom)))]
pub mod shared;
mod space;
pub mod stats;
mod sync;
mod table;
#[cfg(all(feature = "uring", target_os = "linux", not(loom)))]
pub mod uring;
mod wait;
// AF_XDP: the frame map with either half of "feeding the kernel" (`uring` or `xdp`); the socket
// with `xdp`.
#[cfg(any(feature = "uring", feature = "xdp"))]
pub mod xdp;

pub use audit::AuditReport;
pub use brand::{Brand, BrandSlot, NamedBrand, Runtime, Scoped, Unchecked};
pub use builder::{
    InitSlot, PoolBuilder, StrideMode, Written, DEFAULT_CACHE_SIZE, DEFAULT_MAX_THREADS,
    MAX_THREADS_LIMIT,
};
pub use cache::{FlushPolicy, CACHE_LINE, CACHE_MAX_SIZE};
pub use channel::HandleChannel;
pub use element::Element;
pub use error::PoolError;
pub use guard::{HandleOf, ObjectOf, Pooled};
pub use handle::Handle;
pub use handle_ring::HandleRing;
pub use local::LocalCache;
pub use mempool::{Mempool, MempoolRef};
pub use owned::PoolRef;
pub use packet::PacketBuf;
pub use pool::{Pool, Resolver, DEBUG_CHECKS};
pub use region::{Backing, BackingPolicy, BackingReport};
pub use repr::{DefaultRepr, Index, Offset, Pointer};
pub use space::SpaceUsage;
pub use stats::Stats;

/// The one pool's name before it took the brand and the representation as type parameters.
#[deprecated(note = "use `Pool<T, B, R>`")]
pub type GenericPool<T, B = Runtime, R = DefaultRepr> = Pool<T, B, R>;
/// The handle's name before it took the brand and the representation as type parameters.
#[deprecated(note = "use `Handle<T, B, R>`")]
pub type GenericHandle<T, B = Runtime, R = DefaultRepr> = Handle<T, B, R>;
/// The shared run-time pool with 8-byte handles, now a run-time `Pool` behind an `Arc` (4-byte
/// handles): `Arc::new(builder.build()?)`.
#[deprecated(note = "use `Arc<Pool<T>>`")]
pub type DynPool<T> = std::sync::Arc<Pool<T>>;

/// Re-exported for `Zeroable` / `Pod` bounds of zeroed pools. A crate not depending on bytemuck
/// points its derives (which name `::bytemuck`) here with `#[bytemuck(crate =
/// "idxpool::bytemuck")]`:
///
/// ```
/// #[derive(Clone, Copy, idxpool::bytemuck::Zeroable)]
/// #[bytemuck(crate = "idxpool::bytemuck")]
/// struct Order { id: u64, qty: u32, px: u32 }
///
/// let pool = idxpool::PoolBuilder::<Order>::zeroed(1024).build()?;
/// let h = pool.get()?;
/// assert_eq!(pool.get_ref(&h).qty, 0);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub use bytemuck;

/// The design notes (DESIGN.md): the pieces, their invariants and why they are built so, shipped
/// with the API reference (built from the repository only: the package does not ship DESIGN.md).
#[cfg(all(doc, not(docsrs)))]
#[doc = ""]
#[doc = include_str!("../DESIGN.md")]
pub mod design {}

/// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
