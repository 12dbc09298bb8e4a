//! DPDK 22.11's `mempool_perf_autotest`, ported: the index pool against its pointer twin, with
//! the run's own noise floor (A/A) and a one-glance verdict.
//!
//! Per thread, repeat: get `n_keep` objects in chunks of `n_get_bulk`, then put them all back in
//! chunks of `n_put_bulk`. The rate is objects got-and-put per second, summed over threads
//! (DPDK's `rate_persec`). DPDK's matrix: cache 512 and no cache; 1 and 2 threads;
//! `n_get_bulk`, `n_put_bulk` in {1, 4, 8, 32}; `n_keep` in {32, 128, 512}; `constant_n` 0 and 1
//! (1 = the bulk size is a compile-time constant, only where get == put). On top of DPDK's
//! matrix: `touch` 0 and 1 (1 = each object is written through `&mut T` right after the get, the
//! real use, where the index pays its index -> address conversion).
//!
//! Both pools run the very same generic code (over `idxpool::repr::Repr`); only the entry type
//! differs (4-byte index vs 8-byte pointer). Each cell runs three contenders interleaved: the
//! index pool (A), the pointer pool (B) and the index pool again (A', the A/A pair), in the
//! order A B A' then A' B A (which cancels a linear drift), for `--reps` repetitions, after one
//! untimed warm-up run of each pool; the medians are reported. A'/A is the run-to-run noise of
//! this very run: the verdict counts only differences larger than it. Pool creation and first
//! touch are never timed (pools are prefaulted and live across the cells of a group).
//!
//! Modes (times hold on a loaded 2-core machine: a time budget shortens the runs of the cells
//! left when the run falls behind; `--cell-ms` fixes the run length instead):
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example mempool_perf                 # 48 cells, about 2 min
//! cargo run --release -p idxpool-bench --example mempool_perf -- --quick      # 24 cells, about 30 s
//! cargo run --release -p idxpool-bench --example mempool_perf -- --full       # DPDK's 480 cells, about 20 min
//! cargo run --release -p idxpool-bench --example mempool_perf -- --full --filter "cache=512 cores=1" --csv out.csv
//! ```
//!
//! Output: on stdout the run's context (pinning, load average), each pool's backing, then one
//! table row per cell as soon as it is measured, and last the geomean line and the verdict
//! (`verdict: index pool faster in X of N cells (...); geomean ...; run-to-run noise (A/A)
//! +-Y%`). Ctrl-C stops after the current measurement and still prints the summary of the
//! cells measured. A progress bar goes to stderr when it is a terminal. `--csv PATH` also
//! writes three rows per cell (index, pointer, index-aa), and a chart of the change per cell
//! next to it (same path, `.svg`).
//!
//! Differences from DPDK's test, none of which favours one pool over the other: threads are
//! not pinned by default (`--pin`); the put phase returns the chunks last-got-first (DPDK puts
//! them in get order); the pool size, `threads x (512 + 512) minus 1`, uses the cell's thread
//! count (DPDK uses the EAL's lcore count); cells with cache 0 run once, under the first
//! policy, when several policies are swept (the policy does not apply); objects have no
//! header, so with `--stride auto` they sit 2048 bytes apart (DPDK's 64-byte header makes its
//! stride 2112 bytes: `--stride 2112` reproduces that).
//!
//! Rates are measured against each thread's CPU time by default (`--clock cpu`), which removes
//! most of the noise of being descheduled on a machine shared with other work; `--clock wall`
//! is DPDK's time base (elapsed time), right on dedicated, pinned cores.
//!
//! `--matrix 2607` runs DPDK 26.07's matrix instead (bulk sizes 1 to 512, `n_keep` 32 to
//! 32768, its random-bulk pass with DPDK's pseudorandom sequence, its pool size; touch 0).
//! `--floor` adds two contenders per touch=0 cell: the same loops on a bare thread-local LIFO
//! array of u32 and of u64, what the copies alone cost (the index/floor column).
//! `--prefetch` prefetches each got burst for writing (`Resolver::prefetch_all`)
//! before the touch=1 writes; those rows end in ` prefetch=1` and their CSV pools in
//! `+prefetch`. The workers without it are separate instances with no prefetch code.
//! `--runtime` adds a run-time pool (`Pool<Obj, Runtime, R>`, no brand, the 4-byte
//! pool's representation) to every cell: the runtime/index column and a summary line give
//! run-time / branded, side by side with the branded pool's own A/A.
//! `scripts/compare-dpdk.sh` runs this harness cell by cell next to DPDK's C mempool.
//! `--objects N` (instruction counts, `scripts/instr-vs-dpdk.sh`): every contender of a cell
//! runs once untimed (warm-up), then for at least N and 2N objects per thread, no clock read in
//! the loop; under `valgrind --tool=callgrind --collect-atstart=no` each thread's loop is
//! bracketed by callgrind's collection toggles and, after each counted run, the counts are
//! dumped with the label `idxpool pool=<contender> <cell label> objects=<all threads'>`.

