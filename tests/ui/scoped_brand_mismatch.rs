// Two scoped pools of the same T have distinct brands: a handle of the outer pool is
// rejected by the inner one.
use idxpool::PoolBuilder;

fn main() {
    PoolBuilder::<u64>::with_default(4)
        .scoped(|outer| {
            let h = outer.get().unwrap();
            PoolBuilder::<u64>::with_default(4)
                .scoped(|inner| {
                    inner.put(h);
                })
                .unwrap();
        })
        .unwrap();
}
