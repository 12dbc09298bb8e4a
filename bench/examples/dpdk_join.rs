//! Joins DPDK's C mempool (the `mempool_autotest ... rate_persec=N` lines of
//! `bench/dpdk/mempool_perf.c` or of `dpdk-test`'s `mempool_perf_autotest`) with idxpool's
//! `mempool_perf --csv` rows, cell by cell, and prints the table and a verdict line.
//! `scripts/compare-dpdk.sh` runs both sides interleaved per cell and then this.
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example dpdk_join -- --dpdk dpdk.log --idxpool idxpool.csv
//! ```
//!
//! Input:
//! - `--dpdk FILE`: any text holding result lines, in 22.11's format (`mempool_autotest
//!   cache=512 cores=1 n_get_bulk=32 n_put_bulk=32 n_keep=512 constant_n=0 rate_persec=N`) or
//!   26.07's (padded values, `n_max_bulk=` for the random-bulk pass). Several lines of one cell
//!   are rounds (their median is the rate; odd and even rounds give the A/A column). In a
//!   `dpdk-test` log, lines under a `start performance test ... (with cache)` header are the
//!   per-lcore cache, `(with user-owned cache)` the user-owned one, other headers (no cache,
//!   another ops) are skipped for cache > 0; lines before any header count as per-lcore cache.
//! - `--idxpool FILE`: `mempool_perf --csv` rows (header `pool,policy,cache,cores,n_get_bulk,
//!   n_put_bulk,n_keep,constant_n,touch,rate_per_sec`, optional `n_max_bulk`; repeated headers of
//!   concatenated files are skipped). Pools `index`, `pointer`, `index-aa` (A/A), and the floors `floor32`,
//!   `floor64` (bare LIFO arrays of u32 / u64) when present; `touch=1` rows are skipped (DPDK does
//!   not touch objects). Several rows of one pool and cell are rounds (median).
//!
//! Output (stdout): one row per cell present on both sides, rates in millions of objects per
//! second, `index/DPDK`, `pointer/DPDK`, `A/A C` (DPDK's rounds at odd positions over those at
//! even positions: the noise of measuring the same thing twice; `-` with one round), `A/A idx`
//! (the index pool over its `index-aa` copy, measured in the same runs), `index/floor`
//! when floors are present, and a mark: `+` index at or above DPDK, `-` below it, `~` below it
//! by less than the cell's A/A noise (the larger of the two A/A). Then the verdict: geomeans per core count, cells won, and
//! the targets of the C comparison (every cell >= 1, geomean >= 1.5, bulk-32 cells within 1.3x of the
//! floor), each "met" or "missed" with the missing cells. Exit status 0, 1 when nothing could be
//! joined or a file is unreadable, 2 on bad arguments.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use idxpool_bench::stats::geomean;

/// Joins DPDK C mempool_perf lines with idxpool mempool_perf CSV rows per cell.
#[derive(Parser, Debug)]
#[command(name = "dpdk_join")]
struct Args {
    /// DPDK result lines (bench/dpdk/mempool_perf or dpdk-test output).
    #[arg(long)]
    dpdk: PathBuf,
    /// idxpool mempool_perf --csv rows (one file, or several concatenated).
    #[arg(long)]
    idxpool: PathBuf,
    /// Join only cells with this cache size (0 or 512); all when absent.
    #[arg(long)]
    cache: Option<u32>,
    /// Text for the table's title line (e.g. the DPDK version and the clock).
    #[arg(long, default_value = "")]
    title: String,
}

/// One cell of the matrix (22.11's keys, plus 26.07's `n_max_bulk`, 0 for fixed bulks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Cell {
    cache: u32,
    cores: u32,
    keep: u32,
    max_bulk: u32,
    get: u32,
    put: u32,
    constant: u32,
}

