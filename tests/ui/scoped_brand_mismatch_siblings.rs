// Two scoped pools built side by side in one function are told apart too: their brands come
// from two different `scoped` calls.
use idxpool::{Pool, Index, PoolBuilder, Scoped};

fn mix<'a, 'b>(a: &Pool<u64, Scoped<'a>, Index>, b: &Pool<u64, Scoped<'b>, Index>) {
    let h = a.get().unwrap();
    b.put(h);
}

fn main() {
    let _ = mix;
    let _ = PoolBuilder::<u64>::with_default(4);
}
