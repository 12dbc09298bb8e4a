// References from a DynPool's get_mut_all borrow the pool: it cannot be dropped while one lives.
use std::sync::Arc;

fn main() {
    let pool = Arc::new(idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap());
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let objs = pool.resolver();
    let r: &mut u64 = objs.get_mut_all(&mut hs).next().unwrap();
    drop(pool);
    *r = 1;
}
