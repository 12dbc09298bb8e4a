// References from a DynPool's get_mut_all borrow the pool: it cannot be dropped while one lives.
fn main() {
    let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(4)).unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let objs = pool.resolver();
    let r: &mut u64 = objs.get_mut_all(&mut hs).next().unwrap();
    drop(pool);
    *r = 1;
}