impl Cell {
    fn label(&self) -> String {
        if self.max_bulk != 0 {
            format!(
                "cache={} cores={} keep={} max={}",
                self.cache, self.cores, self.keep, self.max_bulk
            )
        } else {
            format!(
                "cache={} cores={} get={} put={} keep={} const={}",
                self.cache, self.cores, self.get, self.put, self.keep, self.constant
            )
        }
    }
}

/// Which cache a `dpdk-test` section measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    /// The pool's per-lcore default cache (or no cache for cache=0 cells).
    Default,
    /// `rte_mempool_cache_create`'s user-owned cache.
    User,
    /// A section this join does not compare (another ops' pool).
    Other,
}

/// Reads `key=value` from a result line, allowing 26.07's padding (`n_keep=  512`).
fn field(line: &str, key: &str) -> Option<u64> {
    let pat = format!("{key}=");
    let mut from = 0;
    while let Some(pos) = line[from..].find(&pat) {
        let at = from + pos;
        let word_start = at == 0 || line.as_bytes()[at - 1] == b' ';
        if word_start {
            let rest = line[at + pat.len()..].trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            return digits.parse().ok();
        }
        from = at + pat.len();
    }
    None
}

/// Parses one `mempool_autotest ... rate_persec=N` line; None for any other line.
fn parse_dpdk_line(line: &str) -> Option<(Cell, f64)> {
    let line = line.trim();
    let rest = line.strip_prefix("mempool_autotest ")?;
    let get = |k| field(rest, k).and_then(|v| u32::try_from(v).ok());
    let rate = field(rest, "rate_persec")? as f64;
    let max_bulk = get("n_max_bulk").unwrap_or(0);
    let cell = Cell {
        cache: get("cache")?,
        cores: get("cores")?,
        keep: get("n_keep")?,
        max_bulk,
        get: if max_bulk != 0 { 0 } else { get("n_get_bulk")? },
        put: if max_bulk != 0 { 0 } else { get("n_put_bulk")? },
        constant: if max_bulk != 0 { 0 } else { get("constant_n")? },
    };
    Some((cell, rate))
}

/// The DPDK log: rates per cell in the order read, per section.
fn parse_dpdk_log(text: &str) -> Vec<(Section, Cell, f64)> {
    let mut section = Section::Default;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.contains("start performance test") {
            section = if line.contains("user-owned") {
                Section::User
            } else if line.contains("test for ") {
                Section::Other
            } else {
                Section::Default
            };
            continue;
        }
        if let Some((cell, rate)) = parse_dpdk_line(line) {
            out.push((section, cell, rate));
        }
    }
    out
}

/// The DPDK rounds to compare per cell: the per-lcore cache section when it has the cell,
/// else the user-owned one.
fn dpdk_rounds(log: &[(Section, Cell, f64)]) -> BTreeMap<Cell, Vec<f64>> {
    let mut by_section: [BTreeMap<Cell, Vec<f64>>; 2] = Default::default();
    for &(s, cell, rate) in log {
        let i = match s {
            Section::Default => 0,
            Section::User => 1,
            Section::Other => continue,
        };
        by_section[i].entry(cell).or_default().push(rate);
    }
    let [mut default, user] = by_section;
    for (cell, v) in user {
        default.entry(cell).or_insert(v);
    }
    default
}

/// idxpool rows: rates per (pool, cell) in the order read, and the policy seen.
#[derive(Debug, Default)]
struct IdxRows {
    rates: BTreeMap<(String, Cell), Vec<f64>>,
    policies: Vec<String>,
}

