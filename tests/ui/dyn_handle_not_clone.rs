// A DynHandle owns its object, as a Handle does: it cannot be cloned into a second owner.
fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap();
    let h = pool.get().unwrap();
    let h2 = h.clone();
    pool.put(h);
    pool.put(h2);
}
