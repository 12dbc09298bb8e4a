// A handle of a pool of brand A is rejected by a pool of brand B, even for the same T.
idxpool::brand!(A);
idxpool::brand!(B);

fn main() {
    let pa = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<A>().unwrap();
    let pb = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<B>().unwrap();
    let h = pa.get().unwrap();
    let _alias: &u64 = pb.get_ref(&h);
    pb.put(h);
}
