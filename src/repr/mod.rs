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
use std::mem::ManuallyDrop;
use std::num::NonZeroU32;
use std::ptr::NonNull;

use crate::error::PoolError;

mod piece;

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
    /// The pool's unsafe code relies on every one of these (sealed: only `Offset`, `Index`
    /// and `Pointer` implement it):
    /// * `encode` is injective over a pool's indices, `ptr(encode(i))` is object `i`'s
    ///   address and `index(encode(i)) == i`: distinct handles name distinct objects;
    /// * `Entry` is a `NonZeroU32` or `NonNull` in `repr(transparent)` wrappers, so that
    ///   `Option<Handle>` has the entry's size and bits and `None` is zero (the caller's
    ///   table is viewed as entries: `table.rs`, `assert_slot_is_entry`);
    /// * for 4-byte entries, `rank(g, e) < g.span` exactly when `e` lies in the pool's block
    ///   of the handle space, and the OR of ranks is below `span` only when every rank is
    ///   (the run-time identity check, one entry or a burst), and then
    ///   `ptr_ranked(g, e, rank(g, e)) == ptr(g, e)`;
    /// * `entry_from_raw` returns the entry `into_raw` made that raw value from (None only for a
    ///   value no entry has); whether it is in the pool's block is `rank`'s to say.
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
        /// [`ReprImpl::ptr`] of an entry of a run-time pool whose rank `r = rank(g, e)` the
        /// identity check has just computed and found below `span`: for 4-byte entries
        /// `base + r x scale` (the rank is the entry's distance from `e0`, as the block is
        /// aligned to its span), so the check's result is also the address's index and the
        /// access costs one xor and one compare more than a branded pool's.
        #[inline(always)]
        fn ptr_ranked(g: &Geometry, e: Self::Entry, r: usize) -> *mut u8 {
            let _ = r;
            Self::ptr(g, e)
        }
        /// [`ReprImpl::rank`] as a word, computed as one (`entry as usize ^ e0 as usize`: no
        /// zero extension between the check and the address that uses it).
        #[inline(always)]
        fn rank_wide(g: &Geometry, e: Self::Entry) -> usize {
            Self::rank(g, e) as usize
        }
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
    #[inline(always)]
    fn ptr_ranked(g: &Geometry, _e: NonZeroU32, r: usize) -> *mut u8 {
        // e = e0 + r (the block is aligned to its span and r < span), and
        // obase0 + e0 x 8 = base.
        g.base.as_ptr().wrapping_add(r << OFFSET_SHIFT)
    }
    #[inline(always)]
    fn rank_wide(g: &Geometry, e: NonZeroU32) -> usize {
        e.get() as usize ^ g.e0 as usize
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
        if !stride.is_multiple_of(OFFSET_SCALE) {
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
    #[inline(always)]
    fn ptr_ranked(g: &Geometry, _e: NonZeroU32, r: usize) -> *mut u8 {
        // e = e0 + r, and base0 + e0 x stride = base: r is the object's index.
        g.base.as_ptr().wrapping_add(r * g.stride)
    }
    #[inline(always)]
    fn rank_wide(g: &Geometry, e: NonZeroU32) -> usize {
        e.get() as usize ^ g.e0 as usize
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

/// The shape of a short run of `n` elements, for the hot paths (1 to 32 entries: a call to
/// `memcpy`/`memset` or a loop with a remainder costs more than the work there): [`by_shape`]
/// picks one from `n`, and every operation over the run is written once per shape:
///
/// * [`Zero`]: `n == 0`; [`One`]: `n == 1`;
/// * [`Win<K>`]: `2 <= n <= 64`, the first `K` and the last `K` elements, `K` the power of two
///   with `K < n <= 2K` (disjoint halves when `n = 2K`, overlapping otherwise). Fixed sizes, so
///   the compiler inlines them as a few vector moves and vector reductions;
/// * [`Long`]: `n > 64`, a plain loop or a library call;
/// * [`Dyn`]: any `n`, one [`by_shape`] dispatch per operation (the callers that do one
///   operation per call: the ring, the `Vec` adapters).
///
/// A caller that does several operations on one run (the table paths: slot check, copy,
/// clear) dispatches once with [`by_shape`] and runs all of them with the shape it gets, so a
/// run-time `n` pays one dispatch per call; with a constant `n` the dispatch folds away and
/// each operation is the fixed-size code alone. Every operation reads and writes through raw
/// pointers (fixed-size `copy_nonoverlapping`, loops over `&[X; K]` views): no window is ever
/// an array value, which went through a stack temporary (BENCHMARKS.md 14).
///
/// # Safety
/// Every method: `p` (and `src`, `dst`) valid for `n` reads (writes) of initialised `X`, and
/// `n` a length this shape covers ([`by_shape`] chooses it; [`Dyn`] covers all).
pub(crate) trait Shape {
    /// Copies `n` elements from `src` to `dst` (non-overlapping).
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, n: usize);
    /// The OR of `f` over the `n` elements at `p` (overlapping windows see a few elements
    /// twice, which changes nothing for an OR).
    unsafe fn or<X>(p: *const X, n: usize, f: impl Fn(&X) -> u32) -> u32;
    /// True when `pred` holds for some of the `n` elements at `p`.
    unsafe fn any<X>(p: *const X, n: usize, pred: impl Fn(&X) -> bool) -> bool;
    /// Writes `None` into the `n` slots at `p` without dropping what was there.
    unsafe fn none<X>(p: *mut Option<X>, n: usize);
    /// True for the shape of one element ([`One`]), whose callers may pick another form of a
    /// test (the cache's fill check) than the longer shapes'.
    const ONE: bool = false;
}

/// The run of `n` elements, which [`by_shape`] turns into a [`Shape`].
pub(crate) trait ByShape: Sized {
    /// What the operation returns.
    type Out;
    /// Runs the operation with the shape `S`, which covers `n`.
    fn run<S: Shape>(self, n: usize) -> Self::Out;
}

/// Runs `op` with the shape of `n`: at most seven compares and no chain of bit tests, as
/// glibc's small `memcpy` does (`n == 1` first: the bulk-1 path pays one compare).
#[inline(always)]
pub(crate) fn by_shape<F: ByShape>(n: usize, op: F) -> F::Out {
    if n == 1 {
        op.run::<One>(n)
    } else if n <= 2 {
        if n == 2 {
            op.run::<Win<1>>(n)
        } else {
            op.run::<Zero>(n)
        }
    } else if n <= 4 {
        if n == 4 {
            op.run::<Four>(n)
        } else {
            op.run::<Win<2>>(n)
        }
    } else if n <= 8 {
        op.run::<Win<4>>(n)
    } else if n <= 16 {
        op.run::<Win<8>>(n)
    } else if n <= 32 {
        op.run::<Win<16>>(n)
    } else if n <= 64 {
        op.run::<Win<32>>(n)
    } else {
        op.run::<Long>(n)
    }
}

/// `n == 0`.
pub(crate) enum Zero {}
/// `n == 1`.
pub(crate) enum One {}
/// `n == 4`: one move of all four elements. Two windows of two 4-byte entries are two
/// 8-byte general-purpose register stores, and a 4-byte load of the upper half of such a
/// store does not take its bytes from it (AMD Zen 3: about 7 cycles more than a load of the
/// lower half), where a caller reads its table entry by entry right after a get
/// (BENCHMARKS.md 32). One 16-byte move is a vector store, from which a 4-byte load at any
/// offset forwards, as DPDK's whole-vector copies. (For 8-byte entries: the same two 16-byte
/// moves as the windows.)
pub(crate) enum Four {}
/// `K < n <= 2K`, `n <= 64`: the first and the last `K` elements.
pub(crate) enum Win<const K: usize> {}
/// `n > 64`.
pub(crate) enum Long {}
/// Any `n`: each operation dispatches with [`by_shape`].
pub(crate) enum Dyn {}

impl Shape for Zero {
    #[inline(always)]
    unsafe fn copy<X: Copy>(_src: *const X, _dst: *mut X, _n: usize) {}
    #[inline(always)]
    unsafe fn or<X>(_p: *const X, _n: usize, _f: impl Fn(&X) -> u32) -> u32 {
        0
    }
    #[inline(always)]
    unsafe fn any<X>(_p: *const X, _n: usize, _pred: impl Fn(&X) -> bool) -> bool {
        false
    }
    #[inline(always)]
    unsafe fn none<X>(_p: *mut Option<X>, _n: usize) {}
}

impl Shape for One {
    const ONE: bool = true;
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, _n: usize) {
        // SAFETY: n == 1: one valid read and one valid write (the trait's contract).
        unsafe { dst.write(src.read()) }
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, _n: usize, f: impl Fn(&X) -> u32) -> u32 {
        // SAFETY: n == 1: one valid element.
        f(unsafe { &*p })
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, _n: usize, pred: impl Fn(&X) -> bool) -> bool {
        // SAFETY: n == 1: one valid element.
        pred(unsafe { &*p })
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, _n: usize) {
        // SAFETY: n == 1: one valid slot; the old value is overwritten without a drop (the
        // caller's contract: what was there was moved away or is a copy).
        unsafe { p.write(None) }
    }
}

impl Shape for Four {
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, _n: usize) {
        // SAFETY: n == 4 elements, valid and disjoint in both ranges (the trait's contract).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, 4) }
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, _n: usize, f: impl Fn(&X) -> u32) -> u32 {
        // SAFETY: n == 4 valid elements.
        let a = unsafe { &*p.cast::<[X; 4]>() };
        let mut acc = 0;
        for x in a {
            acc |= f(x);
        }
        acc
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, _n: usize, pred: impl Fn(&X) -> bool) -> bool {
        // SAFETY: n == 4 valid elements.
        let a = unsafe { &*p.cast::<[X; 4]>() };
        let mut any = false;
        for x in a {
            any |= pred(x);
        }
        any
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, _n: usize) {
        // SAFETY: n == 4 slots, overwritten without a drop (the trait's contract).
        unsafe { p.cast::<[Option<X>; 4]>().write([const { None }; 4]) }
    }
}

