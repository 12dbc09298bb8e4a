//! The caller's-table forms (`get_into` / `put_from`, issue 24): lengths 0, 1, N, the cache
//! size and more than the pool holds; all or nothing, with every count kept; typed errors for
//! occupied, empty and foreign slots; both cache kinds and every representation.

use idxpool::repr::Repr;
use idxpool::{Brand, Handle, Index, Offset, Pointer, Pool, PoolBuilder, PoolError};

const CAP: u32 = 64;
const CACHE: u32 = 16;

fn pool<R: Repr>() -> Pool<u64, idxpool::Runtime, R> {
    PoolBuilder::<u64>::with_default(CAP)
        .cache_size(CACHE)
        .repr::<R>()
        .build()
        .unwrap()
}

/// A pool of the pointer twin (a scoped brand: run-time pools need 4-byte entries).
fn with_pointer_pool(f: impl for<'id> FnOnce(Pool<u64, idxpool::Scoped<'id>, Pointer>)) {
    PoolBuilder::<u64>::with_default(CAP)
        .cache_size(CACHE)
        .repr::<Pointer>()
        .scoped(f)
        .unwrap()
}

fn empty<B, R: Repr>(n: usize) -> Vec<Option<Handle<u64, B, R>>> {
    (0..n).map(|_| None).collect()
}

fn lengths<B: Brand, R: Repr>(p: &Pool<u64, B, R>) {
    for n in [0usize, 1, 4, 32, CACHE as usize, CAP as usize] {
        for explicit in [false, true] {
            assert_eq!(p.available(), CAP as usize);
            let mut c = p.local_cache();
            let mut t = empty::<B, R>(n);
            if explicit {
                c.get_into(&mut t).unwrap();
            } else {
                p.get_into(&mut t).unwrap();
            }
            assert!(t.iter().all(Option::is_some), "n={n}: every slot filled");
            assert_eq!(p.in_use(), n + c.len());
            // Distinct objects, each writable.
            let mut seen = std::collections::HashSet::new();
            for (k, s) in t.iter_mut().enumerate() {
                let h = s.as_mut().unwrap();
                assert!(seen.insert(p.index_of(h)), "n={n}: object handed out twice");
                *p.get_mut(h) = k as u64;
            }
            if explicit {
                c.put_from(&mut t).unwrap();
            } else {
                p.put_from(&mut t).unwrap();
            }
            assert!(
                t.iter().all(Option::is_none),
                "n={n}: put empties every slot"
            );
            assert_eq!(p.in_use(), c.len());
            drop(c);
            p.flush();
            assert_eq!(p.available(), CAP as usize);
        }
    }
}

#[test]
fn every_length_offset() {
    lengths(&pool::<Offset>());
}
#[test]
fn every_length_index() {
    lengths(&pool::<Index>());
}
#[test]
fn every_length_pointer() {
    with_pointer_pool(|p| lengths(&p));
}

#[test]
fn more_than_the_pool_holds_takes_nothing() {
    with_pointer_pool(|p| more_than_the_pool(&p));
    more_than_the_pool(&pool::<Offset>());
}

fn more_than_the_pool<B: Brand, R: Repr>(p: &Pool<u64, B, R>) {
    let mut c = p.local_cache();
    let mut keep = empty::<B, R>(10);
    c.get_into(&mut keep).unwrap();
    for n in [CAP as usize + 1, CAP as usize - 9, 1000] {
        let (in_use, len) = (p.in_use(), c.len());
        let mut t = empty::<B, R>(n);
        match c.get_into(&mut t) {
            Err(PoolError::Exhausted { requested, .. }) => assert_eq!(requested, n),
            other => panic!("n={n}: {other:?}"),
        }
        assert!(
            t.iter().all(Option::is_none),
            "n={n}: a failed get fills nothing"
        );
        assert_eq!((p.in_use(), c.len()), (in_use, len), "n={n}: counts kept");
        assert!(matches!(
            p.get_into(&mut t),
            Err(PoolError::Exhausted { .. })
        ));
    }
    // Exactly what is left still works.
    let mut rest = empty::<B, R>(CAP as usize - 10);
    c.get_into(&mut rest).unwrap();
    assert_eq!(p.in_use(), CAP as usize);
    c.put_from(&mut rest).unwrap();
    c.put_from(&mut keep).unwrap();
}