mod matrix;
mod report;
mod workload;

use std::error::Error;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use idxpool::repr::Repr;
use idxpool::Brand;
use idxpool::{FlushPolicy, Index, Offset, Pointer, Pool, PoolBuilder, PoolError, StrideMode};
use idxpool_bench::clock::Clock;
use idxpool_bench::pin::{context_line, PinMode, Pinning};
use idxpool_bench::report::{change_chart, create_csv, svg_path, write_csv};
use idxpool_bench::run::{self, human, install_ctrlc, interrupted, progress_bar, Budget};
use idxpool_bench::stats::median;
use indicatif::ProgressBar;

use idxpool_bench::callgrind;
use matrix::{
    build_matrix, build_matrix_2607, default_cores, parse_policies, plan, Cell, MatrixSpec,
    CACHE_SIZE,
};
use report::{csv_rows, CellResult, Stream, CSV_HEADER};
use workload::{run_cell, run_cell_counted, run_floor, run_floor_counted, Limit, Obj};

/// Time budget of the default mode.
const DEFAULT_BUDGET: Duration = Duration::from_secs(120);
/// Time budget of `--quick`.
const QUICK_BUDGET: Duration = Duration::from_secs(30);
/// Time budget of `--full`.
const FULL_BUDGET: Duration = Duration::from_secs(20 * 60);
/// Shortest and longest timed run under a budget.
const MIN_RUN: Duration = Duration::from_millis(10);
const MAX_RUN: Duration = Duration::from_millis(500);

