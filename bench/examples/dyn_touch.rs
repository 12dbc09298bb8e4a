//! The price of run-time pools: a run-time pool (`Pool<T>` in an `Arc`: 4-byte handles, one
//! range compare per access and per put, bulk copies straight between the caller's `Vec` and
//! the cache) against the branded pool of the same representation (offset entries), on
//! mempool_perf's loop (one core, explicit cache of 512, get 32 / put 32, `keep` objects per
//! cycle, touch 0/1 = write 8 bytes through `&mut T` after each get), the object of
//! mempool_perf (2048 bytes).
//!
//! Contenders per row, run interleaved `--reps` times, each for `--ms` of thread CPU time:
//! `branded` (a named brand: no check), `branded'` (the same again: the A/A pair, the noise),
//! `dyn` (a `LocalCache` over an `Arc` of the run-time pool + the pool's `Resolver`). Reports median rates and ratios to
//! `branded`.
//!
//! Usage: `cargo run --release -p idxpool-bench --example dyn_touch -- [--ms 200] [--reps 7]
//! [--fixed N]` (`--fixed N`: N objects per contender, no timing, for cachegrind).

use std::hint::black_box;
use std::time::Duration;

use std::sync::Arc;

use idxpool::{Handle, LocalCache, Pool, PoolBuilder};
use idxpool_bench::clock::thread_cpu_time;
use idxpool_bench::stats::median;

/// mempool_perf's object: 2048 bytes, cache-line aligned; `head` is what touch=1 writes.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    head: u64,
    rest: [u8; 2040],
}

idxpool::brand!(Branded);

const CAP: u32 = 16384;

/// One run of `objs` objects through the branded pool's cache; returns objects moved.
#[inline(never)]
fn run_branded<const TOUCH: bool>(
    c: &mut LocalCache<&'_ Pool<Obj, Branded, idxpool::Offset>>,
    bulk: usize,
    keep: usize,
    objs: u64,
) -> u64 {
    let res = c.pool().resolver();
    let mut kept: Vec<idxpool::Handle<Obj, Branded>> = Vec::with_capacity(keep);
    let mut count = 0u64;
    while count < objs {
        while kept.len() < keep {
            let at = kept.len();
            c.get_bulk(&mut kept, bulk).expect("pool sized for keep");
            if TOUCH {
                for h in &mut kept[at..] {
                    res.get_mut(h).head = count;
                }
            }
        }
        while !kept.is_empty() {
            c.put_bulk_tail(&mut kept, bulk);
        }
        count += keep as u64;
    }
    black_box(count)
}

/// The same loop through a run-time pool.
#[inline(never)]
fn run_dyn<const TOUCH: bool>(
    pool: &Pool<Obj>,
    c: &mut LocalCache<Arc<Pool<Obj>>>,
    bulk: usize,
    keep: usize,
    objs: u64,
) -> u64 {
    let res = pool.resolver();
    let mut kept: Vec<Handle<Obj>> = Vec::with_capacity(keep);
    let mut count = 0u64;
    while count < objs {
        while kept.len() < keep {
            let at = kept.len();
            c.get_bulk(&mut kept, bulk).expect("pool sized for keep");
            if TOUCH {
                for h in &mut kept[at..] {
                    res.get_mut(h).head = count;
                }
            }
        }
        while !kept.is_empty() {
            c.put_bulk_tail(&mut kept, bulk);
        }
        count += keep as u64;
    }
    black_box(count)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!(
            "dyn_touch: run-time pool vs branded pool on mempool_perf's loop (1 core, cache 512, \
             get=put 1/4/32, keep 32/512, touch 0/1).\nusage: dyn_touch [--ms 200] [--reps 7] \
             [--fixed N]\nAbout 12 rows x 3 contenders x reps x ms: ~55 s by default."
        );
        return;
    }
    let ms = arg("--ms", 200);
    let reps = arg("--reps", 7) as usize;
    let fixed = arg("--fixed", 0);
    // `--bulk N`: only that bulk size (0: all), e.g. for callgrind.
    let only_bulk = arg("--bulk", 0) as usize;
    let branded = PoolBuilder::<Obj>::zeroed(CAP)
        .cache_size(512)
        .prefault(true)
        .build_named::<Branded>() // offset entries, as DynPool's
        .unwrap();
    let dynp = Arc::new(
        PoolBuilder::<Obj>::zeroed(CAP)
            .cache_size(512)
            .prefault(true)
            .build()
            .unwrap(),
    );
    let mut bc = branded.local_cache();
    let mut dc = LocalCache::new(dynp.clone());
    println!(
        "cell                         branded Mobj/s  branded' (A/A)   runtime  runtime/branded"
    );
    let mut ratios = Vec::new();
    let mut aa = Vec::new();
    for bulk in [1usize, 4, 32] {
        if only_bulk != 0 && bulk != only_bulk {
            continue;
        }
        for keep in [32usize, 512] {
            for touch in [false, true] {
                // Calibrate objects per run so a run takes about `ms` of CPU time.
                let objs = if fixed > 0 {
                    fixed
                } else {
                    let t = thread_cpu_time();
                    let probe = 2_000_000u64;
                    if touch {
                        run_branded::<true>(&mut bc, bulk, keep, probe);
                    } else {
                        run_branded::<false>(&mut bc, bulk, keep, probe);
                    }
                    let s = (thread_cpu_time() - t).as_secs_f64().max(1e-6);
                    ((probe as f64) * (ms as f64 / 1000.0) / s) as u64
                };
                let mut rates = [Vec::new(), Vec::new(), Vec::new()];
                for rep in 0..reps.max(1) {
                    // The order rotates every repetition (branded, branded', runtime; then
                    // runtime first, ...), so no contender always runs first or last.
                    for i in 0..3 {
                        let k = (i + rep) % 3;
                        let rate = &mut rates[k];
                        let t = thread_cpu_time();
                        let n = match (k, touch) {
                            (0 | 1, false) => run_branded::<false>(&mut bc, bulk, keep, objs),
                            (0 | 1, true) => run_branded::<true>(&mut bc, bulk, keep, objs),
                            (_, false) => run_dyn::<false>(&dynp, &mut dc, bulk, keep, objs),
                            (_, true) => run_dyn::<true>(&dynp, &mut dc, bulk, keep, objs),
                        };
                        let d: Duration = thread_cpu_time() - t;
                        rate.push(n as f64 / d.as_secs_f64().max(1e-9) / 1e6);
                    }
                }
                if fixed > 0 {
                    continue;
                }
                let m: Vec<f64> = rates.iter().map(|r| median(r)).collect();
                println!(
                "get=put={bulk:<2} keep={keep:<4} touch={}  {:>9.1}  {:>9.1} ({:+.1}%)  {:>8.1}  {:>6.3}",
                u8::from(touch),
                m[0],
                m[1],
                (m[1] / m[0] - 1.0) * 100.0,
                m[2],
                m[2] / m[0]
            );
                ratios.push(m[2] / m[0]);
                aa.push(m[1] / m[0]);
            }
        }
    }
    if !ratios.is_empty() {
        let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
        let spread = aa.iter().map(|x| (x - 1.0).abs()).fold(0.0, f64::max);
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "verdict: runtime/branded geomean {:.3} (lowest cell {:.3}); A/A geomean {:.3}, widest \
             A/A {:.1}%",
            geo(&ratios),
            min,
            geo(&aa),
            spread * 100.0
        );
    }
}
