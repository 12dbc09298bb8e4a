//! # idxpool
//!
//! An index-based compact memory pool in the style of DPDK's `rte_mempool`.
//!
//! All objects of a pool are carved from one region (hugetlb, THP or 4 KiB pages) at
//! `base + index x stride`. Free objects are named by 32-bit entries held in a lock-free common
//! ring and in per-thread (or user-owned) LIFO caches, which halves the bytes moved per get/put
//! and the cache footprint compared with DPDK's 8-byte pointers. Users hold 4-byte typed
//! [`Handle`]s and turn them into `&T` / `&mut T` on demand. By default an entry is the
//! object's byte offset / 8 ([`repr::Offset`]), so that conversion is the store's addressing
//! mode and costs what a pointer costs; [`index::Pool`] stores indices instead.
//!
//! ```
//! use idxpool::{PoolBuilder, Handle};
//!
//! idxpool::brand!(Packets);
//! struct Packet { len: u16, data: [u8; 2046] }
//!
//! let pool = PoolBuilder::<Packet>::with_init(4096, |_i, slot| {
//!     slot.write(Packet { len: 0, data: [0; 2046] })    // once per object, at creation
//! }).cache_size(256).build::<Packets>()?;
//! println!("backing: {}", pool.backing());
//! let mut cache = pool.local_cache();              // explicit, no TLS lookup
//! let mut burst: Vec<Handle<Packet, Packets>> = Vec::with_capacity(32);
//! cache.get_bulk(&mut burst, 32)?;                  // all or nothing
//! for h in burst.iter_mut() {
//!     let p = cache.get_mut(h);                     // index -> &mut T
//!     p.len = 64;
//!     p.data[0] = 0xff;
//! }
//! cache.put_bulk(&mut burst);                       // always succeeds
//! drop(cache);                                      // its objects go back to the ring
//! assert_eq!(pool.in_use(), 0);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! The modules map onto the design: [`region`] (the mapping), [`ring`] (the common pool),
//! [`cache`] (flush/refill policies), [`handle`], [`mod@brand`] (handle soundness), [`repr`]
//! (index vs pointer entries), [`stats`]. DESIGN.md explains the invariants.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod audit;
pub mod brand;
mod builder;
pub mod cache;
mod debug;
pub mod dynamic;
pub mod error;
mod guard;
pub mod handle;
pub mod handle_ring;
pub mod leaks;
mod local;
mod owned;
mod pool;
mod prefetch;
pub mod region;
pub mod repr;
pub mod ring;
#[cfg(all(target_os = "linux", not(loom)))]
pub mod shared;
pub mod stats;
mod sync;
mod thread;

pub use audit::AuditReport;
pub use brand::{Brand, BrandSlot, NamedBrand, Scoped, Unchecked};
pub use builder::{
    InitSlot, PoolBuilder, StrideMode, Written, CACHE_LINE, DEFAULT_CACHE_SIZE,
    DEFAULT_MAX_THREADS, MAX_THREADS_LIMIT,
};
pub use cache::{FlushPolicy, CACHE_MAX_SIZE};
pub use debug::DEBUG_CHECKS;
pub use dynamic::{DynHandle, DynLocalCache, DynObjectsMut, DynPool, DynPooled, DynResolver};
pub use error::PoolError;
pub use guard::Pooled;
pub use handle::{GenericHandle, Handle};
pub use handle_ring::HandleRing;
pub use local::LocalCache;
pub use owned::{OwnedConsumer, OwnedLocalCache, OwnedProducer, OwnedResolver};
pub use pool::{GenericPool, ObjectsMut, Resolver};
pub use region::{Backing, BackingPolicy, BackingReport, Fallback};
pub use repr::{DefaultRepr, Index, Offset, Pointer};
pub use stats::Stats;

/// Re-exported for `Zeroable` / `Pod` bounds of zero-initialised pools.
pub use bytemuck;

/// The pool: 4-byte entries in caches and ring, 4-byte handles. Entries are scaled byte
/// offsets ([`repr::Offset`], [`DefaultRepr`]): handle -> `&mut T` is the store's addressing
/// mode, as fast as a pointer (BENCHMARKS.md); regions up to 32 GiB. [`index::Pool`] names
/// objects by index instead (any region size).
pub type Pool<T, B> = GenericPool<T, B, DefaultRepr>;
/// A user-owned cache of the default pool [`Pool`].
pub type IndexLocalCache<'p, T, B> = LocalCache<'p, T, B, DefaultRepr>;

/// The pool with index entries ([`repr::Index`]: `index + 1`, address `base + index x stride`,
/// a multiply by the run-time stride per conversion): any region size up to `u32::MAX`
/// objects, and `Handle::index()` without the pool. Build with
/// `PoolBuilder::build_repr::<B, Index>()` or `scoped_repr::<Index, _>`.
pub mod index {
    use crate::repr::Index;

    /// Pool with index entries.
    pub type Pool<T, B> = crate::GenericPool<T, B, Index>;
    /// 4-byte handle of the index pool.
    pub type Handle<T, B> = crate::GenericHandle<T, B, Index>;
    /// User-owned cache of the index pool.
    pub type LocalCache<'p, T, B> = crate::LocalCache<'p, T, B, Index>;
}

/// The pointer twin: the same pool algorithm with 8-byte object pointers in the caches and the
/// ring, as DPDK's rte_mempool stores them. It exists as the baseline the index pool is
/// measured against (`examples/mempool_perf.rs`); only the entry representation differs.
pub mod ptr {
    use crate::repr::Pointer;

    /// Pool with pointer entries.
    pub type Pool<T, B> = crate::GenericPool<T, B, Pointer>;
    /// 8-byte handle of the pointer pool.
    pub type Handle<T, B> = crate::GenericHandle<T, B, Pointer>;
    /// User-owned cache of the pointer pool.
    pub type LocalCache<'p, T, B> = crate::LocalCache<'p, T, B, Pointer>;
}

/// The design notes (DESIGN.md in the repository): the pieces, the invariants they keep, and
/// why they are built this way; published here so that they ship with the API reference.
#[doc = ""]
#[doc = include_str!("../DESIGN.md")]
pub mod design {}

/// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