/// Index pool vs pointer pool on DPDK's mempool_perf_autotest matrix, with an A/A noise floor.
///
/// Measures objects got-and-put per second (DPDK's rate_persec) of idxpool's index pool and
/// its pointer twin, interleaved, plus the index pool a second time (A/A) for the run's own
/// noise; prints one row per cell as it is measured, then a one-glance verdict.
/// Takes about 2 minutes by default (48 cells), 30 s with --quick, 20 min with --full (DPDK's
/// 480 cells), after the build; Ctrl-C prints the summary of what was measured.
#[derive(Parser, Debug)]
#[command(name = "mempool_perf", verbatim_doc_comment)]
struct Args {
    /// About 30 s: 24 cells (cache 512, get = put in {1, 4, 32}, n_keep 32 and 512,
    /// constant_n 0, touch 0/1, 1 and 2 threads), 3 reps.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// About 20 min: DPDK's whole matrix (480 cells on 2 cores: cache 512 and 0, every bulk
    /// pair, n_keep 32/128/512, constant_n 0/1, touch 0/1).
    #[arg(long)]
    full: bool,
    /// Time budget in seconds [default: 120; --quick 30; --full 1200]. The runs of the cells
    /// left get shorter when the run falls behind (down to 10 ms), so that it ends on time.
    #[arg(long)]
    budget: Option<u64>,
    /// Fixed length of one timed run, in milliseconds, instead of a time budget (the run then
    /// takes as long as it takes; the estimate is printed first).
    #[arg(long)]
    cell_ms: Option<u64>,
    /// Timed runs per contender per cell; the median is reported [default: 5; --quick 3].
    #[arg(long)]
    reps: Option<usize>,
    /// Write three rows per cell (index, pointer, index-aa) to this CSV file, and a chart next
    /// to it (.svg).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Run only cells whose label contains this string (e.g. "cache=512 cores=1 get=32"), or
    /// whose label holds every whitespace-separated word of it (e.g. "keep=512 touch=1").
    /// Labels look like "policy=dpdk2607 cache=512 cores=1 get=32 put=32 keep=512 const=0
    /// touch=1". Alternatives separated by `|` pick the cells any of them matches (e.g.
    /// "get=1 put=1 keep=512|get=32 put=32 keep=32"). Combine with --full to pick from the
    /// whole matrix.
    #[arg(long)]
    filter: Option<String>,
    /// Thread counts, comma-separated [default: 1 and every available core up to 2].
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Flush policy of the caches: classic, dpdk2607, aligned, or all [default: the crate's
    /// FlushPolicy::DEFAULT].
    #[arg(long)]
    policy: Option<String>,
    /// Time base of the rates: `cpu` (each thread's own CPU time: robust when other processes
    /// share the cores, as it leaves out the time a thread waits to be scheduled; on a busy
    /// 2-core machine the A/A noise was +-3% with it against +-26% with wall) or `wall` (DPDK's:
    /// elapsed time, right on dedicated cores; use it to compare with DPDK's own figures). Runs
    /// last their length of wall time either way.
    #[arg(long, value_enum, default_value_t = Clock::Cpu)]
    clock: Clock,
    /// Object placement of both pools: `auto` (the crate's StrideMode::Auto: 2048 bytes for
    /// these objects) or a stride in bytes, a multiple of 64 >= 2048 (e.g. 2112: 33 cache
    /// lines, so that objects spread over every cache set, as DPDK's object header and
    /// padding do).
    #[arg(long, default_value = "auto", value_parser = parse_stride)]
    stride: StrideMode,
    /// Pin worker thread i to the i-th allowed CPU: off (default), on, or auto (only when those
    /// CPUs are idle now). On a shared machine pinning can make a run far slower.
    #[arg(long, value_enum, default_value_t = PinMode::Off)]
    pin: PinMode,
    /// DPDK release of the matrix: 2211 (its cells; --quick and --full pick among them) or
    /// 2607, DPDK 26.07's (bulk sizes 1 to 512, n_keep 32 to 32768, its random-bulk pass;
    /// 380 cells per cache size and thread count, touch 0; pool size threads x (32768 + 1024)
    /// - 1; time budget as --full; pick cells with --filter, e.g. "cache=512 keep=2048").
    #[arg(long, default_value = "2211", value_parser = ["2211", "2607"])]
    matrix: String,
    /// Also measure the floor of each touch=0 cell: the same loop on a bare thread-local LIFO
    /// array of u32 (the index pool's entries) and of u64 (the pointer twin's): what the copies
    /// alone cost. Adds two contenders per cell, the index/floor column and CSV rows floor32,
    /// floor64.
    #[arg(long)]
    floor: bool,
    /// Entry representation of the 4-byte pool (A and A'): `offset` (the crate's default,
    /// idxpool::Pool) or `index` (idxpool::repr::Index, index x run-time stride); the B pool is
    /// always the pointer twin.
    #[arg(long, value_enum, default_value_t = ReprArg::Offset)]
    repr: ReprArg,
    /// In touch=1 cells, prefetch the objects of each got burst for writing
    /// (`Resolver::prefetch_all`: VPP's burst prefetch, DPDK's rte_prefetch0_write) before
    /// writing through them. Rows are labelled ` prefetch=1`, CSV pools
    /// `index+prefetch`, `pointer+prefetch`, `index-aa+prefetch`. Without the flag the workers
    /// run the same code as before (separate monomorphised instances).
    #[arg(long)]
    prefetch: bool,
    /// Place each thread's table (DPDK's `obj_table`) this many bytes past a 64-byte cache
    /// line: 0 to 56, a multiple of 8 (default: wherever the allocator puts it). With 64-byte
    /// vector moves, a table off a line splits each move over two lines.
    #[arg(long, value_parser = parse_table_offset)]
    table_offset: Option<usize>,
    /// Place each thread's table at a different offset in a 4 KiB page in each repetition (the
    /// same offsets, in the same order, for every contender: rep `r` at `(r x 1040 + 336) mod
    /// 4096`), so that a cell's median is taken over data placements. A table that shares its
    /// page offsets with the top of the pool's cache array runs up to 3x slower (4K aliasing,
    /// BENCHMARKS.md 40); by default the allocator puts every run's table at one address, and
    /// a contender wins or loses that draw for the whole run. Excludes --table-offset.
    #[arg(long, conflicts_with = "table_offset")]
    spread_tables: bool,
    /// Also run each cell through a run-time pool (`idxpool::Pool<Obj, Runtime, R>`: no brand,
    /// one range check per put entry and per access; the same representation as the 4-byte
    /// pool), interleaved with the others: the runtime/index column and the summary line give
    /// run-time / branded. Adds one contender per cell.
    #[arg(long)]
    runtime: bool,
    /// Instruction counting instead of rates: each contender of a cell runs one warm-up run
    /// (65536 objects per thread, one pass of DPDK's loop) and two counted runs of at least N
    /// and 2N objects per thread (whole chunks of 8192 objects: the timed runs' loop, with an
    /// object count in place of the clock), no clock read in their loops, no A/A run (the
    /// index-aa column repeats index). Under `valgrind --tool=callgrind --collect-atstart=no`
    /// each thread's loop is bracketed by callgrind's collection toggles and the counts are
    /// dumped after each counted run, labelled `idxpool pool=<index|pointer|runtime|floor32|
    /// floor64> <cell label> objects=<objects of all threads>` (scripts/instr-vs-dpdk.sh: the
    /// difference of the two dumps is the loop's cost for N objects per thread); without
    /// valgrind the requests do nothing. Excludes --cell-ms, --reps, --budget.
    #[arg(long, conflicts_with_all = ["cell_ms", "reps", "budget"])]
    objects: Option<u64>,
}

/// `--repr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReprArg {
    /// idxpool::repr::Offset: scaled byte offsets (the default of idxpool::Pool).
    Offset,
    /// idxpool::repr::Index: `index + 1`, converted with a multiply by the stride.
    Index,
}

