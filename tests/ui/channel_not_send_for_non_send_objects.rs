// A channel moves handles, and with them their objects, between threads: for objects that
// are not `Send` (here `Rc`), neither half may cross to another thread.
use idxpool::{HandleChannel, PoolBuilder};
use std::rc::Rc;

fn main() {
    let pool = PoolBuilder::<Rc<u8>>::with_fn(4, |_| Rc::new(0)).build().unwrap();
    let (tx, rx) = HandleChannel::new(&pool).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(tx));
        s.spawn(move || drop(rx));
    });
}
