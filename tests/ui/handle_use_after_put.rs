// put() takes the handle by value: it cannot be used (read, written, put again) afterwards.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let h = pool.get().unwrap();
    pool.put(h);
    let _stale: &u64 = pool.get_ref(&h);
}
