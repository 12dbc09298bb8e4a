//! Memory accesses of the windows no wider than [`PIECE`] bytes where the compiler would
//! otherwise use 64-byte vector moves (x86-64 builds with AVX-512 enabled).
//!
//! Why: a 64-byte store that straddles two cache lines, read back by a load soon after (a put
//! followed by a get of the same entries, a get's writes into the caller's table followed by
//! the put's reads of them), cannot take its bytes from the store buffer: the load waits until
//! the store has been written to L1. On an AMD Zen 4 that is about 10 cycles per access more,
//! and 64-byte stores are also slower to forward when aligned; 32-byte ones lose little when
//! split and nothing when not (`bench/examples/store_forward.rs`, BENCHMARKS.md 33). The
//! caches' arrays are line-aligned, but where a window starts depends on the cache's length,
//! and the caller's table is wherever the caller put it: only the width of each access is ours
//! to choose. DPDK's copies are 32-byte moves in every build (`rte_memcpy` without
//! `RTE_MEMCPY_AVX512`).
//!
//! How: LLVM merges adjacent 32-byte loads and stores into one 64-byte move when AVX-512 is
//! enabled (a memcpy or zeroing of 64 bytes is lowered to one `zmm` move). Each piece's address
//! goes through an empty `asm!` ([`opaque`]), so that the compiler cannot see that two pieces
//! are adjacent and keeps them apart. The bytes are moved by `copy_nonoverlapping` and
//! `write_bytes` (untyped copies: pointer entries keep their provenance). In other builds
//! (no AVX-512, or Miri) [`NARROW`] is false and the windows are the plain fixed-size copies.

use std::mem::{size_of, ManuallyDrop, MaybeUninit};

/// Whether the windows are moved in pieces of [`PIECE`] bytes: x86-64 with AVX-512F enabled
/// at compile time (`-C target-cpu=native` on such a CPU), outside Miri.
pub(super) const NARROW: bool = cfg!(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    not(miri)
));

/// The widest access of a window when [`NARROW`]: one `ymm` move.
pub(super) const PIECE: usize = 32;

/// True when a window of `K` elements of `X` is moved in pieces: [`NARROW`], the window wider
/// than one piece and a whole number of pieces (entries of 4 or 8 bytes in windows of a power
/// of two; any other window, e.g. of 12-byte elements, keeps the plain copy).
#[inline(always)]
pub(super) const fn split<X, const K: usize>() -> bool {
    NARROW && K * size_of::<X>() > PIECE && whole::<X, K>()
}

/// `p`, with the compiler unable to relate it to any other address (an empty `asm!` that
/// returns its input): two accesses through two such pointers are never merged into one.
/// Identity at run time (no instruction beyond a register move); the pointer keeps its
/// provenance (the block behaves as `|p| p`).
#[inline(always)]
fn opaque(p: *mut u8) -> *mut u8 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let mut p = p;
        // The pointer is never dereferenced inside the block, so `nomem` is exact.
        #[allow(clippy::pointers_in_nomem_asm_block)]
        // SAFETY: an empty block: it reads and writes no memory and no flags and touches no
        // stack; its one operand comes back unchanged.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) p, options(pure, nomem, nostack, preserves_flags))
        };
        p
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    p
}

/// Copies the window of `K` elements at `src` to `dst`, one piece at a time.
///
/// # Safety
/// `src` valid for `K` reads, `dst` for `K` writes, of `X`; the ranges do not overlap;
/// `split::<X, K>()` (the window is a whole number of pieces).
#[inline(always)]
pub(super) unsafe fn copy<X: Copy, const K: usize>(src: *const X, dst: *mut X) {
    debug_assert!(whole::<X, K>(), "a whole number of pieces");
    // SAFETY: the caller's contract.
    unsafe { copy_raw::<X, K>(src, dst) }
}

/// [`copy`] for any `X`: a bitwise copy (the caller decides who owns the copies).
///
/// # Safety
/// As [`copy`].
#[inline(always)]
unsafe fn copy_raw<X, const K: usize>(src: *const X, dst: *mut X) {
    let (s, d) = (src.cast::<u8>().cast_mut(), dst.cast::<u8>());
    for i in 0..K * size_of::<X>() / PIECE {
        // SAFETY: piece i lies inside both windows (K x size_of::<X>() bytes, a multiple of
        // PIECE); opaque returns its argument.
        unsafe {
            std::ptr::copy_nonoverlapping(opaque(s.add(i * PIECE)), opaque(d.add(i * PIECE)), PIECE)
        }
    }
}

/// The window of `K` elements at `p`, read one piece at a time into a value (registers,
/// where the checks then combine the pieces). A bitwise copy that is never dropped: the
/// elements stay owned where they are.
///
/// # Safety
/// `p` valid for `K` reads of initialised `X`; `split::<X, K>()`; `X` is plain data (the
/// crate's entries and slots: integers, `NonNull`, `Option`s of them), no `Box` or `&mut`,
/// whose bitwise copy would assert uniqueness.
#[inline(always)]
pub(super) unsafe fn load<X, const K: usize>(p: *const X) -> ManuallyDrop<[X; K]> {
    debug_assert!(whole::<X, K>(), "a whole number of pieces");
    let mut a = MaybeUninit::<[X; K]>::uninit();
    let (s, d) = (p.cast::<u8>().cast_mut(), a.as_mut_ptr().cast::<u8>());
    for i in 0..K * size_of::<X>() / PIECE {
        // SAFETY: piece i lies inside the window (the caller's contract) and inside `a`. Only
        // the source goes through `opaque`: the value stays visible to the compiler, which
        // keeps it in registers.
        unsafe { std::ptr::copy_nonoverlapping(opaque(s.add(i * PIECE)), d.add(i * PIECE), PIECE) }
    }
    // SAFETY: every byte of `a` was copied from K initialised `X` (a bitwise copy, never
    // dropped).
    ManuallyDrop::new(unsafe { a.assume_init() })
}

/// Writes `None` into the `K` slots at `p`, one piece at a time, without dropping what was
/// there. The bytes come from a local array of `None`s (all zero for the crate's slots, but
/// right for any `X`); only the destination's pieces go through [`opaque`], so the compiler
/// sees the constant and stores it from a register.
///
/// # Safety
/// `p` valid for `K` writes of `Option<X>`; `split::<Option<X>, K>()`.
#[inline(always)]
pub(super) unsafe fn none<X, const K: usize>(p: *mut Option<X>) {
    debug_assert!(whole::<Option<X>, K>(), "a whole number of pieces");
    let z = ManuallyDrop::new([const { None::<X> }; K]);
    let (s, d) = ((&raw const z).cast::<u8>(), p.cast::<u8>());
    for i in 0..K * size_of::<Option<X>>() / PIECE {
        // SAFETY: piece i lies inside the K slots and inside `z`; the bytes are those of
        // `None::<X>` values (a bitwise copy of a value that is never dropped).
        unsafe { std::ptr::copy_nonoverlapping(s.add(i * PIECE), opaque(d.add(i * PIECE)), PIECE) }
    }
}

/// The window is a whole number of pieces (what [`split`] tests beside [`NARROW`]).
const fn whole<X, const K: usize>() -> bool {
    (K * size_of::<X>()).is_multiple_of(PIECE) && K * size_of::<X>() >= PIECE
}
