// A `LocalCache` hands out `&mut T` like its pool: invariant in `T`.
use idxpool::{Brand, LocalCache, Pool};

fn shorten<'p, 's, B: Brand>(
    c: LocalCache<&'p Pool<&'static str, B>>,
) -> LocalCache<&'p Pool<&'s str, B>> {
    c
}

fn shorten_arc<'s>(
    c: LocalCache<std::sync::Arc<Pool<&'static str>>>,
) -> LocalCache<std::sync::Arc<Pool<&'s str>>> {
    c
}

fn main() {}
