//! What mempool_perf prints and writes: the streamed table (one row per cell as soon as both
//! pools ran), the summary and one-glance verdict, the CSV and the chart.

use std::fmt::Write as _;

use idxpool::FlushPolicy;
use idxpool_bench::stats::{geomean, Compared, Verdict};

use crate::matrix::{full_label, Cell};

/// The measured medians of one cell (rates in objects got-and-put per second, summed over
/// threads).
#[derive(Clone, Debug)]
pub struct CellResult {
    pub policy: FlushPolicy,
    pub cell: Cell,
    pub index: f64,
    pub pointer: f64,
    /// The index pool measured a second time, interleaved with the others (the A/A pair).
    pub index_aa: f64,
    /// `--floor`: the same loop on a bare LIFO array of u32 / of u64 (touch=0 cells only).
    pub floor32: Option<f64>,
    pub floor64: Option<f64>,
    /// `--runtime`: the same loop through a run-time pool (`Pool<Obj, Runtime, R>`, the same
    /// representation as `index`): one range check per put entry and per access.
    pub runtime: Option<f64>,
}

impl CellResult {
    /// index / pointer.
    pub fn ratio(&self) -> f64 {
        self.index / self.pointer
    }

    /// The A/A ratio: second index measurement / first.
    pub fn aa(&self) -> f64 {
        self.index_aa / self.index
    }

    pub fn change_pct(&self) -> f64 {
        (self.ratio() - 1.0) * 100.0
    }

    /// The cell's label, with its policy when several policies ran.
    pub fn label(&self, with_policy: bool) -> String {
        if with_policy {
            full_label(self.policy, &self.cell)
        } else {
            self.cell.label()
        }
    }
}

/// Geometric mean of index/pointer ratios and the extreme cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub geomean: f64,
    pub n: usize,
    pub min: (f64, String),
    pub max: (f64, String),
}

/// Summarises `(label, ratio)` pairs, skipping non-finite or non-positive ratios; None if none
/// is left.
pub fn summarize(ratios: &[(String, f64)]) -> Option<Summary> {
    let ok: Vec<&(String, f64)> = ratios
        .iter()
        .filter(|(_, r)| r.is_finite() && *r > 0.0)
        .collect();
    let first = ok.first()?;
    let mut min = (first.1, first.0.clone());
    let mut max = min.clone();
    for (label, r) in &ok {
        if *r < min.0 {
            min = (*r, label.clone());
        }
        if *r > max.0 {
            max = (*r, label.clone());
        }
    }
    Some(Summary {
        geomean: geomean(ok.iter().map(|x| x.1))?,
        n: ok.len(),
        min,
        max,
    })
}

/// The geomean line (the format BENCHMARKS.md quotes).
pub fn summary_line(s: &Summary) -> String {
    format!(
        "geomean index/pointer = {:.3} over {} cells (min {:.3} at {}, max {:.3} at {})",
        s.geomean, s.n, s.min.0, s.min.1, s.max.0, s.max.1
    )
}

/// Exact CSV header (pool is `index`, `pointer`, `index-aa` (the A/A repeat), or with
/// `--floor` `floor32` / `floor64`; `n_max_bulk` is 0 except in 26.07's random-bulk cells,
/// whose `n_get_bulk` and `n_put_bulk` are 0).
pub const CSV_HEADER: &str =
    "pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,n_max_bulk,rate_per_sec";

/// The CSV rows of `results`: three per cell (index, pointer, index-aa), plus the floors
/// measured.
pub fn csv_rows(results: &[CellResult]) -> Vec<String> {
    let mut rows = Vec::with_capacity(3 * results.len());
    for r in results {
        for (pool, rate) in [
            ("index", Some(r.index)),
            ("pointer", Some(r.pointer)),
            ("index-aa", Some(r.index_aa)),
            ("floor32", r.floor32),
            ("floor64", r.floor64),
            ("runtime", r.runtime),
        ] {
            let Some(rate) = rate else { continue };
            let c = &r.cell;
            let suffix = if c.prefetch { "+prefetch" } else { "" };
            let (get, put) = if c.max_bulk != 0 {
                (0, 0)
            } else {
                (c.get, c.put)
            };
            rows.push(format!(
                "{pool}{suffix},{},{},{},{},{},{},{},{},{},{:.0}",
                r.policy.name(),
                c.cache,
                c.cores,
                get,
                put,
                c.keep,
                u8::from(c.constant),
                u8::from(c.touch),
                c.max_bulk,
                rate
            ));
        }
    }
    rows
}