/// Parses `mempool_perf --csv` text (header-driven; repeated headers are skipped).
fn parse_idx_csv(text: &str) -> Result<IdxRows, String> {
    let mut rows = IdxRows::default();
    let mut cols: Option<Vec<String>> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with("pool,") {
            cols = Some(line.split(',').map(str::to_owned).collect());
            continue;
        }
        let cols = cols
            .as_ref()
            .ok_or_else(|| format!("line {}: a row before the CSV header", n + 1))?;
        let vals: Vec<&str> = line.split(',').collect();
        if vals.len() != cols.len() {
            return Err(format!(
                "line {}: {} fields, the header has {}",
                n + 1,
                vals.len(),
                cols.len()
            ));
        }
        let col = |name: &str| cols.iter().position(|c| c == name).map(|i| vals[i]);
        let num = |name: &str| -> Result<u32, String> {
            match col(name) {
                None => Ok(0),
                Some(v) => v
                    .parse()
                    .map_err(|_| format!("line {}: bad {name} {v:?}", n + 1)),
            }
        };
        if num("touch")? != 0 {
            continue;
        }
        let rate: f64 = col("rate_per_sec")
            .ok_or_else(|| "the CSV has no rate_per_sec column".to_owned())?
            .parse()
            .map_err(|_| format!("line {}: bad rate", n + 1))?;
        let cell = Cell {
            cache: num("cache")?,
            cores: num("cores")?,
            keep: num("n_keep")?,
            max_bulk: num("n_max_bulk")?,
            get: num("n_get_bulk")?,
            put: num("n_put_bulk")?,
            constant: num("constant_n")?,
        };
        let pool = col("pool").unwrap_or("").to_owned();
        if let Some(p) = col("policy") {
            if (pool == "index" || pool == "pointer") && !rows.policies.iter().any(|q| q == p) {
                rows.policies.push(p.to_owned());
            }
        }
        rows.rates.entry((pool, cell)).or_default().push(rate);
    }
    Ok(rows)
}

/// Median (mean of the two middle values for an even count); None when empty.
fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// A/A: the median of the rounds at even positions (1st, 3rd, ...) over the median of the
/// others (the same cell measured twice, other work in between); None with one round.
fn aa_ratio(rounds: &[f64]) -> Option<f64> {
    let a: Vec<f64> = rounds.iter().copied().step_by(2).collect();
    let b: Vec<f64> = rounds.iter().copied().skip(1).step_by(2).collect();
    Some(median(&a)? / median(&b)?)
}

/// One joined cell.
#[derive(Clone, Debug)]
struct Row {
    cell: Cell,
    dpdk: f64,
    index: f64,
    pointer: Option<f64>,
    aa: Option<f64>,
    /// idxpool's own A/A: the index pool over its second copy (`index-aa` rows).
    index_aa: Option<f64>,
    floor32: Option<f64>,
    floor64: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.index / self.dpdk
    }

    /// The cell's noise: the larger |log A/A| of the two sides (0 when neither is known).
    fn noise(&self) -> f64 {
        let n = |a: Option<f64>| a.map_or(0.0, |a| a.ln().abs());
        n(self.aa).max(n(self.index_aa))
    }

    /// `+` index >= DPDK, `~` below by less than the A/A noise, `-` below.
    fn mark(&self) -> char {
        let r = self.ratio();
        if r >= 1.0 {
            '+'
        } else if r.ln().abs() <= self.noise() {
            '~'
        } else {
            '-'
        }
    }
}

/// Cells present on both sides, in DPDK's order of appearance.
fn join(dpdk_log: &[(Section, Cell, f64)], idx: &IdxRows, cache: Option<u32>) -> Vec<Row> {
    let rounds = dpdk_rounds(dpdk_log);
    let mut order: Vec<Cell> = Vec::new();
    for &(s, cell, _) in dpdk_log {
        if s != Section::Other && !order.contains(&cell) {
            order.push(cell);
        }
    }
    let med = |pool: &str, cell: Cell| {
        idx.rates
            .get(&(pool.to_owned(), cell))
            .and_then(|v| median(v))
    };
    order
        .into_iter()
        .filter(|c| !matches!(cache, Some(k) if c.cache != k))
        .filter_map(|cell| {
            let r = rounds.get(&cell)?;
            let dpdk = median(r)?;
            let index = med("index", cell)?;
            (dpdk > 0.0 && index > 0.0).then(|| Row {
                cell,
                dpdk,
                index,
                pointer: med("pointer", cell),
                aa: aa_ratio(r),
                index_aa: med("index-aa", cell).map(|a| index / a),
                floor32: med("floor32", cell),
                floor64: med("floor64", cell),
            })
        })
        .collect()
}

