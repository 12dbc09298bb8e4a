// A LocalCache has one owner: it is Send but not Sync, so two threads cannot share it.
idxpool::brand!(B);

fn assert_sync<T: Sync>(_: &T) {}

fn main() {
    let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let c = pool.local_cache();
    assert_sync(&c);
}
