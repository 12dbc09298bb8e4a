//! Entry representations: what the caches and the common ring store for a free object.
//!
//! The pool is one generic algorithm over [`Repr`]. Three representations exist:
//!
//! | repr | entry | handle -> address | limit |
//! |---|---|---|---|
//! | [`Offset`] | 4 bytes: `byte offset / 8 + 1` | `[base - 8 + entry * 8]`: folds into the store's addressing mode | last object must start below 32 GiB ([`OFFSET_MAX_OBJECT_OFFSET`]); stride a multiple of 8 |
//! | [`Index`] | 4 bytes: `index + 1` | `base - stride + entry * stride`: a multiply by the run-time stride | `capacity <= u32::MAX` |
//! | [`Pointer`] | 8 bytes: the address (DPDK's rte_mempool) | none | none |
//!
//! Only the representation differs between pools of one `T`, so a benchmark of one against
//! another isolates it (the pointer twin, `Pool<T, B, Pointer>`, is the baseline). What each costs in the
//! allocate-convert-write-free loop: BENCHMARKS.md, "Handle to `&mut T`".

use std::fmt;
use std::num::NonZeroU32;
use std::ptr::NonNull;

use crate::error::PoolError;

mod shape;
pub(crate) use shape::{by_shape, copy_entries, ByShape, Dyn, Shape};

/// The parts of a representation only the pool uses (sealed: nameable inside the crate
/// only, so no other crate implements [`Repr`] or sees the pool's geometry).
mod hidden {
    use super::*;

    /// Where object `i` lives: `base + i * stride`, and which entries name this pool's objects.
    ///
    /// A pool owns the raw entry values (`entry - 1`) `lo .. lo + span` of the process's 32-bit
    /// handle space: `lo = 0` for branded pools (the brand keeps pools apart), a range of its own
    /// for run-time pools ([`crate::brand::Runtime`], `space.rs`), so that a run-time pool tells its
    /// handles from another pool's with one range check. `base0` and `obase0` fold `lo` in, so the
    /// conversion entry -> address is the same instruction whatever `lo` is.
    ///
    /// ```
    /// // The geometry is the pool's own; it shows through the pool's accessors.
    /// let pool = idxpool::PoolBuilder::<[u64; 3]>::with_default(16).build()?;
    /// let h = pool.get()?;
    /// let i = pool.index_of(&h) as usize;
    /// let addr = pool.base().as_ptr() as usize + i * pool.stride(); // base + i x stride
    /// assert_eq!(pool.as_ptr(&h).as_ptr() as usize, addr);
    /// pool.put(h);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[derive(Clone, Copy, Debug)]
    pub struct Geometry {
        /// Address of object 0.
        pub(crate) base: NonNull<u8>,
        /// `base - (lo + 1) x stride` (wrapping), so that the object of index entry `e` is at
        /// `base0 + e * stride`.
        pub(crate) base0: *mut u8,
        /// `base - (lo + 1) x OFFSET_SCALE` (wrapping), so that the object of offset entry `e` is
        /// at `obase0 + e * OFFSET_SCALE` (one addressing mode).
        pub(crate) obase0: *mut u8,
        /// Bytes between consecutive objects.
        pub(crate) stride: usize,
        /// Number of objects.
        pub(crate) capacity: u32,
        /// First raw entry value (`entry - 1`) of this pool's range of the handle space.
        pub(crate) lo: u32,
        /// `lo + 1` (wrapping): the first entry, against which `entry ^ e0 < span` checks a
        /// run-time pool's handle (kept apart so the check needs no add).
        pub(crate) e0: u32,
        /// Raw entry values this pool's range spans (the range check of run-time pools).
        pub(crate) span: u32,
        /// Bytes of one object of a byte-buffer pool (`Pool<[u8]>`: the slice length
        /// [`crate::Element::from_addr`] gives); the object size for sized types (unused).
        pub(crate) elem_len: usize,
        /// The pool has a reset hook ([`crate::PoolBuilder::on_put`]): every put runs it first.
        /// Kept here, next to what the put adapters already read (a `LocalCache` holds a copy in
        /// registers), so that a pool without a hook pays one test of it per put call (the
        /// `Vec` and one-handle puts); the table put tests it only after a refusal, through the
        /// two limits below.
        pub(crate) put_hook: bool,
        /// The limit of a run-time pool's fused table put check (the OR of the slots' ranks
        /// must be below it): `span`, or 0 when the pool has a reset hook, so that every table
        /// put of such a pool leaves the fused check for the hooked path, and one without a
        /// hook tests nothing for it (set by [`Geometry::set_put_hook`]).
        pub(crate) put_span: u32,
    }

