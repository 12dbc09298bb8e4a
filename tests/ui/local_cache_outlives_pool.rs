// A LocalCache borrows its pool: the pool cannot be dropped (or moved) while it lives.
idxpool::brand!(B);

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut c = pool.local_cache();
    drop(pool);
    let _ = c.get();
}
