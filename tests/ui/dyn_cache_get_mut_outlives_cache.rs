// A reference from DynLocalCache::get_mut borrows the cache (which keeps the pool alive): the
// cache cannot be dropped while it lives.
// A reference through a cache's pool cannot outlive the cache that keeps the pool alive.
use std::sync::Arc;
use idxpool::{LocalCache, PoolBuilder};

fn main() {
    let pool = Arc::new(PoolBuilder::<u64>::with_default(4).build().unwrap());
    let mut cache = LocalCache::new(pool.clone());
    drop(pool);
    let mut h = cache.get().unwrap();
    let r: &mut u64 = cache.pool().get_mut(&mut h);
    drop(cache);
    *r = 1;
}
