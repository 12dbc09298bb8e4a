//! What a pool holds: a sized `T`, or `[u8]`, a byte buffer whose length is set at build (from
//! configuration, an mbuf's data room: DPDK's `rte_mempool_create(name, n, elt_size, ..)` and
//! `rte_pktmbuf_pool_create(.., data_room_size, ..)`).
//!
//! ```
//! use idxpool::PoolBuilder;
//! let page = 4096 + 64; // from configuration
//! let pool = PoolBuilder::bytes(128, page, 64).cache_size(16).build()?;
//! let mut h = pool.get()?;
//! let buf: &mut [u8] = pool.get_mut(&mut h);
//! assert_eq!(buf.len(), page);
//! buf[..5].copy_from_slice(b"hello");
//! pool.put(h);
//! # Ok::<(), idxpool::PoolError>(())
//! ```

use std::alloc::Layout;

/// An object type a pool can hold: every sized type, and `[u8]` (byte buffers of a length set at
/// build, [`crate::PoolBuilder::bytes`]).
///
/// # Sealed
/// Implemented for every sized type and `[u8]` only: the pool's unsafe code trusts `from_addr(p,
/// len)` to return a pointer to `p` whose metadata describes an object of `fixed_layout()`'s size
/// (sized) or `len` bytes (`[u8]`), and a byte buffer to be valid all zero (the builder zero-fills
/// it). A user's unsized type (a struct ending in a slice) could keep the first promise and break
/// the second (a `NonZeroU8` field), so the trait is closed (tests/ui/element_sealed.rs).
///
/// ```
/// use idxpool::{Element, Pool, PoolBuilder};
/// // Code written once for pools of sized objects and of byte buffers.
/// fn first_byte<T: ?Sized + Element + AsRef<[u8]>>(pool: &Pool<T>) -> Result<u8, idxpool::PoolError> {
///     let h = pool.get()?;
///     let b = pool.get_ref(&h).as_ref()[0];
///     pool.put(h);
///     Ok(b)
/// }
/// let fixed = PoolBuilder::<[u8; 64]>::with_fn(8, |_| [7; 64]).build()?;
/// let bytes = PoolBuilder::bytes(8, 100, 8).build()?; // `Pool<[u8]>`, zero-filled
/// assert_eq!((first_byte(&fixed)?, first_byte(&bytes)?), (7, 0));
/// assert_eq!((fixed.object_size(), bytes.object_size()), (64, 100));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub trait Element: sealed::Sealed {
    /// The layout of one object when the type fixes it (`None` for `[u8]`: the builder's length).
    #[doc(hidden)]
    fn fixed_layout() -> Option<Layout>;
    /// The object at address `p`, of `len` bytes for `[u8]` (ignored for sized types).
    #[doc(hidden)]
    fn from_addr(p: *mut u8, len: usize) -> *mut Self;
    /// Whether dropping an object runs code (`std::mem::needs_drop`; never for `[u8]`).
    #[doc(hidden)]
    fn needs_drop() -> bool;
    /// Whether every get resets the objects it hands out ([`Element::reset_on_get`]): true for
    /// [`crate::PacketBuf`] only (DPDK's `rte_pktmbuf_alloc` resets its mbuf). A constant, so other
    /// types' gets compile to exactly what they are without it.
    #[doc(hidden)]
    const RESET_ON_GET: bool = false;
    /// The fresh state a get gives an object when [`Element::RESET_ON_GET`] is set. Crate code only
    /// (sealed): it must neither panic nor call into any pool (the pool's cache token is live).
    #[doc(hidden)]
    #[inline(always)]
    fn reset_on_get(_obj: &mut Self) {}
}

pub(crate) mod sealed {
    /// Every sized type and `[u8]` (see [`super::Element`], "Sealed").
    pub trait Sealed {}
    impl<T> Sealed for T {}
    impl Sealed for [u8] {}
}

// A sized object's pointer is its address; its size is the layout's.
impl<T> Element for T {
    #[inline(always)]
    fn fixed_layout() -> Option<Layout> {
        Some(Layout::new::<T>())
    }
    #[inline(always)]
    fn from_addr(p: *mut u8, _len: usize) -> *mut T {
        p.cast()
    }
    #[inline(always)]
    fn needs_drop() -> bool {
        std::mem::needs_drop::<T>()
    }
}

// The slice pointer carries `len` as its metadata; every byte pattern is a valid `[u8]`.
impl Element for [u8] {
    #[inline(always)]
    fn fixed_layout() -> Option<Layout> {
        None
    }
    #[inline(always)]
    fn from_addr(p: *mut u8, len: usize) -> *mut [u8] {
        std::ptr::slice_from_raw_parts_mut(p, len)
    }
    #[inline(always)]
    fn needs_drop() -> bool {
        false
    }
}