    /// An object pointer that may cross threads (the pool, not the pointer, owns the object).
    #[derive(Clone, Copy, PartialEq, Eq)]
    #[repr(transparent)]
    pub struct ObjPtr(pub(crate) NonNull<u8>);

    /// What a representation does; see [`Repr`].
    ///
    /// # Safety
    /// `encode` must be injective over a pool's indices and `ptr(encode(i))` must be object
    /// `i`'s address: the pool relies on this to hand out non-aliasing objects.
    pub unsafe trait ReprImpl: 'static + Sized {
        /// The stored value: 4 bytes for [`Index`], 8 for [`Pointer`]. Has a niche, so that
        /// `Option<Handle>` is as small as the handle.
        type Entry: Copy + Send + Sync + Eq + fmt::Debug + 'static;
        /// Entry for object `index`.
        fn encode(g: &Geometry, index: u32) -> Self::Entry;
        /// Object index of an entry.
        fn index(g: &Geometry, e: Self::Entry) -> u32;
        /// Object address of an entry.
        fn ptr(g: &Geometry, e: Self::Entry) -> *mut u8;
        /// Strides this representation can name are multiples of this (1: any stride).
        /// [`crate::StrideMode::Auto`] rounds up to it; other stride modes must already satisfy it.
        const STRIDE_MULTIPLE: usize = 1;
        /// Checks that every object of a pool of `capacity` objects at `stride` bytes has an entry.
        ///
        /// # Errors
        /// [`PoolError::ReprLimit`] when the layout exceeds what the entry can name.
        fn check_layout(stride: usize, capacity: u32) -> Result<(), PoolError> {
            let _ = (stride, capacity);
            Ok(())
        }
        /// The entry named by a raw value as [`crate::Handle::into_raw`] returns it
        /// (`entry - 1` for 4-byte entries; the object index for [`Pointer`]), or None when no
        /// entry has that raw value. Used by `check_raw`; no other check.
        fn entry_from_raw(g: &Geometry, raw: u32) -> Option<Self::Entry>;
        /// Raw entry values (`entry - 1`) a pool of `capacity` objects at `stride` bytes needs in
        /// the process's handle space (run-time pools), or None when this representation has no
        /// such space ([`Pointer`]: run-time pools need 4-byte entries).
        fn space_needed(stride: usize, capacity: u32) -> Option<u64>;
        /// True when `e` lies in the pool's range of the handle space (`lo .. lo + span`): the one
        /// compare of a run-time pool's access. Says nothing for [`Pointer`] (always true).
        #[inline(always)]
        fn owns(g: &Geometry, e: Self::Entry) -> bool {
            Self::rank(g, e) < g.span
        }
        /// The place of `e` in the pool's block of the handle space: `entry ^ e0`, where the block
        /// is `e0 .. e0 + span` with `span` a power of two and `e0` a multiple of it (space.rs),
        /// so `rank < span` is the range check, and the OR of the ranks of a burst checks the
        /// whole burst (an OR reduction, which vectorises to two instructions per four entries).
        /// 0 for [`Pointer`].
        fn rank(g: &Geometry, e: Self::Entry) -> u32;
        /// [`ReprImpl::rank`] of a caller's table slot, which may be empty: an empty slot
        /// (`None`, bits 0) ranks `0 ^ e0 = e0`. A run-time pool's block starts at a nonzero
        /// multiple of its span (`space::claim`), so `e0 >= span`: an empty slot fails the
        /// range check as a foreign entry does, and one OR over the slots checks both. `u32::MAX`
        /// for an empty slot of [`Pointer`] (never a run-time pool), 0 for a full one.
        fn slot_rank(g: &Geometry, e: Option<Self::Entry>) -> u32;
        /// The raw value (`entry - 1`) of a 4-byte entry in the handle space; `u32::MAX` (no
        /// value of the space) for [`Pointer`]. For messages about foreign handles.
        fn raw(e: Self::Entry) -> u32;
    }
}
pub(crate) use hidden::{Geometry, ObjPtr, ReprImpl};

// SAFETY: Geometry is address arithmetic only; the memory it describes is owned by the pool.
unsafe impl Send for Geometry {}
// SAFETY: as above.
unsafe impl Sync for Geometry {}

impl Geometry {
    /// The geometry of a pool whose entries start at raw value 0 (branded pools).
    pub(crate) fn new(base: NonNull<u8>, stride: usize, capacity: u32) -> Self {
        Self::with_range(base, stride, capacity, 0, u32::MAX)
    }

