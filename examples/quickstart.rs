// The README's usage example, runnable: `cargo run --release --example quickstart`.
// (tests/readme.rs checks that README.md shows exactly this file, and runs it.)

use idxpool::{Handle, PoolBuilder, PoolError};

idxpool::brand!(Packets); // one live pool per brand: handles of two pools cannot mix

struct Packet {
    len: u16,
    data: [u8; 2046],
}

fn main() -> Result<(), PoolError> {
    // 4096 objects, each made once at creation; a per-thread cache of 256.
    let pool = PoolBuilder::<Packet>::with_fn(4096, |_i| Packet {
        len: 0,
        data: [0; 2046],
    })
    .cache_size(256)
    .build::<Packets>()?;
    println!("backing: {}", pool.backing()); // hugetlb 2 MiB, THP or 4 KiB, and why

    let mut cache = pool.local_cache(); // user-owned cache: no TLS lookup
    let mut burst: Vec<Handle<Packet, Packets>> = Vec::with_capacity(32);
    cache.get_bulk(&mut burst, 32)?; // all or nothing
    for h in burst.iter_mut() {
        let p = cache.get_mut(h); // handle -> &mut Packet: [base + entry * 8]
        p.len = 64;
        p.data[0] = 0xff;
    }
    println!("{} packets in use", pool.in_use());
    cache.put_bulk(&mut burst); // always succeeds

    // The implicit per-thread cache: pool.get() / pool.put(h).
    let mut h = pool.get()?;
    pool.get_mut(&mut h).len = 1500;
    pool.put(h);
    Ok(())
}
