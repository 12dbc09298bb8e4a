//! The default cache size against waiting gets: a cache is thread-local and only its owner
//! flushes it, so the objects idle in other threads' caches are out of a waiter's reach. The
//! default keeps each cache's flush threshold at most `capacity / 8`, so that up to seven
//! threads that put, each holding a cache at its threshold, leave objects in the common ring
//! for a `get_wait` on another thread. An explicit size keeps DPDK's rule (the threshold
//! within the capacity) and is the caller's choice.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use idxpool::{FlushPolicy, PoolBuilder};

/// The rule itself, for every policy and the capacities around its steps.
#[test]
fn the_default_flush_threshold_is_at_most_an_eighth_of_the_capacity() {
    for policy in FlushPolicy::ALL {
        for cap in [
            1u32,
            7,
            8,
            9,
            15,
            16,
            17,
            24,
            63,
            64,
            65,
            100,
            1000,
            4095,
            4096,
            8192,
            1 << 16,
        ] {
            let p = PoolBuilder::<u64>::with_default(cap)
                .policy(policy)
                .build()
                .unwrap_or_else(|e| panic!("{policy} {cap}: {e}"));
            let c = p.cache_size();
            assert!(c <= 512, "{policy} {cap}: {c}");
            assert!(
                u64::from(policy.fill_limit(c)) * 8 <= u64::from(cap),
                "{policy} {cap}: cache {c}, threshold {}",
                policy.fill_limit(c)
            );
            // The largest such size: one more would break the rule (or exceed 512).
            assert!(
                c == 512 || u64::from(policy.fill_limit(c + 1)) * 8 > u64::from(cap),
                "{policy} {cap}: {c} is not the largest"
            );
        }
    }
    // Large pools keep DPDK's maximum.
    let p = PoolBuilder::<u64>::with_default(8 * 512).build().unwrap();
    assert_eq!(p.cache_size(), 512);
}

/// An explicit size is checked by DPDK's rule only: a cache of the whole pool is accepted
/// (a single-threaded user may want it), one beyond it is a typed error.
#[test]
fn an_explicit_size_keeps_dpdks_rule() {
    let p = PoolBuilder::<u64>::with_default(64)
        .cache_size(64)
        .build()
        .unwrap();
    assert_eq!(p.cache_size(), 64);
    let e = PoolBuilder::<u64>::with_default(64)
        .cache_size(65)
        .build()
        .err()
        .unwrap();
    assert!(
        matches!(e, idxpool::PoolError::InvalidConfig { .. }),
        "{e:?}"
    );
}

/// Seven threads put objects into their own caches until each holds its flush threshold's
/// worth (and stay alive, so nothing is flushed at thread exit); a waiting get on the main
/// thread is still served from the common ring, for every policy.
#[test]
#[cfg_attr(miri, ignore = "threads waiting")]
fn seven_caches_at_their_threshold_leave_objects_for_a_waiter() {
    for policy in FlushPolicy::ALL {
        let cap = 64u32;
        let p = Arc::new(
            PoolBuilder::<u64>::with_default(cap)
                .policy(policy)
                .build()
                .unwrap(),
        );
        let per = policy.fill_limit(p.cache_size()) as usize;
        // Uncached get of everything, from the ring (no cache on the main thread holds any).
        let mut all = Vec::new();
        p.get_bulk(&mut all, cap as usize).unwrap();
        let hold = Arc::new(Barrier::new(8));
        let done = Arc::new(Barrier::new(8));
        let putters: Vec<_> = (0..7)
            .map(|_| {
                let mine: Vec<_> = all.drain(..per).collect();
                let (p, hold, done) = (p.clone(), hold.clone(), done.clone());
                thread::spawn(move || {
                    for h in mine {
                        p.put(h); // into this thread's cache, under its threshold
                    }
                    hold.wait();
                    done.wait();
                })
            })
            .collect();
        hold.wait();
        // The main thread gives the rest back, then waits for one more than it gave.
        p.put_bulk(&mut all);
        let mut got = Vec::new();
        let n = cap as usize - 7 * per;
        assert!(n > 0, "{policy}: the caches can hold the pool");
        p.flush();
        p.get_bulk_wait(&mut got, n, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{policy}: {e}"));
        p.put_bulk(&mut got);
        done.wait();
        for t in putters {
            t.join().unwrap();
        }
    }
}