    /// The geometry of a pool that owns raw entries `lo .. lo + span` of the handle space.
    pub(crate) fn with_range(
        base: NonNull<u8>,
        stride: usize,
        capacity: u32,
        lo: u32,
        span: u32,
    ) -> Self {
        let first = lo as usize + 1;
        Geometry {
            base,
            base0: base.as_ptr().wrapping_sub(first.wrapping_mul(stride)),
            obase0: base.as_ptr().wrapping_sub(first * OFFSET_SCALE),
            stride,
            capacity,
            lo,
            e0: lo.wrapping_add(1),
            span,
            elem_len: stride,
            put_hook: false,
            put_span: span,
        }
    }

    /// Records whether the pool has a reset hook: the flag, and the limit of a run-time
    /// pool's fused table put check (0 with a hook: every put refused there, then taken by the
    /// hooked path).
    pub(crate) fn set_put_hook(&mut self, hooked: bool) {
        self.put_hook = hooked;
        self.put_span = if hooked { 0 } else { self.span };
    }

    /// The same geometry for objects of `len` bytes (byte-buffer pools).
    pub(crate) fn with_elem_len(self, len: usize) -> Self {
        Geometry {
            elem_len: len,
            ..self
        }
    }

    /// Pointer to object `index` (no check).
    #[inline(always)]
    pub(crate) fn ptr_of_index(&self, index: u32) -> *mut u8 {
        self.base
            .as_ptr()
            .wrapping_add(index as usize * self.stride)
    }

    /// Hints that the first cache line of the object of entry `e` will be written soon: the
    /// conversion of the representation ([`ReprImpl::ptr`]) and one prefetch instruction
    /// ([`prefetch_write`]), nothing else (no identity check: a hint for another pool's entry
    /// touches nothing). Behind [`crate::Resolver::prefetch`].
    #[inline(always)]
    pub(crate) fn prefetch_write<R: ReprImpl>(&self, e: R::Entry) {
        prefetch_write(R::ptr(self, e));
    }
}

/// The prefetch hint behind [`Geometry::prefetch_write`]: one instruction that asks
/// the core to bring the cache line holding `p` towards L1 in a state ready for writing, as
/// DPDK's `rte_prefetch0_write` and VPP's `vlib_prefetch_buffer_header(b, STORE)` do. No effect
/// on program semantics: no read, no write, no fault.
///
/// - x86-64: `_mm_prefetch::<_MM_HINT_ET0>`. LLVM emits `prefetchw` (fetch for ownership) only
///   when the target feature `prfchw` is enabled (e.g. `-C target-cpu=native` on a CPU that has
///   it, which is every x86-64 since Broadwell / AMD K8); without it the same call compiles to
///   `prefetcht0` (a read prefetch into every level), which still hides the miss but leaves the
///   line shared until the first store upgrades it.
/// - aarch64: `prfm pstl1keep, [p]` (prefetch for store, L1, temporal).
/// - Other targets, and Miri (which interprets no prefetch): nothing.
///
/// A prefetch never faults, whatever the address; the caller still only passes addresses of
/// objects inside a pool's region, computed from entries, so that no address arithmetic
/// leaves the region's allocation (Miri, strict provenance). Here, with the geometry, because
/// the address is the geometry's; `unsafe` only because the intrinsic is a
/// `#[target_feature(enable = "sse")]` function (safe to call only from code that lists the
/// feature, even though SSE is in the x86-64 baseline) and the arm64 form is inline assembly
/// (the stable `core::hint::prefetch_write` does not exist yet: nightly `hint_prefetch`).
#[inline(always)]
fn prefetch_write(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: a prefetch is a hint: it reads and writes no memory and never faults, for any
        // address. Its one requirement, the `sse` target feature, is part of the x86-64
        // baseline (statically enabled on every x86-64 target).
        unsafe { _mm_prefetch::<{ _MM_HINT_ET0 }>(p.cast::<i8>()) };
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        // SAFETY: PRFM is a hint: it reads and writes no memory, never faults (also on an
        // unmapped address), touches no stack and no flags.
        unsafe {
            core::arch::asm!(
                "prfm pstl1keep, [{0}]",
                in(reg) p,
                options(nostack, readonly, preserves_flags)
            )
        };
    }
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        let _ = p;
    }
}

