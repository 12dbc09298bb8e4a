//! DPDK 22.11's `mempool_perf_autotest`, ported: the index pool against its pointer twin.
//!
//! Per thread, repeat: get `n_keep` objects in chunks of `n_get_bulk`, then put them all back in
//! chunks of `n_put_bulk`. The rate is objects got-and-put per second, summed over threads
//! (DPDK's `rate_persec`). The matrix is DPDK's: cache 512 and no cache; 1 and 2 threads;
//! `n_get_bulk`, `n_put_bulk` in {1, 4, 8, 32}; `n_keep` in {32, 128, 512}; `constant_n` 0 and 1
//! (1 = the bulk size is a compile-time constant, only where get == put). On top of DPDK's
//! matrix: `touch` 0 and 1 (1 = each object is written through `&mut T` right after the get, the
//! real use, where the index pays its index -> address conversion).
//!
//! Both pools run the very same generic code (over `idxpool::repr::Repr`); only the entry type
//! differs (4-byte index vs 8-byte pointer). Each cell runs interleaved (index, pointer,
//! pointer, index, ...: ABBA order, which cancels a linear drift) for `--reps` repetitions of
//! `--cell-ms` each, after one untimed warm-up run of each pool; the median is reported. Pool creation and first touch are never timed (pools are
//! prefaulted and live across the cells of a group).
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example mempool_perf                 # full matrix (~21 min on 2 cores)
//! cargo run --release -p idxpool-bench --example mempool_perf -- --quick      # representative subset (< 60 s)
//! cargo run --release -p idxpool-bench --example mempool_perf -- --filter "cache=512 cores=1" --csv out.csv
//! ```
//!
//! Output: progress on stderr; on stdout a table per flush policy, each pool's backing, and last
//! the line `geomean index/pointer = X.XXX over N cells (min ... at <cell>, max ... at <cell>)`.
//! `--csv PATH` also writes one row per pool per cell, and an SVG chart of the change per cell
//! next to it (same path, `.svg`).
//!
//! Differences from DPDK's test, none of which favours one pool over the other: threads are
//! not pinned (std threads started together behind a `Barrier`); the put phase returns the
//! chunks last-got-first (DPDK puts them in get order); the pool size, `threads x (512 + 512)
//! minus 1`, uses the cell's thread count (DPDK uses the EAL's lcore count); cells with cache 0
//! run once, under the first policy, when several policies are swept (the policy does not
//! apply); objects have no header, so with `--stride auto` they sit 2048 bytes apart (DPDK's
//! 64-byte header makes its stride 2112 bytes: `--stride 2112` reproduces that).
//!
//! On a machine shared with other work, `--clock cpu` measures rates against each thread's
//! CPU time instead of wall time, which removes most of the noise of being descheduled.

use std::error::Error;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Parser;
use idxpool::repr::Repr;
use idxpool::{
    Brand, FlushPolicy, GenericHandle, GenericPool, Index, LocalCache, Pointer, PoolBuilder,
    PoolError, StrideMode,
};

/// DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`, the cache size of the cached half of the matrix.
const CACHE_SIZE: u32 = 512;
/// DPDK's `MAX_KEEP`: largest `n_keep`, part of the pool size formula.
const MAX_KEEP: u32 = 512;
/// Bulk sizes of DPDK 22.11 (1, 4, a cache line of pointers, 32).
const BULK_SIZES: [usize; 4] = [1, 4, 8, 32];
/// `n_keep` values of DPDK 22.11.
const KEEPS: [usize; 3] = [32, 128, 512];
/// Objects moved between two reads of the clock (DPDK checks the clock every N = 65536).
const OBJS_PER_CLOCK_CHECK: usize = 8192;

/// The object: 2048 bytes as DPDK's test elements, cache-line aligned. `head` is the 8 bytes
/// written by `touch=1`.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    head: u64,
    rest: [u8; 2040],
}

const _: () = assert!(std::mem::size_of::<Obj>() == 2048);

type H<B, R> = GenericHandle<Obj, B, R>;

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

