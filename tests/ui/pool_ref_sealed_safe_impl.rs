// `PoolRef` is sealed: an implementation outside the crate is refused even when written as a
// plain `impl` (the owners are `&Pool` and `Arc<Pool>`; see tests/ui/pool_ref_sealed.rs).
use std::ops::Deref;
use std::rc::Rc;

use idxpool::{Pool, PoolRef, Runtime};

struct Shared(Rc<Pool<u64>>);

impl Deref for Shared {
    type Target = Pool<u64>;
    fn deref(&self) -> &Pool<u64> {
        &self.0
    }
}

impl PoolRef for Shared {
    type T = u64;
    type B = Runtime;
    type R = idxpool::repr::Offset;
    fn pool(&self) -> &Pool<u64> {
        &self.0
    }
}

fn main() {}
