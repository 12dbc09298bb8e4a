//! Instructions per object, DPDK's C mempool against idxpool, from callgrind's dumps: the
//! table, the summary per group of cells and the verdict of `scripts/instr-vs-dpdk.sh`.
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example instr_report -- \
//!     --pairing native=target/instr-vs-dpdk/native --pairing debian=target/instr-vs-dpdk/debian \
//!     --csv target/instr-vs-dpdk/instr.csv
//! ```
//!
//! Input: per pairing (a C build and a Rust build of the same instruction-set class), a
//! directory of callgrind dump files (`callgrind.out*`) written by `valgrind --tool=callgrind
//! --collect-atstart=no` runs of `bench/dpdk/mempool_perf --objects N` and of `mempool_perf
//! --objects N`. Each dump is one contender on one cell: its `desc: Trigger: Client Request:`
//! line is the label (`dpdk cache=512 cores=1 n_get_bulk=1 n_put_bulk=1 n_keep=512
//! constant_n=0 objects=65536`, or `idxpool pool=index cache=512 cores=1 get=1 put=1 keep=512
//! const=0 touch=0 objects=65536`), its `totals:` line the instructions (`Ir`) that the
//! contender's threads executed inside their counted loops: get, put and the table walk, no
//! setup, no clock. Both harnesses count each contender and cell twice, N then 2N objects per
//! thread; instructions per object = (Ir of the 2N run - Ir of the N run) / (the difference of
//! their objects, all threads'), so that the fixed costs of a run (entering and leaving the
//! loop, the collection toggles) cancel and what remains is the loop's cost per object (a
//! single run: its Ir / its objects). Other dumps (the one at program exit, `touch=1` or random-bulk cells, other cache sizes) are
//! skipped.
//!
//! Output (stdout), per pairing: one row per cell (instructions per object of DPDK C, the index
//! pool, the run-time pool, the pointer twin and the u32 floor; index/DPDK, runtime/index,
//! pointer/DPDK, floor/DPDK; marks `I` index above DPDK (by more than 0.005 instructions per
//! object: the harnesses' loops differ by less than 0.001), `R` run-time above 1.05x the branded
//! pool, `P` pointer twin outside 0.9-1.1x of DPDK), a Markdown table of geomeans per group of
//! cells, and the verdict lines: index/DPDK (target: <= 1 in every cell and <= 0.8 in geomean),
//! runtime/index (<= 1.05 in every cell), pointer/DPDK (0.9-1.1 in every cell). The targets
//! are judged on `--targets`' pairing [native]; the others' lines are for information.
//! `--csv`: one row per pairing, contender and cell. Exit status 0 (also when targets are
//! missed), 1 when nothing was read, a directory is unreadable, or a cell lacks a contender; 2
//! on bad arguments.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use idxpool_bench::stats::geomean;

/// Instructions per object from callgrind dumps: table, groups and verdict.
#[derive(Parser, Debug)]
#[command(name = "instr_report")]
struct Args {
    /// NAME=DIR: a pairing and the directory of its callgrind dumps (both sides); repeatable,
    /// in printing order.
    #[arg(long, required = true, value_parser = parse_pairing)]
    pairing: Vec<(String, PathBuf)>,
    /// NAME=TEXT: a line printed under the pairing's heading (its compilers and flags).
    #[arg(long, value_parser = parse_about)]
    about: Vec<(String, String)>,
    /// The pairing the targets are judged on [native]; without it, every verdict line is for
    /// information.
    #[arg(long)]
    targets: Option<String>,
    /// Also write every count to this CSV file.
    #[arg(long)]
    csv: Option<PathBuf>,
}

fn parse_pairing(s: &str) -> Result<(String, PathBuf), String> {
    let (name, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=DIR, got {s:?}"))?;
    if name.is_empty() || dir.is_empty() {
        return Err(format!("expected NAME=DIR, got {s:?}"));
    }
    Ok((name.to_string(), PathBuf::from(dir)))
}

fn parse_about(s: &str) -> Result<(String, String), String> {
    let (name, text) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=TEXT, got {s:?}"))?;
    Ok((name.to_string(), text.to_string()))
}

/// One cell of DPDK 22.11's matrix (cache 512), in the autotest's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Cell {
    cores: u32,
    get: u32,
    put: u32,
    keep: u32,
    constant: u32,
}

