// The run-time pool (`DynPool`), its handles and the `Pooled` guard hold or hand out `T` too:
// invariant in `T`, inherited from the core pool and handle.
use idxpool::{Brand, Handle, Pool, Pooled};
use std::sync::Arc;

fn pool<'s>(p: Arc<Pool<&'static str>>) -> Arc<Pool<&'s str>> {
    p
}

fn handle<'s>(h: Handle<&'static str>) -> Handle<&'s str> {
    h
}

fn guard<'p, 's, B: Brand>(g: Pooled<&'p Pool<&'static str, B>>) -> Pooled<&'p Pool<&'s str, B>> {
    g
}

fn main() {}