/// Parses `--table-offset`.
fn parse_table_offset(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n < 64 && n % 8 == 0 => Ok(n),
        _ => Err(format!("{s:?}: a byte offset 0..=56, a multiple of 8")),
    }
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

/// How long the timed runs of a cell last.
#[derive(Clone, Copy, Debug)]
enum RunLength {
    /// `--cell-ms`.
    Fixed(Duration),
    /// A share of the time budget.
    Budgeted,
    /// `--objects`: at least this many objects per thread, once per contender, counted.
    Objects(u64),
}

/// Everything a run needs while it measures.
struct Ctx {
    reps: usize,
    /// Contenders per touch=0 cell: 3, or 5 with `--floor`.
    contenders: usize,
    floor: bool,
    /// `--runtime`.
    runtime: bool,
    clock: Clock,
    stride: StrideMode,
    repr: ReprArg,
    pinning: Pinning,
    length: RunLength,
    budget: Budget,
    stream: Stream,
    bar: ProgressBar,
    backing_printed: bool,
}

impl Ctx {
    /// Prints `text` on stdout without tearing the progress bar.
    fn print(&self, text: &str) {
        self.bar.suspend(|| {
            let mut out = io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        });
    }

    /// The length of each timed run of the next cell (warm-ups last a fifth of it).
    fn run_length(&self) -> Duration {
        match self.length {
            RunLength::Fixed(d) => d,
            RunLength::Objects(_) => Duration::ZERO,
            RunLength::Budgeted => run::run_length(
                self.budget.next_slot(),
                runs_per_cell(self.reps, self.contenders),
                MIN_RUN,
                MAX_RUN,
            ),
        }
    }
}

/// The u32 floor's entries (as the index pool's).
fn floor32(i: usize) -> u32 {
    i as u32
}

/// The u64 floor's entries (as the pointer twin's: addresses 2112 bytes apart).
fn floor64(i: usize) -> u64 {
    0x7f00_0000_0000 + 2112 * i as u64
}

/// Timed-run equivalents per cell: contenders x reps, plus a warm-up of a fifth per pool
/// (2, or 4 with the floors).
fn runs_per_cell(reps: usize, contenders: usize) -> f64 {
    contenders as f64 * reps as f64 + 0.2 * (contenders - 1) as f64
}

/// Warm-up length for a run length.
fn warm_length(run: Duration) -> Duration {
    (run / 5).clamp(Duration::from_millis(2), Duration::from_millis(50))
}

