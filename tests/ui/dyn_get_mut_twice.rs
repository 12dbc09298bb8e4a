// One DynHandle yields at most one &mut at a time, whatever the cache's &self methods allow.
fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap();
    let mut h = pool.get().unwrap();
    let a: &mut u64 = pool.get_mut(&mut h);
    let b: &mut u64 = pool.get_mut(&mut h);
    *a = 1;
    *b = 2;
}