/// The table's column header (`floor`: with the index/floor column).
pub fn table_header(floor: bool, runtime: bool) -> String {
    let h = format!(
        "{:>5} {:>5} {:>10} {:>10} {:>6} {:>10} {:>5} {:>12} {:>14} {:>8} {:>7}",
        "cache",
        "cores",
        "n_get_bulk",
        "n_put_bulk",
        "n_keep",
        "constant_n",
        "touch",
        "index Mobj/s",
        "pointer Mobj/s",
        "change",
        "A/A"
    );
    let h = if floor {
        format!("{h} {:>11}", "index/floor")
    } else {
        h
    };
    if runtime {
        format!("{h} {:>13}", "runtime/index")
    } else {
        h
    }
}

/// A bulk size column: the size, or `1..max` in a random-bulk cell.
fn bulk(c: &Cell, n: usize) -> String {
    if c.max_bulk != 0 {
        format!("1..{}", c.max_bulk)
    } else {
        n.to_string()
    }
}

/// One row of the table: rates in millions of objects per second, change = index vs pointer,
/// A/A = the index pool's second measurement vs its first; with `floor`, the index pool's rate
/// over the u32 floor's (`-` where no floor was measured).
pub fn table_row(r: &CellResult, floor: bool, runtime: bool) -> String {
    let c = &r.cell;
    let row = format!(
        "{:>5} {:>5} {:>10} {:>10} {:>6} {:>10} {:>5} {:>12.2} {:>14.2} {:>+7.1}% {:>+6.1}%",
        c.cache,
        c.cores,
        bulk(c, c.get),
        bulk(c, c.put),
        c.keep,
        u8::from(c.constant),
        u8::from(c.touch),
        r.index / 1e6,
        r.pointer / 1e6,
        r.change_pct(),
        (r.aa() - 1.0) * 100.0
    );
    let prefetch = if c.prefetch { " prefetch=1" } else { "" };
    let row = if !floor {
        row
    } else {
        match r.floor32 {
            Some(f) => format!("{row} {:>11.3}", r.index / f),
            None => format!("{row} {:>11}", "-"),
        }
    };
    if !runtime {
        return format!("{row}{prefetch}");
    }
    match r.runtime {
        Some(rt) => format!("{row} {:>13.3}{prefetch}", rt / r.index),
        None => format!("{row} {:>13}{prefetch}", "-"),
    }
}

/// The streamed report: [`Stream::push`] gives the lines to print for each new result (a
/// section header when the policy changes, then the row), and [`Stream::summary`] the closing
/// lines over whatever was measured, complete or interrupted.
#[derive(Debug, Default)]
pub struct Stream {
    with_policy: bool,
    floor: bool,
    runtime: bool,
    results: Vec<CellResult>,
}

impl Stream {
    /// A new report; `with_policy` when several policies run (labels then carry it).
    pub fn new(with_policy: bool) -> Self {
        Stream {
            with_policy,
            floor: false,
            runtime: false,
            results: Vec::new(),
        }
    }

    /// With the index/floor column (`--floor`).
    pub fn with_floor(mut self, floor: bool) -> Self {
        self.floor = floor;
        self
    }

    /// With the runtime/index column and summary line (`--runtime`).
    pub fn with_runtime(mut self, runtime: bool) -> Self {
        self.runtime = runtime;
        self
    }

    /// Records `r` and returns the text to print now (ends with a newline).
    pub fn push(&mut self, r: CellResult) -> String {
        let mut out = String::new();
        if self.results.last().map(|p| p.policy) != Some(r.policy) {
            let _ = writeln!(out, "policy {}:", r.policy);
            let _ = writeln!(out, "{}", table_header(self.floor, self.runtime));
        }
        let _ = writeln!(out, "{}", table_row(&r, self.floor, self.runtime));
        self.results.push(r);
        out
    }

    /// The results so far, in measuring order.
    pub fn results(&self) -> &[CellResult] {
        &self.results
    }

    /// Per-cell comparisons for the verdict (grouped by touch).
    pub fn compared(&self) -> Vec<Compared> {
        self.results
            .iter()
            .map(|r| Compared {
                group: format!("touch={}", u8::from(r.cell.touch)),
                ratio: r.ratio(),
                aa: r.aa(),
            })
            .collect()
    }

