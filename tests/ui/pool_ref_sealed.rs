// `PoolRef` is sealed: only `&Pool` and `Arc<Pool>` implement it. A raw-pointer owner that
// met the trait's former written contract (same pool, never moved, never dropped) could still
// let its user take `&mut Pool` while a `LocalCache` lived: `audit()` then reclaimed the live
// cache's storage as forgotten, and the pool handed out the cached objects a second time.
// This is that reproducer; it must not compile (the `unsafe impl` of a now-safe, sealed trait
// is refused; tests/ui/pool_ref_sealed_safe_impl.rs shows the plain `impl` refused by the seal).
use std::ops::Deref;

use idxpool::{LocalCache, Pool, PoolBuilder, PoolRef, Runtime};

struct Ptr(*const Pool<u64>);

impl Deref for Ptr {
    type Target = Pool<u64>;
    fn deref(&self) -> &Pool<u64> {
        unsafe { &*self.0 }
    }
}

unsafe impl PoolRef for Ptr {
    type T = u64;
    type B = Runtime;
    type R = idxpool::repr::Offset;
    fn pool(&self) -> &Pool<u64> {
        unsafe { &*self.0 }
    }
}

fn main() {
    let raw = Box::into_raw(Box::new(
        PoolBuilder::<u64>::with_default(64).cache_size(16).build().unwrap(),
    ));
    let mut c = LocalCache::new(Ptr(raw));
    let mut v = Vec::new();
    c.get_bulk(&mut v, 16).unwrap();
    c.put_bulk(&mut v);
    let _ = unsafe { (*raw).audit() };
    let mut a = Vec::new();
    let _ = unsafe { &*raw }.get_bulk(&mut a, 64);
    let mut b = Vec::new();
    let n = c.len();
    let _ = c.get_bulk(&mut b, n);
}
