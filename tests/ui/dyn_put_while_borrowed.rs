// A handle cannot be put back while a reference to its object lives.
fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap();
    let mut cache = pool.local_cache();
    let mut h = cache.get().unwrap();
    let r: &mut u64 = pool.get_mut(&mut h);
    cache.put(h);
    *r = 1;
}
