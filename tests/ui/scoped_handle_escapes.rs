// A scoped pool's handle cannot leave the closure: the pool is dropped when it returns.
use idxpool::PoolBuilder;

fn main() {
    let h = PoolBuilder::<u64>::with_default(4)
        .scoped(|pool| pool.get().unwrap())
        .unwrap();
    drop(h);
}
