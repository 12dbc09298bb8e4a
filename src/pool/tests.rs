//! Unit tests of the pool: the bulk forms over every representation, access, initialisers.
use super::*;
use crate::{Index, Offset, Pointer, PoolBuilder};

/// The prefetch / bulk-resolve API on a full pool of `R` entries.
fn bulk_api<R: Repr>() {
    let cap = if cfg!(miri) { 16 } else { 256 };
    PoolBuilder::<[u64; 9]>::zeroed(cap)
        .cache_size(8)
        .repr::<R>()
        .scoped(|pool| {
            let objs = pool.resolver();
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, cap as usize).unwrap();
            // Prefetch of every object of a full pool: a hint, no fault.
            objs.prefetch_all(&hs);
            pool.resolver().prefetch_all(&hs);
            for h in &hs {
                objs.prefetch(h);
                pool.prefetch(h);
            }
            // resolve_bulk: min(len) pointers, the same as as_ptr.
            let mut out = vec![NonNull::<[u64; 9]>::dangling(); hs.len() + 3];
            assert_eq!(objs.resolve_bulk(&hs, &mut out), hs.len());
            for (h, p) in hs.iter().zip(&out) {
                assert_eq!(*p, pool.as_ptr(h));
                assert_eq!(*p, objs.as_ptr(h));
            }
            assert_eq!(out[hs.len()], NonNull::dangling(), "out[n..] untouched");
            let mut short = vec![NonNull::<[u64; 9]>::dangling(); 5];
            assert_eq!(pool.resolver().resolve_bulk(&hs, &mut short), 5);
            assert_eq!(short[4], pool.as_ptr(&hs[4]));
            assert_eq!(objs.resolve_bulk(&hs[..0], &mut short), 0);
            // get_mut_all: one &mut per handle, in order; writes reach each object.
            let it = objs.get_mut_all(&mut hs);
            assert_eq!(it.len(), cap as usize);
            for (k, o) in it.enumerate() {
                o[0] = k as u64 + 1;
                o[8] = pool.stride() as u64;
            }
            for (k, h) in hs.iter().enumerate() {
                assert_eq!(pool.get_ref(h)[0], k as u64 + 1);
                assert_eq!(pool.get_ref(h)[8], pool.stride() as u64);
            }
            // Held all at once, from both ends.
            let mut refs: Vec<&mut [u64; 9]> = pool.resolver().get_mut_all(&mut hs).rev().collect();
            refs[0][1] = 7; // the last handle's object
            drop(refs);
            assert_eq!(pool.get_ref(hs.last().unwrap())[1], 7);
            {
                let mut it = pool.resolver().get_mut_all(&mut hs);
                it.next().unwrap()[2] = 1;
                it.next_back().unwrap()[2] = 2;
                assert_eq!(it.len(), cap as usize - 2);
            }
            assert_eq!(pool.get_ref(&hs[0])[2], 1);
            assert_eq!(pool.get_ref(hs.last().unwrap())[2], 2);
            // Through a LocalCache, which keeps allocating while the references live.
            let mut cache = pool.local_cache();
            let mut burst = Vec::new();
            pool.put_bulk(&mut hs);
            cache.get_bulk(&mut burst, 4).unwrap();
            objs.prefetch_all(&burst);
            objs.prefetch(&burst[0]);
            let mut ptrs = [NonNull::dangling(); 4];
            assert_eq!(objs.resolve_bulk(&burst, &mut ptrs), 4);
            let refs: Vec<_> = objs.get_mut_all(&mut burst).collect();
            let extra = cache.get().unwrap();
            for (r, p) in refs.into_iter().zip(ptrs) {
                assert_eq!(NonNull::from(&mut *r), p);
                r[3] = 33;
            }
            cache.put(extra);
            assert!(burst.iter().all(|h| objs.get_ref(h)[3] == 33));
            cache.put_bulk(&mut burst);
            drop(cache);
            assert!(pool.is_full());
        })
        .unwrap();
}

#[test]
fn bulk_api_offset() {
    bulk_api::<Offset>();
}

#[test]
fn bulk_api_index() {
    bulk_api::<Index>();
}

#[test]
fn bulk_api_pointer() {
    bulk_api::<Pointer>();
}

#[test]
fn get_mut_all_of_no_handles_is_empty() {
    PoolBuilder::<u64>::with_default(4)
        .scoped(|pool| {
            let mut none: Vec<H<u64, _, _>> = Vec::new();
            assert_eq!(pool.resolver().get_mut_all(&mut none).len(), 0);
            assert!(pool.resolver().get_mut_all(&mut none).next().is_none());
            pool.resolver().prefetch_all(&none);
        })
        .unwrap();
}

/// The object view an initialiser gets checks the element type: an initialiser for a
/// larger type panics before writing (nothing past the object is touched), and the
/// objects made before it are dropped by `init_objects`' guard.
#[test]
fn an_initialiser_for_a_larger_type_panics_before_writing() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D(u64);
    impl Drop for D {
        fn drop(&mut self) {
            assert_eq!(self.0, 7);
            DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }
    let mut buf = vec![0u64; 4]; // 4 objects of 8 bytes, 8-aligned
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
    let g = Geometry::new(base, 8, 4).with_elem_len(8);
    let mut init = |i: u32, obj: UninitObject<'_>, written: &AtomicBool| {
        if i < 2 {
            obj.into_uninit::<D>().write(D(7));
        } else {
            obj.into_uninit::<[u64; 2]>().write([1, 1]);
        }
        written.store(true, Ordering::Relaxed);
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: objects 0..4 lie in `buf` (4 x 8 bytes, 8-aligned), hold no value that
        // needs dropping, and nothing else uses `buf` during the call.
        unsafe { objects::init_objects::<D>(&g, 0, 4, &mut init) }
    }));
    assert!(r.is_err(), "the mismatched view panics");
    assert_eq!(
        DROPS.load(Ordering::Relaxed),
        2,
        "the two objects made are dropped"
    );
    assert_eq!(
        buf[2..],
        [0, 0],
        "nothing written by the mismatched initialiser"
    );
}
