// One DynHandle yields at most one &mut at a time, whatever the cache's &self methods allow.
fn main() {
    let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(4)).unwrap();
    let mut cache = pool.local_cache();
    let mut h = cache.get().unwrap();
    let a: &mut u64 = cache.get_mut(&mut h);
    let b: &mut u64 = cache.get_mut(&mut h);
    *a = 1;
    *b = 2;
}
