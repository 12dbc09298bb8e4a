// An OwnedLocalCache takes &self on every method, so it must never be shared between threads:
// it is Send but not Sync.
idxpool::brand!(B);

fn assert_sync<T: Sync>(_: &T) {}

fn main() {
    let pool = std::sync::Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap());
    let c = idxpool::LocalCache::new(pool.clone());
    assert_sync(&c);
}
