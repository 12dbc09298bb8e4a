//! idxpool side by side with the crates Rust users would pick instead.
//!
//! Every contender lives in this one binary and process; for each (workload, object size) the
//! contenders run round-robin, several repetitions, and the table shows the median, so that the
//! ratios hold on a small, noisy machine. Each sample builds its contender afresh, pre-warms it
//! (the working set is allocated once and freed before the clock starts, plus a warm-up tenth of
//! the run), and times only steady-state work: never growth or first-touch page faults.
//!
//! ```text
//! cargo run --release -p idxpool-bench --example peers -- --quick                 # about 1 min
//! cargo run --release -p idxpool-bench --example peers -- --csv target/peers.csv  # about 5 min; also writes peers.svg
//! cargo run --release -p idxpool-bench --example peers -- --filter forward,jemalloc --reps 9
//! ```
//!
//! Contenders (names as printed):
//! * `idxpool-explicit`: a [`idxpool::LocalCache`] per thread; bursts through `get_bulk` /
//!   `put_bulk` (burst, forward), single `get`/`put` in steady. The reference of every ratio.
//! * `idxpool-explicit-1`: the same cache, one object per call everywhere.
//! * `idxpool-implicit`: `pool.get()` / `pool.put()` (per-thread cache found through TLS), one
//!   object per call.
//! * `idxpool-ptr`: the pointer twin ([`idxpool::ptr`], 8-byte entries), explicit cache, bulk
//!   as `idxpool-explicit`.
//! * `sharded-slab`: `sharded_slab::Pool` (`create_with` writes in place, `clear` frees).
//! * `lockfree-object-pool`: `LinearObjectPool` (RAII guard, no-op reset).
//! * `heapless-pool`: heapless 0.9 `box_pool!` (by-value `alloc(value)`: writes the whole object).
//! * `crossbeam-arrayqueue`: `ArrayQueue<u32>` as the free list of a `Vec<T>`.
//! * `slotmap`, `slab`: single thread only (burst, steady); by-value `insert`.
//! * `box-system`, `box-mimalloc`, `box-jemalloc`: `GlobalAlloc::alloc/dealloc` with
//!   `Layout::new::<T>()` called directly on `std::alloc::System`, `mimalloc::MiMalloc` and
//!   `tikv_jemallocator::Jemalloc`, so that all three coexist in one binary.
//! * `floor-no-alloc`: no allocator at all (objects taken round-robin from an array, frees do
//!   nothing): the cost of the workload itself, shown to tell allocator cost from transport
//!   cost (burst, forward; never counted as a peer).
//!
//! Workloads: `burst` (allocate 32, write each, free 32; one thread), `steady` (4096 live
//! objects, replace a random one per step: free, allocate, write), `forward` (allocate on thread
//! A, hand the handle to thread B through a bounded `crossbeam_queue::ArrayQueue`, B reads and
//! frees: the RX/TX pattern; threads pinned only with `--pin`), `forward-burst` (the same, the
//! queue carrying bursts of 32 handles as DPDK's RX/TX rings do), `scan` (touch every object of a
//! 1 GiB idxpool pool in a random order, hugetlb 2 MiB vs THP vs 4 KiB pages: the TLB effect;
//! 256 MiB with `--quick`).
//!
//! The harness is unit-tested (`cargo test -p idxpool-bench --example peers`): every contender's adapter runs
//! every workload through a checker that asserts distinct live objects, intact values and
//! frees == allocs.

mod contenders;
mod memory;
mod report;
mod scan;
mod workloads;

#[allow(unused_imports)]
use contenders::*;
#[allow(unused_imports)]
use memory::*;
#[allow(unused_imports)]
use report::*;
#[allow(unused_imports)]
use scan::*;
#[allow(unused_imports)]
use workloads::*;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::hint::black_box;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, Once};
use std::time::Instant;

use clap::Parser;
use crossbeam_queue::ArrayQueue;
use heapless::pool::boxed::{BoxBlock, BoxPool};
use idxpool::repr::Repr;
use idxpool::{
    Backing, BackingPolicy, Brand, Handle, LocalCache, NamedBrand, Pool, PoolBuilder, PoolError,
};
use idxpool_bench::pin::{context_line, PinMode, Pinning};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

// ---- main -----------------------------------------------------------------------------------

