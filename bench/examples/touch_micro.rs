//! Micro-benchmarks of the touch loop: "get a burst of handles, convert each to
//! `&mut T`, write 8 bytes, put them back", taken apart one step at a time, for the three entry
//! representations (`offset`, `index`, `pointer`, see `idxpool::repr`).
//!
//! Steps, each a separate `#[inline(never)]` function so that its loop can be read in the
//! disassembly (`objdump -d --no-show-raw-insn -C target/release/examples/touch_micro`):
//!
//! * `conv`: the conversion alone (sum of the converted addresses of a fixed array of entries);
//! * `store`: the conversion feeding a store, entries in a fixed array (loaded long ago);
//! * `fresh`: a LIFO stack model of the cache without pool code: copy the top `get` entries
//!   into a burst buffer, store through each (address depends on a value just stored by the
//!   copy), put `put` at a time back: the shape of `mempool_perf`'s touch=1 cells;
//! * `pool`: the same loop on real pools (`LocalCache::get_bulk`, `Resolver::get_mut`,
//!   `put_bulk_tail`), `keep` objects per cycle as mempool_perf;
//! * `pool-prefetch`: `pool` with the got burst prefetched for writing
//!   (`Resolver::prefetch_all`, VPP / DPDK's burst prefetch) before the writes.
//!
//! Every row runs the contenders interleaved, `--reps` times each, timed by the thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`: on a shared machine a descheduled thread does not count),
//! and reports the median rate and the ratio to `pointer`; `pointer'` is a second pointer run (an A/A pair: the noise).
//!
//! Usage: `cargo run --release -p idxpool-bench --example touch_micro -- [--ms 40] [--reps 7]
//! [--only fresh|pool|pool-prefetch|...] [--fixed N]` (`--fixed N`: run every row for N objects, no timing:
//! for `valgrind --tool=cachegrind`).

use std::hint::black_box;
use std::time::Duration;

use idxpool::repr::Repr;
use idxpool::{Brand, Handle, Index, LocalCache, Offset, Pool, PoolBuilder};

/// mempool_perf's object: 2048 bytes, cache-line aligned; `head` is what touch=1 writes.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    head: u64,
    rest: [u8; 2040],
}

/// DPDK mbuf-like stride (StrideMode::Auto for Obj).
const STRIDE: usize = 2112;
/// Objects in the model's region and stack.
const N_OBJS: usize = 1024;

// ---------------------------------------------------------------------------------------------
// Model conversions (no pool code): the three entry forms over one region
// ---------------------------------------------------------------------------------------------

/// A model representation: entry type and conversion, as the pool's `Repr`s do it.
trait Model: Copy {
    type E: Copy;
    fn encode(m: &Region, i: usize) -> Self::E;
    fn ptr(m: &Region, e: Self::E) -> *mut u64;
}

struct Region {
    mem: Vec<u8>,
    base: *mut u8,
    /// Run-time stride (black-boxed so the compiler cannot fold it).
    stride: usize,
}

impl Region {
    fn new() -> Self {
        let mut mem = vec![0u8; N_OBJS * STRIDE + 64];
        let off = mem.as_ptr().align_offset(64);
        let base = mem.as_mut_ptr().wrapping_add(off);
        Region {
            mem,
            base,
            stride: black_box(STRIDE),
        }
    }
}

#[derive(Clone, Copy)]
struct MIndex;
impl Model for MIndex {
    type E = u32;
    #[inline(always)]
    fn encode(_m: &Region, i: usize) -> u32 {
        i as u32
    }
    #[inline(always)]
    fn ptr(m: &Region, e: u32) -> *mut u64 {
        m.base.wrapping_add(e as usize * m.stride).cast()
    }
}

#[derive(Clone, Copy)]
struct MOffset;
impl Model for MOffset {
    type E = u32;
    #[inline(always)]
    fn encode(m: &Region, i: usize) -> u32 {
        ((i * m.stride) >> 3) as u32
    }
    #[inline(always)]
    fn ptr(m: &Region, e: u32) -> *mut u64 {
        m.base.wrapping_add((e as usize) << 3).cast()
    }
}

