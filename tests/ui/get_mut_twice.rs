// Two &mut T through the same handle cannot coexist.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut h = pool.get().unwrap();
    let a: &mut u64 = pool.get_mut(&mut h);
    let b: &mut u64 = pool.get_mut(&mut h);
    *a = 1;
    *b = 2;
    pool.put(h);
}
