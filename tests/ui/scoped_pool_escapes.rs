// Nor can the scoped pool itself (or a reference to it) escape.
use idxpool::PoolBuilder;

fn main() {
    let pool = PoolBuilder::<u64>::with_default(4).scoped(|pool| pool).unwrap();
    drop(pool);
}
