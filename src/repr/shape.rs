//! Short runs of entries in fixed-size shapes: one length dispatch per call for the hot
//! paths' copies, checks and clears.

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
        op.run::<Win<2>>(n)
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
}

impl<const K: usize> Shape for Win<K> {
    #[inline(always)]
    unsafe fn copy<X: Copy>(src: *const X, dst: *mut X, n: usize) {
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside both ranges (the trait's
        // contract: valid and disjoint for n).
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, K);
            std::ptr::copy_nonoverlapping(src.add(n - K), dst.add(n - K), K);
        }
    }
    #[inline(always)]
    unsafe fn or<X>(p: *const X, n: usize, f: impl Fn(&X) -> u32) -> u32 {
        // SAFETY: the trait's contract (K < n <= 2K).
        let (a, b) = unsafe { Self::views(p, n) };
        // Two plain loops over arrays (a `chain` of the two is not vectorised).
        let mut acc = 0;
        for x in a {
            acc |= f(x);
        }
        for x in b {
            acc |= f(x);
        }
        acc
    }
    #[inline(always)]
    unsafe fn any<X>(p: *const X, n: usize, pred: impl Fn(&X) -> bool) -> bool {
        // SAFETY: the trait's contract (K < n <= 2K).
        let (a, b) = unsafe { Self::views(p, n) };
        // One compare per element and no branch (fixed-size vector code), then one branch.
        let mut any = false;
        for x in a {
            any |= pred(x);
        }
        for x in b {
            any |= pred(x);
        }
        any
    }
    #[inline(always)]
    unsafe fn none<X>(p: *mut Option<X>, n: usize) {
        // SAFETY: K < n, so [0, K) and [n - K, n) lie inside the run; the old values are
        // overwritten without a drop (the trait's contract).
        unsafe {
            p.cast::<[Option<X>; K]>().write([const { None }; K]);
            p.add(n - K)
                .cast::<[Option<X>; K]>()
                .write([const { None }; K]);
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
mod copy_tests {
    use super::{by_shape, ByShape, Dyn, Shape};

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

    /// Every shape's operations against plain loops, at every length (through `Dyn`, and
    /// through one `by_shape` dispatch for all of them, as the table paths do).
    #[test]
    fn every_shape_sees_every_element() {
        struct All<'a>(
            &'a [u32],
            &'a mut [u32],
            &'a mut [Option<std::num::NonZeroU32>],
        );
        impl ByShape for All<'_> {
            type Out = (u32, bool, bool);
            fn run<S: Shape>(self, n: usize) -> (u32, bool, bool) {
                // SAFETY: the three buffers hold at least n elements; distinct.
                unsafe {
                    S::copy(self.0.as_ptr(), self.1.as_mut_ptr(), n);
                    let or = S::or(self.0.as_ptr(), n, |&x| 1 << (x % 32));
                    let any7 = S::any(self.0.as_ptr(), n, |&x| x == 7);
                    let anyn = S::any(self.2.as_ptr(), n, Option::is_none);
                    S::none(self.2.as_mut_ptr(), n);
                    (or, any7, anyn)
                }
            }
        }
        let (max, step) = if cfg!(miri) { (70, 11) } else { (150, 1) };
        for n in 0..max {
            for at in (0..n.max(1)).step_by(step) {
                let src: Vec<u32> = (0..n as u32)
                    .map(|i| if i as usize == at { 7 } else { 100 + i })
                    .collect();
                let mut dst = vec![u32::MAX; n + 1];
                let mut slots: Vec<_> = (0..=n)
                    .map(|i| std::num::NonZeroU32::new(i as u32 + 1))
                    .collect();
                if n > 0 {
                    slots[at] = None;
                }
                let (or, any7, anyn) = by_shape(n, All(&src, &mut dst, &mut slots));
                assert_eq!(&dst[..n], &src[..], "n={n}");
                assert_eq!(dst[n], u32::MAX, "n={n}: no write past n");
                assert_eq!(or, src.iter().fold(0, |m, &x| m | 1 << (x % 32)), "n={n}");
                assert_eq!(any7, n > 0, "n={n} at={at}");
                assert_eq!(anyn, n > 0, "n={n} at={at}");
                assert!(slots[..n].iter().all(Option::is_none), "n={n}: cleared");
                assert!(slots[n].is_some(), "n={n}: nothing past n cleared");
                // Dyn gives the same answers.
                // SAFETY: as above.
                let (or2, any2) = unsafe {
                    (
                        Dyn::or(src.as_ptr(), n, |&x| 1 << (x % 32)),
                        Dyn::any(src.as_ptr(), n, |&x| x == 7),
                    )
                };
                assert_eq!((or2, any2), (or, any7), "n={n}");
            }
        }
    }
}