/// Runs the cells of one (policy, cache, cores) group on a pair of pools that live for the
/// whole group, with one persistent cache per thread per pool. Stops early (Ok) on Ctrl-C.
fn run_group<B1: Brand, B2: Brand, RA: Repr>(
    ip: &Pool<Obj, B1, RA>,
    pp: &Pool<Obj, B2, Pointer>,
    rp: Option<&Pool<Obj, idxpool::Runtime, RA>>,
    policy: FlushPolicy,
    cells: &[Cell],
    ctx: &mut Ctx,
) -> Result<(), PoolError> {
    let threads = cells[0].cores;
    let mut ic: Vec<_> = (0..threads).map(|_| ip.local_cache()).collect();
    let mut pc: Vec<_> = (0..threads).map(|_| pp.local_cache()).collect();
    let mut rc: Option<Vec<_>> = rp.map(|rp| (0..threads).map(|_| rp.local_cache()).collect());
    let (clock, pin) = (ctx.clock, ctx.pinning.clone());
    for cell in cells {
        if interrupted() {
            return Ok(());
        }
        if let RunLength::Objects(n) = ctx.length {
            let r = count_cell(&mut ic, &mut pc, rc.as_deref_mut(), policy, cell, n, ctx)?;
            ctx.bar.inc(1);
            let text = ctx.stream.push(r);
            ctx.print(&text);
            continue;
        }
        let run = ctx.run_length();
        let (run, warm) = (Limit::Time(run), Limit::Time(warm_length(run)));
        run_cell(&mut ic, cell, warm, clock, &pin)?;
        run_cell(&mut pc, cell, warm, clock, &pin)?;
        if let Some(rc) = rc.as_mut() {
            run_cell(rc, cell, warm, clock, &pin)?;
        }
        let floor = ctx.floor && !cell.touch;
        if floor {
            run_floor(cell, warm, clock, &pin, floor32);
            run_floor(cell, warm, clock, &pin, floor64);
        }
        let mut a = Vec::with_capacity(ctx.reps);
        let mut b = Vec::with_capacity(ctx.reps);
        let mut a2 = Vec::with_capacity(ctx.reps);
        let mut f32s = Vec::with_capacity(ctx.reps);
        let mut f64s = Vec::with_capacity(ctx.reps);
        let mut rts = Vec::with_capacity(ctx.reps);
        // A B A' then A' B A: a load drift during the cell hits all three alike.
        for rep in 0..ctx.reps {
            if interrupted() {
                return Ok(());
            }
            workload::set_table_rep(rep);
            if rep % 2 == 0 {
                a.push(run_cell(&mut ic, cell, run, clock, &pin)?);
                b.push(run_cell(&mut pc, cell, run, clock, &pin)?);
                a2.push(run_cell(&mut ic, cell, run, clock, &pin)?);
            } else {
                a2.push(run_cell(&mut ic, cell, run, clock, &pin)?);
                b.push(run_cell(&mut pc, cell, run, clock, &pin)?);
                a.push(run_cell(&mut ic, cell, run, clock, &pin)?);
            }
            if let Some(rc) = rc.as_mut() {
                rts.push(run_cell(rc, cell, run, clock, &pin)?);
            }
            if floor {
                f32s.push(run_floor(cell, run, clock, &pin, floor32));
                f64s.push(run_floor(cell, run, clock, &pin, floor64));
            }
        }
        let r = CellResult {
            policy,
            cell: *cell,
            index: median(&a),
            pointer: median(&b),
            index_aa: median(&a2),
            floor32: floor.then(|| median(&f32s)),
            floor64: floor.then(|| median(&f64s)),
            runtime: rc.is_some().then(|| median(&rts)),
        };
        ctx.budget.unit_done();
        ctx.bar.inc(1);
        let text = ctx.stream.push(r);
        ctx.print(&text);
    }
    Ok(())
}

/// The caches of one pool, one per thread of a cell.
type Caches<'p, B, R> = [idxpool::LocalCache<&'p Pool<Obj, B, R>>];

