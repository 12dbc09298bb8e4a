// `with_init(1, |_, _slot| {})` built a pool of `&'static u64` whose object
// was never written, and `get_ref` yielded a null reference. The initialiser must now return
// the `Written` proof that only a write of this object produces.
fn main() {
    let pool = idxpool::PoolBuilder::<&'static u64>::with_init(1, |_, _slot| {});
    drop(pool);
}