fn opt(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{:.prec$}", x / scale))
}

/// The joined table.
fn format_table(rows: &[Row], title: &str) -> String {
    let floors = rows.iter().any(|r| r.floor32.is_some());
    let mut out = String::new();
    if !title.is_empty() {
        let _ = writeln!(out, "{title}");
    }
    let _ = write!(
        out,
        "{:<48} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7}",
        "cell", "DPDK C", "index", "pointer", "index/DPDK", "ptr/DPDK", "A/A C", "A/A idx"
    );
    if floors {
        let _ = write!(
            out,
            " {:>10} {:>10} {:>11} {:>10}",
            "floor u32", "floor u64", "index/floor", "ptr/floor"
        );
    }
    let _ = writeln!(out);
    for r in rows {
        let _ = write!(
            out,
            "{:<48} {:>10.1} {:>10.1} {:>10} {:>9.3}{} {:>10} {:>7} {:>7}",
            r.cell.label(),
            r.dpdk / 1e6,
            r.index / 1e6,
            opt(r.pointer, 1e6, 1),
            r.ratio(),
            r.mark(),
            opt(r.pointer.map(|p| p / r.dpdk), 1.0, 3),
            opt(r.aa, 1.0, 3),
            opt(r.index_aa, 1.0, 3),
        );
        if floors {
            let _ = write!(
                out,
                " {:>10} {:>10} {:>11} {:>10}",
                opt(r.floor32, 1e6, 1),
                opt(r.floor64, 1e6, 1),
                opt(r.floor32.map(|f| r.index / f), 1.0, 3),
                opt(r.pointer.zip(r.floor64).map(|(p, f)| p / f), 1.0, 3),
            );
        }
        let _ = writeln!(out);
    }
    out
}