/// DPDK's mempool_perf_autotest: idxpool's index pool vs its pointer twin, interleaved.
#[derive(Parser, Debug)]
#[command(name = "mempool_perf")]
struct Args {
    /// Representative subset in under a minute: cache 512 only, bulk pairs (1,1) (1,32) (32,1)
    /// (32,32) (4,4), n_keep 32 and 512, short cells.
    #[arg(long)]
    quick: bool,
    /// Length of one timed run of one pool in one cell, in milliseconds [default: 250, quick: 60].
    #[arg(long)]
    cell_ms: Option<u64>,
    /// Timed runs per pool per cell; the median is reported [default: 5].
    #[arg(long)]
    reps: Option<usize>,
    /// Write one row per pool per cell to this CSV file, and a chart next to it (.svg).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Run only cells whose label contains this string (e.g. "cache=512 cores=1 get=32"), or
    /// whose label holds every whitespace-separated word of it (e.g. "keep=512 touch=1").
    /// Labels look like "policy=dpdk2607 cache=512 cores=1 get=32 put=32 keep=512 const=0 touch=1".
    #[arg(long)]
    filter: Option<String>,
    /// Thread counts, comma-separated [default: 1 and every available core up to 2].
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Flush policy of the caches: classic, dpdk2607, aligned, or all [default: the crate's
    /// FlushPolicy::DEFAULT].
    #[arg(long)]
    policy: Option<String>,
    /// Time base of the rates: `wall` (DPDK's: elapsed time, right on dedicated cores) or `cpu`
    /// (each thread's own CPU time: robust when other processes share the cores, as it leaves
    /// out the time a thread waits to be scheduled). Cells last --cell-ms of wall time either way.
    #[arg(long, value_enum, default_value_t = Clock::Wall)]
    clock: Clock,
    /// Object placement of both pools: `auto` (the crate's StrideMode::Auto: 2048 bytes for
    /// these objects) or a stride in bytes, a multiple of 64 >= 2048 (e.g. 2112: 33 cache
    /// lines, so that objects spread over every cache set, as DPDK's object header and
    /// padding do).
    #[arg(long, default_value = "auto", value_parser = parse_stride)]
    stride: StrideMode,
}

/// Parses `--stride`.
fn parse_stride(s: &str) -> Result<StrideMode, String> {
    if s == "auto" {
        return Ok(StrideMode::Auto);
    }
    let b: usize = s
        .parse()
        .map_err(|_| format!("expected auto or a number of bytes, got {s:?}"))?;
    StrideMode::Bytes(b)
        .stride_for(std::mem::size_of::<Obj>(), std::mem::align_of::<Obj>())
        .map(StrideMode::Bytes)
        .map_err(|e| e.to_string())
}

/// Time base of a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Clock {
    /// Elapsed (wall-clock) time.
    Wall,
    /// The measuring thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
    Cpu,
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on
    // every Linux since 2.6.12, and clock_gettime only writes through the pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Measures one worker run: the deadline is always wall time (so cells have a fixed length);
/// the rate's time base is the chosen clock, read only at the start and the end.
struct Stopwatch {
    clock: Clock,
    wall: Instant,
    cpu: Duration,
}

impl Stopwatch {
    fn start(clock: Clock) -> Self {
        Stopwatch {
            clock,
            cpu: if clock == Clock::Cpu {
                thread_cpu_time()
            } else {
                Duration::ZERO
            },
            wall: Instant::now(),
        }
    }

    fn wall_elapsed(&self) -> Duration {
        self.wall.elapsed()
    }

    /// Elapsed time on the chosen clock.
    fn measured(&self) -> Duration {
        match self.clock {
            Clock::Wall => self.wall.elapsed(),
            Clock::Cpu => thread_cpu_time().saturating_sub(self.cpu),
        }
    }
}

/// Default thread counts: 1 and every available core up to 2.
fn default_cores(available: usize) -> Vec<usize> {
    (1..=available.clamp(1, 2)).collect()
}

/// Parses `--policy`: a name, `all`, or none (the default policy).
fn parse_policies(arg: Option<&str>) -> Result<Vec<FlushPolicy>, String> {
    match arg {
        None => Ok(vec![FlushPolicy::DEFAULT]),
        Some("all") => Ok(FlushPolicy::ALL.to_vec()),
        Some(name) => FlushPolicy::from_name(name)
            .map(|p| vec![p])
            .ok_or_else(|| {
                let names: Vec<&str> = FlushPolicy::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown policy {name:?}: expected one of {}, or all",
                    names.join(", ")
                )
            }),
    }
}

// ---------------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------------

/// One cell of the matrix (a pool configuration and a workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    cache: u32,
    cores: usize,
    get: usize,
    put: usize,
    keep: usize,
    constant: bool,
    touch: bool,
}

impl Cell {
    /// Label used by `--filter`, progress and the summary.
    fn label(&self) -> String {
        format!(
            "cache={} cores={} get={} put={} keep={} const={} touch={}",
            self.cache,
            self.cores,
            self.get,
            self.put,
            self.keep,
            u8::from(self.constant),
            u8::from(self.touch)
        )
    }

    /// DPDK's `MEMPOOL_SIZE`: `threads x (MAX_KEEP + cache max) - 1`.
    fn pool_size(&self) -> u32 {
        self.cores as u32 * (MAX_KEEP + CACHE_SIZE) - 1
    }
}

/// The label of a cell under a policy, as `--filter` sees it.
fn full_label(policy: FlushPolicy, cell: &Cell) -> String {
    format!("policy={} {}", policy.name(), cell.label())
}

/// The axes of a matrix.
#[derive(Clone, Debug)]
struct MatrixSpec {
    caches: Vec<u32>,
    cores: Vec<usize>,
    pairs: Vec<(usize, usize)>,
    keeps: Vec<usize>,
    touches: Vec<bool>,
}

impl MatrixSpec {
    /// DPDK 22.11's matrix plus touch 0/1.
    fn full(cores: &[usize]) -> Self {
        MatrixSpec {
            caches: vec![CACHE_SIZE, 0],
            cores: cores.to_vec(),
            pairs: BULK_SIZES
                .iter()
                .flat_map(|&g| BULK_SIZES.iter().map(move |&p| (g, p)))
                .collect(),
            keeps: KEEPS.to_vec(),
            touches: vec![false, true],
        }
    }

