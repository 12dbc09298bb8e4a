// The attack that covariance in `T` allowed. `&Pool<&'static str, B>` must
// not coerce to `&Pool<&'s str, B>`: through the shorter type a short-lived `&str` would be
// written into an object and read back through the original type as a `&'static str` after
// the string was freed (Miri: dangling reference). The pool is invariant in `T`.
use idxpool::Pool;

idxpool::brand!(Strs);

fn main() {
    let pool = idxpool::PoolBuilder::<&'static str>::with_default(1)
        .build_named::<Strs>()
        .unwrap();
    {
        let s = String::from("short-lived");
        let short: &Pool<&str, Strs> = &pool;
        let mut h = short.get().unwrap();
        *short.get_mut(&mut h) = s.as_str();
        short.put(h);
    }
    let h = pool.get().unwrap();
    println!("{}", pool.get_ref(&h));
    pool.put(h);
}
