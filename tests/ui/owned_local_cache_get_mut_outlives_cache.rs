// A reference from OwnedLocalCache::get_mut borrows the cache, which holds the pool's Arc: the
// cache cannot be dropped while it lives (the last Arc could go with it).
idxpool::brand!(B);

fn main() {
    let pool = std::sync::Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap());
    let mut cache = idxpool::LocalCache::new(pool.clone());
    drop(pool);
    let mut h = cache.get().unwrap();
    let r: &mut u64 = cache.pool().get_mut(&mut h);
    drop(cache);
    *r = 1;
}