    /// The `--quick` subset.
    fn quick(cores: &[usize]) -> Self {
        MatrixSpec {
            caches: vec![CACHE_SIZE],
            cores: cores.to_vec(),
            pairs: vec![(1, 1), (1, 32), (32, 1), (32, 32), (4, 4)],
            keeps: vec![32, 512],
            touches: vec![false, true],
        }
    }
}

/// Every cell of `spec`, grouped by (cache, cores) in that order; `constant_n = 1` cells only
/// where get == put (as DPDK replays them).
fn build_matrix(spec: &MatrixSpec) -> Vec<Cell> {
    let mut cells = Vec::new();
    for &cache in &spec.caches {
        for &cores in &spec.cores {
            for &(get, put) in &spec.pairs {
                for &keep in &spec.keeps {
                    let consts: &[bool] = if get == put { &[false, true] } else { &[false] };
                    for &constant in consts {
                        for &touch in &spec.touches {
                            cells.push(Cell {
                                cache,
                                cores,
                                get,
                                put,
                                keep,
                                constant,
                                touch,
                            });
                        }
                    }
                }
            }
        }
    }
    cells
}

/// True when `label` contains `filter`, or holds every whitespace-separated word of it.
fn matches_filter(label: &str, filter: &str) -> bool {
    let filter = filter.trim();
    if filter.is_empty() || label.contains(filter) {
        return true;
    }
    let words: Vec<&str> = label.split_whitespace().collect();
    filter.split_whitespace().all(|w| words.contains(&w))
}

