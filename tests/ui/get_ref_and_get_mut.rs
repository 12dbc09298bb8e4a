// A &T and a &mut T through the same handle cannot coexist (also through a LocalCache).
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();

    let mut h = pool.get().unwrap();
    let shared: &u64 = pool.get_ref(&h);
    let exclusive: &mut u64 = pool.get_mut(&mut h);
    *exclusive = *shared;
    pool.put(h);
}