/// How a free object is named in the caches and the ring.
///
/// # Safety
/// For every `index < g.capacity`, `ptr(g, encode(g, index))` must equal
/// `g.base + index * g.stride` and `index(g, encode(g, index)) == index`; distinct indices must
/// give distinct entries. The pool relies on this to hand out non-aliasing objects.
/// `Entry` must be one of the types for which Rust guarantees the null-pointer optimisation
/// (`NonZeroU32`, `NonNull<_>`, ..., or a `repr(transparent)` wrapper of one): callers' tables
/// of `Option<Handle>` slots (`get_into` / `put_from`) are read and written as entries.
///
/// ```
/// use idxpool::{repr::Repr, Brand, Index, Pointer, Pool, PoolBuilder};
/// fn entry_bytes<T, B: Brand, R: Repr>(_: &Pool<T, B, R>) -> usize {
///     std::mem::size_of::<R::Entry>()
/// }
/// let offsets = PoolBuilder::<u64>::with_default(8).build()?; // the default: `Offset`
/// let indices = PoolBuilder::<u64>::with_default(8).repr::<Index>().build()?;
/// assert_eq!((entry_bytes(&offsets), entry_bytes(&indices)), (4, 4));
/// assert_eq!(Index::NAME, "index"); // the name reports use
/// let ptr = PoolBuilder::<u64>::with_default(8).repr::<Pointer>().scoped(|p| entry_bytes(&p))?;
/// assert_eq!(ptr, 8);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub trait Repr: 'static + Sized + ReprImpl {
    /// Name used in reports: `"offset"`, `"index"` or `"pointer"`.
    ///
    /// ```
    /// use idxpool::{repr::Repr, Index, Offset, Pointer};
    /// assert_eq!([Offset::NAME, Index::NAME, Pointer::NAME], ["offset", "index", "pointer"]);
    /// ```
    const NAME: &'static str;
}

/// The default representation of [`crate::Pool`], [`crate::Handle`] and
/// [`crate::PoolBuilder`]: [`Offset`], chosen by measurement (BENCHMARKS.md, "Handle to
/// `&mut T`"). `PoolBuilder::repr::<Index>()` or `::<Pointer>()` picks another.
///
/// ```
/// use idxpool::{repr::Repr, DefaultRepr, Handle, Pool, PoolBuilder, Runtime};
/// let pool: Pool<u64, Runtime, DefaultRepr> = PoolBuilder::with_default(8).build()?;
/// let h: Handle<u64> = pool.get()?; // Handle<u64, Runtime, DefaultRepr>: 4 bytes
/// assert_eq!((DefaultRepr::NAME, std::mem::size_of_val(&h)), ("offset", 4));
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub type DefaultRepr = Offset;

/// The 4-byte representations ([`Offset`], [`Index`]): entries are `NonZeroU32`, so a handle
/// has a raw `u32` form (`into_raw` / `from_raw`) and `Option<Handle>` is 4 bytes. Sealed.
///
/// ```
/// use idxpool::{repr::CompactRepr, Handle, PoolBuilder};
/// // Any 4-byte handle has a raw `u32` form, e.g. to store in a foreign structure.
/// fn stash<T, B, R: CompactRepr>(h: Handle<T, B, R>) -> u32 {
///     h.into_raw()
/// }
/// let pool = PoolBuilder::<u64>::with_default(8).build()?;
/// let raw = stash(pool.get()?);
/// assert!(pool.check_raw(raw).is_ok());
/// // SAFETY: `raw` comes from `into_raw` of a handle of this live pool, rebuilt once.
/// let h = unsafe { Handle::from_raw(raw) };
/// pool.put(h);
/// assert_eq!(pool.in_use(), 0);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub trait CompactRepr: Repr + ReprImpl<Entry = NonZeroU32> {}
impl CompactRepr for Index {}
impl CompactRepr for Offset {}

/// Offset entries store byte offsets divided by this (`1 << OFFSET_SHIFT`).
pub const OFFSET_SCALE: usize = 1 << OFFSET_SHIFT;
/// log2 of [`OFFSET_SCALE`]: the largest scale x86-64 addressing modes apply for free.
pub const OFFSET_SHIFT: u32 = 3;
/// Largest byte offset of an object's start that an [`Offset`] entry can name:
/// `(u32::MAX - 1) * 8` (entries are `offset / 8 + 1`, and `0` is never an entry), just under
/// 32 GiB. Every region of at most 32 GiB fits.
pub const OFFSET_MAX_OBJECT_OFFSET: u64 = (u32::MAX as u64 - 1) * OFFSET_SCALE as u64;

