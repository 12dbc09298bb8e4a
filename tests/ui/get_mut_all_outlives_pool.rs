// References from get_mut_all borrow the pool too: the pool cannot be dropped while one lives.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let r: &mut u64 = pool.resolver().get_mut_all(&mut hs).next().unwrap();
    drop(pool);
    *r = 1;
}