/// The verdict: geomeans per core count, wins, and the C comparison's targets.
fn verdict(rows: &[Row]) -> String {
    let mut out = String::new();
    let n = rows.len();
    let g = geomean(rows.iter().map(Row::ratio)).unwrap_or(f64::NAN);
    let mut cores: Vec<u32> = rows.iter().map(|r| r.cell.cores).collect();
    cores.sort_unstable();
    cores.dedup();
    let per_core: Vec<String> = cores
        .iter()
        .map(|&c| {
            let gc = geomean(rows.iter().filter(|r| r.cell.cores == c).map(Row::ratio));
            format!(
                "{c} core{}: {}",
                if c == 1 { "" } else { "s" },
                opt(gc, 1.0, 3)
            )
        })
        .collect();
    let gp = geomean(rows.iter().filter_map(|r| r.pointer.map(|p| p / r.dpdk)));
    let wins = rows.iter().filter(|r| r.mark() == '+').count();
    let ties = rows.iter().filter(|r| r.mark() == '~').count();
    let mut noise: Vec<f64> = rows
        .iter()
        .filter(|r| r.aa.is_some() || r.index_aa.is_some())
        .map(Row::noise)
        .collect();
    noise.sort_by(f64::total_cmp);
    let noise_txt = match (median(&noise), noise.last()) {
        (Some(m), Some(&mx)) => format!(
            "A/A noise median {:.1}%, max {:.1}%",
            (m.exp() - 1.0) * 100.0,
            (mx.exp() - 1.0) * 100.0
        ),
        _ => "A/A noise: one round, unknown".to_owned(),
    };
    let _ = writeln!(
        out,
        "verdict: index/DPDK geomean {g:.3} over {n} cells ({}); pointer/DPDK {}; index >= DPDK in {wins} of {n} cells, {ties} more within noise; {noise_txt}",
        per_core.join(", "),
        opt(gp, 1.0, 3),
    );
    let mut losers: Vec<&Row> = rows.iter().filter(|r| r.ratio() < 1.0).collect();
    losers.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    let list = |v: &[&Row], f: &dyn Fn(&Row) -> f64| -> String {
        let shown: Vec<String> = v
            .iter()
            .take(8)
            .map(|r| format!("{} {:.3}", r.cell.label(), f(r)))
            .collect();
        let more = if v.len() > 8 {
            format!(", ... {} more", v.len() - 8)
        } else {
            String::new()
        };
        format!("{}{more}", shown.join("; "))
    };
    let _ = writeln!(
        out,
        "target every cell index >= DPDK: {}",
        if losers.is_empty() {
            "met".to_owned()
        } else {
            format!(
                "missed in {} cells (worst first: {})",
                losers.len(),
                list(&losers, &Row::ratio)
            )
        }
    );
    let _ = writeln!(
        out,
        "target geomean >= 1.5: {} ({g:.3})",
        if g >= 1.5 { "met" } else { "missed" }
    );
    let b32: Vec<&Row> = rows
        .iter()
        .filter(|r| r.cell.get == 32 && r.cell.put == 32 && r.floor32.is_some())
        .collect();
    if b32.is_empty() {
        let _ = writeln!(
            out,
            "target bulk-32 within 1.3x of the floor: no floor column"
        );
    } else {
        let slow = |r: &Row| r.floor32.map_or(f64::NAN, |f| f / r.index);
        let mut far: Vec<&Row> = b32.iter().copied().filter(|r| slow(r) > 1.3).collect();
        far.sort_by(|a, b| slow(b).total_cmp(&slow(a)));
        let _ = writeln!(
            out,
            "target bulk-32 within 1.3x of the floor (floor/index): {}",
            if far.is_empty() {
                format!("met in {} cells", b32.len())
            } else {
                format!(
                    "missed in {} of {} cells ({})",
                    far.len(),
                    b32.len(),
                    list(&far, &slow)
                )
            }
        );
    }
    // The pointer twin is a faithful port when it runs within 0.9-1.1x of DPDK.
    let twin = |r: &Row| r.pointer.map_or(f64::NAN, |p| p / r.dpdk);
    let mut unfaithful: Vec<&Row> = rows
        .iter()
        .filter(|r| r.pointer.is_some() && !(0.9..=1.1).contains(&twin(r)))
        .collect();
    unfaithful.sort_by(|a, b| {
        (twin(a) - 1.0)
            .abs()
            .total_cmp(&(twin(b) - 1.0).abs())
            .reverse()
    });
    let _ = writeln!(
        out,
        "target pointer twin within 0.9-1.1x of DPDK (a faithful port): {}",
        if unfaithful.is_empty() {
            "met".to_owned()
        } else {
            format!(
                "unfaithful twin in {} cells (furthest first: {})",
                unfaithful.len(),
                list(&unfaithful, &twin)
            )
        }
    );
    let fl = |r: &Row| r.floor32.map_or(f64::NAN, |f| f / r.dpdk);
    let with_floor = rows.iter().filter(|r| r.floor32.is_some()).count();
    if with_floor > 0 {
        let mut below: Vec<&Row> = rows.iter().filter(|r| fl(r) < 1.0).collect();
        below.sort_by(|a, b| fl(a).total_cmp(&fl(b)));
        let _ = writeln!(
            out,
            "target floor (u32) >= DPDK: {}",
            if below.is_empty() {
                format!("met in {with_floor} cells")
            } else {
                format!(
                    "missed in {} of {with_floor} cells ({})",
                    below.len(),
                    list(&below, &fl)
                )
            }
        );
    }
    out
}