/// 4-byte entries holding the object's **scaled byte offset**: `(address - base) / 8 + 1` as a
/// `NonZeroU32` (DPDK's `rte_ptr_compress` with shift 3; VPP's buffer indices). The object is at
/// `obase0 + entry * 8` with `obase0 = base - 8` precomputed, so the conversion handle ->
/// address is the store's own addressing mode (`mov %val, (%base, %entry, 8)` on x86-64,
/// `str x, [base, entry, uxtw #3]` on arm64): no multiply by the run-time stride between the
/// load of the handle and the store through it, as [`Index`] has (BENCHMARKS.md measures what
/// that multiply costs in the allocate-write-free loop).
///
/// Limits, checked when the pool is built ([`PoolError::ReprLimit`], [`PoolError::InvalidConfig`]):
/// the stride is a multiple of 8 ([`crate::StrideMode::Auto`] rounds objects under 8 bytes up
/// to 8), and the last object starts at most [`OFFSET_MAX_OBJECT_OFFSET`] bytes (about 32 GiB)
/// from the base. Larger pools use [`Index`] (any region, `capacity <= u32::MAX`).
///
/// The object index is still available ([`crate::Pool::index_of`]): `offset / stride`,
/// a shift when the stride is a power of two, else a division.
///
/// ```
/// use idxpool::{Handle, Offset, Pool, PoolBuilder, Runtime};
/// let pool: Pool<[u8; 24], Runtime, Offset> = PoolBuilder::zeroed(16).build()?; // the default
/// assert_eq!(<Offset as idxpool::repr::Repr>::NAME, "offset");
/// assert_eq!(pool.stride() % 8, 0); // offsets are counted in 8-byte units
/// let h: Handle<[u8; 24]> = pool.get()?;
/// assert_eq!(std::mem::size_of_val(&h), 4);
/// assert!(pool.index_of(&h) < 16);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Offset {}

impl Repr for Offset {
    const NAME: &'static str = "offset";
}

// SAFETY: encode(i) = i * stride / 8 + 1 is injective for stride a multiple of 8 (the builder
// checks it: STRIDE_MULTIPLE) and fits in u32 for every object (check_layout);
// ptr(encode(i)) = base - 8 + (i * stride / 8 + 1) * 8 = base + i * stride, and
// index(encode(i)) = i * stride / stride = i.
unsafe impl ReprImpl for Offset {
    type Entry = NonZeroU32;
    const STRIDE_MULTIPLE: usize = OFFSET_SCALE;
    #[inline(always)]
    fn encode(g: &Geometry, index: u32) -> NonZeroU32 {
        let scaled = (index as usize * g.stride) >> OFFSET_SHIFT;
        debug_assert!(
            scaled + (g.lo as usize) < u32::MAX as usize,
            "checked by check_layout and the handle space"
        );
        NonZeroU32::new((scaled as u32).wrapping_add(g.lo).wrapping_add(1))
            .expect("offset entry below u32::MAX")
    }
    #[inline(always)]
    fn index(g: &Geometry, e: NonZeroU32) -> u32 {
        let off = ((e.get() - 1).wrapping_sub(g.lo) as usize) << OFFSET_SHIFT;
        if g.stride.is_power_of_two() {
            (off >> g.stride.trailing_zeros()) as u32
        } else {
            (off / g.stride) as u32
        }
    }
    #[inline(always)]
    fn ptr(g: &Geometry, e: NonZeroU32) -> *mut u8 {
        g.obase0.wrapping_add((e.get() as usize) << OFFSET_SHIFT)
    }
    fn entry_from_raw(_g: &Geometry, raw: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(raw.wrapping_add(1))
    }
    fn space_needed(stride: usize, capacity: u32) -> Option<u64> {
        Some(capacity as u64 * (stride / OFFSET_SCALE) as u64)
    }
    #[inline(always)]
    fn rank(g: &Geometry, e: NonZeroU32) -> u32 {
        e.get() ^ g.e0
    }
    #[inline(always)]
    fn slot_rank(g: &Geometry, e: Option<NonZeroU32>) -> u32 {
        e.map_or(0, NonZeroU32::get) ^ g.e0
    }
    fn raw(e: NonZeroU32) -> u32 {
        e.get() - 1
    }
    fn check_layout(stride: usize, capacity: u32) -> Result<(), PoolError> {
        if stride % OFFSET_SCALE != 0 {
            return Err(PoolError::config(format!(
                "stride {stride} is not a multiple of {OFFSET_SCALE}, which offset entries \
                 (the default representation) need; use StrideMode::Auto or the Index \
                 representation"
            )));
        }
        let last = (capacity as u64)
            .saturating_sub(1)
            .saturating_mul(stride as u64);
        if last > OFFSET_MAX_OBJECT_OFFSET {
            return Err(PoolError::ReprLimit {
                repr: Self::NAME,
                capacity,
                stride,
                max_offset: OFFSET_MAX_OBJECT_OFFSET,
            });
        }
        Ok(())
    }
}

