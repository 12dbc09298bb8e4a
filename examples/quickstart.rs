// The README's usage example, runnable: `cargo run --release --example quickstart`.
// (tests/readme.rs checks that README.md shows exactly this file, and runs it.)

use std::sync::Arc;

use idxpool::{Handle, LocalCache, Pool, PoolBuilder, PoolError};

struct Packet {
    len: u16,
    data: [u8; 2046],
}

fn main() -> Result<(), PoolError> {
    // 4096 objects, each made once at creation; per-thread caches of 256. A run-time pool:
    // no brand to declare, as many as you like, stored anywhere; 4-byte handles.
    let pool: Arc<Pool<Packet>> = Arc::new(
        PoolBuilder::with_fn(4096, |_i| Packet {
            len: 0,
            data: [0; 2046],
        })
        .cache_size(256)
        .build()?,
    );
    println!("backing: {}", pool.backing()); // hugetlb 2 MiB, THP or 4 KiB, and why

    // A worker thread with its own cache (no TLS lookup); the cache holds a clone of the Arc.
    let mut cache = LocalCache::new(pool.clone());
    let shared = pool.clone();
    let worker = std::thread::spawn(move || -> Result<usize, PoolError> {
        let objs = shared.resolver(); // handle -> &mut Packet: [base + entry * 8]
        let mut burst: Vec<Handle<Packet>> = Vec::with_capacity(32);
        cache.get_bulk(&mut burst, 32)?; // all or nothing
        for h in burst.iter_mut() {
            let p = objs.get_mut(h);
            p.len = 64;
            p.data[0] = 0xff;
        }
        let n = burst.len();
        cache.put_bulk(&mut burst); // always succeeds
        Ok(n)
    });
    println!("{} packets filled", worker.join().unwrap()?);

    // The implicit per-thread cache: pool.get() / pool.put(h).
    let mut h = pool.get()?;
    pool.get_mut(&mut h).len = 1500;
    pool.put(h);
    println!("{} packets in use", pool.in_use());
    Ok(())
}
