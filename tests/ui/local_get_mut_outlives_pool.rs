// A reference from LocalCache::get_mut is tied to the pool (not the cache): the pool cannot be
// dropped while it lives.
fn main() {
    idxpool::PoolBuilder::<u64>::with_default(4).scoped(|pool| {
        let mut cache = pool.local_cache();
        let mut h = cache.get().unwrap();
        let r: &mut u64 = pool.get_mut(&mut h);
        drop(cache);
        drop(pool);
        *r = 1;
    }).unwrap();
}
