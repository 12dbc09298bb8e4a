// A DynLocalCache takes &self on every method, so it must never be shared between threads:
// it is Send but not Sync.
fn assert_sync<T: Sync>(_: &T) {}

fn main() {
    let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(4)).unwrap();
    let c = pool.local_cache();
    assert_sync(&c);
}