/// idxpool versus the crates users pick instead: interleaved, median of reps.
///
/// Measures CPU nanoseconds per object of idxpool (explicit and implicit cache, pointer twin)
/// and sharded-slab, lockfree-object-pool, heapless, crossbeam ArrayQueue, slotmap, slab and
/// Box from System / mimalloc / jemalloc, in four workloads (burst, steady, forward,
/// forward-burst) at 8 B, 64 B and 2 KiB objects; then scan (hugetlb vs THP vs 4 KiB pages)
/// and the memory cost per object.
/// Takes about 1 minute with --quick, about 5 minutes by default (forward samples stop after
/// 150 ms / 500 ms of wall time, so a loaded machine cannot stretch them).
/// Threads are not pinned unless --pin.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// About 1 minute: small sizes, 3 repetitions, scan pools of 256 MiB.
    #[arg(long)]
    quick: bool,
    /// Write `workload,contender,object_size,threads,ns_per_object` here, and a bar chart
    /// next to it with the .svg extension.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Only contenders or workloads whose name contains one of these comma-separated
    /// substrings; `W:C` selects contenders matching C in workloads matching W
    /// (idxpool-explicit always runs as the reference; `memory` selects the memory report).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Repetitions per (workload, size, contender); default 3 with --quick, else 7.
    #[arg(long)]
    reps: Option<usize>,
    /// Pin the forward workloads' producer and consumer to the first two allowed CPUs: off
    /// (default), on, or auto (only when those CPUs are idle now).
    #[arg(long, value_enum, default_value_t = PinMode::Off)]
    pin: PinMode,
}

