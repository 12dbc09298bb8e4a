// The pool (index and pointer twins) is invariant in `T`: the coercion of the attack in
// variance_pool.rs, as a function signature.
use idxpool::{Pointer, Pool};

fn shorten<'s, B>(p: &'s Pool<&'static str, B>) -> &'s Pool<&'s str, B> {
    p
}

fn shorten_ptr<'s, B>(p: &'s Pool<&'static str, B, Pointer>) -> &'s Pool<&'s str, B, Pointer> {
    p
}

fn main() {}
