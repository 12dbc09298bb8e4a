// A DynLocalCache takes &self on every method, so it must never be shared between threads:
// it is Send but not Sync.
use std::sync::Arc;

fn assert_sync<T: Sync>(_: &T) {}

fn main() {
    let pool = Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap());
    let c = idxpool::LocalCache::new(pool.clone());
    assert_sync(&c);
}