/// `--objects`: one warm-up run and two counted runs (N, then 2N objects per thread) of each
/// contender of `cell` (index, pointer, then runtime and the floors when asked), each counted
/// run followed by a callgrind dump labelled with the contender, the cell and the objects
/// moved by all threads. The rates reported are the second runs'.
fn count_cell<B1: Brand, B2: Brand, RA: Repr>(
    ic: &mut Caches<'_, B1, RA>,
    pc: &mut Caches<'_, B2, Pointer>,
    rc: Option<&mut Caches<'_, idxpool::Runtime, RA>>,
    policy: FlushPolicy,
    cell: &Cell,
    n: u64,
    ctx: &Ctx,
) -> Result<CellResult, PoolError> {
    let (clock, pin) = (ctx.clock, &ctx.pinning);
    let warm = Limit::Objects {
        n: 65536,
        counted: false,
    };
    // N then 2N objects per thread: the difference of the two counts is the loop's cost for
    // N objects with every fixed cost (entering and leaving the loop) cancelled.
    let counts = [n, 2 * n].map(|n| Limit::Objects { n, counted: true });
    let dump = |pool: &str, objects: u64| {
        callgrind::dump_stats_at(&format!(
            "idxpool pool={pool} {} objects={objects}",
            cell.label()
        ));
    };
    run_cell(ic, cell, warm, clock, pin)?;
    let mut index = 0.0;
    for limit in counts {
        let (rate, objects) = run_cell_counted(ic, cell, limit, clock, pin)?;
        dump("index", objects);
        index = rate;
    }
    run_cell(pc, cell, warm, clock, pin)?;
    let mut pointer = 0.0;
    for limit in counts {
        let (rate, objects) = run_cell_counted(pc, cell, limit, clock, pin)?;
        dump("pointer", objects);
        pointer = rate;
    }
    let runtime = match rc {
        Some(rc) => {
            run_cell(rc, cell, warm, clock, pin)?;
            let mut runtime = 0.0;
            for limit in counts {
                let (rate, objects) = run_cell_counted(rc, cell, limit, clock, pin)?;
                dump("runtime", objects);
                runtime = rate;
            }
            Some(runtime)
        }
        None => None,
    };
    let floor = ctx.floor && !cell.touch;
    let (mut floor32s, mut floor64s) = (None, None);
    if floor {
        for limit in counts {
            let (rate, objects) = run_floor_counted(cell, limit, clock, pin, floor32);
            dump("floor32", objects);
            floor32s = Some(rate);
            let (rate, objects) = run_floor_counted(cell, limit, clock, pin, floor64);
            dump("floor64", objects);
            floor64s = Some(rate);
        }
    }
    Ok(CellResult {
        policy,
        cell: *cell,
        index,
        pointer,
        index_aa: index,
        floor32: floor32s,
        floor64: floor64s,
        runtime,
    })
}

/// Builds the pool pair of a group (fresh brands, prefaulted) and runs its cells; prints the
/// pools' backing before the first group's rows.
fn run_pools(policy: FlushPolicy, cells: &[Cell], ctx: &mut Ctx) -> Result<(), PoolError> {
    let c0 = cells[0];
    let stride = ctx.stride;
    let builder = || {
        PoolBuilder::<Obj>::zeroed(c0.pool_size())
            .cache_size(c0.cache)
            .policy(policy)
            .stride(stride)
            .prefault(true)
    };
    match ctx.repr {
        ReprArg::Offset => {
            let rp = ctx.runtime.then(|| builder().build()).transpose()?;
            builder()
                .repr::<Offset>()
                .scoped(|ip| run_pair(ip, rp.as_ref(), policy, cells, ctx))?
        }
        ReprArg::Index => {
            let rp = ctx
                .runtime
                .then(|| builder().repr::<Index>().build())
                .transpose()?;
            builder()
                .repr::<Index>()
                .scoped(|ip| run_pair(ip, rp.as_ref(), policy, cells, ctx))?
        }
    }
}

