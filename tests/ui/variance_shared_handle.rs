// A shared pool's handle names an object of one `T`: invariant in `T`, like the core handle.
use idxpool::shared::SharedHandle;

fn shorten<'s>(h: SharedHandle<&'static str>) -> SharedHandle<&'s str> {
    h
}

fn main() {}
