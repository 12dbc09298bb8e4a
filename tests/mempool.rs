//! One interface over the crate's pools (`Mempool`): the same generic code on the branded and
//! run-time in-process pools (each entry representation) and on a shared pool attachment; the
//! caller's-table forms of the shared pool (the trait's provided methods) keep their
//! all-or-nothing contract with typed errors; the `Pooled` guard works over any of them.

#![cfg(all(target_os = "linux", not(miri)))]

use std::sync::Arc;

use idxpool::shared::{fingerprint, SharedHandle, SharedOptions, SharedPool};
use idxpool::{Index, Mempool, PoolBuilder, PoolError, Pooled};

/// Takes everything, writes each object, checks every object is distinct, puts it all back
/// through a table and through a Vec; returns what it took.
fn exercise<M: Mempool<Object = [u32; 16]>>(pool: &M) -> usize {
    let cap = pool.capacity() as usize;
    let mut v = Vec::new();
    let got = pool.get_burst(&mut v, cap + 10);
    assert!(got <= cap && got == v.len());
    for (i, h) in v.iter_mut().enumerate() {
        pool.get_mut(h)[0] = i as u32;
    }
    for (i, h) in v.iter().enumerate() {
        assert_eq!(pool.get_ref(h)[0], i as u32, "distinct objects");
    }
    assert!(pool.get().is_err(), "exhausted");
    pool.put_bulk(&mut v);
    assert_eq!(pool.in_use(), 0);
    let mut table: Vec<Option<M::Handle>> = (0..8).map(|_| None).collect();
    pool.get_into(&mut table).unwrap();
    assert_eq!(pool.in_use(), 8);
    assert!(matches!(
        pool.get_into(&mut table),
        Err(PoolError::SlotOccupied { index: 0, len: 8 })
    ));
    pool.put_from(&mut table).unwrap();
    assert!(table.iter().all(Option::is_none));
    assert!(matches!(
        pool.put_from(&mut table),
        Err(PoolError::SlotEmpty { index: 0, len: 8 })
    ));
    pool.flush();
    assert_eq!((pool.in_use(), pool.available()), (0, cap));
    got
}

fn shared(tag: &str, capacity: u32) -> SharedPool<[u32; 16]> {
    let name = format!("idxpool-test-{}-mempool-{tag}", std::process::id());
    let opts = SharedOptions {
        cache_size: Some(4),
        ..SharedOptions::default()
    };
    SharedPool::create(&name, capacity, fingerprint("[u32; 16]"), opts).unwrap()
}

#[test]
fn one_generic_function_runs_on_every_pool() {
    let runtime = PoolBuilder::<[u32; 16]>::with_default(64)
        .cache_size(4)
        .build()
        .unwrap();
    assert_eq!(exercise(&runtime), 64);
    let index = PoolBuilder::<[u32; 16]>::with_default(64)
        .cache_size(4)
        .repr::<Index>()
        .build()
        .unwrap();
    assert_eq!(exercise(&index), 64);
    let branded = PoolBuilder::<[u32; 16]>::with_default(64)
        .cache_size(4)
        .scoped(|p| exercise(&p))
        .unwrap();
    assert_eq!(branded, 64);
    let s = shared("generic", 64);
    assert_eq!(exercise(&s), 64);
}

/// The shared pool's table forms refuse whole, with the table unchanged and nothing moved.
#[test]
fn shared_table_forms_are_all_or_nothing() {
    let a = shared("table-a", 16);
    let b = shared("table-b", 16);
    // Exhausted: a table larger than the pool.
    let mut big: Vec<Option<SharedHandle<[u32; 16]>>> = (0..17).map(|_| None).collect();
    assert!(matches!(
        a.get_into(&mut big),
        Err(PoolError::Exhausted { .. })
    ));
    assert!(big.iter().all(Option::is_none));
    assert_eq!(Mempool::in_use(&a), 0);
    // A slot in the middle occupied: its index, nothing taken.
    let mut t: Vec<Option<SharedHandle<[u32; 16]>>> = (0..4).map(|_| None).collect();
    t[2] = Some(a.get().unwrap());
    assert!(matches!(
        a.get_into(&mut t),
        Err(PoolError::SlotOccupied { index: 2, len: 4 })
    ));
    assert_eq!(Mempool::in_use(&a), 1);
    // Another attachment's handle in a put: ForeignHandle, nothing moved.
    let mut t2 = vec![t[2].take(), Some(b.get().unwrap())];
    assert!(matches!(
        a.put_from(&mut t2),
        Err(PoolError::ForeignHandle { .. })
    ));
    assert!(t2.iter().all(Option::is_some));
    assert_eq!((Mempool::in_use(&a), Mempool::in_use(&b)), (1, 1));
    let hb = t2.pop().unwrap().unwrap();
    let hb = Mempool::try_put(&a, hb).unwrap_err();
    Mempool::try_put(&b, hb).unwrap();
    a.put_from(&mut t2).unwrap();
    assert_eq!((Mempool::in_use(&a), Mempool::in_use(&b)), (0, 0));
}

#[test]
fn pooled_guards_over_every_pool() {
    let s = shared("guard", 8);
    {
        let mut g = Pooled::get(&s).unwrap();
        g[3] = 9;
        assert_eq!(Mempool::in_use(&s), 1);
    }
    assert_eq!(Mempool::in_use(&s), 0);
    let other = shared("guard-other", 8);
    let h = other.get().unwrap();
    let h = Pooled::new(&s, h).unwrap_err(); // another attachment's: given back
    other.put(h);
    let p = Arc::new(PoolBuilder::<[u32; 16]>::with_default(8).build().unwrap());
    let g = Pooled::get(p.clone()).unwrap();
    std::thread::spawn(move || drop(g)).join().unwrap();
    assert_eq!(p.in_use(), 0);
}