/// 4-byte entries: `index + 1` as a `NonZeroU32`. The object is at `base0 + entry * stride`
/// with `base0 = base - stride` precomputed, so the `+ 1` costs nothing on access (the same
/// trick as DPDK's ptr_compress: a base plus a scaled 32-bit offset).
///
/// ```
/// use idxpool::{Handle, Index, PoolBuilder, Runtime};
/// let pool = PoolBuilder::<[u8; 100]>::zeroed(16).repr::<Index>().build()?;
/// let h: Handle<[u8; 100], Runtime, Index> = pool.get()?;
/// assert_eq!(<Index as idxpool::repr::Repr>::NAME, "index");
/// assert_eq!(std::mem::size_of_val(&h), 4);
/// assert!(pool.index_of(&h) < 16);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Index {}

impl Repr for Index {
    const NAME: &'static str = "index";
}

// SAFETY: encode is injective (index + 1) and ptr(encode(i)) = base - stride + (i+1) * stride.
unsafe impl ReprImpl for Index {
    type Entry = NonZeroU32;
    #[inline(always)]
    fn encode(g: &Geometry, index: u32) -> NonZeroU32 {
        // capacity <= u32::MAX, so index <= u32::MAX - 1 and index + 1 does not wrap; a
        // run-time pool's range (lo + capacity) fits the handle space by construction.
        NonZeroU32::new(index.wrapping_add(g.lo).wrapping_add(1)).expect("index < u32::MAX")
    }
    #[inline(always)]
    fn index(g: &Geometry, e: NonZeroU32) -> u32 {
        (e.get() - 1).wrapping_sub(g.lo)
    }
    #[inline(always)]
    fn ptr(g: &Geometry, e: NonZeroU32) -> *mut u8 {
        g.base0.wrapping_add(e.get() as usize * g.stride)
    }
    fn entry_from_raw(_g: &Geometry, raw: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(raw.wrapping_add(1))
    }
    fn space_needed(_stride: usize, capacity: u32) -> Option<u64> {
        Some(capacity as u64)
    }
    #[inline(always)]
    fn rank(g: &Geometry, e: NonZeroU32) -> u32 {
        e.get() ^ g.e0
    }
    #[inline(always)]
    fn slot_rank(g: &Geometry, e: Option<NonZeroU32>) -> u32 {
        e.map_or(0, NonZeroU32::get) ^ g.e0
    }
    fn raw(e: NonZeroU32) -> u32 {
        e.get() - 1
    }
}

/// 8-byte entries: the object's address, as DPDK's pointer-based mempool stores them.
///
/// ```
/// use idxpool::{Pointer, PoolBuilder};
/// PoolBuilder::<[u8; 64]>::zeroed(16).repr::<Pointer>().scoped(|pool| {
///     let mut h = pool.get().unwrap();
///     pool.get_mut(&mut h)[0] = 9;
///     assert_eq!(std::mem::size_of_val(&h), 8); // DPDK's 8-byte entries
///     assert_eq!(<Pointer as idxpool::repr::Repr>::NAME, "pointer");
///     pool.put(h);
/// })?;
/// // Run-time pools need 4-byte entries: pointer pools carry a brand.
/// assert!(PoolBuilder::<[u8; 64]>::zeroed(16).repr::<Pointer>().build().is_err());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Pointer {}

impl fmt::Debug for ObjPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:p}", self.0)
    }
}

// SAFETY: an ObjPtr is only an address inside a pool region; ownership of the object is tracked
// by the handle that holds it, which carries the Send/Sync bounds of T.
unsafe impl Send for ObjPtr {}
// SAFETY: as above.
unsafe impl Sync for ObjPtr {}

impl Repr for Pointer {
    const NAME: &'static str = "pointer";
}