#[derive(Clone, Copy)]
struct MPointer;
impl Model for MPointer {
    type E = *mut u8;
    #[inline(always)]
    fn encode(m: &Region, i: usize) -> *mut u8 {
        m.base.wrapping_add(i * m.stride)
    }
    #[inline(always)]
    fn ptr(_m: &Region, e: *mut u8) -> *mut u64 {
        e.cast()
    }
}

/// Step 1: the conversion alone. Returns objects converted.
#[inline(never)]
fn conv<M: Model>(m: &Region, entries: &[M::E], rounds: usize) -> usize {
    let mut acc = 0usize;
    for _ in 0..rounds {
        for &e in black_box(entries) {
            acc = acc.wrapping_add(M::ptr(m, e) as usize);
        }
    }
    black_box(acc);
    rounds * entries.len()
}

/// Step 2: the conversion feeding a store; the entries were loaded long ago.
#[inline(never)]
fn store<M: Model>(m: &Region, entries: &[M::E], rounds: usize) -> usize {
    for r in 0..rounds {
        for &e in black_box(entries) {
            // SAFETY: every entry names an object of the region (encode of i < N_OBJS).
            unsafe { M::ptr(m, e).write(r as u64) };
        }
    }
    rounds * entries.len()
}

/// Step 3: the cache model: LIFO stack, get `get` into a burst (a copy: the entries are stored
/// just before the touch loads them), touch, put back `put` at a time; `keep` per cycle.
#[inline(never)]
fn fresh<M: Model>(
    m: &Region,
    stack: &mut Vec<M::E>,
    get: usize,
    put: usize,
    keep: usize,
    rounds: usize,
) -> usize {
    let mut kept: Vec<M::E> = Vec::with_capacity(keep + get);
    for r in 0..rounds {
        while kept.len() < keep {
            let at = stack.len() - get;
            kept.extend_from_slice(&stack[at..]);
            stack.truncate(at);
            for &e in &kept[kept.len() - get..] {
                // SAFETY: as in `store`.
                unsafe { M::ptr(m, e).write(r as u64) };
            }
        }
        while !kept.is_empty() {
            let n = put.min(kept.len());
            let at = kept.len() - n;
            stack.extend_from_slice(&kept[at..]);
            kept.truncate(at);
        }
    }
    rounds * keep
}

// ---------------------------------------------------------------------------------------------
// Real pools
// ---------------------------------------------------------------------------------------------

/// Step 4: mempool_perf's worker_dyn with touch=1, on a real pool. `PREFETCH` (step
/// `pool-prefetch`): the got burst is prefetched for writing
/// (`Resolver::prefetch_all`) before the writes; the `pool` instance (`PREFETCH = false`) has no
/// prefetch code.
#[inline(never)]
fn pool_touch<const PREFETCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    get: usize,
    put: usize,
    keep: usize,
    rounds: usize,
) -> usize {
    let objs = c.pool().resolver();
    let mut kept: Vec<Handle<Obj, B, R>> = Vec::with_capacity(keep + get);
    for r in 0..rounds {
        while kept.len() < keep {
            let at = kept.len();
            c.get_bulk(&mut kept, get).expect("pool sized for keep");
            if PREFETCH {
                objs.prefetch_all(&kept[at..]);
            }
            for h in &mut kept[at..] {
                objs.get_mut(h).head = r as u64;
            }
        }
        while !kept.is_empty() {
            c.put_bulk_tail(&mut kept, put);
        }
    }
    rounds * keep
}

