// A reference from LocalCache::get_mut borrows its handle: the handle cannot be put back while
// the reference lives, even though the cache itself is free to allocate.
fn main() {
    idxpool::PoolBuilder::<u64>::with_default(4).scoped(|pool| {
        let mut cache = pool.local_cache();
        let mut h = cache.get().unwrap();
        let r: &mut u64 = pool.get_mut(&mut h);
        let other = cache.get().unwrap();
        cache.put(h);
        *r = 1;
        cache.put(other);
    }).unwrap();
}