impl Cell {
    fn label(&self) -> String {
        format!(
            "cores={} get={} put={} keep={} const={}",
            self.cores, self.get, self.put, self.keep, self.constant
        )
    }

    /// The group of cells the summary table and BENCHMARKS.md use.
    fn group(&self) -> usize {
        match (self.constant != 0, self.get == 1 || self.put == 1) {
            (false, true) => 0,
            (true, true) => 1,
            (false, false) => 2,
            (true, false) => 3,
        }
    }
}

/// Names of [`Cell::group`]'s groups.
const GROUPS: [&str; 4] = [
    "const=0, a bulk of 1 (get or put)",
    "const=1, 1/1",
    "const=0, both bulks >= 4",
    "const=1, 4/4 8/8 32/32",
];

/// The contenders, in column order.
const CONTENDERS: [&str; 6] = ["dpdk", "index", "runtime", "pointer", "floor32", "floor64"];

/// Instructions and objects of one dump (one counted run).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Count {
    instructions: u64,
    objects: u64,
}

/// The dumps of one contender on one cell.
#[derive(Clone, Debug, Default, PartialEq)]
struct Samples(Vec<Count>);

impl Samples {
    /// The loop's cost: the difference between the run with the most objects and the run with
    /// the fewest (the harnesses count N then 2N objects: every fixed cost cancels), or the
    /// runs' sum when all moved the same number of objects.
    fn net(&self) -> Count {
        let lo = self.0.iter().min_by_key(|c| c.objects);
        let hi = self.0.iter().max_by_key(|c| c.objects);
        match (lo, hi) {
            (Some(lo), Some(hi)) if hi.objects > lo.objects => Count {
                instructions: hi.instructions.saturating_sub(lo.instructions),
                objects: hi.objects - lo.objects,
            },
            _ => Count {
                instructions: self.0.iter().map(|c| c.instructions).sum(),
                objects: self.0.iter().map(|c| c.objects).sum(),
            },
        }
    }

    fn per_object(&self) -> f64 {
        let c = self.net();
        c.instructions as f64 / c.objects as f64
    }
}