/// The (policy, cell) pairs to run: cache-0 cells only under the first policy (the policy has
/// no cache to act on), filtered.
fn plan(
    cells: &[Cell],
    policies: &[FlushPolicy],
    filter: Option<&str>,
) -> Vec<(FlushPolicy, Cell)> {
    let mut out = Vec::new();
    for (pi, &policy) in policies.iter().enumerate() {
        for cell in cells {
            if cell.cache == 0 && pi > 0 {
                continue;
            }
            if filter.map_or(true, |f| matches_filter(&full_label(policy, cell), f)) {
                out.push((policy, *cell));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Statistics and output
// ---------------------------------------------------------------------------------------------

/// Median (mean of the two middle values for an even count); NaN for no value.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The measured medians of one cell.
#[derive(Clone, Debug)]
struct CellResult {
    policy: FlushPolicy,
    cell: Cell,
    /// Objects got-and-put per second, summed over threads.
    index: f64,
    pointer: f64,
}

impl CellResult {
    fn ratio(&self) -> f64 {
        self.index / self.pointer
    }

    fn change_pct(&self) -> f64 {
        (self.ratio() - 1.0) * 100.0
    }

    /// The cell's label, with its policy when several policies ran.
    fn label(&self, with_policy: bool) -> String {
        if with_policy {
            full_label(self.policy, &self.cell)
        } else {
            self.cell.label()
        }
    }
}

/// Geometric mean of index/pointer ratios and the extreme cells.
#[derive(Clone, Debug, PartialEq)]
struct Summary {
    geomean: f64,
    n: usize,
    min: (f64, String),
    max: (f64, String),
}

/// Summarises `(label, ratio)` pairs, skipping non-finite or non-positive ratios; None if none
/// is left.
fn summarize(ratios: &[(String, f64)]) -> Option<Summary> {
    let ok: Vec<&(String, f64)> = ratios
        .iter()
        .filter(|(_, r)| r.is_finite() && *r > 0.0)
        .collect();
    let first = ok.first()?;
    let mut min = (first.1, first.0.clone());
    let mut max = min.clone();
    let mut log_sum = 0.0;
    for (label, r) in &ok {
        log_sum += r.ln();
        if *r < min.0 {
            min = (*r, label.clone());
        }
        if *r > max.0 {
            max = (*r, label.clone());
        }
    }
    Some(Summary {
        geomean: (log_sum / ok.len() as f64).exp(),
        n: ok.len(),
        min,
        max,
    })
}

/// The last line of the output.
fn summary_line(s: &Summary) -> String {
    format!(
        "geomean index/pointer = {:.3} over {} cells (min {:.3} at {}, max {:.3} at {})",
        s.geomean, s.n, s.min.0, s.min.1, s.max.0, s.max.1
    )
}

/// Exact CSV header.
const CSV_HEADER: &str =
    "pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate_per_sec";

/// One row per pool per cell.
fn write_csv<W: Write>(mut w: W, results: &[CellResult]) -> io::Result<()> {
    writeln!(w, "{CSV_HEADER}")?;
    for r in results {
        for (pool, rate) in [("index", r.index), ("pointer", r.pointer)] {
            let c = &r.cell;
            writeln!(
                w,
                "{pool},{},{},{},{},{},{},{},{},{:.0}",
                r.policy.name(),
                c.cache,
                c.cores,
                c.get,
                c.put,
                c.keep,
                u8::from(c.constant),
                u8::from(c.touch),
                rate
            )?;
        }
    }
    w.flush()
}

/// The table: one section per policy, rates in millions of objects per second.
fn format_table(results: &[CellResult]) -> String {
    let mut out = String::new();
    let mut policies: Vec<FlushPolicy> = Vec::new();
    for r in results {
        if !policies.contains(&r.policy) {
            policies.push(r.policy);
        }
    }
    for policy in policies {
        let _ = writeln!(out, "policy {policy}:");
        let _ = writeln!(
            out,
            "{:>5} {:>5} {:>10} {:>10} {:>6} {:>10} {:>5} {:>12} {:>12} {:>8}",
            "cache",
            "cores",
            "n_get_bulk",
            "n_put_bulk",
            "n_keep",
            "constant_n",
            "touch",
            "index Mobj/s",
            "pointer Mobj/s",
            "change"
        );
        for r in results.iter().filter(|r| r.policy == policy) {
            let c = &r.cell;
            let _ = writeln!(
                out,
                "{:>5} {:>5} {:>10} {:>10} {:>6} {:>10} {:>5} {:>12.2} {:>14.2} {:>+7.1}%",
                c.cache,
                c.cores,
                c.get,
                c.put,
                c.keep,
                u8::from(c.constant),
                u8::from(c.touch),
                r.index / 1e6,
                r.pointer / 1e6,
                r.change_pct()
            );
        }
    }
    out
}

/// `path` with its extension replaced by `.svg`.
fn svg_path(csv: &Path) -> PathBuf {
    csv.with_extension("svg")
}

/// Horizontal bar chart of the change (index vs pointer, %) per cell, first cell on top.
fn write_svg(path: &Path, results: &[CellResult], with_policy: bool) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;

    let n = results.len();
    if n == 0 {
        return Ok(());
    }
    let changes: Vec<f64> = results.iter().map(|r| r.change_pct()).collect();
    let labels: Vec<String> = results.iter().map(|r| r.label(with_policy)).collect();
    let lo = changes.iter().copied().fold(0.0f64, f64::min).floor() - 2.0;
    let hi = changes.iter().copied().fold(0.0f64, f64::max).ceil() + 2.0;
    let height = 90 + 16 * n as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let label_width = 7 * labels.iter().map(|l| l.len()).max().unwrap_or(10) as u32 + 20;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "idxpool mempool_perf: index vs pointer pool, change % per cell (median)",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(label_width)
        .build_cartesian_2d(lo..hi, (0..n as i32 - 1).into_segmented())?;
    // Row i (from the bottom) shows result n - 1 - i, so that the first cell is on top.
    let row_label = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            let idx = n as i32 - 1 - *i;
            usize::try_from(idx)
                .ok()
                .and_then(|k| labels.get(k).cloned())
                .unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .y_labels(n)
        .y_label_formatter(&row_label)
        .y_label_style(("monospace", 11))
        .x_desc("index rate vs pointer rate, %")
        .disable_y_mesh()
        .draw()?;
    chart.draw_series(
        Histogram::horizontal(&chart)
            .style_func(|_, v: &f64| {
                if *v >= 0.0 {
                    GREEN.mix(0.8).filled()
                } else if *v >= -3.0 {
                    RGBColor(255, 165, 0).filled()
                } else {
                    RED.mix(0.8).filled()
                }
            })
            .margin(2)
            .data(
                changes
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| (n as i32 - 1 - k as i32, c)),
            ),
    )?;
    chart.draw_series(LineSeries::new(
        [(0.0, SegmentValue::Exact(0)), (0.0, SegmentValue::Last)],
        BLACK,
    ))?;
    root.present()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The workload (generic over the representation: the same code for both pools)
// ---------------------------------------------------------------------------------------------

/// Runs one cell on one thread's cache for `dur`: returns (objects got-and-put, elapsed).
fn worker<B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    cell: &Cell,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    match (cell.constant, cell.touch) {
        (false, false) => worker_dyn::<false, B, R>(c, cell, dur, clock),
        (false, true) => worker_dyn::<true, B, R>(c, cell, dur, clock),
        (true, touch) => {
            assert_eq!(cell.get, cell.put, "constant_n cells have get == put");
            match (cell.get, touch) {
                (1, false) => worker_const::<1, false, B, R>(c, cell.keep, dur, clock),
                (1, true) => worker_const::<1, true, B, R>(c, cell.keep, dur, clock),
                (4, false) => worker_const::<4, false, B, R>(c, cell.keep, dur, clock),
                (4, true) => worker_const::<4, true, B, R>(c, cell.keep, dur, clock),
                (8, false) => worker_const::<8, false, B, R>(c, cell.keep, dur, clock),
                (8, true) => worker_const::<8, true, B, R>(c, cell.keep, dur, clock),
                (32, false) => worker_const::<32, false, B, R>(c, cell.keep, dur, clock),
                (32, true) => worker_const::<32, true, B, R>(c, cell.keep, dur, clock),
                (n, _) => panic!("no constant_n instance for bulk size {n}"),
            }
        }
    }
}

/// `constant_n = 0`: bulk sizes are run-time values (`get_bulk` / `put_bulk_tail`). Not
/// inlined, so that each variant is one function to profile and disassemble.
#[inline(never)]
fn worker_dyn<const TOUCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    cell: &Cell,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let (n_get, n_put, keep) = (cell.get, cell.put, cell.keep);
    // Handle -> &mut T converter holding base and stride by value (registers in the loop).
    let objs = c.pool().resolver();
    let mut kept: Vec<H<B, R>> = Vec::with_capacity(keep);
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    loop {
        for _ in 0..cycles {
            while kept.len() < keep {
                let at = kept.len();
                if let Err(e) = c.get_bulk(&mut kept, n_get) {
                    c.put_bulk(&mut kept);
                    return Err(e);
                }
                if TOUCH {
                    for h in &mut kept[at..] {
                        objs.get_mut(h).head = count;
                    }
                }
            }
            while !kept.is_empty() {
                c.put_bulk_tail(&mut kept, n_put);
            }
            count += keep as u64;
        }
        if start.wall_elapsed() >= dur {
            return Ok((count, start.measured()));
        }
    }
}

/// `constant_n = 1`: the bulk size is the compile-time constant `N` (`get_array::<N>` /
/// `put_array`), monomorphised per N. Not inlined (see `worker_dyn`).
#[inline(never)]
fn worker_const<const N: usize, const TOUCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    keep: usize,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let chunks = keep / N;
    let objs = c.pool().resolver();
    let mut kept: Vec<[H<B, R>; N]> = Vec::with_capacity(chunks);
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    loop {
        for _ in 0..cycles {
            for _ in 0..chunks {
                match c.get_array::<N>() {
                    Ok(mut a) => {
                        if TOUCH {
                            for h in &mut a {
                                objs.get_mut(h).head = count;
                            }
                        }
                        kept.push(a);
                    }
                    Err(e) => {
                        while let Some(a) = kept.pop() {
                            c.put_array(a);
                        }
                        return Err(e);
                    }
                }
            }
            while let Some(a) = kept.pop() {
                c.put_array(a);
            }
            count += (chunks * N) as u64;
        }
        if start.wall_elapsed() >= dur {
            return Ok((count, start.measured()));
        }
    }
}

