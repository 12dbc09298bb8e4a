// A `Resolver` hands out `&mut T` like its pool: invariant in `T`.
use idxpool::{Index, Resolver};

fn shorten<'p, 's, B>(r: Resolver<'p, &'static str, B, Index>) -> Resolver<'p, &'s str, B, Index> {
    r
}

fn main() {}
