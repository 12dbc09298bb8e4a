// References from get_mut borrow the pool too: the pool cannot be dropped while one lives.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut h = pool.get().unwrap();
    let r: &mut u64 = pool.get_mut(&mut h);
    drop(pool);
    *r = 1;
}