/// One timed run of one cell: one thread per cache, started together behind a barrier.
/// Returns the summed rate (objects got-and-put per second).
fn run_cell<B: Brand, R: Repr>(
    caches: &mut [LocalCache<'_, Obj, B, R>],
    cell: &Cell,
    dur: Duration,
    clock: Clock,
) -> Result<f64, PoolError> {
    let barrier = Barrier::new(caches.len());
    let results: Vec<Result<(u64, Duration), PoolError>> = std::thread::scope(|s| {
        let handles: Vec<_> = caches
            .iter_mut()
            .map(|c| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    worker(c, cell, dur, clock)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    });
    let mut rate = 0.0;
    for r in results {
        let (count, elapsed) = r?;
        rate += count as f64 / elapsed.as_secs_f64();
    }
    Ok(rate)
}

/// Timing parameters.
#[derive(Clone, Copy, Debug)]
struct Timing {
    cell: Duration,
    warm: Duration,
    reps: usize,
    clock: Clock,
    stride: StrideMode,
}

/// Progress reporting on stderr.
struct Progress {
    done: usize,
    total: usize,
    start: Instant,
    with_policy: bool,
}

/// Runs the cells of one (policy, cache, cores) group on a pair of pools that live for the
/// whole group, with one persistent cache per thread per pool.
fn run_group<B1: Brand, B2: Brand>(
    ip: &GenericPool<Obj, B1, Index>,
    pp: &GenericPool<Obj, B2, Pointer>,
    policy: FlushPolicy,
    cells: &[Cell],
    timing: Timing,
    progress: &mut Progress,
) -> Result<Vec<CellResult>, PoolError> {
    let threads = cells[0].cores;
    let mut ic: Vec<_> = (0..threads).map(|_| ip.local_cache()).collect();
    let mut pc: Vec<_> = (0..threads).map(|_| pp.local_cache()).collect();
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        run_cell(&mut ic, cell, timing.warm, timing.clock)?;
        run_cell(&mut pc, cell, timing.warm, timing.clock)?;
        let mut irates = Vec::with_capacity(timing.reps);
        let mut prates = Vec::with_capacity(timing.reps);
        // Interleaved in ABBA order (index, pointer, pointer, index, ...), so that a load
        // drift during the cell (other processes) hits both pools alike.
        for rep in 0..timing.reps {
            if rep % 2 == 0 {
                irates.push(run_cell(&mut ic, cell, timing.cell, timing.clock)?);
                prates.push(run_cell(&mut pc, cell, timing.cell, timing.clock)?);
            } else {
                prates.push(run_cell(&mut pc, cell, timing.cell, timing.clock)?);
                irates.push(run_cell(&mut ic, cell, timing.cell, timing.clock)?);
            }
        }
        let r = CellResult {
            policy,
            cell: *cell,
            index: median(&mut irates),
            pointer: median(&mut prates),
        };
        progress.done += 1;
        eprintln!(
            "[{:>3}/{}] {:>5.0}s  {}: index {:.2} M/s, pointer {:.2} M/s ({:+.1}%)",
            progress.done,
            progress.total,
            progress.start.elapsed().as_secs_f64(),
            r.label(progress.with_policy),
            r.index / 1e6,
            r.pointer / 1e6,
            r.change_pct()
        );
        out.push(r);
    }
    Ok(out)
}

/// Builds the pool pair of a group (fresh brands, prefaulted) and runs its cells. Returns the
/// results and the two pools' backing reports.
fn run_pools(
    policy: FlushPolicy,
    cells: &[Cell],
    timing: Timing,
    progress: &mut Progress,
) -> Result<(Vec<CellResult>, String, String), PoolError> {
    let c0 = cells[0];
    let builder = || {
        PoolBuilder::<Obj>::zeroed(c0.pool_size())
            .cache_size(c0.cache)
            .policy(policy)
            .stride(timing.stride)
            .prefault(true)
    };
    let nested = builder().scoped(|ip| {
        builder().scoped_ptr(|pp| {
            let backing = (
                format!("{}, stride {} B", ip.backing(), ip.stride()),
                format!("{}, stride {} B", pp.backing(), pp.stride()),
            );
            run_group(&ip, &pp, policy, cells, timing, progress)
                .map(|res| (res, backing.0, backing.1))
        })
    });
    nested??
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cores = args
        .cores
        .clone()
        .unwrap_or_else(|| default_cores(available));
    if cores.is_empty() || cores.contains(&0) {
        return Err("--cores needs thread counts >= 1".into());
    }
    if let Some(&c) = cores.iter().find(|&&c| c > available) {
        eprintln!("warning: {c} threads on {available} available cores: they will time-share");
    }
    let policies = parse_policies(args.policy.as_deref())?;
    let spec = if args.quick {
        MatrixSpec::quick(&cores)
    } else {
        MatrixSpec::full(&cores)
    };
    let cell_ms = args.cell_ms.unwrap_or(if args.quick { 60 } else { 250 });
    let reps = args.reps.unwrap_or(5);
    if cell_ms == 0 || reps == 0 {
        return Err("--cell-ms and --reps must be at least 1".into());
    }
    let timing = Timing {
        cell: Duration::from_millis(cell_ms),
        warm: Duration::from_millis((cell_ms / 5).clamp(5, 50)),
        reps,
        clock: args.clock,
        stride: args.stride,
    };
    let todo = plan(&build_matrix(&spec), &policies, args.filter.as_deref());
    if todo.is_empty() {
        return Err(format!(
            "no cell matches --filter {:?}",
            args.filter.unwrap_or_default()
        )
        .into());
    }
    // Open the CSV now, so that a bad path fails before the run rather than after it.
    let csv = match &args.csv {
        Some(path) => Some((
            path.clone(),
            std::fs::File::create(path)
                .map_err(|e| format!("cannot create --csv {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let with_policy = policies.len() > 1;
    let per_cell = 2.0 * (reps as f64 * timing.cell.as_secs_f64() + timing.warm.as_secs_f64());
    eprintln!(
        "mempool_perf: {} cells x 2 pools x {} reps x {} ms (+ warm-up): about {:.0} s",
        todo.len(),
        reps,
        cell_ms,
        todo.len() as f64 * per_cell
    );
    let mut progress = Progress {
        done: 0,
        total: todo.len(),
        start: Instant::now(),
        with_policy,
    };
    let mut results: Vec<CellResult> = Vec::with_capacity(todo.len());
    let mut backings: Option<(String, String)> = None;
    let mut i = 0;
    while i < todo.len() {
        let (policy, c0) = todo[i];
        let mut j = i;
        while j < todo.len()
            && todo[j].0 == policy
            && todo[j].1.cache == c0.cache
            && todo[j].1.cores == c0.cores
        {
            j += 1;
        }
        let cells: Vec<Cell> = todo[i..j].iter().map(|&(_, c)| c).collect();
        let (res, ib, pb) = run_pools(policy, &cells, timing, &mut progress)?;
        backings.get_or_insert((ib, pb));
        results.extend(res);
        i = j;
    }

    let stdout = io::stdout();
    let mut out = stdout.lock();
    if let Some((ib, pb)) = &backings {
        writeln!(out, "backing: index pool {ib}; pointer pool {pb}")?;
    }
    writeln!(
        out,
        "objects of {} B, {} reps x {} ms per pool per cell, median, {} clock; change = index vs pointer",
        std::mem::size_of::<Obj>(),
        reps,
        cell_ms,
        match args.clock {
            Clock::Wall => "wall",
            Clock::Cpu => "thread CPU",
        }
    )?;
    write!(out, "{}", format_table(&results))?;
    if let Some((path, file)) = csv {
        write_csv(io::BufWriter::new(file), &results)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        let svg = svg_path(&path);
        write_svg(&svg, &results, with_policy)
            .map_err(|e| format!("writing {}: {e}", svg.display()))?;
        eprintln!("wrote {} and {}", path.display(), svg.display());
    }
    let ratios: Vec<(String, f64)> = results
        .iter()
        .map(|r| (r.label(with_policy), r.ratio()))
        .collect();
    match summarize(&ratios) {
        Some(s) => writeln!(out, "{}", summary_line(&s))?,
        None => writeln!(out, "geomean index/pointer = n/a over 0 cells")?,
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mempool_perf: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(policy: FlushPolicy, get: usize, index: f64, pointer: f64) -> CellResult {
        CellResult {
            policy,
            cell: Cell {
                cache: 512,
                cores: 1,
                get,
                put: get,
                keep: 32,
                constant: false,
                touch: false,
            },
            index,
            pointer,
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
        assert_eq!(median(&mut [5.0, 1.0, 100.0, 2.0, 3.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn full_matrix_has_dpdk_cells_plus_touch() {
        let cells = build_matrix(&MatrixSpec::full(&[1, 2]));
        // Per (cache, cores): 16 bulk pairs x 3 keeps + 4 (get == put) x 3 keeps with
        // constant_n = 1 = 60 DPDK cells, x 2 touch; x 2 caches x 2 core counts.
        assert_eq!(cells.len(), 60 * 2 * 2 * 2);
        assert!(cells.iter().all(|c| !c.constant || c.get == c.put));
        assert_eq!(
            cells.iter().filter(|c| c.constant).count(),
            4 * 3 * 2 * 2 * 2
        );
        // Every get == put pair has both constant_n values.
        for c in cells.iter().filter(|c| c.get == c.put && !c.constant) {
            assert!(cells.contains(&Cell {
                constant: true,
                ..*c
            }));
        }
        // Grouped by (cache, cores): each group is contiguous.
        let mut groups: Vec<(u32, usize)> = cells.iter().map(|c| (c.cache, c.cores)).collect();
        groups.dedup();
        assert_eq!(groups, vec![(512, 1), (512, 2), (0, 1), (0, 2)]);
        assert!(cells
            .iter()
            .all(|c| c.keep % c.get == 0 && c.keep % c.put == 0));
    }

    #[test]
    fn quick_matrix_subset() {
        let cells = build_matrix(&MatrixSpec::quick(&[1]));
        // 5 pairs x 2 keeps + 3 (get == put) x 2 keeps constant, x 2 touch.
        assert_eq!(cells.len(), (5 * 2 + 3 * 2) * 2);
        assert!(cells.iter().all(|c| c.cache == 512 && c.cores == 1));
        assert!(!cells
            .iter()
            .any(|c| c.constant && c.get == 1 && c.put == 32));
    }

    #[test]
    fn pool_size_is_dpdks() {
        let mut c = build_matrix(&MatrixSpec::quick(&[1]))[0];
        assert_eq!(c.pool_size(), 1023);
        c.cores = 2;
        assert_eq!(c.pool_size(), 2047);
    }

    #[test]
    fn filter_by_substring_or_words() {
        let c = Cell {
            cache: 512,
            cores: 1,
            get: 32,
            put: 32,
            keep: 512,
            constant: false,
            touch: true,
        };
        let l = full_label(FlushPolicy::Dpdk2607, &c);
        assert_eq!(
            l,
            "policy=dpdk2607 cache=512 cores=1 get=32 put=32 keep=512 const=0 touch=1"
        );
        assert!(matches_filter(&l, "cache=512 cores=1"));
        assert!(matches_filter(
            &l,
            "cache=512 cores=1 get=32 put=32 keep=512 const=0 touch=1"
        ));
        assert!(matches_filter(&l, "keep=512 touch=1"));
        assert!(matches_filter(&l, ""));
        assert!(!matches_filter(&l, "cache=0"));
        assert!(!matches_filter(&l, "cores=2 touch=1"));
        assert!(!matches_filter(&l, "keep=32 touch=1"));
    }

    #[test]
    fn plan_runs_cache0_once_and_filters() {
        let cells = build_matrix(&MatrixSpec::full(&[1]));
        let all = plan(&cells, &FlushPolicy::ALL, None);
        let cached = cells.iter().filter(|c| c.cache > 0).count();
        let uncached = cells.len() - cached;
        assert_eq!(all.len(), 3 * cached + uncached);
        let f = plan(
            &cells,
            &[FlushPolicy::Classic],
            Some("cache=512 cores=1 get=32 put=32"),
        );
        // keep 32/128/512 x const 0/1 x touch 0/1.
        assert_eq!(f.len(), 12);
        assert!(f
            .iter()
            .all(|(p, c)| *p == FlushPolicy::Classic && c.get == 32));
    }

    #[test]
    fn stride_parses() {
        assert_eq!(parse_stride("auto"), Ok(StrideMode::Auto));
        assert_eq!(parse_stride("2112"), Ok(StrideMode::Bytes(2112)));
        assert!(parse_stride("1024").is_err());
        assert!(parse_stride("x").is_err());
    }

    #[test]
    fn policies_parse() {
        assert_eq!(parse_policies(None).unwrap(), vec![FlushPolicy::DEFAULT]);
        assert_eq!(
            parse_policies(Some("all")).unwrap(),
            FlushPolicy::ALL.to_vec()
        );
        assert_eq!(
            parse_policies(Some("classic")).unwrap(),
            vec![FlushPolicy::Classic]
        );
        assert!(parse_policies(Some("bogus"))
            .unwrap_err()
            .contains("dpdk2607"));
        assert_eq!(default_cores(1), vec![1]);
        assert_eq!(default_cores(2), vec![1, 2]);
        assert_eq!(default_cores(64), vec![1, 2]);
    }

    #[test]
    fn summary_picks_geomean_min_and_max() {
        let r = vec![
            ("a".to_string(), 2.0),
            ("b".to_string(), 0.5),
            ("c".to_string(), 1.0),
            ("d".to_string(), 4.0),
            ("bad".to_string(), f64::NAN),
        ];
        let s = summarize(&r).unwrap();
        assert_eq!(s.n, 4);
        assert!((s.geomean - 2f64.powf(0.5)).abs() < 1e-12);
        assert_eq!(s.min, (0.5, "b".to_string()));
        assert_eq!(s.max, (4.0, "d".to_string()));
        assert_eq!(
            summary_line(&s),
            "geomean index/pointer = 1.414 over 4 cells (min 0.500 at b, max 4.000 at d)"
        );
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn csv_has_exact_header_and_two_rows_per_cell() {
        let results = vec![
            res(FlushPolicy::Dpdk2607, 1, 110e6, 100e6),
            res(FlushPolicy::Classic, 32, 90e6, 100e6),
        ];
        let mut buf = Vec::new();
        write_csv(&mut buf, &results).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(
            lines[0],
            "pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate_per_sec"
        );
        assert_eq!(lines.len(), 1 + 2 * results.len());
        assert_eq!(lines[1], "index,dpdk2607,512,1,1,1,32,0,0,110000000");
        assert_eq!(lines[2], "pointer,dpdk2607,512,1,1,1,32,0,0,100000000");
        assert!(lines[3].starts_with("index,classic,512,1,32,32,"));
        for l in &lines[1..] {
            assert_eq!(l.split(',').count(), 10);
        }
    }

    #[test]
    fn table_has_a_section_per_policy_and_signed_change() {
        let results = vec![
            res(FlushPolicy::Dpdk2607, 1, 110e6, 100e6),
            res(FlushPolicy::Classic, 32, 90e6, 100e6),
        ];
        let t = format_table(&results);
        assert!(t.contains("policy dpdk2607:"));
        assert!(t.contains("policy classic:"));
        let rows: Vec<&str> = t.lines().filter(|l| l.ends_with('%')).collect();
        assert_eq!(rows.len(), 2);
        assert!(
            rows[0].contains("110.00") && rows[0].ends_with("+10.0%"),
            "{}",
            rows[0]
        );
        assert!(rows[1].ends_with("-10.0%"), "{}", rows[1]);
        assert!((results[1].ratio() - 0.9).abs() < 1e-12);
    }

    #[test]
    fn svg_is_written_next_to_the_csv() {
        let dir = std::env::temp_dir().join(format!("mempool_perf_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("out.csv");
        let svg = svg_path(&csv);
        assert_eq!(svg, dir.join("out.svg"));
        let results = vec![
            res(FlushPolicy::Dpdk2607, 1, 110e6, 100e6),
            res(FlushPolicy::Dpdk2607, 32, 90e6, 100e6),
        ];
        write_svg(&svg, &results, false).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"));
        assert!(text.contains("cache=512 cores=1 get=32 put=32 keep=32 const=0 touch=0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn workload_runs_on_both_pools_and_returns_every_object() {
        // A tiny timed run of every kind of cell on both representations: no object lost.
        let cells = [
            (4, 1, false, true),
            (1, 4, false, false),
            (8, 8, true, true),
            (32, 32, true, false),
        ];
        for (get, put, constant, touch) in cells {
            let cell = Cell {
                cache: 64,
                cores: 1,
                get,
                put,
                keep: 32,
                constant,
                touch,
            };
            let d = Duration::from_millis(1);
            PoolBuilder::<Obj>::zeroed(200)
                .cache_size(64)
                .scoped(|pool| {
                    let mut caches = vec![pool.local_cache()];
                    assert!(run_cell(&mut caches, &cell, d, Clock::Cpu).unwrap() > 0.0);
                    drop(caches);
                    assert_eq!(pool.in_use(), 0);
                })
                .unwrap();
            PoolBuilder::<Obj>::zeroed(200)
                .cache_size(0)
                .scoped_ptr(|pool| {
                    let mut caches = vec![pool.local_cache(), pool.local_cache()];
                    assert!(
                        run_cell(&mut caches, &Cell { cores: 2, ..cell }, d, Clock::Wall).unwrap()
                            > 0.0
                    );
                    drop(caches);
                    assert_eq!(pool.in_use(), 0);
                })
                .unwrap();
        }
    }
}
