// A reference from DynLocalCache::get_mut borrows the cache (which keeps the pool alive): the
// cache cannot be dropped while it lives.
fn main() {
    let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(4)).unwrap();
    let mut cache = pool.local_cache();
    drop(pool);
    let mut h = cache.get().unwrap();
    let r: &mut u64 = cache.get_mut(&mut h);
    drop(cache);
    *r = 1;
}
