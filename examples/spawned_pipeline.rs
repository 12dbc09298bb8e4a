//! A two-stage packet pipeline on spawned threads: an RX thread fills buffers from
//! a pool and hands them through a handle ring to a worker thread, which checks and frees them.
//!
//! Everything is `std::thread::spawn`: no `static`, no `thread::scope`, no `unsafe`, no brand.
//! The pool is a run-time pool ([`idxpool::Pool`]`<T>`) in an `Arc`; each thread gets its own
//! explicit cache and one half of the ring, all `'static` because each holds a clone of the
//! `Arc`. Handles are the 4-byte entries the caches and the ring move; the ring checks each
//! handle's range (one compare) on the way in.
//!
//! `cargo run --release --example spawned_pipeline [packets]`

use std::time::Instant;

use idxpool::handle_ring::Zeroing;
use std::sync::Arc;

use idxpool::{HandleRing, LocalCache, PoolBuilder, PoolError};

const HELP: &str = "\
spawned_pipeline: RX thread -> handle ring -> worker thread, all std::thread::spawn, with a
run-time pool (idxpool::Pool in an Arc), one explicit cache per thread and no static or scope.
Moves [packets] packets (default 1000000; about a second) and prints the rate.

usage: spawned_pipeline [packets] [--help]
";

/// A packet buffer: a length, a sequence number and payload bytes.
struct Packet {
    seq: u64,
    len: u16,
    data: [u8; 1500],
}

const BURST: usize = 32;

fn main() -> Result<(), PoolError> {
    let arg = std::env::args().nth(1);
    if let Some("-h" | "--help") = arg.as_deref() {
        print!("{HELP}");
        return Ok(());
    }
    let packets: u64 = arg.and_then(|a| a.parse().ok()).unwrap_or(1_000_000);

    let pool = Arc::new(
        PoolBuilder::with_fn(4096, |_| Packet {
            seq: 0,
            len: 0,
            data: [0; 1500],
        })
        .cache_size(256)
        .name("pipeline")
        .build()?,
    );
    let (mut tx, mut rx) = HandleRing::new(pool.clone(), 1024, Zeroing::Batched)?;
    let mut rx_cache = LocalCache::new(pool.clone());
    let mut worker_cache = LocalCache::new(pool.clone());
    let start = Instant::now();

    // RX: take a burst of buffers, "receive" into them, hand them to the worker.
    let rx_thread = std::thread::spawn(move || {
        let mut burst = Vec::with_capacity(BURST);
        let mut seq = 0u64;
        let mut ring_full = 0u64;
        while seq < packets {
            let want = BURST.min((packets - seq) as usize);
            if rx_cache.get_burst(&mut burst, want) == 0 {
                std::thread::yield_now(); // every buffer is in flight: wait for the worker
                continue;
            }
            let objs = tx.ring().pool().resolver();
            for h in burst.iter_mut() {
                let p = objs.get_mut(h);
                p.seq = seq;
                p.len = 64 + (seq % 1400) as u16;
                p.data[0] = seq as u8;
                seq += 1;
            }
            while !burst.is_empty() {
                if tx.produce_burst(&mut burst) == 0 {
                    ring_full += 1;
                    std::thread::yield_now();
                }
            }
        }
        ring_full
    });

    // Worker: consume, check, free through its own cache.
    let worker_thread = std::thread::spawn(move || {
        let mut got = Vec::with_capacity(BURST);
        let (mut next, mut bytes) = (0u64, 0u64);
        while next < packets {
            if rx.consume_burst(&mut got, BURST) == 0 {
                std::thread::yield_now();
                continue;
            }
            for h in got.iter() {
                let p = worker_cache.pool().get_ref(h);
                assert_eq!(p.seq, next, "the ring is FIFO");
                assert_eq!(p.data[0], next as u8);
                bytes += u64::from(p.len);
                next += 1;
            }
            worker_cache.put_bulk(&mut got);
        }
        bytes
    });

    let ring_full = rx_thread.join().expect("rx thread");
    let bytes = worker_thread.join().expect("worker thread");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{packets} packets ({bytes} bytes) through RX -> ring -> worker in {:.3} s: {:.1} Mpkt/s; \
         RX found the ring full {ring_full} times",
        secs,
        packets as f64 / secs / 1e6
    );
    // Both caches and both ring halves were dropped with their threads: everything is home.
    println!(
        "pool {}: {} of {} buffers free",
        pool.name(),
        pool.available(),
        pool.capacity()
    );
    assert_eq!(pool.in_use(), 0);
    Ok(())
}
