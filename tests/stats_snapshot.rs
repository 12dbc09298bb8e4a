//! `stats()` while caches go away: a thread that exits folds its cache's counters into the
//! pool's totals, and so does a dropped `LocalCache`. A snapshot taken meanwhile must count
//! each operation once: never twice (the live cache and the totals it went into), never not at
//! all (neither). The counters only grow, so a snapshot that is later seen smaller was wrong.
//! (Feature `stats`: without it every counter is 0 and these tests have nothing to check.)

use idxpool::{LocalCache, Pool, PoolBuilder, Stats};
use std::sync::atomic::{AtomicBool, Ordering};

const ROUNDS: u64 = 400;
const PER_ROUND: u64 = 5;

/// Reads `stats().put_bulk` until `stop`, failing if it ever goes back; returns the reads.
fn read_until(stop: &AtomicBool, put_bulk: impl Fn() -> u64) -> u64 {
    let mut last = 0;
    let mut reads = 0;
    while !stop.load(Ordering::Acquire) {
        let now = put_bulk();
        assert!(
            now >= last,
            "a snapshot counted {last} puts and a later one {now}: one of them was wrong"
        );
        last = now;
        reads += 1;
    }
    reads
}

/// Runs `round` ROUNDS times (each round makes PER_ROUND gets and puts through a cache that
/// goes away by its end) while another thread reads `stats()` without pause; then checks that
/// the final snapshot counted every put once.
fn race(round: impl Fn(&Pool<u64>)) {
    if !Stats::COUNTING {
        return;
    }
    let pool = PoolBuilder::<u64>::with_default(1024)
        .cache_size(32)
        .build()
        .unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| read_until(&stop, || pool.stats().put_bulk));
        for _ in 0..ROUNDS {
            round(&pool);
        }
        stop.store(true, Ordering::Release);
        reader.join().unwrap();
    });
    assert_eq!(pool.stats().put_bulk, ROUNDS * PER_ROUND);
}

#[test]
fn a_snapshot_counts_an_exiting_threads_cache_once() {
    race(|pool| {
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                for _ in 0..PER_ROUND {
                    let h = pool.get().unwrap();
                    pool.put(h);
                }
            });
            // The native join waits for the thread's exit flush (its TLS destructor); the
            // scope's own wait may end before it.
            worker.join().unwrap();
        });
    });
}

#[test]
fn a_snapshot_counts_a_dropped_local_caches_operations_once() {
    race(|pool| {
        let mut cache = LocalCache::new(pool);
        for _ in 0..PER_ROUND {
            let h = cache.get().unwrap();
            cache.put(h);
        }
        drop(cache);
    });
}