fn main() {
    let args = Args::parse();
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 7 }).max(1);
    let terms = &args.filter;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!(
        "# peers: idxpool vs the crates users pick instead ({} mode, {reps} reps, median; CPU: {cpu}, {} CPUs)",
        if args.quick { "quick" } else { "default" },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let pinning = Pinning::decide(args.pin, 2);
    println!("# {}", context_line(&pinning));
    println!(
        "# expected duration: about {}",
        if args.quick { "1 min" } else { "5 min" }
    );
    let started = Instant::now();
    let mut params = Params::new(args.quick);
    params.pin = match (pinning.cpu_for(0), pinning.cpu_for(1)) {
        (Some(a), Some(b)) => Some([a, b]),
        _ => None,
    };
    let all = contenders();
    let mut rows: Vec<Row> = Vec::new();
    for wl in Workload::ALL {
        let cs: Vec<&Contender> = all
            .iter()
            .filter(|c| c.supports(wl))
            .filter(|c| c.name == REFERENCE || matches(terms, wl.name(), c.name))
            .collect();
        if cs.len() <= 1 && !matches(terms, wl.name(), REFERENCE) {
            continue;
        }
        let t = Instant::now();
        for (si, size) in SIZES.iter().enumerate() {
            let job = Job {
                wl,
                p: &params,
                check: None,
            };
            let mut samples = vec![Vec::new(); cs.len()];
            for rep in 0..reps {
                for j in 0..cs.len() {
                    let k = (j + rep) % cs.len();
                    samples[k].push((cs[k].run[si])(&job));
                }
            }
            for (c, s) in cs.iter().zip(&samples) {
                rows.push(Row {
                    workload: wl.name().into(),
                    contender: c.name.into(),
                    object_size: *size,
                    threads: wl.threads(),
                    ns: median(s),
                    spread: spread_pct(s),
                });
            }
        }
        let wr: Vec<Row> = rows
            .iter()
            .filter(|r| r.workload == wl.name())
            .cloned()
            .collect();
        print_table(
            &format!(
                "{} ({} thread{}, {:.1} s)",
                wl.name(),
                wl.threads(),
                if wl.threads() > 1 { "s" } else { "" },
                t.elapsed().as_secs_f64()
            ),
            &wr,
            REFERENCE,
            "ns = CPU time of the timed thread(s) per object (CLOCK_THREAD_CPUTIME_ID; forward*: \
             the busier of the two threads), median of the repetitions; ± = half the min-max spread. \
             ratio = contender ns / idxpool-explicit ns (above 1: idxpool-explicit is faster).",
        );
    }
    if let Ok(b) = BACKINGS.lock() {
        if !b.is_empty() {
            println!(
                "\nidxpool benchmark pools ({} objects, BackingPolicy::Auto) were backed by: {}",
                params.pool_cap,
                b.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    // scan
    if ["idxpool-hugetlb2m", "idxpool-thp", "idxpool-4k"]
        .iter()
        .any(|c| matches(terms, "scan", c))
    {
        let bytes = if args.quick { 256 << 20 } else { 1 << 30 };
        println!(
            "\n## scan: every object of a {} MiB pool touched in a random order{}",
            bytes >> 20,
            if args.quick {
                " (--quick: 256 MiB instead of 1 GiB)"
            } else {
                ""
            }
        );
        let t = Instant::now();
        let mut srows = Vec::new();
        println!(
            "  scan 8 B: not run: {} M objects would need a {} MiB shuffled handle array per \
             pool and seconds per pass, and each touch hits a random page just as at 64 B",
            (bytes / 8) >> 20,
            (bytes / 8 * 4) >> 20
        );
        scan_size::<O64>(bytes, reps, terms, &mut srows);
        scan_size::<O2K>(bytes, reps, terms, &mut srows);
        print_table(
            &format!("scan (1 thread, {:.1} s)", t.elapsed().as_secs_f64()),
            &srows,
            "idxpool-4k",
            "speedup = idxpool-4k ns / this ns (above 1: faster than 4 KiB pages).",
        );
        rows.extend(srows);
    }
    if terms.is_empty() || terms.iter().any(|t| "memory".contains(t.as_str())) {
        memory_report();
    }
    // targets
    println!("\n### targets (measured, not asserted)\n");
    for wl in ["burst", "forward", "forward-burst"] {
        for size in SIZES {
            let of = |pred: &dyn Fn(&str) -> bool| {
                rows.iter()
                    .filter(|r| r.workload == wl && r.object_size == size && pred(&r.contender))
                    .min_by(|a, b| a.ns.total_cmp(&b.ns))
            };
            let idx = of(&|c| c == REFERENCE);
            let peer = of(&|c| is_peer(c));
            if let (Some(i), Some(p)) = (idx, peer) {
                let x = p.ns / i.ns;
                println!(
                    "- {wl} {}: best peer {} {} ns vs idxpool-explicit {} ns: {:.2}x (target >= 3x: {})",
                    size_label(size),
                    p.contender,
                    fmt_ns(p.ns),
                    fmt_ns(i.ns),
                    x,
                    if x >= 3.0 { "met" } else { "NOT met" }
                );
            }
        }
    }
    for size in SIZES {
        let get = |c: &str| {
            rows.iter()
                .find(|r| r.workload == "scan" && r.contender == c && r.object_size == size)
        };
        if let (Some(h), Some(p)) = (get("idxpool-hugetlb2m"), get("idxpool-4k")) {
            let x = p.ns / h.ns;
            println!(
                "- scan {}: hugetlb {} ns vs 4 KiB {} ns: {:.2}x (target >= 1.3x: {})",
                size_label(size),
                fmt_ns(h.ns),
                fmt_ns(p.ns),
                x,
                if x >= 1.3 { "met" } else { "NOT met" }
            );
        }
    }
    if let Some(path) = &args.csv {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).expect("create the csv directory");
        }
        std::fs::write(path, csv_string(&rows)).expect("write csv");
        let svg = path.with_extension("svg");
        match write_svg(&svg, &rows) {
            Ok(()) => println!("\nwrote {} and {}", path.display(), svg.display()),
            Err(e) => println!("\nwrote {}; svg failed: {e}", path.display()),
        }
    }
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
}

// ---- tests ----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn tiny() -> Params {
        Params::sized(20, 64, 400, 3000, 64, 2048)
    }

    /// Every contender, every workload it supports, through the checker: distinct live
    /// objects, values intact, frees == allocs, nothing left live.
    fn all_contenders_at(si: usize) {
        let p = tiny();
        for c in contenders() {
            for wl in Workload::ALL {
                if !c.supports(wl) {
                    continue;
                }
                let log = CheckLog::default();
                let job = Job {
                    wl,
                    p: &p,
                    check: Some(&log),
                };
                let ns = (c.run[si])(&job);
                let (a, f) = (
                    log.allocs.load(Ordering::Relaxed),
                    log.frees.load(Ordering::Relaxed),
                );
                let what = format!("{} {} {}", c.name, wl.name(), SIZES[si]);
                assert!(ns.is_finite() && ns >= 0.0, "{what}: {ns}");
                assert!(a > 0, "{what}: nothing allocated");
                assert_eq!(a, f, "{what}: allocs != frees");
                assert!(
                    log.live.lock().unwrap().is_empty(),
                    "{what}: objects left live"
                );
                let expect = match wl {
                    Workload::Burst => (p.burst_rounds + p.burst_rounds / 10 + 1) * BURST,
                    Workload::Steady => {
                        2 * p.steady_live + p.steady_idx.len() + p.steady_idx.len() / 10
                    }
                    Workload::Forward | Workload::ForwardBurst => {
                        p.forward_total + p.forward_total / 10 + 1
                    }
                };
                assert_eq!(a, expect, "{what}: allocation count");
            }
        }
    }

    #[test]
    fn contenders_8b() {
        all_contenders_at(0);
    }

    #[test]
    fn contenders_64b() {
        all_contenders_at(1);
    }

    #[test]
    fn contenders_2k() {
        all_contenders_at(2);
    }

    /// A burst of every adapter directly: distinct addresses, as many frees as allocations.
    #[test]
    fn burst_adapters_hand_out_distinct_objects() {
        fn check<W: Worker>(w: &mut W) {
            let log = CheckLog::default();
            let mut c = Checked { w, log: &log };
            let mut v = Vec::new();
            c.alloc_n(&mut v, 40, 100);
            let one = c.alloc(7);
            let addrs: HashSet<usize> = v.iter().chain([&one]).map(|h| c.id(h)).collect();
            assert_eq!(addrs.len(), 41);
            c.free(one);
            c.free_all(&mut v);
            assert_eq!(log.allocs.load(Ordering::Relaxed), 41);
            assert_eq!(log.frees.load(Ordering::Relaxed), 41);
        }
        PoolBuilder::<O64>::with_default(256)
            .scoped(|pool| {
                check(&mut IdxCache {
                    c: pool.local_cache(),
                    bulk: true,
                });
                check(&mut IdxImplicit(&pool));
                pool.flush();
                assert_eq!(pool.in_use(), 0);
            })
            .unwrap();
        let sp = sharded_slab::Pool::<O64>::new();
        check(&mut ShardedSlab(&sp));
        let lf = lockfree_object_pool::LinearObjectPool::<O64>::new(O64::default, |_| ());
        check(&mut LockfreePool(&lf));
        O64::heapless_init();
        check(&mut Heapless::<O64>(PhantomData));
        let fl = FreeList::<O64>::new(64);
        check(&mut ArrayQueueFree(&fl));
        assert_eq!(fl.free.len(), 64);
        let mut sm = SlotMapW::<O64>(slotmap::SlotMap::new());
        check(&mut sm);
        assert!(sm.0.is_empty());
        let mut sl = SlabW::<O64>(slab::Slab::new());
        check(&mut sl);
        assert!(sl.0.is_empty());
        check(&mut RawAlloc::<_, O64>(System, PhantomData));
        check(&mut RawAlloc::<_, O64>(mimalloc::MiMalloc, PhantomData));
        check(&mut RawAlloc::<_, O64>(
            tikv_jemallocator::Jemalloc,
            PhantomData,
        ));
    }

    #[test]
    fn median_and_ratio() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert_eq!(ratio(30.0, 10.0), 3.0);
        assert!(ratio(1.0, 0.0).is_nan());
        assert!(ratio(f64::NAN, 1.0).is_nan());
        assert_eq!(spread_pct(&[9.0, 10.0, 11.0]), 10.0);
    }

    #[test]
    fn csv_has_the_exact_header() {
        let rows = [Row {
            workload: "burst".into(),
            contender: "slab".into(),
            object_size: 64,
            threads: 1,
            ns: 1.5,
            spread: 0.0,
        }];
        let s = csv_string(&rows);
        let mut lines = s.lines();
        assert_eq!(
            lines.next(),
            Some("workload,contender,object_size,threads,ns_per_object")
        );
        assert_eq!(lines.next(), Some("burst,slab,64,1,1.500"));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn filter_matches_workload_or_contender() {
        let t = vec!["forward".to_string(), "jemalloc".to_string()];
        assert!(matches(&t, "forward", "slab"));
        assert!(matches(&t, "burst", "box-jemalloc"));
        assert!(!matches(&t, "burst", "slab"));
        assert!(matches(&[], "burst", "slab"));
        let t = vec!["steady:slab".to_string()];
        assert!(matches(&t, "steady", "slab"));
        assert!(!matches(&t, "burst", "slab"));
        assert!(!matches(&t, "steady", "slotmap"));
    }

    idxpool::brand!(TestScan);

    #[test]
    fn scan_touches_every_object_once() {
        let mut p = ScanPool::<O64, TestScan>::new("t", Backing::Pages4K, 1 << 20).unwrap();
        assert_eq!(p.hs.len(), (1 << 20) / 64);
        let mut idx: Vec<u32> = p.hs.iter().map(|h| p.pool.index_of(h)).collect();
        assert_ne!(idx, (0..idx.len() as u32).collect::<Vec<_>>(), "shuffled");
        idx.sort_unstable();
        assert_eq!(
            idx,
            (0..idx.len() as u32).collect::<Vec<_>>(),
            "a permutation"
        );
        p.pass();
        p.pass();
        assert_eq!(p.sum(), 2 * p.hs.len() as u64);
        assert!(p.detail().contains("4 KiB"));
    }

    #[test]
    fn svg_is_written() {
        let rows: Vec<Row> = ["burst", "scan"]
            .iter()
            .flat_map(|w| {
                SIZES.iter().map(move |s| Row {
                    workload: w.to_string(),
                    contender: "idxpool-explicit".into(),
                    object_size: *s,
                    threads: 1,
                    ns: *s as f64,
                    spread: 0.0,
                })
            })
            .collect();
        let path = std::env::temp_dir().join(format!("peers-test-{}.svg", std::process::id()));
        write_svg(&path, &rows).unwrap();
        let s = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(s.contains("<svg") && s.contains("idxpool-explicit"));
    }
}
