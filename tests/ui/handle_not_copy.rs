// A handle is not Copy: binding it twice moves it, so only one owner remains.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let h = pool.get().unwrap();
    let a = h;
    let b = h;
    pool.put(a);
    pool.put(b);
}
