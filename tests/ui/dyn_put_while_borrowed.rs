// A handle cannot be put back while a reference to its object lives.
fn main() {
    let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(4)).unwrap();
    let mut cache = pool.local_cache();
    let mut h = cache.get().unwrap();
    let r: &mut u64 = cache.get_mut(&mut h);
    cache.put(h);
    *r = 1;
}
