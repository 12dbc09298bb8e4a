// A handle owns its object like a Box: it cannot be cloned into a second owner.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let h = pool.get().unwrap();
    let h2 = h.clone();
    pool.put(h);
    pool.put(h2);
}
