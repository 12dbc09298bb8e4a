// Both halves of a handle ring move handles of `T` (and the ring puts them back into its pool
// at drop): invariant in `T`.
use idxpool::handle_ring::{Consumer, Producer};
use idxpool::{Brand, Pool};

fn shorten_tx<'p, 's, B: Brand>(tx: Producer<&'p Pool<&'static str, B>>) -> Producer<&'p Pool<&'s str, B>> {
    tx
}

fn shorten_rx<'p, 's, B: Brand>(rx: Consumer<&'p Pool<&'static str, B>>) -> Consumer<&'p Pool<&'s str, B>> {
    rx
}

fn main() {}