/// `key=value` of a label's word.
fn field(words: &[&str], key: &str) -> Option<u64> {
    words.iter().find_map(|w| {
        let (k, v) = w.split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

/// A dump's label -> (contender, cell, objects); None for the dumps this report skips.
fn parse_label(label: &str) -> Option<(String, Cell, u64)> {
    let words: Vec<&str> = label.split_whitespace().collect();
    let (contender, long) = match *words.first()? {
        "dpdk" => ("dpdk".to_string(), true),
        "idxpool" => {
            let pool = words
                .iter()
                .find_map(|w| w.strip_prefix("pool="))?
                .to_string();
            (pool, false)
        }
        _ => return None,
    };
    if field(&words, "cache")? != 512
        || field(&words, "touch").unwrap_or(0) != 0
        || field(&words, if long { "n_max_bulk" } else { "max" }).unwrap_or(0) != 0
        || words.iter().any(|w| w.starts_with("prefetch="))
    {
        return None;
    }
    let key = |short: &str, long_key: &str| -> Option<u32> {
        u32::try_from(field(&words, if long { long_key } else { short })?).ok()
    };
    let cell = Cell {
        cores: key("cores", "cores")?,
        get: key("get", "n_get_bulk")?,
        put: key("put", "n_put_bulk")?,
        keep: key("keep", "n_keep")?,
        constant: key("const", "constant_n")?,
    };
    let objects = field(&words, "objects").filter(|&o| o > 0)?;
    Some((contender, cell, objects))
}

/// One callgrind dump's label and total `Ir` (the `totals:` line, else `summary:`).
fn parse_dump(text: &str) -> Option<(String, u64)> {
    let mut label = None;
    let (mut totals, mut summary) = (None, None);
    for line in text.lines() {
        if let Some(l) = line.strip_prefix("desc: Trigger: Client Request: ") {
            label = Some(l.trim().to_string());
        } else if let Some(t) = line.strip_prefix("totals:") {
            totals = t.split_whitespace().next().and_then(|v| v.parse().ok());
        } else if let Some(t) = line.strip_prefix("summary:") {
            summary = t.split_whitespace().next().and_then(|v| v.parse().ok());
        }
    }
    Some((label?, totals.or(summary)?))
}

/// Per cell, per contender.
type Counts = BTreeMap<Cell, BTreeMap<String, Samples>>;

/// Reads every `callgrind.out*` file of `dir`.
fn read_dir(dir: &Path) -> Result<Counts, String> {
    let mut counts = Counts::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let is_dump = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("callgrind.out"));
        if !is_dump {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        add_dump(&mut counts, &text);
    }
    Ok(counts)
}

/// Adds one dump's count (if it is one this report reads).
fn add_dump(counts: &mut Counts, text: &str) {
    let Some((label, instructions)) = parse_dump(text) else {
        return;
    };
    let Some((contender, cell, objects)) = parse_label(&label) else {
        return;
    };
    let samples = counts
        .entry(cell)
        .or_default()
        .entry(contender)
        .or_default();
    samples.0.push(Count {
        instructions,
        objects,
    });
}

/// Instructions per object of `contender` on `cell`.
fn ipo(counts: &Counts, cell: &Cell, contender: &str) -> Option<f64> {
    counts.get(cell)?.get(contender).map(Samples::per_object)
}

fn num(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.prec$}"))
}

/// A ratio of two contenders on a cell.
fn ratio(counts: &Counts, cell: &Cell, a: &str, b: &str) -> Option<f64> {
    Some(ipo(counts, cell, a)? / ipo(counts, cell, b)?)
}

/// The run-time target: at most this times the branded pool's instructions.
const RUNTIME_MAX: f64 = 1.05;
/// The faithful-twin band of pointer/DPDK.
const TWIN: (f64, f64) = (0.9, 1.1);
/// The geomean target of index/DPDK.
const INDEX_GEOMEAN_MAX: f64 = 0.8;
/// Instructions per object by which the index pool may exceed DPDK and still count as at or
/// below it: the harnesses' outer loops differ by less than 0.001 per object (idxpool's tests
/// its object count every 8192 objects, DPDK's `while` every 65536), so a cell within this of
/// DPDK runs the same per-object work (a tie), not more.
const TIE: f64 = 0.005;

/// Whether the index pool runs more instructions per object than DPDK on `cell` (beyond
/// [`TIE`]).
fn index_above(counts: &Counts, cell: &Cell) -> bool {
    match (ipo(counts, cell, "index"), ipo(counts, cell, "dpdk")) {
        (Some(i), Some(d)) => i > d + TIE,
        _ => false,
    }
}

/// The per-cell table of one pairing.
fn format_table(counts: &Counts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<36} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7}  marks",
        "cell (cache=512)",
        "DPDK C",
        "index",
        "runtime",
        "pointer",
        "floor32",
        "idx/C",
        "rt/idx",
        "ptr/C",
        "flr/C"
    );
    for cell in counts.keys() {
        let v = |c| ipo(counts, cell, c);
        let (ic, ri, pc) = (
            ratio(counts, cell, "index", "dpdk"),
            ratio(counts, cell, "runtime", "index"),
            ratio(counts, cell, "pointer", "dpdk"),
        );
        let mut marks = String::new();
        if index_above(counts, cell) {
            marks.push('I');
        }
        if ri.is_some_and(|r| r > RUNTIME_MAX) {
            marks.push('R');
        }
        if pc.is_some_and(|r| !(TWIN.0..=TWIN.1).contains(&r)) {
            marks.push('P');
        }
        let _ = writeln!(
            out,
            "{:<36} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7}  {}",
            cell.label(),
            num(v("dpdk"), 2),
            num(v("index"), 2),
            num(v("runtime"), 2),
            num(v("pointer"), 2),
            num(v("floor32"), 2),
            num(ic, 3),
            num(ri, 3),
            num(pc, 3),
            num(ratio(counts, cell, "floor32", "dpdk"), 3),
            marks
        );
    }
    out
}

