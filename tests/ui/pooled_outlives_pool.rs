// An RAII guard borrows its pool: the pool cannot be dropped while the guard lives.
fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build().unwrap();
    let g = pool.get_pooled().unwrap();
    drop(pool);
    drop(g);
}