impl<const K: usize> Win<K> {
    /// The two windows of `n` elements at `p`, as read-only fixed-size views.
    ///
    /// # Safety
    /// `K < n <= 2K` and `p` valid for `n` reads.
    #[inline(always)]
    unsafe fn views<'a, X>(p: *const X, n: usize) -> (&'a [X; K], &'a [X; K]) {
        debug_assert!(K < n && n <= 2 * K);
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside the run.
        unsafe { (&*p.cast::<[X; K]>(), &*p.add(n - K).cast::<[X; K]>()) }
    }

    /// The two windows of `n` elements at `p`, read in pieces into values ([`piece::load`]).
    ///
    /// # Safety
    /// `K < n <= 2K` and `p` valid for `n` reads of initialised `X`.
    #[inline(always)]
    unsafe fn loads<X>(p: *const X, n: usize) -> (ManuallyDrop<[X; K]>, ManuallyDrop<[X; K]>) {
        debug_assert!(K < n && n <= 2 * K);
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside the run.
        unsafe { (piece::load::<X, K>(p), piece::load::<X, K>(p.add(n - K))) }
    }
}

impl<const K: usize> Shape for Win<K> {
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, n: usize) {
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside both ranges (the trait's
        // contract: valid and disjoint for n).
        unsafe {
            if piece::split::<X, K>() {
                piece::copy::<X, K>(src, dst);
                piece::copy::<X, K>(src.add(n - K), dst.add(n - K));
            } else {
                std::ptr::copy_nonoverlapping(src, dst, K);
                std::ptr::copy_nonoverlapping(src.add(n - K), dst.add(n - K), K);
            }
        }
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, n: usize, f: impl Fn(&X) -> u32) -> u32 {
        // Two plain loops over arrays (a `chain` of the two is not vectorised).
        let mut acc = 0;
        if piece::split::<X, K>() {
            // SAFETY: the trait's contract (K < n <= 2K): both windows lie inside the run.
            let (a, b) = unsafe { Self::loads(p, n) };
            for x in a.iter() {
                acc |= f(x);
            }
            for x in b.iter() {
                acc |= f(x);
            }
        } else {
            // SAFETY: the trait's contract (K < n <= 2K).
            let (a, b) = unsafe { Self::views(p, n) };
            for x in a {
                acc |= f(x);
            }
            for x in b {
                acc |= f(x);
            }
        }
        acc
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, n: usize, pred: impl Fn(&X) -> bool) -> bool {
        // One compare per element and no branch (fixed-size vector code), then one branch.
        let mut any = false;
        if piece::split::<X, K>() {
            // SAFETY: the trait's contract (K < n <= 2K).
            let (a, b) = unsafe { Self::loads(p, n) };
            for x in a.iter() {
                any |= pred(x);
            }
            for x in b.iter() {
                any |= pred(x);
            }
        } else {
            // SAFETY: the trait's contract (K < n <= 2K).
            let (a, b) = unsafe { Self::views(p, n) };
            for x in a {
                any |= pred(x);
            }
            for x in b {
                any |= pred(x);
            }
        }
        any
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, n: usize) {
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside the run; the old values are
        // overwritten without a drop (the trait's contract); the pieces only when `split`.
        unsafe {
            if piece::split::<Option<X>, K>() {
                piece::none::<X, K>(p);
                piece::none::<X, K>(p.add(n - K));
            } else {
                p.cast::<[Option<X>; K]>().write([const { None }; K]);
                p.add(n - K)
                    .cast::<[Option<X>; K]>()
                    .write([const { None }; K]);
            }
        }
    }
}