/// The geomeans per group of cells (a Markdown table).
fn format_groups(counts: &Counts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| group of cells | cells | DPDK C | index | runtime | pointer | floor32 | index/DPDK | runtime/index | pointer/DPDK | floor32/DPDK |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    let mut groups: Vec<(String, Vec<Cell>)> = GROUPS
        .iter()
        .enumerate()
        .map(|(g, name)| {
            let cells = counts.keys().filter(|c| c.group() == g).copied().collect();
            (name.to_string(), cells)
        })
        .collect();
    for cores in [1, 2] {
        let cells: Vec<Cell> = counts
            .keys()
            .filter(|c| c.cores == cores)
            .copied()
            .collect();
        groups.push((
            format!("{cores} core{}", if cores > 1 { "s" } else { "" }),
            cells,
        ));
    }
    groups.push(("all".to_string(), counts.keys().copied().collect()));
    for (name, cells) in groups {
        if cells.is_empty() {
            continue;
        }
        let g = |c: &str| geomean(cells.iter().filter_map(|cell| ipo(counts, cell, c)));
        let r =
            |a: &str, b: &str| geomean(cells.iter().filter_map(|cell| ratio(counts, cell, a, b)));
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cells.len(),
            num(g("dpdk"), 2),
            num(g("index"), 2),
            num(g("runtime"), 2),
            num(g("pointer"), 2),
            num(g("floor32"), 2),
            num(r("index", "dpdk"), 3),
            num(r("runtime", "index"), 3),
            num(r("pointer", "dpdk"), 3),
            num(r("floor32", "dpdk"), 3),
        );
    }
    out
}

/// `(ratio, cell)` pairs sorted worst first by `key`, the first 8 as text.
fn worst(mut v: Vec<(f64, Cell)>, key: impl Fn(f64) -> f64) -> String {
    v.sort_by(|a, b| key(b.0).total_cmp(&key(a.0)));
    let shown: Vec<String> = v
        .iter()
        .take(8)
        .map(|(r, c)| format!("{} {r:.3}", c.label()))
        .collect();
    let more = v.len().saturating_sub(8);
    format!(
        "{}{}",
        shown.join("; "),
        if more > 0 {
            format!(", ... {more} more")
        } else {
            String::new()
        }
    )
}

