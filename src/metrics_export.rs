//! The pool's counts and counters through the [`metrics`](https://docs.rs/metrics) facade
//! (feature `metrics`), pulled by [`Pool::export_metrics`]: nothing on the get and put paths.

use crate::brand::Brand;
use crate::element::Element;
use crate::pool::Pool;
use crate::repr::Repr;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Publishes the pool's counts and counters to the process's
    /// [`metrics`](https://docs.rs/metrics) recorder (crate feature **`metrics`**, which
    /// enables `stats`), each labelled `pool = <the pool's name>`:
    ///
    /// | metric | kind | value |
    /// |---|---|---|
    /// | `idxpool_objects_available` | gauge | [`Pool::available`] |
    /// | `idxpool_objects_in_use` | gauge | [`Pool::in_use`] |
    /// | `idxpool_objects_in_caches` | gauge | objects in every live cache (thread caches and `LocalCache`s) |
    /// | `idxpool_objects_lent` | gauge | [`Pool::lent_to_kernel`] |
    /// | `idxpool_gets_total` | counter | objects handed out by successful gets |
    /// | `idxpool_puts_total` | counter | objects given back |
    /// | `idxpool_get_failures_total` | counter | failed get calls |
    /// | `idxpool_refills_total` | counter | dequeues from the common ring (refills, bypasses) |
    /// | `idxpool_flushes_total` | counter | enqueues into the common ring (flushes, bypasses) |
    /// | `idxpool_waits_total` | counter | gets that had to wait ([`Pool::get_wait`], [`Pool::get_bulk_wait`], [`Pool::get_async`]) |
    /// | `idxpool_wait_timeouts_total` | counter | waits that ended in [`crate::PoolError::Timeout`] |
    ///
    /// The counters count since the pool was built ([`Pool::stats`] before any
    /// [`Pool::stats_reset`], which does not rewind them) and are published as absolute values
    /// (`Counter::absolute`), so the call keeps no state and may come from any thread.
    ///
    /// A pull model: nothing is published from the get and put paths. Call it periodically
    /// (e.g. before rendering each scrape); it costs what [`Pool::stats`] and
    /// [`Pool::cache_counts`] cost (a lock per live cache) plus eleven registrations with the
    /// recorder. Give pools distinct names ([`crate::PoolBuilder::name`]; the default
    /// `idxpool-<n>` is unique): two pools of one name would publish into one series.
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(64).name("requests").build()?;
    /// let h = pool.get()?;
    /// pool.put(h);
    /// // With no recorder installed this publishes nowhere; a service installs one first, e.g.
    /// // metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder().
    /// pool.export_metrics();
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn export_metrics(&self) {
        let name = self.name().to_string();
        let in_caches: usize = self.cache_counts().iter().map(|&(_, n)| n).sum();
        let gauges = [
            (
                "idxpool_objects_available",
                self.available(),
                "free objects (ring and thread caches)",
            ),
            (
                "idxpool_objects_in_use",
                self.in_use(),
                "objects held by handles and LocalCaches",
            ),
            (
                "idxpool_objects_in_caches",
                in_caches,
                "objects held by the pool's live caches",
            ),
            (
                "idxpool_objects_lent",
                self.lent_to_kernel(),
                "objects lent to the kernel (io_uring)",
            ),
        ];
        for (key, v, what) in gauges {
            metrics::describe_gauge!(key, metrics::Unit::Count, what);
            metrics::gauge!(key, "pool" => name.clone()).set(v as f64);
        }
        let s = self.stats_total();
        let (waits, timeouts) = self.wait_queue().counts();
        let counters = [
            (
                "idxpool_gets_total",
                s.get_success_objs,
                "objects handed out by successful gets",
            ),
            ("idxpool_puts_total", s.put_objs, "objects given back"),
            (
                "idxpool_get_failures_total",
                s.get_fail_bulk,
                "failed get calls",
            ),
            (
                "idxpool_refills_total",
                s.get_common_pool_bulk,
                "dequeues from the common ring",
            ),
            (
                "idxpool_flushes_total",
                s.put_common_pool_bulk,
                "enqueues into the common ring",
            ),
            ("idxpool_waits_total", waits, "gets that had to wait"),
            (
                "idxpool_wait_timeouts_total",
                timeouts,
                "waits that timed out",
            ),
        ];
        for (key, v, what) in counters {
            metrics::describe_counter!(key, metrics::Unit::Count, what);
            metrics::counter!(key, "pool" => name.clone()).absolute(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    use crate::PoolBuilder;

    /// The value of one metric, as the recorder last saw it.
    #[derive(Default)]
    struct Cell(AtomicU64);

    impl CounterFn for Cell {
        fn increment(&self, v: u64) {
            self.0.fetch_add(v, Relaxed);
        }
        fn absolute(&self, v: u64) {
            self.0.fetch_max(v, Relaxed);
        }
    }

    impl GaugeFn for Cell {
        fn increment(&self, _: f64) {
            unreachable!("the export sets gauges")
        }
        fn decrement(&self, _: f64) {
            unreachable!("the export sets gauges")
        }
        fn set(&self, v: f64) {
            self.0.store(v as u64, Relaxed);
        }
    }

    /// A recorder keeping every series by (kind, name, labels): a hand-written one, so that
    /// the test needs no dependency beyond the facade.
    #[derive(Default)]
    struct Rec {
        series: Mutex<BTreeMap<(char, String, String), Arc<Cell>>>,
        described: Mutex<Vec<String>>,
    }

    impl Rec {
        fn cell(&self, kind: char, key: &Key) -> Arc<Cell> {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let id = (kind, key.name().to_string(), labels.join(","));
            self.series.lock().unwrap().entry(id).or_default().clone()
        }
        fn get(&self, kind: char, name: &str, pool: &str) -> Option<u64> {
            let id = (kind, name.to_string(), format!("pool={pool}"));
            self.series
                .lock()
                .unwrap()
                .get(&id)
                .map(|c| c.0.load(Relaxed))
        }
    }

    impl Recorder for Rec {
        fn describe_counter(&self, k: KeyName, _: Option<Unit>, _: SharedString) {
            self.described.lock().unwrap().push(k.as_str().to_string());
        }
        fn describe_gauge(&self, k: KeyName, _: Option<Unit>, _: SharedString) {
            self.described.lock().unwrap().push(k.as_str().to_string());
        }
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {
            unreachable!("no histograms")
        }
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.cell('c', key))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.cell('g', key))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            unreachable!("no histograms")
        }
    }

    #[test]
    fn names_kinds_labels_and_values() {
        let rec = Rec::default();
        let pool = PoolBuilder::<u64>::with_default(64)
            .cache_size(8)
            .name("orders")
            .build()
            .unwrap();
        let mut hs = Vec::new();
        pool.get_bulk(&mut hs, 20).unwrap(); // refills from the ring
        assert!(pool.get_bulk(&mut hs, 100).is_err()); // one failure
        let mut lc = pool.local_cache();
        let h = lc.get().unwrap();
        lc.put(h); // one object in a LocalCache
        pool.put_bulk(&mut hs); // 20 back; the thread cache flushes
        pool.stats_reset(); // does not rewind the exported counters
        metrics::with_local_recorder(&rec, || pool.export_metrics());

        let s = pool.stats_total();
        let want = [
            ('g', "idxpool_objects_available", pool.available() as u64),
            ('g', "idxpool_objects_in_use", pool.in_use() as u64),
            (
                'g',
                "idxpool_objects_in_caches",
                (lc.len() + pool.available() - pool.ring_count()) as u64,
            ),
            ('g', "idxpool_objects_lent", 0),
            ('c', "idxpool_gets_total", 21),
            ('c', "idxpool_puts_total", 21),
            ('c', "idxpool_get_failures_total", 1),
            ('c', "idxpool_refills_total", s.get_common_pool_bulk),
            ('c', "idxpool_flushes_total", s.put_common_pool_bulk),
            ('c', "idxpool_waits_total", 0),
            ('c', "idxpool_wait_timeouts_total", 0),
        ];
        for (kind, name, v) in want {
            assert_eq!(rec.get(kind, name, "orders"), Some(v), "{kind} {name}");
        }
        assert!(s.get_common_pool_bulk > 0 && s.put_common_pool_bulk > 0);
        assert_eq!(
            pool.in_use(),
            lc.len(),
            "the LocalCache's objects count as in use"
        );
        assert!(!lc.is_empty());
        // Exactly these eleven series, each described.
        assert_eq!(rec.series.lock().unwrap().len(), 11);
        let mut d = rec.described.lock().unwrap().clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 11);
        // A get that had to wait, and timed out.
        let w = PoolBuilder::<u64>::with_default(1)
            .cache_size(0)
            .name("waiting")
            .build()
            .unwrap();
        let held = w.get().unwrap();
        assert!(matches!(
            w.get_wait(std::time::Duration::from_millis(1)),
            Err(crate::PoolError::Timeout { requested: 1, .. })
        ));
        metrics::with_local_recorder(&rec, || w.export_metrics());
        assert_eq!(rec.get('c', "idxpool_waits_total", "waiting"), Some(1));
        assert_eq!(
            rec.get('c', "idxpool_wait_timeouts_total", "waiting"),
            Some(1)
        );
        w.put(held);
        drop(lc);

        // A second export publishes the new totals; a second pool gets its own series.
        let other = PoolBuilder::<u64>::with_default(8)
            .name("other")
            .build()
            .unwrap();
        pool.put(pool.get().unwrap());
        metrics::with_local_recorder(&rec, || {
            pool.export_metrics();
            other.export_metrics();
        });
        assert_eq!(rec.get('c', "idxpool_gets_total", "orders"), Some(22));
        assert_eq!(rec.get('g', "idxpool_objects_in_use", "orders"), Some(0));
        assert_eq!(rec.get('g', "idxpool_objects_available", "other"), Some(8));
        assert_eq!(rec.series.lock().unwrap().len(), 33); // orders, waiting, other
    }
}
