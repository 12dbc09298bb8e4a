//! Entry representations: what the caches and the common ring store for a free object.
//!
//! The pool is one generic algorithm over [`Repr`]; [`Index`] stores 4-byte indices (the point
//! of this crate), [`Pointer`] stores 8-byte object pointers as DPDK's rte_mempool does (the
//! baseline, see [`crate::ptr`]). Only the representation differs between the two, so a
//! benchmark of one against the other isolates it.

use std::fmt;
use std::num::NonZeroU32;
use std::ptr::NonNull;

/// Where object `i` lives: `base + i * stride`.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// Address of object 0.
    pub(crate) base: NonNull<u8>,
    /// `base - stride` (wrapping), so that object of 1-based slot `s` is at `base0 + s * stride`.
    pub(crate) base0: *mut u8,
    /// Bytes between consecutive objects.
    pub(crate) stride: usize,
    /// Number of objects.
    pub(crate) capacity: u32,
}

// SAFETY: Geometry is address arithmetic only; the memory it describes is owned by the pool.
unsafe impl Send for Geometry {}
// SAFETY: as above.
unsafe impl Sync for Geometry {}

impl Geometry {
    pub(crate) fn new(base: NonNull<u8>, stride: usize, capacity: u32) -> Self {
        Geometry {
            base,
            base0: base.as_ptr().wrapping_sub(stride),
            stride,
            capacity,
        }
    }

    /// Pointer to object `index` (no check).
    #[inline(always)]
    pub(crate) fn ptr_of_index(&self, index: u32) -> *mut u8 {
        self.base
            .as_ptr()
            .wrapping_add(index as usize * self.stride)
    }
}

/// How a free object is named in the caches and the ring.
///
/// # Safety
/// For every `index < g.capacity`, `ptr(g, encode(g, index))` must equal
/// `g.base + index * g.stride` and `index(g, encode(g, index)) == index`; distinct indices must
/// give distinct entries. The pool relies on this to hand out non-aliasing objects.
pub unsafe trait Repr: 'static + Sized {
    /// The stored value: 4 bytes for [`Index`], 8 for [`Pointer`]. Has a niche, so that
    /// `Option<Handle>` is as small as the handle.
    type Entry: Copy + Send + Sync + Eq + fmt::Debug + 'static;
    /// Name used in reports: `"index"` or `"pointer"`.
    const NAME: &'static str;
    /// Entry for object `index`.
    fn encode(g: &Geometry, index: u32) -> Self::Entry;
    /// Object index of an entry.
    fn index(g: &Geometry, e: Self::Entry) -> u32;
    /// Object address of an entry.
    fn ptr(g: &Geometry, e: Self::Entry) -> *mut u8;
}

/// 4-byte entries: `index + 1` as a `NonZeroU32`. The object is at `base0 + entry * stride`
/// with `base0 = base - stride` precomputed, so the `+ 1` costs nothing on access (the same
/// trick as DPDK's ptr_compress: a base plus a scaled 32-bit offset).
#[derive(Debug, Clone, Copy)]
pub enum Index {}

// SAFETY: encode is injective (index + 1) and ptr(encode(i)) = base - stride + (i+1) * stride.
unsafe impl Repr for Index {
    type Entry = NonZeroU32;
    const NAME: &'static str = "index";
    #[inline(always)]
    fn encode(_g: &Geometry, index: u32) -> NonZeroU32 {
        // capacity <= u32::MAX, so index <= u32::MAX - 1 and index + 1 does not wrap.
        NonZeroU32::new(index.wrapping_add(1)).expect("index < u32::MAX")
    }
    #[inline(always)]
    fn index(_g: &Geometry, e: NonZeroU32) -> u32 {
        e.get() - 1
    }
    #[inline(always)]
    fn ptr(g: &Geometry, e: NonZeroU32) -> *mut u8 {
        g.base0.wrapping_add(e.get() as usize * g.stride)
    }
}

/// 8-byte entries: the object's address, as DPDK's pointer-based mempool stores them.
#[derive(Debug, Clone, Copy)]
pub enum Pointer {}

/// An object pointer that may cross threads (the pool, not the pointer, owns the object).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct ObjPtr(NonNull<u8>);

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

// SAFETY: encode computes base + index * stride, which is injective for stride > 0, and ptr
// returns it unchanged.
unsafe impl Repr for Pointer {
    type Entry = ObjPtr;
    const NAME: &'static str = "pointer";
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// Copies `n` entries from `src` to `dst` (non-overlapping). Bursts are short (1 to 32 in
/// the hot paths), where a call to libc's `memcpy` costs more than the copy: short copies are
/// done with fixed-size moves the compiler inlines (blocks of 8, then 4, 2, 1); long ones
/// (refills and flushes of hundreds) call `memcpy`.
///
/// # Safety
/// `src` valid for `n` reads, `dst` for `n` writes, the ranges do not overlap.
#[inline(always)]
pub(crate) unsafe fn copy_entries<E: Copy>(src: *const E, dst: *mut E, n: usize) {
    use std::ptr::copy_nonoverlapping as cp;
    // SAFETY: (whole body) every copy stays within [0, n) of both ranges, which the caller
    // guarantees valid and disjoint.
    unsafe {
        if n == 1 {
            dst.write(src.read());
            return;
        }
        if n > 64 {
            cp(src, dst, n);
            return;
        }
        let mut i = 0;
        while i + 8 <= n {
            cp(src.add(i), dst.add(i), 8);
            i += 8;
        }
        if n & 4 != 0 {
            cp(src.add(i), dst.add(i), 4);
            i += 4;
        }
        if n & 2 != 0 {
            cp(src.add(i), dst.add(i), 2);
            i += 2;
        }
        if n & 1 != 0 {
            cp(src.add(i), dst.add(i), 1);
        }
    }
}

#[cfg(test)]
mod copy_tests {
    #[test]
    fn copy_entries_copies_every_length() {
        for n in 0..200usize {
            let src: Vec<u32> = (0..n as u32).collect();
            let mut dst = vec![u32::MAX; n + 1];
            // SAFETY: both buffers hold at least n entries and are distinct.
            unsafe { super::copy_entries(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..]);
            assert_eq!(dst[n], u32::MAX, "no write past n");
        }
    }
}
