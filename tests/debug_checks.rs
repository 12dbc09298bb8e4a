//! Debug checks (always on in debug builds, or with the `debug-checks` feature): a put of an
//! object that is already free, through a handle rebuilt with `Handle::from_raw`, panics with a
//! message naming the index and the pool, on every put path (implicit and explicit caches,
//! single, bulk, tail, array); an index out of range panics naming it; `check_raw` reports
//! `DoubleFree` and `IndexOutOfRange`; and a caught panic leaves the pool consistent.
//!
//! These tests are ignored when `idxpool::DEBUG_CHECKS` is false (release builds without the
//! feature), where such puts are undetected contract violations.

use std::panic::{catch_unwind, AssertUnwindSafe};

use idxpool::{Handle, PoolBuilder, PoolError, Scoped, DEBUG_CHECKS};

idxpool::brand!(Eight);
idxpool::brand!(Caught);

/// Runs `f` with a pool of one object named "dc-single" (so a freed handle is always index 0)
/// and a second handle to that object, which is free.
fn with_freed_twin(
    f: impl for<'id> FnOnce(&idxpool::Pool<u64, Scoped<'id>>, Handle<u64, Scoped<'id>>),
) {
    PoolBuilder::<u64>::with_default(1)
        .cache_size(1)
        .name("dc-single")
        .scoped(|pool| {
            let h = pool.get().unwrap();
            let raw = h.into_raw();
            // SAFETY: rebuilds the only handle to `raw`, which is put right back.
            pool.put(unsafe { Handle::from_raw(raw) });
            // SAFETY (deliberately broken: the object is free): the handle is only put, never
            // resolved, and debug checks stop the put.
            let twin = unsafe { Handle::from_raw(raw) };
            f(&pool, twin)
        })
        .unwrap();
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "double free of object 0 in pool dc-single")]
fn put_of_a_free_object_panics_implicit_cache() {
    with_freed_twin(|pool, twin| pool.put(twin));
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "double free of object 0 in pool dc-single")]
fn put_of_a_free_object_panics_local_cache() {
    with_freed_twin(|pool, twin| pool.local_cache().put(twin));
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "double free of object 0 in pool dc-single")]
fn put_bulk_of_a_free_object_panics() {
    with_freed_twin(|pool, twin| pool.put_bulk(&mut vec![twin]));
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "double free of object 0 in pool dc-single")]
fn put_bulk_tail_of_a_free_object_panics() {
    with_freed_twin(|pool, twin| pool.local_cache().put_bulk_tail(&mut vec![twin], 1));
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "double free of object 0 in pool dc-single")]
fn put_array_of_a_free_object_panics() {
    with_freed_twin(|pool, twin| pool.local_cache().put_array([twin]));
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
#[should_panic(expected = "index 100 out of range for pool of capacity 8")]
fn put_of_an_index_out_of_range_panics() {
    let pool = PoolBuilder::<u64>::with_default(8)
        .build_named::<Eight>()
        .unwrap();
    // SAFETY (deliberately broken): index 100 is not an object of the pool; the handle is only
    // put, and the range check stops it.
    pool.put(unsafe { Handle::from_raw(100) });
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
fn a_caught_double_free_leaves_the_pool_consistent() {
    // u64 objects sit 8 bytes apart, so an offset entry's raw value (offset / 8) is the index:
    // `from_raw(index)` below names the object of that index.
    let mut pool = PoolBuilder::<u64>::with_default(8)
        .cache_size(2)
        .name("dc-caught")
        .build_named::<Caught>()
        .unwrap();
    let mut v = Vec::new();
    pool.get_bulk(&mut v, 3).unwrap();
    let i = pool.index_of(&v[0]);
    let h = v.remove(0);
    pool.put(h);
    // Single put of the freed object: refused before anything moved.
    let err = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY (deliberately broken, object free): only put, stopped by the check.
        pool.put(unsafe { Handle::<u64, Caught>::from_raw(i) })
    }))
    .expect_err("double put must panic");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains(&format!("object {i}")) && msg.contains("dc-caught"),
        "message names the index and the pool: {msg}"
    );
    assert_eq!(pool.available(), 6);
    assert_eq!(
        pool.check_raw(pool.index_of(&v[0]))
            .map_err(|e| e.to_string()),
        Ok(())
    );
    assert!(matches!(
        pool.check_raw(i),
        Err(PoolError::DoubleFree { index, .. }) if index == i
    ));
    assert!(matches!(
        pool.check_raw(8),
        Err(PoolError::IndexOutOfRange {
            index: 8,
            capacity: 8
        })
    ));
    pool.put_bulk(&mut v);
    let rep = pool.audit().expect("consistent after a caught double free");
    assert_eq!(rep.in_use, 0);
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
fn a_bulk_put_with_one_bad_handle_moves_nothing() {
    // The bad handle is last: the good ones before it must not be half-returned.
    PoolBuilder::<u64>::with_default(8)
        .cache_size(2)
        .scoped(|mut pool| {
            let mut v = Vec::new();
            pool.get_bulk(&mut v, 4).unwrap();
            let freed = v.pop().unwrap();
            let i = pool.index_of(&freed);
            pool.put(freed);
            // SAFETY (deliberately broken, object free): only put, stopped by the check.
            v.push(unsafe { Handle::from_raw(i) });
            let r = catch_unwind(AssertUnwindSafe(|| pool.put_bulk(&mut v)));
            assert!(r.is_err(), "double free in a bulk must panic");
            assert_eq!(
                pool.available(),
                5,
                "nothing of the failed bulk reached the pool"
            );
            // Give back the three good handles (the forged one is forgotten).
            let _forged = v.pop().unwrap(); // a handle has no destructor: dropping it is a no-op
            for h in &v {
                assert!(
                    pool.check_raw(pool.index_of(h)).is_ok(),
                    "object {} must still be marked in use after the failed bulk",
                    pool.index_of(h)
                );
            }
            pool.put_bulk(&mut v);
            pool.audit().expect("consistent after a failed bulk");
        })
        .unwrap();
}

#[test]
#[cfg_attr(
    not(any(debug_assertions, feature = "debug-checks")),
    ignore = "needs debug checks"
)]
fn the_same_object_twice_in_one_bulk_is_caught_and_moves_nothing() {
    PoolBuilder::<u64>::with_default(4)
        .cache_size(0)
        .scoped(|mut pool| {
            let mut v = Vec::new();
            pool.get_bulk(&mut v, 2).unwrap();
            let i = pool.index_of(&v[0]);
            // SAFETY (deliberately broken: two handles to object i, both in use): only put.
            v.push(unsafe { Handle::from_raw(i) });
            let r = catch_unwind(AssertUnwindSafe(|| pool.put_bulk(&mut v)));
            let msg = r.expect_err("a duplicate in one bulk must panic");
            let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains(&format!("double free of object {i}")), "{msg}");
            assert_eq!(
                pool.ring_count(),
                2,
                "nothing of the failed bulk was enqueued"
            );
            let _forged = v.pop().unwrap(); // dropping a handle is a no-op
            for h in &v {
                assert!(pool.check_raw(pool.index_of(h)).is_ok(), "still in use");
            }
            pool.put_bulk(&mut v);
            assert_eq!(pool.audit().unwrap().in_ring, 4);
        })
        .unwrap();
}

#[test]
fn debug_checks_follow_the_build() {
    // On in debug builds and with the `debug-checks` feature; compiled away otherwise.
    assert_eq!(
        DEBUG_CHECKS,
        cfg!(any(debug_assertions, feature = "debug-checks"))
    );
}
