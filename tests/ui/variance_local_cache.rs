// A `LocalCache` hands out `&mut T` like its pool: invariant in `T`.
use idxpool::{Brand, IndexLocalCache};

fn shorten<'p, 's, B: Brand>(
    c: IndexLocalCache<'p, &'static str, B>,
) -> IndexLocalCache<'p, &'s str, B> {
    c
}

fn main() {}
