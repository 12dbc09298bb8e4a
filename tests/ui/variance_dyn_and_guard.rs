// The run-time pool (`DynPool`), its handles and the `Pooled` guard hold or hand out `T` too:
// invariant in `T`, inherited from the core pool and handle.
use idxpool::{DynHandle, DynPool, Pooled, Brand};

fn pool<'s>(p: DynPool<&'static str>) -> DynPool<&'s str> {
    p
}

fn handle<'s>(h: DynHandle<&'static str>) -> DynHandle<&'s str> {
    h
}

fn guard<'p, 's, B: Brand>(g: Pooled<'p, &'static str, B>) -> Pooled<'p, &'s str, B> {
    g
}

fn main() {}