/// The verdict lines of one pairing; with `targets`, each target said met or missed, and the
/// count of targets met. Returns (text, targets met, targets judged).
fn verdict(name: &str, counts: &Counts, targets: bool) -> (String, usize, usize) {
    let mut out = String::new();
    let mut met = 0;
    let tag = |ok: bool| if ok { "met" } else { "missed" };
    let head = if targets {
        format!("verdict {name}")
    } else {
        format!("verdict {name} (information)")
    };
    let cells: Vec<Cell> = counts.keys().copied().collect();
    let pairs = |a: &str, b: &str| -> Vec<(f64, Cell)> {
        cells
            .iter()
            .filter_map(|c| ratio(counts, c, a, b).map(|r| (r, *c)))
            .collect()
    };

    // index <= DPDK everywhere, <= 0.8 in geomean
    let ic = pairs("index", "dpdk");
    let gm = geomean(ic.iter().map(|p| p.0));
    let above: Vec<(f64, Cell)> = ic
        .iter()
        .copied()
        .filter(|p| index_above(counts, &p.1))
        .collect();
    let every = above.is_empty() && !ic.is_empty();
    let gm_ok = gm.is_some_and(|g| g <= INDEX_GEOMEAN_MAX);
    let _ = write!(
        out,
        "{head}: index/DPDK instructions per object: geomean {} over {} cells (1 core {}, 2 cores {}); index <= DPDK in {} of {} cells",
        num(gm, 3),
        ic.len(),
        num(geomean(ic.iter().filter(|p| p.1.cores == 1).map(|p| p.0)), 3),
        num(geomean(ic.iter().filter(|p| p.1.cores == 2).map(|p| p.0)), 3),
        ic.len() - above.len(),
        ic.len()
    );
    if targets {
        let _ = write!(
            out,
            "\n  target index <= DPDK in every cell: {}",
            tag(every)
        );
        if !above.is_empty() {
            let _ = write!(
                out,
                " ({} cells above, worst first: {})",
                above.len(),
                worst(above.clone(), |r| r)
            );
        }
        let _ = write!(
            out,
            "\n  target index/DPDK geomean <= {INDEX_GEOMEAN_MAX}: {} ({})",
            tag(gm_ok),
            num(gm, 3)
        );
        met += usize::from(every) + usize::from(gm_ok);
    }
    let _ = writeln!(out);

    // runtime <= 1.05 x branded everywhere
    let ri = pairs("runtime", "index");
    let over: Vec<(f64, Cell)> = ri.iter().copied().filter(|p| p.0 > RUNTIME_MAX).collect();
    let ok = over.is_empty() && !ri.is_empty();
    let _ = write!(
        out,
        "{head}: runtime/index: geomean {} over {} cells; <= {RUNTIME_MAX}x in {} of {} cells",
        num(geomean(ri.iter().map(|p| p.0)), 3),
        ri.len(),
        ri.len() - over.len(),
        ri.len()
    );
    if targets {
        let _ = write!(
            out,
            "\n  target runtime <= {RUNTIME_MAX}x branded in every cell: {}",
            tag(ok)
        );
        if !over.is_empty() {
            let _ = write!(
                out,
                " ({} cells above, worst first: {})",
                over.len(),
                worst(over.clone(), |r| r)
            );
        }
        met += usize::from(ok);
    }
    let _ = writeln!(out);

    // pointer twin within 0.9-1.1 x DPDK
    let pc = pairs("pointer", "dpdk");
    let outside: Vec<(f64, Cell)> = pc
        .iter()
        .copied()
        .filter(|p| !(TWIN.0..=TWIN.1).contains(&p.0))
        .collect();
    let ok = outside.is_empty() && !pc.is_empty();
    let below = outside.iter().filter(|p| p.0 < TWIN.0).count();
    let _ = write!(
        out,
        "{head}: pointer/DPDK: geomean {} over {} cells; within {}-{}x in {} of {} cells ({} below, {} above)",
        num(geomean(pc.iter().map(|p| p.0)), 3),
        pc.len(),
        TWIN.0,
        TWIN.1,
        pc.len() - outside.len(),
        pc.len(),
        below,
        outside.len() - below
    );
    if targets {
        let _ = write!(
            out,
            "\n  target pointer twin within {}-{}x of DPDK in every cell: {}",
            TWIN.0,
            TWIN.1,
            tag(ok)
        );
        if !outside.is_empty() {
            let _ = write!(
                out,
                " ({} cells outside, furthest first: {})",
                outside.len(),
                worst(outside.clone(), |r| r.ln().abs())
            );
        }
        met += usize::from(ok);
    }
    let _ = writeln!(out);

    // the floor, for information
    let fc = pairs("floor32", "dpdk");
    let _ = writeln!(
        out,
        "{head}: floor32/DPDK: geomean {} over {} cells; floor32 <= DPDK in {} of {} cells",
        num(geomean(fc.iter().map(|p| p.0)), 3),
        fc.len(),
        fc.iter().filter(|p| p.0 <= 1.0).count(),
        fc.len()
    );
    (out, met, if targets { 4 } else { 0 })
}

/// Cells lacking a contender, as text lines.
fn missing(name: &str, counts: &Counts) -> Vec<String> {
    counts
        .iter()
        .filter_map(|(cell, m)| {
            let absent: Vec<&str> = CONTENDERS
                .iter()
                .copied()
                .filter(|c| !m.contains_key(*c))
                .collect();
            (!absent.is_empty()).then(|| {
                format!(
                    "{name}: {} has no count of {}",
                    cell.label(),
                    absent.join(", ")
                )
            })
        })
        .collect()
}

fn csv_rows(name: &str, counts: &Counts) -> Vec<String> {
    let mut rows = Vec::new();
    for (cell, m) in counts {
        for contender in CONTENDERS {
            if let Some(c) = m.get(contender).map(Samples::net) {
                rows.push(format!(
                    "{name},{contender},512,{},{},{},{},{},{},{},{:.4}",
                    cell.cores,
                    cell.get,
                    cell.put,
                    cell.keep,
                    cell.constant,
                    c.instructions,
                    c.objects,
                    c.instructions as f64 / c.objects as f64
                ));
            }
        }
    }
    rows
}