impl Shape for Long {
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, n: usize) {
        // SAFETY: the trait's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, n: usize, f: impl Fn(&X) -> u32) -> u32 {
        // SAFETY: the trait's contract: n valid elements.
        let s = unsafe { std::slice::from_raw_parts(p, n) };
        s.iter().fold(0, |acc, x| acc | f(x))
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, n: usize, pred: impl Fn(&X) -> bool) -> bool {
        // SAFETY: the trait's contract: n valid elements.
        let s = unsafe { std::slice::from_raw_parts(p, n) };
        let mut any = false;
        for x in s {
            any |= pred(x);
        }
        any
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, n: usize) {
        for i in 0..n {
            // SAFETY: i < n: a valid slot; overwritten without a drop (the trait's contract).
            unsafe { p.add(i).write(None) }
        }
    }
}

impl Shape for Dyn {
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, n: usize) {
        struct Op<X>(*const X, *mut X);
        impl<X: Copy> ByShape for Op<X> {
            type Out = ();
            #[inline(always)]
            fn run<S: Shape>(self, n: usize) {
                // SAFETY: Dyn::copy's contract; S covers n (by_shape).
                unsafe { S::copy(self.0, self.1, n) }
            }
        }
        by_shape(n, Op(src, dst))
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, n: usize, f: impl Fn(&X) -> u32) -> u32 {
        struct Op<X, F>(*const X, F);
        impl<X, F: Fn(&X) -> u32> ByShape for Op<X, F> {
            type Out = u32;
            #[inline(always)]
            fn run<S: Shape>(self, n: usize) -> u32 {
                // SAFETY: Dyn::or's contract; S covers n (by_shape).
                unsafe { S::or(self.0, n, self.1) }
            }
        }
        by_shape(n, Op(p, f))
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, n: usize, pred: impl Fn(&X) -> bool) -> bool {
        struct Op<X, F>(*const X, F);
        impl<X, F: Fn(&X) -> bool> ByShape for Op<X, F> {
            type Out = bool;
            #[inline(always)]
            fn run<S: Shape>(self, n: usize) -> bool {
                // SAFETY: Dyn::any's contract; S covers n (by_shape).
                unsafe { S::any(self.0, n, self.1) }
            }
        }
        by_shape(n, Op(p, pred))
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, n: usize) {
        struct Op<X>(*mut Option<X>);
        impl<X> ByShape for Op<X> {
            type Out = ();
            #[inline(always)]
            fn run<S: Shape>(self, n: usize) {
                // SAFETY: Dyn::none's contract; S covers n (by_shape).
                unsafe { S::none(self.0, n) }
            }
        }
        by_shape(n, Op(p))
    }
}

/// Copies `n` entries from `src` to `dst` (non-overlapping), in the shape of `n` ([`Dyn`]):
/// short copies are fixed-size moves the compiler inlines, long ones (refills and flushes of
/// hundreds) call `memcpy`.
///
/// # Safety
/// `src` valid for `n` reads, `dst` for `n` writes, the ranges do not overlap.
#[inline(always)]
pub(crate) unsafe fn copy_entries<E: Copy>(src: *const E, dst: *mut E, n: usize) {
    // SAFETY: the caller's contract; Dyn covers every n.
    unsafe { Dyn::copy(src, dst, n) }
}

#[cfg(test)]
mod tests;
