//! How long `Pool::grow(n)` takes, per backing: a pool of `--cap` objects of 2 KiB
//! with a maximum of `cap + n`, built (untimed), then grown by `n` (timed, wall clock: growth
//! is page faults and page zeroing by the kernel, which a thread CPU clock would count only
//! in part). Each cell is a fresh pool, `--reps` times; the median is reported, with the time
//! per object and per MiB.
//!
//! Columns: `grow` is `grow(n)` alone: for hugetlb it includes populating the huge pages
//! (`MADV_POPULATE_WRITE`: the kernel zeroes them), for THP and 4 KiB pages only the
//! `mprotect` (pages fault in on first touch); `grow+touch` adds a write to every new object
//! (one byte per object, through `get_bulk`/`get_mut`), so every backing has paid for its pages;
//! `prefault` is `grow(n)` of a pool built with `prefault(true)` (THP and 4 KiB pages are then
//! touched by `grow`). `init` rows use `with_fn` (each new object written by the closure)
//! instead of `zeroed`.
//!
//! Usage: `cargo run --release -p idxpool-bench --example grow_time -- [--reps 5] [--cap 1024]
//! [--n 1024,16384,131072]`. Hugetlb rows need free 2 MiB pages (`echo 256 >
//! /proc/sys/vm/nr_hugepages`); they are skipped otherwise.

use std::time::{Duration, Instant};

use clap::Parser;
use idxpool::{Backing, BackingPolicy, PoolBuilder};

type Obj = [u8; 2048];

#[derive(Parser, Debug)]
struct Args {
    /// Timed runs per cell (a fresh pool each); the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Objects at build.
    #[arg(long, default_value_t = 1024)]
    cap: u32,
    /// Objects added by the timed `grow`, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024,16384,131072")]
    n: Vec<u32>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Grow,
    GrowTouch,
    Prefault,
    Init,
}

/// One timed run; `None` when the backing is unavailable.
fn run(backing: Backing, cap: u32, n: u32, mode: Mode) -> Option<Duration> {
    let b = if mode == Mode::Init {
        PoolBuilder::<Obj>::with_fn(cap, |i| {
            let mut o = [0u8; 2048];
            o[0] = i as u8;
            o
        })
    } else {
        PoolBuilder::<Obj>::zeroed(cap)
    };
    let pool = b
        .max_capacity(cap + n)
        .cache_size(0)
        .backing(BackingPolicy::Require(backing))
        .prefault(mode == Mode::Prefault)
        .build()
        .ok()?;
    let mut hs = Vec::with_capacity((cap + n) as usize);
    let t = Instant::now();
    match pool.grow(n) {
        Ok(_) => {}
        Err(e) => {
            eprintln!("{backing} n={n}: {e}");
            return None;
        }
    }
    if mode == Mode::GrowTouch {
        pool.get_bulk(&mut hs, (cap + n) as usize).unwrap();
        for h in hs.iter_mut().rev().take(n as usize) {
            pool.get_mut(h)[7] = 1;
        }
    }
    let d = t.elapsed();
    pool.put_bulk(&mut hs);
    Some(d)
}

fn main() {
    let args = Args::parse();
    println!(
        "grow_time: objects of {} bytes (stride {}), cap {} at build, reps {}, wall clock, median",
        std::mem::size_of::<Obj>(),
        PoolBuilder::<Obj>::zeroed(1).build().unwrap().stride(),
        args.cap,
        args.reps
    );
    println!(
        "{:<14} {:>8} {:>11} {:>12} {:>10} {:>10}",
        "backing", "n", "mode", "median", "ns/object", "ms/GiB"
    );
    for &n in &args.n {
        for backing in [Backing::Hugetlb2M, Backing::Thp, Backing::Pages4K] {
            for (mode, label) in [
                (Mode::Grow, "grow"),
                (Mode::GrowTouch, "grow+touch"),
                (Mode::Prefault, "prefault"),
                (Mode::Init, "init"),
            ] {
                let mut ts: Vec<Duration> = (0..args.reps)
                    .filter_map(|_| run(backing, args.cap, n, mode))
                    .collect();
                if ts.is_empty() {
                    println!(
                        "{:<14} {n:>8} {label:>11} {:>12}",
                        backing.to_string(),
                        "n/a"
                    );
                    continue;
                }
                ts.sort();
                let med = ts[ts.len() / 2];
                let bytes = n as f64 * 2048.0;
                println!(
                    "{:<14} {n:>8} {label:>11} {:>12.3?} {:>10.1} {:>10.1}",
                    backing.to_string(),
                    med,
                    med.as_nanos() as f64 / n as f64,
                    med.as_secs_f64() * 1e3 / (bytes / f64::from(1u32 << 30)),
                );
            }
        }
    }
}
