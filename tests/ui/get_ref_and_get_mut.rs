// A &T and a &mut T through the same handle cannot coexist (also through a LocalCache).
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build::<B>().unwrap();
    let c = pool.local_cache();
    let mut h = pool.get().unwrap();
    let shared: &u64 = c.get_ref(&h);
    let exclusive: &mut u64 = c.get_mut(&mut h);
    *exclusive = *shared;
    pool.put(h);
}
