// The &mut T from get_mut borrows the handle: the handle cannot be put back while the
// reference is alive, so no reference outlives the ownership of its object.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut h = pool.get().unwrap();
    let r: &mut u64 = pool.get_mut(&mut h);
    pool.put(h);
    *r = 1;
}
