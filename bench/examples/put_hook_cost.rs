//! The price of the reset hook (`PoolBuilder::on_put`): the put paths of a pool
//! without a hook (what every pool pays for the hook's existence: one test of a flag per put
//! call) and of a pool with a trivial hook (`obj.head = 0`: one out-of-line call per burst, one
//! indirect call per object), on mempool_perf's object (2048 bytes) and loops.
//!
//! Cases (`--case`):
//! * `table`: mempool_perf's `constant_n = 0` loop: a `LocalCache` over a run-time pool,
//!   `get_into` / `put_from` of `--bulk` slots of a table of `--keep`;
//! * `vec`: the same with `get_bulk` / `put_bulk_tail` through a `Vec`;
//! * `thread`: `pool.get()` / `pool.put(h)` of one object through the thread's cache, `--keep`
//!   at a time;
//! * `const`: `table` with windows of constant length (`--bulk` 1, 4 or 32: mempool_perf's
//!   `constant_n = 1`).
//!
//! `--fixed N`: run the case once for N objects (no timing), for
//! `valgrind --tool=callgrind --dump-instr=no`; the instructions of `run_<case>` divided by N
//! are its instructions per object. Without it: `--reps` interleaved timed runs of the pool
//! without a hook (twice: the A/A pair) and with the hook, each `--ms` of thread CPU time,
//! medians printed.
//!
//! Built with `RUSTFLAGS="--cfg idxpool_before"` it compiles against a commit without
//! `on_put` (the hook-present contender is left out), for before/after instruction counts of
//! the hook-absent paths.
//!
//! Usage: `cargo run --release -p idxpool-bench --example put_hook_cost -- --case table
//! [--bulk 1] [--keep 32] [--hook] [--fixed N | --ms 200 --reps 7]`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use idxpool::{Handle, LocalCache, Pool, PoolBuilder};
use idxpool_bench::clock::thread_cpu_time;
use idxpool_bench::stats::median;

/// mempool_perf's object: 2048 bytes, cache-line aligned; `head` is what the hook resets.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    head: u64,
    rest: [u8; 2040],
}

const CAP: u32 = 8192;

fn pool(hook: bool) -> Arc<Pool<Obj>> {
    let b = PoolBuilder::<Obj>::zeroed(CAP).cache_size(512);
    #[cfg(not(idxpool_before))]
    let b = if hook {
        b.on_put(|o: &mut Obj| o.head = 0)
    } else {
        b
    };
    #[cfg(idxpool_before)]
    assert!(!hook, "built against a commit without on_put");
    Arc::new(b.build().expect("pool"))
}

/// `constant_n = 0` loop of mempool_perf: get_into / put_from through a table.
#[inline(never)]
fn run_table(c: &mut LocalCache<Arc<Pool<Obj>>>, bulk: usize, keep: usize, objs: u64) -> u64 {
    let mut table: Vec<Option<Handle<Obj>>> = (0..keep).map(|_| None).collect();
    let mut count = 0u64;
    while count < objs {
        let mut i = 0;
        while i < keep {
            c.get_into(&mut table[i..i + bulk]).expect("sized");
            i += bulk;
        }
        let mut i = 0;
        while i < keep {
            c.put_from(&mut table[i..i + bulk]).expect("full");
            i += bulk;
        }
        count += keep as u64;
    }
    count
}

/// `constant_n = 1` loop of mempool_perf: the table's windows of constant length `N`.
#[inline(never)]
fn run_const<const N: usize>(c: &mut LocalCache<Arc<Pool<Obj>>>, keep: usize, objs: u64) -> u64 {
    let mut table: Vec<Option<Handle<Obj>>> = (0..keep).map(|_| None).collect();
    let mut count = 0u64;
    while count < objs {
        let mut i = 0;
        while i < keep {
            c.get_into(&mut table[i..i + N]).expect("sized");
            i += N;
        }
        let mut i = 0;
        while i < keep {
            c.put_from(&mut table[i..i + N]).expect("full");
            i += N;
        }
        count += keep as u64;
    }
    count
}

