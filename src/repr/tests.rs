//! Unit tests of the representations and of the short-run shapes.

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

/// A run-time pool's access addresses the object from the rank its identity check computed
/// (`ptr_ranked`): for every entry of a block of the handle space (aligned to its span, as
/// `space::claim` gives), that address is the entry's own, and the rank names the entry back
/// (the foreign-handle panic rebuilds the entry from it).
#[test]
fn a_checked_access_addresses_from_the_rank() {
    fn each<R: Repr>(g: &Geometry, i: u32) {
        let e = R::encode(g, i);
        let r = R::rank_wide(g, e);
        assert!(
            r < g.span as usize,
            "{} rank {r} of index {i} in the span",
            R::NAME
        );
        assert_eq!(r as u32, R::rank(g, e));
        assert_eq!(
            R::ptr_ranked(g, e, r),
            R::ptr(g, e),
            "{} index {i}",
            R::NAME
        );
        assert_eq!(R::ptr_ranked(g, e, r), g.ptr_of_index(i));
        assert_eq!((r as u32 ^ g.e0).wrapping_sub(1), R::raw(e));
    }
    let mut buf = vec![0u64; 64];
    for (stride, cap) in [(8usize, 1u32), (64, 1000), (2112, 4096), (4096, 3)] {
        let need = (cap as u64 * stride as u64 / 8).max(cap as u64);
        let span = need.next_power_of_two() as u32;
        for block in [1u32, 2, 7] {
            let lo = block * span - 1;
            let base = NonNull::new(bytemuck_bytes(&mut buf).as_mut_ptr()).unwrap();
            let g = Geometry::with_range(base, stride, cap, lo, span);
            for i in [0, 1, cap / 2, cap - 1].into_iter().filter(|&i| i < cap) {
                each::<Offset>(&g, i);
                each::<Index>(&g, i);
            }
        }
    }
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

    /// The copy and the clear of 8-byte elements (the pointer twin's entries, whose windows
    /// of 32 span 256 bytes) and the copy of a 12-byte element (no power of two), at every
    /// length: every element, nothing past the run.
    #[test]
    fn copies_and_clears_of_wide_elements() {
        for n in 0..140usize {
            let src: Vec<u64> = (0..n as u64).map(|i| i + 1).collect();
            let mut dst = vec![u64::MAX; n + 1];
            // SAFETY: both buffers hold at least n entries and are distinct.
            unsafe { super::copy_entries(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..], "n={n}");
            assert_eq!(dst[n], u64::MAX, "n={n}: no write past n");
            let mut slots: Vec<Option<std::num::NonZeroU64>> = (0..=n as u64)
                .map(|i| std::num::NonZeroU64::new(i + 1))
                .collect();
            // SAFETY: n + 1 valid slots; NonZeroU64 has no destructor.
            unsafe { Dyn::none(slots.as_mut_ptr(), n) };
            assert!(slots[..n].iter().all(Option::is_none), "n={n}: cleared");
            assert!(slots[n].is_some(), "n={n}: nothing past n cleared");
            let src3: Vec<[u32; 3]> = (0..n as u32).map(|i| [i, i + 1, i + 2]).collect();
            let mut dst3 = vec![[u32::MAX; 3]; n + 1];
            // SAFETY: as above.
            unsafe { super::copy_entries(src3.as_ptr(), dst3.as_mut_ptr(), n) };
            assert_eq!(&dst3[..n], &src3[..], "n={n}");
            assert_eq!(dst3[n], [u32::MAX; 3], "n={n}: no write past n");
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

/// The 32-byte pieces of `piece.rs`, called directly (in the default build and under Miri
/// the shapes never take them, `NARROW` being false; here they run in every build).
mod piece_tests {
    use super::piece;
    use std::num::NonZeroU32;
    use std::ptr::NonNull;

    /// Copies, loads and clears a window of `K` elements at every offset of 4 bytes past a
    /// 64-byte line (unaligned pieces), and checks nothing outside it moves.
    fn window<X: Copy + PartialEq + std::fmt::Debug, const K: usize>(make: impl Fn(usize) -> X) {
        let src: Vec<X> = (0..K).map(&make).collect();
        for off in 0..4 {
            let mut dst: Vec<X> = (0..K + 4).map(|i| make(1000 + i)).collect();
            let before = dst.clone();
            // SAFETY: `src` holds K elements; `dst[off..]` has room for K (K + 4 in all).
            unsafe { piece::copy::<X, K>(src.as_ptr(), dst.as_mut_ptr().add(off)) };
            assert_eq!(&dst[off..off + K], &src[..], "K={K} off={off}");
            assert_eq!(&dst[..off], &before[..off], "nothing before the window");
            assert_eq!(&dst[off + K..], &before[off + K..], "nothing after it");
            // SAFETY: dst[off..off + K] are K initialised elements.
            let got = unsafe { piece::load::<X, K>(dst.as_ptr().add(off)) };
            assert_eq!(&got[..], &src[..], "K={K} off={off}: load");
            let mut slots: Vec<Option<X>> = (0..K + 4).map(|i| Some(make(i))).collect();
            // SAFETY: slots[off..] has room for K slots.
            unsafe { piece::none::<X, K>(slots.as_mut_ptr().add(off)) };
            assert!(
                slots[off..off + K].iter().all(Option::is_none),
                "K={K}: cleared"
            );
            assert!(slots[..off]
                .iter()
                .chain(&slots[off + K..])
                .all(Option::is_some));
        }
    }

    #[test]
    fn pieces_copy_load_and_clear_exactly_the_window() {
        let nz = |i: usize| NonZeroU32::new(i as u32 + 1).unwrap();
        window::<NonZeroU32, 8>(nz);
        window::<NonZeroU32, 16>(nz);
        window::<NonZeroU32, 32>(nz);
        window::<u64, 4>(|i| i as u64 * 3 + 1);
        window::<u64, 16>(|i| i as u64 * 3 + 1);
        // Pointer entries keep their provenance through the pieces (Miri, strict provenance:
        // the copies are dereferenced).
        let mut objs = [0u8; 64];
        let base = objs.as_mut_ptr();
        // SAFETY: i % 64 stays inside `objs`.
        let ptr = |i: usize| NonNull::new(unsafe { base.add(i % 64) }).unwrap();
        window::<NonNull<u8>, 8>(ptr);
        let src: Vec<NonNull<u8>> = (0..8).map(ptr).collect();
        let mut dst = vec![ptr(0); 8];
        // SAFETY: 8 elements each.
        unsafe { piece::copy::<NonNull<u8>, 8>(src.as_ptr(), dst.as_mut_ptr()) };
        for (i, p) in dst.iter().enumerate() {
            // SAFETY: a pointer into `objs`, alive, copied with its provenance.
            unsafe { p.as_ptr().write(i as u8) };
        }
        assert_eq!(objs[..8], [0, 1, 2, 3, 4, 5, 6, 7]);
    }
}