/// Builds the pointer twin of `ip`'s group and runs the group on the pair.
fn run_pair<B1: Brand, RA: Repr>(
    ip: Pool<Obj, B1, RA>,
    rp: Option<&Pool<Obj, idxpool::Runtime, RA>>,
    policy: FlushPolicy,
    cells: &[Cell],
    ctx: &mut Ctx,
) -> Result<(), PoolError> {
    let c0 = cells[0];
    let stride = ctx.stride;
    PoolBuilder::<Obj>::zeroed(c0.pool_size())
        .cache_size(c0.cache)
        .policy(policy)
        .stride(stride)
        .prefault(true)
        .repr::<idxpool::Pointer>().scoped(|pp| {
            if !ctx.backing_printed {
                ctx.backing_printed = true;
                ctx.print(&format!(
                    "backing: 4-byte pool ({} entries) {}, stride {} B; pointer pool {}, stride {} B\n",
                    <RA as Repr>::NAME,
                    ip.backing(),
                    ip.stride(),
                    pp.backing(),
                    pp.stride()
                ));
            }
            run_group(&ip, &pp, rp, policy, cells, ctx)
        })?
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
    let (spec, mode, budget) = if args.full {
        (MatrixSpec::full(&cores), "--full", FULL_BUDGET)
    } else if args.quick {
        (MatrixSpec::quick(&cores), "--quick", QUICK_BUDGET)
    } else {
        (MatrixSpec::standard(&cores), "default", DEFAULT_BUDGET)
    };
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 });
    let (cells, mode, budget) = if args.matrix == "2607" {
        if args.quick || args.full {
            return Err("--matrix 2607 is DPDK 26.07's whole matrix: pick cells with --filter, not --quick or --full".into());
        }
        (
            build_matrix_2607(&[CACHE_SIZE, 0], &cores),
            "--matrix 2607",
            FULL_BUDGET,
        )
    } else {
        (build_matrix(&spec), mode, budget)
    };
    if let Some(off) = args.table_offset {
        workload::TABLE_OFFSET.store(off, std::sync::atomic::Ordering::Relaxed);
    }
    workload::TABLE_SPREAD.store(args.spread_tables, std::sync::atomic::Ordering::Relaxed);
    // --prefetch applies to the cells that write through their handles.
    let cells: Vec<Cell> = cells
        .into_iter()
        .map(|c| Cell {
            prefetch: args.prefetch && c.touch,
            ..c
        })
        .collect();
    let budget = args.budget.map_or(budget, Duration::from_secs);
    if reps == 0 || args.cell_ms == Some(0) || budget.is_zero() {
        return Err("--reps, --cell-ms and --budget must be at least 1".into());
    }
    let contenders = if args.floor { 5 } else { 3 } + usize::from(args.runtime);
    let todo = plan(&cells, &policies, args.filter.as_deref());
    if todo.is_empty() {
        return Err(format!(
            "no cell matches --filter {:?}{}",
            args.filter.unwrap_or_default(),
            if args.full {
                ""
            } else {
                " (add --full to pick from DPDK's whole matrix)"
            }
        )
        .into());
    }
    // Open the CSV now, so that a bad path fails before the run rather than after it.
    let csv = match &args.csv {
        Some(path) => Some((path.clone(), create_csv(path)?)),
        None => None,
    };
    if args.objects.is_some_and(|n| n == 0 || n > 1 << 40) {
        return Err("--objects must be in 1..=2^40".into());
    }
    let (length, expected) = match (args.objects, args.cell_ms) {
        (Some(n), _) => (RunLength::Objects(n), Duration::ZERO),
        (None, Some(ms)) => {
            let run = Duration::from_millis(ms);
            let per_cell = run.mul_f64(contenders as f64 * reps as f64)
                + (contenders as u32 - 1) * warm_length(run);
            (RunLength::Fixed(run), per_cell * todo.len() as u32)
        }
        (None, None) => (RunLength::Budgeted, budget),
    };
    let threads = cores.iter().copied().max().unwrap_or(1);
    let pinning = Pinning::decide(args.pin, threads);
    install_ctrlc();
    println!("mempool_perf: {}", context_line(&pinning));
    if let Some(n) = args.objects {
        println!(
            "mempool_perf ({mode}, --objects {n}): {} cells, each contender (index, pointer{}{}) once untimed and twice counted (at least {n} and {} objects per thread, callgrind dumps when run under valgrind); rates of single runs, no A/A",
            todo.len(),
            if args.runtime { ", runtime" } else { "" },
            if args.floor { ", floors u32 and u64" } else { "" },
            2 * n,
        );
    } else {
        println!(
        "mempool_perf ({mode}): {} cells x {contenders} contenders (index, pointer, index again for A/A{}) x {} reps{}: about {}; Ctrl-C prints the summary so far",
        todo.len(),
        if args.floor { ", floors u32 and u64" } else { "" },
        reps,
        match args.cell_ms {
            Some(ms) => format!(" x {ms} ms"),
            None => format!(", time budget {}", human(budget)),
        },
        human(expected)
    );
        println!(
        "objects of {} B, median of {} reps, {} clock; change = index vs pointer rate, A/A = index pool vs itself",
        std::mem::size_of::<Obj>(),
        reps,
        args.clock.describe()
    );
    }
    let with_policy = policies.len() > 1;
    let mut ctx = Ctx {
        reps,
        contenders,
        floor: args.floor,
        runtime: args.runtime,
        clock: args.clock,
        stride: args.stride,
        repr: args.repr,
        pinning,
        length,
        budget: Budget::new(budget, todo.len()),
        stream: Stream::new(with_policy)
            .with_floor(args.floor)
            .with_runtime(args.runtime),
        bar: progress_bar(todo.len() as u64, !args.quick, "cells"),
        backing_printed: false,
    };
    let mut i = 0;
    while i < todo.len() && !interrupted() {
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
        run_pools(policy, &cells, &mut ctx)?;
        i = j;
    }
    ctx.bar.finish_and_clear();
    let elapsed = ctx.budget.elapsed();

    let mut out = io::stdout().lock();
    if let Some((path, file)) = csv {
        let results = ctx.stream.results();
        write_csv(file, CSV_HEADER, csv_rows(results))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        let svg = svg_path(&path);
        change_chart(
            &svg,
            "idxpool mempool_perf: index vs pointer pool, change % per cell (median)",
            "index rate vs pointer rate, %",
            &ctx.stream.chart_rows(),
            3.0,
        )
        .map_err(|e| format!("writing {}: {e}", svg.display()))?;
        eprintln!("wrote {} and {}", path.display(), svg.display());
    }
    write!(out, "{}", ctx.stream.summary(todo.len()))?;
    writeln!(out, "measured in {}", human(elapsed))?;
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        // 130: interrupted by Ctrl-C (after the summary of what was measured), as a shell does.
        Ok(()) if interrupted() => ExitCode::from(130),
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

    #[test]
    fn stride_parses() {
        assert_eq!(parse_stride("auto"), Ok(StrideMode::Auto));
        assert_eq!(parse_stride("2112"), Ok(StrideMode::Bytes(2112)));
        assert!(parse_stride("1024").is_err());
        assert!(parse_stride("x").is_err());
    }

    #[test]
    fn args_parse_modes() {
        let a = Args::try_parse_from(["mempool_perf", "--quick"]).unwrap();
        assert!(a.quick && !a.full);
        assert_eq!(a.pin, PinMode::Off);
        assert_eq!(a.clock, Clock::Cpu);
        assert!(Args::try_parse_from(["mempool_perf", "--quick", "--full"]).is_err());
        let f = Args::try_parse_from(["mempool_perf", "--full", "--budget", "60"]).unwrap();
        assert_eq!(f.budget, Some(60));
        assert_eq!((f.matrix.as_str(), f.floor), ("2211", false));
        let m = Args::try_parse_from(["mempool_perf", "--matrix", "2607", "--floor"]).unwrap();
        assert_eq!((m.matrix.as_str(), m.floor), ("2607", true));
        assert!(Args::try_parse_from(["mempool_perf", "--matrix", "2400"]).is_err());
        assert!(!a.prefetch);
        let p = Args::try_parse_from(["mempool_perf", "--quick", "--prefetch"]).unwrap();
        assert!(p.prefetch);
        assert_eq!(runs_per_cell(5, 5), 25.8);
    }

    #[test]
    fn budgeted_runs_fit_the_default_budget() {
        // 48 cells in 120 s: each run gets its share, within the clamp.
        let b = Budget::new(DEFAULT_BUDGET, 48);
        let run = run::run_length(
            b.slot_at(Duration::ZERO),
            runs_per_cell(5, 3),
            MIN_RUN,
            MAX_RUN,
        );
        assert!(run > MIN_RUN && run < MAX_RUN, "{run:?}");
        let per_cell = run.mul_f64(runs_per_cell(5, 3));
        assert!(per_cell * 48 <= DEFAULT_BUDGET);
        assert_eq!(
            warm_length(Duration::from_millis(100)),
            Duration::from_millis(20)
        );
    }
}