/// The CSV's columns: `instructions` and `objects` are the net counts (the 2N run's minus the
/// N run's).
const CSV_HEADER: &str = "pairing,contender,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,instructions,objects,instr_per_object";

/// The whole report; Err when a directory is unreadable or holds nothing this report reads.
fn report(
    pairings: &[(String, Counts)],
    about: &[(String, String)],
    targets: &str,
) -> (String, bool) {
    let mut out = String::new();
    let mut complete = true;
    let mut summary = Vec::new();
    for (name, counts) in pairings {
        let _ = writeln!(out, "== pairing {name} ==");
        for (n, text) in about {
            if n == name {
                let _ = writeln!(out, "{text}");
            }
        }
        let _ = writeln!(
            out,
            "instructions per object (callgrind Ir of the counted loops: the 2N-object run's minus the N-object run's, over the objects all threads moved in the difference); marks: I index above DPDK (by more than {TIE} per object), R runtime above {RUNTIME_MAX}x index, P pointer outside {}-{}x of DPDK",
            TWIN.0, TWIN.1
        );
        out.push_str(&format_table(counts));
        let _ = writeln!(out);
        out.push_str(&format_groups(counts));
        let _ = writeln!(out);
        for line in missing(name, counts) {
            complete = false;
            let _ = writeln!(out, "incomplete: {line}");
        }
        let (text, met, judged) = verdict(name, counts, name == targets);
        if judged > 0 {
            summary.push(format!(
                "targets ({name}): {met} of {judged} met over {} cells",
                counts.len()
            ));
        }
        out.push_str(&text);
        let _ = writeln!(out);
    }
    if summary.is_empty() {
        summary.push(format!(
            "targets: judged on the {targets} pairing, which was not run (the lines above are for information)"
        ));
    }
    for line in summary {
        let _ = writeln!(out, "{line}");
    }
    (out, complete)
}

