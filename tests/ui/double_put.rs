// The same handle cannot be put twice (the double free DPDK can only catch at run time).
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut c = pool.local_cache();
    let h = c.get().unwrap();
    c.put(h);
    c.put(h);
}
