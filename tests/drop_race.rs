//! A pool dropped right after `std::thread::scope` (found by attack): the scope
//! returns before the threads' TLS destructors have flushed their caches into the ring, and the
//! drop counted the ring and the caches in two snapshots, so a flush in between was counted
//! nowhere: a false leak report, a retired brand or a quarantined handle-space block. The drop
//! now counts both under every slot lock. Its own binary: it installs a leak hook.

use std::sync::atomic::{AtomicUsize, Ordering};

use idxpool::PoolBuilder;

static REPORTS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_pool_dropped_after_scoped_threads_reports_no_false_leak() {
    idxpool::leaks::set_leak_hook(|r| {
        if r.pool.starts_with("scoped-race") {
            REPORTS.fetch_add(1, Ordering::SeqCst);
        }
    });
    let rounds = if cfg!(miri) { 3 } else { 300 };
    let idxpool::SpaceUsage {
        free: free0,
        quarantined: quarantined0,
    } = idxpool::Runtime::space_usage();
    for i in 0..rounds {
        let pool = PoolBuilder::<u64>::with_default(1024)
            .cache_size(64)
            .name(format!("scoped-race-{i}"))
            .build()
            .unwrap();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut v = Vec::new();
                    pool.get_bulk(&mut v, 200).unwrap();
                    pool.put_bulk(&mut v);
                });
            }
        });
        drop(pool);
    }
    idxpool::leaks::clear_leak_hook();
    assert_eq!(REPORTS.load(Ordering::SeqCst), 0, "false leak reports");
    let idxpool::SpaceUsage { free, quarantined } = idxpool::Runtime::space_usage();
    assert_eq!(quarantined, quarantined0, "no block quarantined");
    assert_eq!(free, free0, "every block came back");
}