/// The `pool` (`prefetch` false) or `pool-prefetch` instance of [`pool_touch`].
fn touch_step<B: Brand, R: Repr>(
    prefetch: bool,
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    get: usize,
    put: usize,
    keep: usize,
    rounds: usize,
) -> usize {
    if prefetch {
        pool_touch::<true, B, R>(c, get, put, keep, rounds)
    } else {
        pool_touch::<false, B, R>(c, get, put, keep, rounds)
    }
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

struct Opts {
    ms: u64,
    reps: usize,
    only: Option<String>,
    fixed: Option<usize>,
}

fn parse() -> Opts {
    let mut o = Opts {
        ms: 40,
        reps: 7,
        only: None,
        fixed: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--ms" => o.ms = val().parse().expect("--ms N"),
            "--reps" => o.reps = val().parse().expect("--reps N"),
            "--only" => o.only = Some(val()),
            "--fixed" => o.fixed = Some(val().parse().expect("--fixed N")),
            "-h" | "--help" => {
                println!("touch_micro [--ms 40] [--reps 7] [--only STEP] [--fixed OBJS]");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

/// CPU time consumed by the calling thread: the machine is shared (other builds run), and a
/// descheduled thread must not count.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes through it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A contender: a name and a closure running `rounds` rounds, returning objects done.
type Run<'a> = Box<dyn FnMut(usize) -> usize + 'a>;

/// Runs the contenders interleaved and prints one row: median Mobj/s each and ratios to the
/// `pointer` contender (index 0 must be `pointer`, the last `pointer'`).
fn row(o: &Opts, label: &str, runs: &mut [(&str, Run<'_>)]) {
    if let Some(objs) = o.fixed {
        for (_, f) in runs.iter_mut() {
            let per = f(1).max(1);
            f(objs / per);
        }
        println!("{label}: fixed {objs} objects per contender");
        return;
    }
    // Calibrate rounds for ~ms each, on the first contender.
    let mut rounds = 1usize;
    loop {
        let t = cpu_now();
        (runs[0].1)(rounds);
        if cpu_now() - t >= Duration::from_millis(o.ms / 4).max(Duration::from_micros(500)) {
            break;
        }
        rounds *= 2;
    }
    rounds *= 4;
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    for _ in 0..o.reps {
        for (k, (_, f)) in runs.iter_mut().enumerate() {
            let t = cpu_now();
            let n = f(rounds);
            rates[k].push(n as f64 / (cpu_now() - t).as_secs_f64() / 1e6);
        }
    }
    let med: Vec<f64> = rates
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    let mut s = format!("{label:<28}");
    for (k, (name, _)) in runs.iter().enumerate() {
        s += &format!(" {name} {:>7.1}", med[k]);
    }
    s += " |";
    for (k, (name, _)) in runs.iter().enumerate().skip(1) {
        s += &format!(" {name}/pointer {:.3}", med[k] / med[0]);
    }
    println!("{s}");
}

fn main() {
    let o = parse();
    let want = |step: &str| o.only.as_deref().is_none_or(|w| w == step);
    println!(
        "touch_micro: Mobj/s (thread CPU time), median of {} x ~{} ms, contenders interleaved; stride {STRIDE}",
        o.reps, o.ms
    );
    let m = Region::new();
    let _ = &m.mem;
    // Entries in a scattered (LIFO-like) order over the region.
    let order: Vec<usize> = (0..N_OBJS).map(|i| (i * 389) % N_OBJS).collect();
    let ent_i: Vec<u32> = order.iter().map(|&i| MIndex::encode(&m, i)).collect();
    let ent_o: Vec<u32> = order.iter().map(|&i| MOffset::encode(&m, i)).collect();
    let ent_p: Vec<*mut u8> = order.iter().map(|&i| MPointer::encode(&m, i)).collect();
    for n in [32usize, 128] {
        if want("conv") {
            row(
                &o,
                &format!("conv n={n}"),
                &mut [
                    (
                        "pointer",
                        Box::new(|r| conv::<MPointer>(&m, &ent_p[..n], r)),
                    ),
                    ("offset", Box::new(|r| conv::<MOffset>(&m, &ent_o[..n], r))),
                    ("index", Box::new(|r| conv::<MIndex>(&m, &ent_i[..n], r))),
                    (
                        "pointer'",
                        Box::new(|r| conv::<MPointer>(&m, &ent_p[..n], r)),
                    ),
                ],
            );
        }
        if want("store") {
            row(
                &o,
                &format!("store n={n}"),
                &mut [
                    (
                        "pointer",
                        Box::new(|r| store::<MPointer>(&m, &ent_p[..n], r)),
                    ),
                    ("offset", Box::new(|r| store::<MOffset>(&m, &ent_o[..n], r))),
                    ("index", Box::new(|r| store::<MIndex>(&m, &ent_i[..n], r))),
                    (
                        "pointer'",
                        Box::new(|r| store::<MPointer>(&m, &ent_p[..n], r)),
                    ),
                ],
            );
        }
    }
    let cells = [(1usize, 1usize), (4, 8), (8, 4), (32, 32)];
    if want("fresh") {
        for &(get, put) in &cells {
            for keep in [32usize, 128] {
                let (mut si, mut so, mut sp, mut sp2) =
                    (ent_i.clone(), ent_o.clone(), ent_p.clone(), ent_p.clone());
                row(
                    &o,
                    &format!("fresh get={get} put={put} keep={keep}"),
                    &mut [
                        (
                            "pointer",
                            Box::new(|r| fresh::<MPointer>(&m, &mut sp, get, put, keep, r)),
                        ),
                        (
                            "offset",
                            Box::new(|r| fresh::<MOffset>(&m, &mut so, get, put, keep, r)),
                        ),
                        (
                            "index",
                            Box::new(|r| fresh::<MIndex>(&m, &mut si, get, put, keep, r)),
                        ),
                        (
                            "pointer'",
                            Box::new(|r| fresh::<MPointer>(&m, &mut sp2, get, put, keep, r)),
                        ),
                    ],
                );
            }
        }
    }
    let steps: Vec<(&str, bool)> = [("pool", false), ("pool-prefetch", true)]
        .into_iter()
        .filter(|(step, _)| want(step))
        .collect();
    if !steps.is_empty() {
        let cap = 2048;
        let b = || {
            PoolBuilder::<Obj>::zeroed(cap)
                .cache_size(512)
                .prefault(true)
        };
        b().repr::<idxpool::Pointer>()
            .scoped(|pp| {
                b().repr::<Offset>().scoped(|op| {
                    b().repr::<Index>().scoped(|ip| {
                        b().repr::<idxpool::Pointer>().scoped(|pp2| {
                            let mut cp = pp.local_cache();
                            let mut co = op.local_cache();
                            let mut ci = ip.local_cache();
                            let mut cp2 = pp2.local_cache();
                            for &(step, prefetch) in &steps {
                                for &(get, put) in &cells {
                                    for keep in [32usize, 128, 512] {
                                        row(
                                            &o,
                                            &format!("{step} get={get} put={put} keep={keep}"),
                                            &mut [
                                                (
                                                    "pointer",
                                                    Box::new(|r| {
                                                        touch_step(
                                                            prefetch, &mut cp, get, put, keep, r,
                                                        )
                                                    }),
                                                ),
                                                (
                                                    "offset",
                                                    Box::new(|r| {
                                                        touch_step(
                                                            prefetch, &mut co, get, put, keep, r,
                                                        )
                                                    }),
                                                ),
                                                (
                                                    "index",
                                                    Box::new(|r| {
                                                        touch_step(
                                                            prefetch, &mut ci, get, put, keep, r,
                                                        )
                                                    }),
                                                ),
                                                (
                                                    "pointer'",
                                                    Box::new(|r| {
                                                        touch_step(
                                                            prefetch, &mut cp2, get, put, keep, r,
                                                        )
                                                    }),
                                                ),
                                            ],
                                        );
                                    }
                                }
                            }
                        })
                    })
                })
            })
            .expect("pools")
            .expect("pools")
            .expect("pools")
            .expect("pools");
    }
}
