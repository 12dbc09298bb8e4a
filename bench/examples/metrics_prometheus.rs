//! A pool's metrics as a Prometheus text page: the `metrics` facade's
//! Prometheus exporter (`metrics-exporter-prometheus`, no HTTP listener: the page is rendered
//! and printed) fed by `Pool::export_metrics`, the pull model a service would call before each
//! scrape.
//!
//! Usage: `cargo run --release -p idxpool-bench --features metrics --example metrics_prometheus`
//! (`--quick`: the same, less traffic; the CI's smoke test).

use std::sync::Arc;

use idxpool::{LocalCache, PoolBuilder};
use metrics_exporter_prometheus::PrometheusBuilder;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!("metrics_prometheus [--quick]: prints the Prometheus page of two pools");
        return;
    }
    // A service installs the recorder once at start-up (here without the HTTP listener: the
    // page is rendered by hand; `PrometheusBuilder::with_http_listener` would serve it).
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("no other recorder installed");

    let packets = Arc::new(
        PoolBuilder::<[u8; 2048]>::zeroed(4096)
            .cache_size(256)
            .name("rx-buffers")
            .build()
            .expect("pool"),
    );
    let sessions = PoolBuilder::<[u64; 8]>::zeroed(64)
        .cache_size(8)
        .name("sessions")
        .build()
        .expect("pool");

    // Some traffic: two workers moving bursts, one holding a few objects at the end.
    let rounds = if quick { 1_000 } else { 100_000 };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let p = packets.clone();
            std::thread::spawn(move || {
                let mut c = LocalCache::new(p.clone());
                let mut burst = Vec::with_capacity(32);
                for _ in 0..rounds {
                    c.get_bulk(&mut burst, 32).expect("sized for two workers");
                    c.put_bulk(&mut burst);
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let held: Vec<_> = (0..10).map(|_| packets.get().unwrap()).collect();
    let mut hs = Vec::new();
    let _ = sessions.get_bulk(&mut hs, 100); // larger than the pool: a counted failure
    sessions.get_bulk(&mut hs, 40).unwrap();

    // The pull: once per scrape (or on a timer), then the exporter renders the page.
    packets.export_metrics();
    sessions.export_metrics();
    print!("{}", handle.render());

    held.into_iter().for_each(|h| packets.put(h));
    sessions.put_bulk(&mut hs);
}
