// A handle cannot be put back while a reference from get_mut_all to its object lives.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let r: &mut u64 = pool.resolver().get_mut_all(&mut hs).next().unwrap();
    pool.put_bulk(&mut hs);
    *r = 1;
}
