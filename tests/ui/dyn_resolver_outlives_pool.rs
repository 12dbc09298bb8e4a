// References from a DynResolver borrow the pool: the pool cannot be dropped while one lives.
fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap();
    let mut h = pool.get().unwrap();
    let objs = pool.resolver();
    let r: &mut u64 = objs.get_mut(&mut h);
    drop(pool);
    *r = 1;
}
