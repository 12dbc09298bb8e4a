//! The caller's-table forms (`get_into` / `put_from`): lengths 0, 1, N, the cache
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

/// The `index` of `SlotOccupied` / `SlotEmpty` counts from the start of the slice the caller
/// passed (the whole of it: not from a window the pool's checks read, nor from the vector the
/// slice was cut from), at every position of windows of every shape (one slot, the
/// overlapping halves, beyond 64), through both caches.
#[test]
fn slot_errors_index_the_table_passed() {
    let p = pool::<Offset>();
    let mut c = p.local_cache();
    for (from, len) in [
        (7usize, 1usize),
        (3, 2),
        (5, 3),
        (9, 8),
        (2, 13),
        (1, 33),
        (0, 64),
    ] {
        for at in 0..len {
            let mut big = empty::<idxpool::Runtime, Offset>(from + len + 3);
            // One handle in the window's slot `at` (taken through a one-slot window).
            c.get_into(&mut big[from + at..from + at + 1]).unwrap();
            let before = (p.in_use(), c.len());
            for r in [
                c.get_into(&mut big[from..from + len]),
                p.get_into(&mut big[from..from + len]),
            ] {
                assert!(
                    matches!(r, Err(PoolError::SlotOccupied { index, len: l }) if index == at && l == len),
                    "window {from}..+{len}, slot {at}: {r:?}"
                );
            }
            assert_eq!((p.in_use(), c.len()), before, "nothing taken");
            c.put_from(&mut big[from + at..from + at + 1]).unwrap();
            // The window full but for slot `at`: the put says `at`.
            c.get_into(&mut big[from..from + len]).unwrap();
            let h = big[from + at].take();
            let before = (p.in_use(), c.len());
            for r in [
                c.put_from(&mut big[from..from + len]),
                p.put_from(&mut big[from..from + len]),
            ] {
                assert!(
                    matches!(r, Err(PoolError::SlotEmpty { index, len: l }) if index == at && l == len),
                    "window {from}..+{len}, slot {at}: {r:?}"
                );
            }
            assert_eq!((p.in_use(), c.len()), before, "nothing moved");
            assert_eq!(big.iter().flatten().count(), len - 1, "the table unchanged");
            big[from + at] = h;
            c.put_from(&mut big[from..from + len]).unwrap();
            assert!(big.iter().all(Option::is_none));
        }
    }
    drop(c);
    assert_eq!(p.in_use(), 0);
}

/// A put whose table has both an empty slot and another pool's handle is `SlotEmpty` (the
/// first empty slot), whatever their order, as when the slot check ran before the identity
/// check; a run-time pool's put checks both with one OR (an empty slot fails the range check),
/// and says which afterwards. Nothing moves.
#[test]
fn an_empty_slot_is_reported_before_a_foreign_handle() {
    let a = pool::<Index>();
    let b = pool::<Index>();
    let mut c = a.local_cache();
    for n in [2usize, 3, 4, 5, 8, 9, 17, 40, 64] {
        for (hole, foreign) in [(0, n - 1), (n - 1, 0)] {
            let mut t = empty::<idxpool::Runtime, Index>(n);
            c.get_into(&mut t).unwrap();
            let mine = t[foreign].take();
            let theirs = b.get().unwrap();
            t[foreign] = Some(theirs);
            let h = t[hole].take();
            let before = (a.in_use(), b.in_use(), c.len());
            for r in [c.put_from(&mut t), a.put_from(&mut t)] {
                assert!(
                    matches!(r, Err(PoolError::SlotEmpty { index, len }) if index == hole && len == n),
                    "n={n} hole={hole} foreign={foreign}: {r:?}"
                );
            }
            assert_eq!((a.in_use(), b.in_use(), c.len()), before, "nothing moved");
            t[hole] = h;
            let r = c.put_from(&mut t);
            assert!(
                matches!(r, Err(PoolError::ForeignHandle { .. })),
                "n={n}: {r:?}"
            );
            b.put(t[foreign].take().unwrap());
            t[foreign] = mine;
            c.put_from(&mut t).unwrap();
        }
    }
    drop(c);
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