fn run(args: &Args) -> Result<(String, bool), Box<dyn Error>> {
    let mut pairings = Vec::new();
    for (name, dir) in &args.pairing {
        let counts = read_dir(dir)?;
        if counts.is_empty() {
            return Err(format!(
                "{}: no callgrind dump of a cache-512 touch=0 cell (was valgrind run with --collect-atstart=no on the harnesses' --objects mode?)",
                dir.display()
            )
            .into());
        }
        pairings.push((name.clone(), counts));
    }
    // The targets are stated against DPDK built for this CPU: judged on `native` unless told.
    let targets = args.targets.clone().unwrap_or_else(|| "native".to_string());
    if let Some(path) = &args.csv {
        let mut text = String::from(CSV_HEADER);
        text.push('\n');
        for (name, counts) in &pairings {
            for row in csv_rows(name, counts) {
                text.push_str(&row);
                text.push('\n');
            }
        }
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(report(&pairings, &args.about, &targets))
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
        Ok((text, complete)) => {
            print!("{text}");
            if complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("instr_report: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(label: &str, ir: u64) -> String {
        format!(
            "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 1\ncmd: x\npart: 2\n\ndesc: I1 cache: \ndesc: Timerange: Basic block 0 - 1\ndesc: Trigger: Client Request: {label}\n\npositions: line\nevents: Ir\nsummary: {ir}\n\nfn=(1) f\n0 {ir}\n\ntotals: {ir}\n"
        )
    }

    fn cell(cores: u32, get: u32, put: u32, keep: u32, constant: u32) -> Cell {
        Cell {
            cores,
            get,
            put,
            keep,
            constant,
        }
    }

    #[test]
    fn dumps_and_labels_parse_on_both_sides() {
        let d = dump("dpdk cache=512 cores=2 n_get_bulk=4 n_put_bulk=32 n_keep=128 constant_n=0 objects=131072", 2_621_440);
        let (label, ir) = parse_dump(&d).unwrap();
        assert_eq!(ir, 2_621_440);
        let (who, c, objects) = parse_label(&label).unwrap();
        assert_eq!(
            (who.as_str(), c, objects),
            ("dpdk", cell(2, 4, 32, 128, 0), 131072)
        );
        let (who, c, objects) = parse_label(
            "idxpool pool=runtime cache=512 cores=1 get=32 put=32 keep=512 const=1 touch=0 objects=65536",
        )
        .unwrap();
        assert_eq!(
            (who.as_str(), c, objects),
            ("runtime", cell(1, 32, 32, 512, 1), 65536)
        );
        // skipped: touch=1, cache 0, random bulks, prefetch, no objects, exit dumps
        for l in [
            "idxpool pool=index cache=512 cores=1 get=1 put=1 keep=32 const=0 touch=1 objects=8",
            "idxpool pool=index cache=0 cores=1 get=1 put=1 keep=32 const=0 touch=0 objects=8",
            "idxpool pool=index cache=512 cores=1 keep=32 max=8 touch=0 objects=8",
            "dpdk cache=512 cores=1 n_keep=32 n_max_bulk=8 objects=8",
            "idxpool pool=index cache=512 cores=1 get=1 put=1 keep=32 const=0 touch=0 objects=0",
            "Program termination",
        ] {
            assert_eq!(parse_label(l), None, "{l}");
        }
        assert_eq!(
            parse_dump("summary: 0\ntotals: 0\n"),
            None,
            "no client request"
        );
    }

    #[test]
    fn runs_of_n_and_2n_objects_are_differenced() {
        let mut counts = Counts::new();
        let l = |o: u64| {
            format!("idxpool pool=index cache=512 cores=1 get=1 put=1 keep=512 const=0 touch=0 objects={o}")
        };
        // 60 per object plus 1000 fixed: the difference leaves 60 exactly.
        add_dump(&mut counts, &dump(&l(131072), 60 * 131072 + 1000));
        add_dump(&mut counts, &dump(&l(65536), 60 * 65536 + 1000));
        add_dump(
            &mut counts,
            "desc: Trigger: Program termination\ntotals: 0\n",
        );
        let c = cell(1, 1, 1, 512, 0);
        assert_eq!(counts.len(), 1);
        assert_eq!(ipo(&counts, &c, "index"), Some(60.0));
        assert_eq!(
            counts[&c]["index"].net(),
            Count {
                instructions: 60 * 65536,
                objects: 65536
            }
        );
        assert_eq!(ipo(&counts, &c, "dpdk"), None);
        assert_eq!(missing("x", &counts).len(), 1);
        // Runs of equal length: their sum.
        let s = Samples(vec![
            Count {
                instructions: 100,
                objects: 10,
            };
            2
        ]);
        assert_eq!(s.per_object(), 10.0);
    }

    /// Every cell of 22.11's cache-512 matrix on 1 and 2 cores, with the given instructions per
    /// object per contender.
    fn matrix(f: impl Fn(&Cell, &str) -> f64) -> Counts {
        let mut counts = Counts::new();
        for cores in [1, 2] {
            for get in [1, 4, 8, 32] {
                for put in [1, 4, 8, 32] {
                    for keep in [32, 128, 512] {
                        for constant in [0, 1] {
                            if constant == 1 && get != put {
                                continue;
                            }
                            let c = cell(cores, get, put, keep, constant);
                            let m = counts.entry(c).or_default();
                            for who in CONTENDERS {
                                let objects = 65536 * u64::from(cores);
                                m.insert(
                                    who.to_string(),
                                    Samples(vec![Count {
                                        instructions: (f(&c, who) * objects as f64) as u64,
                                        objects,
                                    }]),
                                );
                            }
                        }
                    }
                }
            }
        }
        counts
    }

    #[test]
    fn groups_cover_the_120_cells() {
        let counts = matrix(|_, _| 10.0);
        assert_eq!(counts.len(), 120);
        let sizes: Vec<usize> = (0..4)
            .map(|g| counts.keys().filter(|c| c.group() == g).count())
            .collect();
        assert_eq!(sizes, vec![42, 6, 54, 18]);
        let t = format_groups(&counts);
        assert!(t.contains("| all | 120 | 10.00 | 10.00 |"), "{t}");
        assert!(t.contains("| 2 cores | 60 |"), "{t}");
        assert!(missing("x", &counts).is_empty());
    }

    #[test]
    fn verdict_judges_each_target() {
        // index 0.75x DPDK everywhere, runtime 1.04x, twin 1.0x: all four met.
        let good = matrix(|_, who| match who {
            "dpdk" | "pointer" => 20.0,
            "index" => 15.0,
            "runtime" => 15.6,
            _ => 10.0,
        });
        let (text, met, judged) = verdict("native", &good, true);
        assert_eq!((met, judged), (4, 4), "{text}");
        assert!(text.contains("geomean 0.750 over 120 cells"), "{text}");
        assert!(!text.contains("missed"), "{text}");
        // index above DPDK in the 1/1 constant cells, runtime 1.2x there, twin 0.5x: three
        // targets missed, the geomean one still met.
        let bad = matrix(|c, who| match (who, c.group()) {
            ("index", 1) => 22.0,
            ("runtime", 1) => 26.4,
            ("pointer", 1) => 10.0,
            ("dpdk" | "pointer", _) => 20.0,
            ("index", _) => 14.0,
            ("runtime", _) => 14.0,
            _ => 10.0,
        });
        let (text, met, _) = verdict("native", &bad, true);
        assert_eq!(met, 1, "{text}");
        assert!(
            text.contains("target index <= DPDK in every cell: missed (6 cells above, worst first: cores=1 get=1 put=1 keep=32 const=1 1.100"),
            "{text}"
        );
        assert!(
            text.contains("target runtime <= 1.05x branded in every cell: missed (6 cells above"),
            "{text}"
        );
        assert!(
            text.contains("within 0.9-1.1x in 114 of 120 cells (6 below, 0 above)"),
            "{text}"
        );
        // A tie (the harness's outer loop: under 0.005 per object more) is not above DPDK.
        let tie = matrix(|_, who| match who {
            "dpdk" | "pointer" => 20.0,
            "index" => 20.004,
            _ => 10.0,
        });
        assert!(verdict("native", &tie, true)
            .0
            .contains("index <= DPDK in 120 of 120 cells"));
        // Information only: no target lines.
        let (text, met, judged) = verdict("debian", &bad, false);
        assert_eq!((met, judged), (0, 0));
        assert!(!text.contains("target"), "{text}");
    }

    #[test]
    fn report_and_csv_cover_every_pairing() {
        let counts = matrix(|_, _| 8.0);
        let pairings = vec![
            ("native".to_string(), counts.clone()),
            ("debian".to_string(), counts.clone()),
        ];
        let about = vec![("native".to_string(), "C -O3".to_string())];
        let (text, complete) = report(&pairings, &about, "native");
        assert!(complete);
        assert!(text.contains("== pairing native ==\nC -O3\n"), "{text}");
        assert!(
            text.contains("targets (native): 3 of 4 met over 120 cells"),
            "{text}"
        );
        assert!(!text.contains("targets (debian)"), "{text}");
        let (text, _) = report(&pairings[1..], &about, "native");
        assert!(
            text.contains("targets: judged on the native pairing, which was not run"),
            "{text}"
        );
        let rows = csv_rows("native", &counts);
        assert_eq!(rows.len(), 120 * CONTENDERS.len());
        assert_eq!(rows[0], "native,dpdk,512,1,1,1,32,0,524288,65536,8.0000");
        assert_eq!(CSV_HEADER.split(',').count(), rows[0].split(',').count());
    }

    #[test]
    fn arguments_parse() {
        let a = Args::try_parse_from([
            "instr_report",
            "--pairing",
            "native=/tmp/a",
            "--pairing",
            "debian=/tmp/b",
            "--about",
            "native=C -O3 -march=native",
        ])
        .unwrap();
        assert_eq!(
            a.pairing[1],
            ("debian".to_string(), PathBuf::from("/tmp/b"))
        );
        assert_eq!(a.about[0].1, "C -O3 -march=native");
        assert!(Args::try_parse_from(["instr_report"]).is_err());
        assert!(Args::try_parse_from(["instr_report", "--pairing", "x"]).is_err());
    }
}
