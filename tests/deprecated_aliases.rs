//! The renamed public items keep a deprecated alias for one release: old code still compiles
//! (with a warning) and names the same types.
#![allow(deprecated)]

use std::any::TypeId;
use std::sync::Arc;

use idxpool::{DefaultRepr, Handle, Pool, PoolBuilder, Runtime};

#[test]
fn the_old_names_are_the_new_types() {
    assert_eq!(
        TypeId::of::<idxpool::GenericPool<u64>>(),
        TypeId::of::<Pool<u64, Runtime, DefaultRepr>>()
    );
    assert_eq!(
        TypeId::of::<idxpool::GenericHandle<u64>>(),
        TypeId::of::<Handle<u64>>()
    );
    assert_eq!(
        TypeId::of::<idxpool::DynPool<u64>>(),
        TypeId::of::<Arc<Pool<u64>>>()
    );
}

#[test]
fn code_written_against_the_old_names_runs() {
    let pool: idxpool::DynPool<u64> = Arc::new(PoolBuilder::<u64>::zeroed(8).build().unwrap());
    let h: idxpool::GenericHandle<u64> = pool.get().unwrap();
    assert_eq!(*pool.get_ref(&h), 0);
    pool.put(h);
    let unsized_pool: idxpool::GenericPool<[u8]> = PoolBuilder::bytes(4, 16, 8).build().unwrap();
    assert_eq!(unsized_pool.capacity(), 4);
}