    /// The closing lines: the geomean line, then `verdict: ...`; when the run stopped early
    /// (`planned` cells were planned), says how many were measured.
    pub fn summary(&self, planned: usize) -> String {
        let mut out = String::new();
        if self.results.len() < planned {
            let _ = writeln!(
                out,
                "interrupted: {} of {} cells measured; the summary covers those",
                self.results.len(),
                planned
            );
        }
        let ratios: Vec<(String, f64)> = self
            .results
            .iter()
            .map(|r| (r.label(self.with_policy), r.ratio()))
            .collect();
        match summarize(&ratios) {
            Some(s) => {
                let _ = writeln!(out, "{}", summary_line(&s));
            }
            None => {
                let _ = writeln!(out, "geomean index/pointer = n/a over 0 cells");
            }
        }
        let rt: Vec<(String, f64)> = self
            .results
            .iter()
            .filter_map(|r| Some((r.label(self.with_policy), r.runtime? / r.index)))
            .collect();
        if let Some(s) = summarize(&rt) {
            let aa: Vec<(String, f64)> = self
                .results
                .iter()
                .filter(|r| r.runtime.is_some())
                .map(|r| (r.label(self.with_policy), r.aa()))
                .collect();
            let widest = aa
                .iter()
                .map(|(_, a)| (a - 1.0).abs())
                .fold(0.0f64, f64::max);
            let _ = writeln!(
                out,
                "run-time pool / branded (same representation): geomean {:.3} over {} cells \
                 (min {:.3} at {}, max {:.3} at {}); the branded pool's A/A widest {:.1}%",
                s.geomean,
                s.n,
                s.min.0,
                s.min.1,
                s.max.0,
                s.max.1,
                widest * 100.0
            );
        }
        match Verdict::of(&self.compared()) {
            Some(v) => {
                let _ = writeln!(out, "verdict: {}", v.line("index pool"));
            }
            None => {
                let _ = writeln!(out, "verdict: no cell measured");
            }
        }
        out
    }

