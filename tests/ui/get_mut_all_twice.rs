// get_mut_all borrows the slice of handles mutably: two iterators (or their references) over
// the same handles cannot be alive at once.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let objs = pool.resolver();
    let mut hs = Vec::new();
    pool.get_bulk(&mut hs, 2).unwrap();
    let mut a: Vec<&mut u64> = objs.get_mut_all(&mut hs).collect();
    let mut b: Vec<&mut u64> = objs.get_mut_all(&mut hs).collect();
    *a[0] = 1;
    *b[0] = 2;
    pool.put_bulk(&mut hs);
}
