// The common ring takes entries in through `&self` and gives them back: invariant in `E`.
use idxpool::ring::Ring;

fn shorten<'r, 's>(r: &'r Ring<&'static str>) -> &'r Ring<&'s str> {
    r
}

fn main() {}