    /// `(label, change %)` per cell, for the chart.
    pub fn chart_rows(&self) -> Vec<(String, f64)> {
        self.results
            .iter()
            .map(|r| (r.label(self.with_policy), r.change_pct()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(policy: FlushPolicy, get: usize, touch: bool, i: f64, p: f64, aa: f64) -> CellResult {
        CellResult {
            policy,
            cell: Cell {
                cache: 512,
                cores: 1,
                get,
                put: get,
                keep: 32,
                constant: false,
                touch,
                max_bulk: 0,
                dpdk: Default::default(),
                prefetch: false,
            },
            index: i,
            pointer: p,
            index_aa: aa,
            floor32: None,
            floor64: None,
            runtime: None,
        }
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
    fn stream_prints_each_row_at_once_with_headers_per_policy() {
        let mut s = Stream::new(true);
        let first = s.push(res(FlushPolicy::Dpdk2607, 1, false, 110e6, 100e6, 111e6));
        let lines: Vec<&str> = first.lines().collect();
        assert_eq!(lines.len(), 3, "{first}");
        assert_eq!(lines[0], "policy dpdk2607:");
        assert_eq!(lines[1], table_header(false, false));
        assert!(lines[2].ends_with("+10.0%   +0.9%"), "{}", lines[2]);
        // Same policy: only the row.
        let second = s.push(res(FlushPolicy::Dpdk2607, 4, true, 90e6, 100e6, 90e6));
        assert_eq!(second.lines().count(), 1);
        assert!(second.trim_end().ends_with("-10.0%   +0.0%"), "{second}");
        // New policy: a new section.
        let third = s.push(res(FlushPolicy::Classic, 32, false, 100e6, 100e6, 100e6));
        assert!(third.starts_with("policy classic:\n"));
        assert_eq!(s.results().len(), 3);
    }

    #[test]
    fn stream_summary_covers_what_was_measured() {
        let mut s = Stream::new(false);
        assert_eq!(
            s.summary(0),
            "geomean index/pointer = n/a over 0 cells\nverdict: no cell measured\n"
        );
        s.push(res(FlushPolicy::Dpdk2607, 1, false, 120e6, 100e6, 122.4e6));
        s.push(res(FlushPolicy::Dpdk2607, 4, true, 95e6, 100e6, 93.1e6));
        // Planned 48, measured 2: an interrupted run still gets its verdict.
        let sum = s.summary(48);
        let lines: Vec<&str> = sum.lines().collect();
        assert_eq!(
            lines[0],
            "interrupted: 2 of 48 cells measured; the summary covers those"
        );
        assert!(lines[1].starts_with("geomean index/pointer = 1.068 over 2 cells"));
        assert_eq!(
            lines[2],
            "verdict: index pool faster in 1 of 2 cells (1 beyond noise, 1 slower beyond noise); \
             geomean +20% (touch=0) / -5.0% (touch=1), +6.8% overall; run-to-run noise (A/A) +-2.0%"
        );
        // Complete run: no interruption line.
        assert!(s.summary(2).starts_with("geomean"));
        let cmp = s.compared();
        assert_eq!(cmp[1].group, "touch=1");
        assert!((cmp[0].aa - 1.02).abs() < 1e-12);
        assert_eq!(s.chart_rows().len(), 2);
    }

    #[test]
    fn csv_has_exact_header_and_three_rows_per_cell() {
        let results = vec![
            res(FlushPolicy::Dpdk2607, 1, false, 110e6, 100e6, 109e6),
            res(FlushPolicy::Classic, 32, false, 90e6, 100e6, 91e6),
        ];
        assert_eq!(
            CSV_HEADER,
            "pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,n_max_bulk,rate_per_sec"
        );
        let rows = csv_rows(&results);
        assert_eq!(rows.len(), 3 * results.len());
        assert_eq!(rows[0], "index,dpdk2607,512,1,1,1,32,0,0,0,110000000");
        assert_eq!(rows[1], "pointer,dpdk2607,512,1,1,1,32,0,0,0,100000000");
        assert_eq!(rows[2], "index-aa,dpdk2607,512,1,1,1,32,0,0,0,109000000");
        assert!(rows[3].starts_with("index,classic,512,1,32,32,"));
        for l in &rows {
            assert_eq!(l.split(',').count(), 11);
        }
    }

    #[test]
    fn floors_and_random_cells_in_csv_and_table() {
        let mut r = res(FlushPolicy::Dpdk2607, 1, false, 100e6, 100e6, 100e6);
        r.cell.max_bulk = 64;
        r.cell.keep = 2048;
        r.floor32 = Some(400e6);
        r.floor64 = Some(300e6);
        let rows = csv_rows(std::slice::from_ref(&r));
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[3], "floor32,dpdk2607,512,1,0,0,2048,0,0,64,400000000");
        assert_eq!(rows[4], "floor64,dpdk2607,512,1,0,0,2048,0,0,64,300000000");
        let row = table_row(&r, true, false);
        assert!(row.contains("1..64"), "{row}");
        assert!(row.ends_with("0.250"), "{row}");
        assert!(table_header(true, false).ends_with("index/floor"));
        r.floor32 = None;
        assert!(table_row(&r, true, false).ends_with(" -"));
        assert!(!table_row(&r, false, false).ends_with(" -"));
        let mut s = Stream::new(false).with_floor(true);
        assert!(s.push(r).contains("index/floor"));
    }

    #[test]
    fn prefetch_cells_are_labelled_in_the_table_and_the_csv() {
        let mut r = res(FlushPolicy::Dpdk2607, 32, true, 100e6, 100e6, 100e6);
        r.cell.prefetch = true;
        let rows = csv_rows(std::slice::from_ref(&r));
        assert!(
            rows[0].starts_with("index+prefetch,dpdk2607,"),
            "{}",
            rows[0]
        );
        assert!(rows[1].starts_with("pointer+prefetch,"));
        assert!(rows[2].starts_with("index-aa+prefetch,"));
        assert!(table_row(&r, false, false).ends_with(" prefetch=1"));
        assert!(r.label(false).ends_with("touch=1 prefetch=1"));
        r.cell.prefetch = false;
        assert!(!table_row(&r, false, false).contains("prefetch"));
    }

    #[test]
    fn runtime_column_and_summary() {
        let mut r = res(FlushPolicy::Classic, 4, false, 1.0e8, 0.8e8, 1.0e8);
        r.runtime = Some(0.9e8);
        assert!(table_header(false, true).ends_with("runtime/index"));
        assert!(table_row(&r, false, true).ends_with("0.900"));
        let mut st = Stream::new(false).with_runtime(true);
        st.push(r.clone());
        let sum = st.summary(1);
        assert!(
            sum.contains("run-time pool / branded (same representation): geomean 0.900"),
            "{sum}"
        );
        assert!(csv_rows(&[r]).iter().any(|row| row.starts_with("runtime,")));
    }
}
