// A handle names an object of one `T`: invariant in `T` (and in its brand).
use idxpool::Handle;

fn shorten<'s, B>(h: Handle<&'static str, B>) -> Handle<&'s str, B> {
    h
}

fn main() {}