#[test]
fn an_occupied_slot_moves_nothing() {
    let p = pool::<Offset>();
    let mut c = p.local_cache();
    let mut t = empty::<idxpool::Runtime, Offset>(8);
    c.get_into(&mut t[5..6]).unwrap();
    let before = (p.in_use(), c.len(), p.index_of(t[5].as_ref().unwrap()));
    for r in [c.get_into(&mut t), p.get_into(&mut t)] {
        assert!(
            matches!(r, Err(PoolError::SlotOccupied { index: 5, len: 8 })),
            "{r:?}"
        );
    }
    assert_eq!(
        (p.in_use(), c.len(), p.index_of(t[5].as_ref().unwrap())),
        before,
        "the handle is still there, no count moved"
    );
    assert_eq!(t.iter().filter(|s| s.is_some()).count(), 1);
    c.put_from(&mut t[5..6]).unwrap();
}

#[test]
fn an_empty_slot_moves_nothing() {
    let p = pool::<Index>();
    let mut c = p.local_cache();
    let mut t = empty::<idxpool::Runtime, Index>(8);
    c.get_into(&mut t).unwrap();
    let h = t[3].take();
    let before = (p.in_use(), c.len());
    for r in [c.put_from(&mut t), p.put_from(&mut t)] {
        assert!(
            matches!(r, Err(PoolError::SlotEmpty { index: 3, len: 8 })),
            "{r:?}"
        );
    }
    assert_eq!((p.in_use(), c.len()), before);
    assert_eq!(
        t.iter().filter(|s| s.is_some()).count(),
        7,
        "the table is unchanged"
    );
    t[3] = h;
    c.put_from(&mut t).unwrap();
    assert_eq!(p.in_use(), c.len());
}

#[test]
fn a_foreign_handle_is_a_typed_error_and_moves_nothing() {
    let a = pool::<Offset>();
    let b = pool::<Offset>();
    let mut ta = empty::<idxpool::Runtime, Offset>(4);
    a.get_into(&mut ta).unwrap();
    let mut tb = empty::<idxpool::Runtime, Offset>(4);
    b.get_into(&mut tb).unwrap();
    std::mem::swap(&mut ta[2], &mut tb[2]);
    let before = (a.in_use(), b.in_use());
    assert!(matches!(
        a.put_from(&mut ta),
        Err(PoolError::ForeignHandle { .. })
    ));
    assert!(ta.iter().all(Option::is_some));
    assert_eq!((a.in_use(), b.in_use()), before);
    std::mem::swap(&mut ta[2], &mut tb[2]);
    a.put_from(&mut ta).unwrap();
    b.put_from(&mut tb).unwrap();
    assert_eq!((a.in_use(), b.in_use()), (0, 0));
}

/// DPDK's loop: a table of n_keep slots filled in windows of n_get and emptied in windows of
/// n_put, over and over, with the cache's refills and flushes in between.
#[test]
fn dpdk_loop_conserves_objects() {
    with_pointer_pool(|p| dpdk_loop(&p));
    dpdk_loop(&pool::<Index>());
}

fn dpdk_loop<B: Brand, R: Repr>(p: &Pool<u64, B, R>) {
    let mut c = p.local_cache();
    let (keep, get, put) = (48usize, 16usize, 12usize);
    let mut t = empty::<B, R>(keep);
    for _ in 0..if cfg!(miri) { 3 } else { 200 } {
        let mut i = 0;
        while i < keep {
            c.get_into(&mut t[i..i + get]).unwrap();
            i += get;
        }
        let mut i = 0;
        while i < keep {
            c.put_from(&mut t[i..i + put]).unwrap();
            i += put;
        }
        assert!(t.iter().all(Option::is_none));
    }
    drop(c);
    assert_eq!(p.in_use(), 0);
}