/// The same through a `Vec`: get_bulk / put_bulk_tail.
#[inline(never)]
fn run_vec(c: &mut LocalCache<Arc<Pool<Obj>>>, bulk: usize, keep: usize, objs: u64) -> u64 {
    let mut kept: Vec<Handle<Obj>> = Vec::with_capacity(keep);
    let mut count = 0u64;
    while count < objs {
        while kept.len() < keep {
            c.get_bulk(&mut kept, bulk).expect("sized");
        }
        while !kept.is_empty() {
            c.put_bulk_tail(&mut kept, bulk);
        }
        count += keep as u64;
    }
    count
}

/// One object at a time through the thread's cache.
#[inline(never)]
fn run_thread(p: &Pool<Obj>, keep: usize, objs: u64) -> u64 {
    let mut kept: Vec<Handle<Obj>> = Vec::with_capacity(keep);
    let mut count = 0u64;
    while count < objs {
        for _ in 0..keep {
            kept.push(p.get().expect("sized"));
        }
        for h in kept.drain(..) {
            p.put(h);
        }
        count += keep as u64;
    }
    count
}

fn run(case: &str, p: &Arc<Pool<Obj>>, bulk: usize, keep: usize, objs: u64) -> u64 {
    match case {
        "table" => run_table(&mut LocalCache::new(p.clone()), bulk, keep, objs),
        "vec" => run_vec(&mut LocalCache::new(p.clone()), bulk, keep, objs),
        "thread" => run_thread(p, keep, objs),
        "const" => {
            let c = &mut LocalCache::new(p.clone());
            match bulk {
                1 => run_const::<1>(c, keep, objs),
                4 => run_const::<4>(c, keep, objs),
                32 => run_const::<32>(c, keep, objs),
                _ => panic!("--case const: --bulk 1, 4 or 32"),
            }
        }
        other => panic!("unknown case {other}: table, const, vec or thread"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |k: &str| args.iter().any(|a| a == k);
    let arg = |k: &str, d: u64| -> u64 {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .map_or(d, |v| v.parse().expect("a number"))
    };
    if has("--help") || has("-h") {
        println!(
            "put_hook_cost --case table|const|vec|thread [--bulk 1] [--keep 32] [--hook] \
             [--fixed N | --ms 200 --reps 7]"
        );
        return;
    }
    let case = args
        .iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1))
        .map_or("table", String::as_str)
        .to_string();
    let (bulk, keep) = (arg("--bulk", 1) as usize, arg("--keep", 32) as usize);
    assert!(
        keep % bulk == 0 && keep <= 2048,
        "keep a multiple of bulk, <= 2048"
    );
    let fixed = arg("--fixed", 0);
    if fixed > 0 {
        let p = pool(has("--hook"));
        black_box(run(&case, &p, bulk, keep, fixed));
        return;
    }
    let (ms, reps) = (arg("--ms", 200), arg("--reps", 7));
    let contenders = if cfg!(idxpool_before) {
        vec![("none", false), ("none'", false)]
    } else {
        vec![("none", false), ("none'", false), ("hook", true)]
    };
    let pools: Vec<_> = contenders.iter().map(|&(_, h)| pool(h)).collect();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); pools.len()];
    for _ in 0..reps {
        for (k, p) in pools.iter().enumerate() {
            let chunk = 1 << 16;
            let t0 = thread_cpu_time();
            let mut n = 0u64;
            while thread_cpu_time() - t0 < Duration::from_millis(ms) {
                n += run(&case, p, bulk, keep, chunk);
            }
            rates[k].push(n as f64 / (thread_cpu_time() - t0).as_secs_f64() / 1e6);
        }
    }
    println!("case={case} bulk={bulk} keep={keep}: median Mobj/s of {reps} runs of {ms} ms (thread CPU time)");
    let base = median(&rates[0]);
    for (k, &(name, _)) in contenders.iter().enumerate() {
        let m = median(&rates[k]);
        println!("  {name:6} {m:8.2}  x{:.3}", m / base);
    }
}
