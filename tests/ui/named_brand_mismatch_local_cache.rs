// The same through explicit caches: a LocalCache of brand B rejects a handle of brand A.
idxpool::brand!(A);
idxpool::brand!(B);

fn main() {
    let pa = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<A>().unwrap();
    let pb = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let mut ca = pa.local_cache();
    let mut cb = pb.local_cache();
    let h = ca.get().unwrap();
    cb.put(h);
}