// SAFETY: encode computes base + index * stride, which is injective for stride > 0, and ptr
// returns it unchanged.
unsafe impl ReprImpl for Pointer {
    type Entry = ObjPtr;
    #[inline(always)]
    fn encode(g: &Geometry, index: u32) -> ObjPtr {
        ObjPtr(NonNull::new(g.ptr_of_index(index)).expect("object pointer is non-null"))
    }
    #[inline(always)]
    fn index(g: &Geometry, e: ObjPtr) -> u32 {
        ((e.0.as_ptr() as usize - g.base.as_ptr() as usize) / g.stride) as u32
    }
    #[inline(always)]
    fn ptr(_g: &Geometry, e: ObjPtr) -> *mut u8 {
        e.0.as_ptr()
    }
    fn entry_from_raw(g: &Geometry, raw: u32) -> Option<ObjPtr> {
        (raw < g.capacity).then(|| Self::encode(g, raw))
    }
    fn space_needed(_stride: usize, _capacity: u32) -> Option<u64> {
        None
    }
    #[inline(always)]
    fn rank(_g: &Geometry, _e: ObjPtr) -> u32 {
        0
    }
    #[inline(always)]
    fn slot_rank(_g: &Geometry, e: Option<ObjPtr>) -> u32 {
        if e.is_some() {
            0
        } else {
            u32::MAX
        }
    }
    fn raw(_e: ObjPtr) -> u32 {
        u32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_of_any_address_in_a_buffer_is_harmless() {
        let buf = vec![7u8; 4096];
        for off in (0..buf.len()).step_by(64) {
            prefetch_write(buf[off..].as_ptr());
        }
        assert!(buf.iter().all(|&b| b == 7), "a prefetch writes nothing");
    }

    #[test]
    fn both_reprs_agree_on_addresses() {
        let mut buf = vec![0u8; 64 * 10];
        let g = Geometry::new(NonNull::new(buf.as_mut_ptr()).unwrap(), 64, 10);
        for i in 0..10 {
            let a = Index::ptr(&g, Index::encode(&g, i));
            let b = Pointer::ptr(&g, Pointer::encode(&g, i));
            assert_eq!(a, b);
            assert_eq!(a, g.ptr_of_index(i));
            assert_eq!(Index::index(&g, Index::encode(&g, i)), i);
            assert_eq!(Pointer::index(&g, Pointer::encode(&g, i)), i);
        }
        assert_eq!(std::mem::size_of::<Option<NonZeroU32>>(), 4);
        assert_eq!(std::mem::size_of::<Option<ObjPtr>>(), 8);
    }

    /// A geometry over `buf` whose far objects are never dereferenced: wrapping pointer
    /// arithmetic keeps the buffer's provenance (Miri, strict provenance).
    fn far_geometry(buf: &mut [u8], stride: usize, capacity: u32) -> Geometry {
        Geometry::new(NonNull::new(buf.as_mut_ptr()).unwrap(), stride, capacity)
    }

    fn round_trip<R: Repr>(g: &Geometry, i: u32) {
        let e = R::encode(g, i);
        assert_eq!(R::index(g, e), i, "{} index of entry {e:?}", R::NAME);
        assert_eq!(
            R::ptr(g, e),
            g.ptr_of_index(i),
            "{} address of index {i}",
            R::NAME
        );
        assert_eq!(R::encode(g, R::index(g, e)), e);
    }

    #[test]
    fn every_repr_round_trips_index_entry_address() {
        let mut buf = vec![0u64; 64];
        for stride in [8usize, 16, 24, 64, 192, 2112, 4096, 1 << 20] {
            let g = far_geometry(bytemuck_bytes(&mut buf), stride, 1000);
            for i in [0u32, 1, 2, 7, 500, 999] {
                round_trip::<Index>(&g, i);
                round_trip::<Offset>(&g, i);
                round_trip::<Pointer>(&g, i);
            }
        }
        // Index and Pointer take any stride, Offset multiples of 8 only.
        for stride in [1usize, 3, 12, 100] {
            let g = far_geometry(bytemuck_bytes(&mut buf), stride, 50);
            for i in [0u32, 1, 49] {
                round_trip::<Index>(&g, i);
                round_trip::<Pointer>(&g, i);
            }
        }
    }

    fn bytemuck_bytes(v: &mut [u64]) -> &mut [u8] {
        // SAFETY: u64 has no padding and any byte pattern is valid for u8.
        unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8) }
    }

    #[test]
    fn offset_entries_address_through_base_minus_8() {
        let mut buf = vec![0u64; 64];
        let g = far_geometry(bytemuck_bytes(&mut buf), 2112, 10);
        let e = Offset::encode(&g, 3);
        assert_eq!(e.get(), 3 * 2112 / 8 + 1, "entry = byte offset / 8 + 1");
        assert_eq!(
            Offset::ptr(&g, e),
            g.base.as_ptr().wrapping_add(3 * 2112),
            "obase0 + entry * 8"
        );
        // Power-of-two strides take the shift path of index().
        let g = far_geometry(bytemuck_bytes(&mut buf), 4096, 10);
        assert_eq!(Offset::index(&g, Offset::encode(&g, 9)), 9);
    }

    #[test]
    fn capacity_limits_of_each_repr() {
        // Offset: the last object may start at (u32::MAX - 1) * 8, not one scale step more.
        assert!(
            Offset::check_layout(8, u32::MAX).is_ok(),
            "stride 8: every u32 index"
        );
        assert!(Offset::check_layout(16, 1 << 31).is_ok());
        match Offset::check_layout(16, (1 << 31) + 1) {
            Err(PoolError::ReprLimit {
                repr: "offset",
                capacity,
                stride: 16,
                max_offset,
            }) => {
                assert_eq!(capacity, (1 << 31) + 1);
                assert_eq!(max_offset, OFFSET_MAX_OBJECT_OFFSET);
            }
            other => panic!("expected ReprLimit, got {other:?}"),
        }
        // 2112-byte objects: 16_268_815 fit (last start 34_359_737_280 <= max), one more not.
        let cap = (OFFSET_MAX_OBJECT_OFFSET / 2112 + 1) as u32;
        assert!(Offset::check_layout(2112, cap).is_ok());
        assert!(matches!(
            Offset::check_layout(2112, cap + 1),
            Err(PoolError::ReprLimit { .. })
        ));
        // Strides Offset cannot name.
        for stride in [1usize, 4, 12, 2100] {
            assert!(matches!(
                Offset::check_layout(stride, 10),
                Err(PoolError::InvalidConfig { .. })
            ));
        }
        // Index and Pointer: no limit beyond capacity <= u32::MAX (and the region's isize::MAX).
        assert!(Index::check_layout(1 << 20, u32::MAX).is_ok());
        assert!(Pointer::check_layout(1 << 20, u32::MAX).is_ok());
        assert_eq!((Index::STRIDE_MULTIPLE, Pointer::STRIDE_MULTIPLE), (1, 1));
        assert_eq!(Offset::STRIDE_MULTIPLE, 8);
    }

    #[test]
    fn the_largest_offset_pool_names_its_last_object() {
        let mut buf = vec![0u64; 64];
        // Stride 8, capacity u32::MAX: the last entry is u32::MAX itself.
        let g = far_geometry(bytemuck_bytes(&mut buf), 8, u32::MAX);
        let last = u32::MAX - 1;
        assert_eq!(Offset::encode(&g, last).get(), u32::MAX);
        round_trip::<Offset>(&g, last);
        round_trip::<Index>(&g, last);
        // The largest 2112-stride pool.
        let cap = (OFFSET_MAX_OBJECT_OFFSET / 2112 + 1) as u32;
        let g = far_geometry(bytemuck_bytes(&mut buf), 2112, cap);
        round_trip::<Offset>(&g, cap - 1);
        round_trip::<Offset>(&g, 0);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            if cfg!(miri) {
                ProptestConfig {
                    cases: 8,
                    failure_persistence: None,
                    ..ProptestConfig::default()
                }
            } else {
                ProptestConfig::with_cases(2000)
            }
        }

        /// A stride (multiple of 8) and a capacity that offset entries can name.
        fn layout() -> impl Strategy<Value = (usize, u32)> {
            (1usize..=1 << 17).prop_flat_map(|units| {
                let stride = units * 8;
                let max_cap = (OFFSET_MAX_OBJECT_OFFSET / stride as u64 + 1).min(u32::MAX as u64);
                (Just(stride), 1..=max_cap as u32)
            })
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn every_repr_round_trips((stride, cap) in layout(), a in any::<u32>(), b in any::<u32>()) {
                prop_assert!(Offset::check_layout(stride, cap).is_ok());
                let mut buf = vec![0u64; 8];
                let g = far_geometry(bytemuck_bytes(&mut buf), stride, cap);
                let (i, j) = (a % cap, b % cap);
                round_trip::<Offset>(&g, i);
                round_trip::<Index>(&g, i);
                round_trip::<Pointer>(&g, i);
                // Distinct objects, distinct entries and addresses.
                if i != j {
                    prop_assert_ne!(Offset::encode(&g, i), Offset::encode(&g, j));
                    prop_assert_ne!(Offset::ptr(&g, Offset::encode(&g, i)), Offset::ptr(&g, Offset::encode(&g, j)));
                    prop_assert_ne!(Index::encode(&g, i), Index::encode(&g, j));
                }
            }

            #[test]
            fn offset_limit_is_exact(units in 1usize..=1 << 17) {
                let stride = units * 8;
                let max_cap = OFFSET_MAX_OBJECT_OFFSET / stride as u64 + 1;
                if max_cap < u32::MAX as u64 {
                    prop_assert!(Offset::check_layout(stride, max_cap as u32).is_ok());
                    let over = Offset::check_layout(stride, max_cap as u32 + 1);
                    let limited = matches!(over, Err(PoolError::ReprLimit { .. }));
                    prop_assert!(limited, "stride {}: {:?}", stride, over);
                } else {
                    prop_assert!(Offset::check_layout(stride, u32::MAX).is_ok());
                }
            }
        }
    }
}