fn run(args: &Args) -> Result<String, Box<dyn Error>> {
    let dtext = std::fs::read_to_string(&args.dpdk)
        .map_err(|e| format!("cannot read --dpdk {}: {e}", args.dpdk.display()))?;
    let itext = std::fs::read_to_string(&args.idxpool)
        .map_err(|e| format!("cannot read --idxpool {}: {e}", args.idxpool.display()))?;
    let log = parse_dpdk_log(&dtext);
    if log.is_empty() {
        return Err(format!(
            "no 'mempool_autotest ... rate_persec=' line in {}",
            args.dpdk.display()
        )
        .into());
    }
    let idx = parse_idx_csv(&itext).map_err(|e| format!("{}: {e}", args.idxpool.display()))?;
    let rows = join(&log, &idx, args.cache);
    if rows.is_empty() {
        return Err("no cell in common (DPDK lines vs idxpool rows)".into());
    }
    let mut title = args.title.clone();
    if !idx.policies.is_empty() {
        if !title.is_empty() {
            title.push_str("; ");
        }
        let _ = write!(
            title,
            "idxpool policy {}; rates in Mobj/s",
            idx.policies.join("+")
        );
    }
    Ok(format!("{}{}", format_table(&rows, &title), verdict(&rows)))
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(&args) {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dpdk_join: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded: bench/dpdk/mempool_perf (22.11 format) on 2 lcores, two rounds per cell.
    const C_HARNESS_LOG: &str = include_str!("../tests/data/dpdk/harness-2211.log");
    /// Recorded: `dpdk-test` mempool_perf_autotest output (22.11), the start of each section.
    const DPDK_TEST_LOG: &str = include_str!("../tests/data/dpdk/dpdk-test-2211.log");
    /// Recorded: 26.07-format lines (padded values, random-bulk pass).
    const LOG_2607: &str = include_str!("../tests/data/dpdk/harness-2607.log");
    /// Recorded: mempool_perf --csv rows of the same cells, two rounds concatenated.
    const IDX_CSV: &str = include_str!("../tests/data/dpdk/idxpool.csv");

    fn cell(cores: u32, get: u32, put: u32, keep: u32, constant: u32) -> Cell {
        Cell {
            cache: 512,
            cores,
            keep,
            max_bulk: 0,
            get,
            put,
            constant,
        }
    }

    #[test]
    fn parses_2211_and_2607_lines() {
        let (c, r) = parse_dpdk_line(
            "mempool_autotest cache=512 cores=1 n_get_bulk=32 n_put_bulk=4 n_keep=128 constant_n=0 rate_persec=1487929344",
        )
        .unwrap();
        assert_eq!(c, cell(1, 32, 4, 128, 0));
        assert_eq!(r, 1487929344.0);
        let (c, r) = parse_dpdk_line(
            "mempool_autotest cache=512 cores=2 n_keep=   32 n_get_bulk=  1 n_put_bulk=  1 constant_n=1 rate_persec=  92345678",
        )
        .unwrap();
        assert_eq!(c, cell(2, 1, 1, 32, 1));
        assert_eq!(r, 92345678.0);
        let (c, _) = parse_dpdk_line(
            "mempool_autotest cache=512 cores=1 n_keep= 2048 n_max_bulk= 64 rate_persec=1000",
        )
        .unwrap();
        assert_eq!((c.keep, c.max_bulk, c.get), (2048, 64, 0));
        // No rate (a failed cell), other lines, a key inside another key: not results.
        assert!(parse_dpdk_line("mempool_autotest cache=512 cores=1 n_get_bulk=1 n_put_bulk=1 n_keep=32 constant_n=0 mempool is not full").is_none());
        assert!(parse_dpdk_line("EAL: Detected CPU lcores: 2").is_none());
        assert_eq!(field("xn_keep=5 n_keep=7", "n_keep"), Some(7));
    }

    #[test]
    fn recorded_harness_log_has_two_rounds_per_cell() {
        let log = parse_dpdk_log(C_HARNESS_LOG);
        assert!(!log.is_empty());
        let rounds = dpdk_rounds(&log);
        assert!(rounds.values().all(|v| v.len() == 2), "{rounds:?}");
        assert!(log.iter().all(|(s, _, _)| *s == Section::Default));
    }

    #[test]
    fn dpdk_test_sections_pick_the_cache_pass() {
        // Recorded excerpt: the no-cache section, the default-ops section (same cells, another
        // pool: skipped), the per-lcore cache section.
        let log = parse_dpdk_log(DPDK_TEST_LOG);
        assert_eq!(log.len(), 14);
        assert_eq!(
            log.iter().filter(|(s, _, _)| *s == Section::Other).count(),
            2
        );
        let rounds = dpdk_rounds(&log);
        let c0 = Cell {
            cache: 0,
            ..cell(1, 1, 1, 32, 0)
        };
        assert_eq!(
            rounds[&c0],
            vec![15859712.0],
            "the other-ops pass adds no round"
        );
        assert_eq!(rounds[&cell(1, 1, 1, 32, 1)], vec![42218291.0]);
        assert_eq!(rounds.keys().filter(|c| c.cache == 512).count(), 3);
    }

    #[test]
    fn recorded_2607_log_parses() {
        let log = parse_dpdk_log(LOG_2607);
        assert_eq!(log.len(), 12);
        assert_eq!(log.iter().filter(|(_, c, _)| c.max_bulk != 0).count(), 8);
        assert!(log.iter().all(|(_, c, r)| c.keep == 2048 && *r > 0.0));
        let rounds = dpdk_rounds(&log);
        assert_eq!(rounds.len(), 6);
        assert!(rounds
            .keys()
            .any(|c| c.max_bulk == 0 && c.get == 8 && c.put == 4));
    }

    #[test]
    fn user_cache_is_used_only_when_the_default_cache_lacks_the_cell() {
        let text = "start performance test (with cache)\n\
            mempool_autotest cache=512 cores=1 n_get_bulk=1 n_put_bulk=1 n_keep=32 constant_n=0 rate_persec=100\n\
            start performance test (with user-owned cache)\n\
            mempool_autotest cache=512 cores=1 n_get_bulk=1 n_put_bulk=1 n_keep=32 constant_n=0 rate_persec=900\n\
            mempool_autotest cache=512 cores=1 n_get_bulk=4 n_put_bulk=4 n_keep=32 constant_n=0 rate_persec=400\n";
        let r = dpdk_rounds(&parse_dpdk_log(text));
        assert_eq!(r[&cell(1, 1, 1, 32, 0)], vec![100.0]);
        assert_eq!(r[&cell(1, 4, 4, 32, 0)], vec![400.0]);
    }

    #[test]
    fn csv_rows_group_by_pool_and_cell_and_skip_touch() {
        let idx = parse_idx_csv(IDX_CSV).unwrap();
        assert_eq!(idx.policies.len(), 1);
        let k = ("index".to_owned(), cell(1, 1, 1, 128, 0));
        assert_eq!(idx.rates[&k].len(), 2);
        let csv =
            "pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate_per_sec\n\
                   index,dpdk2607,512,1,1,1,32,0,1,5\n";
        assert!(parse_idx_csv(csv).unwrap().rates.is_empty());
        assert!(parse_idx_csv("index,x,1\n").is_err(), "row before header");
        let bad = "pool,cache,rate_per_sec\nindex,512\n";
        assert!(parse_idx_csv(bad).is_err(), "short row");
    }

    #[test]
    fn join_of_recorded_logs_covers_every_cell() {
        let log = parse_dpdk_log(C_HARNESS_LOG);
        let idx = parse_idx_csv(IDX_CSV).unwrap();
        let rows = join(&log, &idx, Some(512));
        assert_eq!(rows.len(), dpdk_rounds(&log).len());
        assert!(rows.iter().all(|r| r.pointer.is_some() && r.aa.is_some()));
        let table = format_table(&rows, "t");
        assert_eq!(table.lines().count(), rows.len() + 2);
        let v = verdict(&rows);
        assert!(v.starts_with("verdict: index/DPDK geomean "), "{v}");
        assert!(v.contains("target geomean >= 1.5: "));
        assert!(v.contains("no floor column"));
        // The A/A copy of the index pool (mempool_perf's `index-aa` rows) gives `A/A idx`.
        let aa_csv = format!(
            "{IDX_CSV}pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate_per_sec\n\
             index-aa,dpdk2607,512,1,1,1,128,0,0,600000000\n"
        );
        let rows_aa = join(&log, &parse_idx_csv(&aa_csv).unwrap(), None);
        let aa = rows_aa[0].index_aa.unwrap();
        assert!((aa - rows_aa[0].index / 600e6).abs() < 1e-12);
        assert!(rows_aa[1..].iter().all(|r| r.index_aa.is_none()));
        // Filtering on a cache size nobody measured leaves nothing.
        assert!(join(&log, &idx, Some(0)).is_empty());
    }

    #[test]
    fn medians_aa_and_marks() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(aa_ratio(&[110.0, 100.0]), Some(1.1));
        assert_eq!(aa_ratio(&[1.0]), None);
        let mut r = Row {
            cell: cell(1, 4, 4, 32, 0),
            dpdk: 100.0,
            index: 95.0,
            pointer: None,
            aa: Some(1.1),
            index_aa: None,
            floor32: None,
            floor64: None,
        };
        assert_eq!(r.mark(), '~');
        r.aa = Some(1.01);
        assert_eq!(r.mark(), '-');
        r.index_aa = Some(0.9);
        assert_eq!(r.mark(), '~', "idxpool's own noise counts too");
        r.index = 100.0;
        assert_eq!(r.mark(), '+');
    }

    #[test]
    fn verdict_names_the_missed_targets() {
        let mk = |get, ratio: f64, floor: f64| Row {
            cell: cell(1, get, get, 32, 0),
            dpdk: 100.0,
            index: 100.0 * ratio,
            pointer: Some(100.0),
            aa: Some(1.0),
            index_aa: Some(1.0),
            floor32: Some(100.0 * ratio * floor),
            floor64: None,
        };
        let v = verdict(&[mk(32, 2.0, 1.2), mk(4, 2.0, 3.0)]);
        assert!(v.contains("target every cell index >= DPDK: met"), "{v}");
        assert!(v.contains("target geomean >= 1.5: met (2.000)"), "{v}");
        assert!(v.contains("floor/index): met in 1 cells"), "{v}");
        let v = verdict(&[mk(32, 0.5, 2.0), mk(4, 2.0, 1.0)]);
        assert!(
            v.contains("missed in 1 cells (worst first: cache=512 cores=1 get=32"),
            "{v}"
        );
        assert!(v.contains("target geomean >= 1.5: missed (1.000)"), "{v}");
        assert!(v.contains("floor/index): missed in 1 of 1 cells"), "{v}");
    }

    #[test]
    fn arguments_parse() {
        let a =
            Args::try_parse_from(["dpdk_join", "--dpdk", "a.log", "--idxpool", "b.csv"]).unwrap();
        assert_eq!(a.cache, None);
        let a = Args::try_parse_from([
            "dpdk_join",
            "--dpdk",
            "a",
            "--idxpool",
            "b",
            "--cache",
            "512",
            "--title",
            "x",
        ])
        .unwrap();
        assert_eq!((a.cache, a.title.as_str()), (Some(512), "x"));
        assert!(Args::try_parse_from(["dpdk_join", "--dpdk", "a"]).is_err());
        assert!(Args::try_parse_from([
            "dpdk_join",
            "--dpdk",
            "a",
            "--idxpool",
            "b",
            "--cache",
            "x"
        ])
        .is_err());
    }
}
