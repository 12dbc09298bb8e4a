// A `Written` proof can only be made by writing the object: it has no public constructor.
use idxpool::Written;

fn main() {
    let pool = idxpool::PoolBuilder::<&'static u64>::with_init(1, |_, _slot| Written(Default::default()));
    drop(pool);
}
