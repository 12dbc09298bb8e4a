//! Statistics and output: rows, CSV, the tables and the SVG chart.

#[allow(unused_imports)]
use super::*;

// ---- statistics and output ------------------------------------------------------------------

pub(crate) use idxpool_bench::stats::{median, ratio, spread_pct};

/// One measured figure.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) workload: String,
    pub(crate) contender: String,
    pub(crate) object_size: usize,
    pub(crate) threads: usize,
    pub(crate) ns: f64,
    pub(crate) spread: f64,
}

pub(crate) const CSV_HEADER: &str = "workload,contender,object_size,threads,ns_per_object";

pub(crate) fn csv_string(rows: &[Row]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.3}",
            r.workload, r.contender, r.object_size, r.threads, r.ns
        );
    }
    s
}

/// Whether (workload, contender) passes the filter terms (empty: everything). A term matches
/// when it is a substring of the workload or of the contender name; a term `W:C` matches when
/// `W` is a substring of the workload and `C` of the contender.
pub(crate) fn matches(terms: &[String], workload: &str, contender: &str) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| match t.split_once(':') {
            Some((w, c)) => workload.contains(w) && contender.contains(c),
            None => workload.contains(t.as_str()) || contender.contains(t.as_str()),
        })
}

pub(crate) fn fmt_ns(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

pub(crate) fn fmt_ratio(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}x")
    }
}

/// Prints the table of one workload: ns per object (± half spread) and ratio to the
/// reference, per object size.
pub(crate) fn print_table(title: &str, rows: &[Row], reference: &str, ratio_note: &str) {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.contender.as_str()) {
            names.push(&r.contender);
        }
    }
    let sizes: Vec<usize> = SIZES
        .iter()
        .copied()
        .filter(|s| rows.iter().any(|r| r.object_size == *s))
        .collect();
    println!("\n### {title}\n");
    print!("| contender |");
    for s in &sizes {
        print!(" {} ns/obj | ratio |", size_label(*s));
    }
    println!();
    print!("|---|");
    for _ in &sizes {
        print!("---:|---:|");
    }
    println!();
    for n in &names {
        print!("| {n} |");
        for s in &sizes {
            let get = |c: &str| {
                rows.iter()
                    .find(|r| r.contender == c && r.object_size == *s)
                    .map(|r| (r.ns, r.spread))
            };
            match get(n) {
                Some((ns, sp)) => {
                    let refv = get(reference).map_or(f64::NAN, |x| x.0);
                    let rt = if ratio_note.starts_with("speedup") {
                        ratio(refv, ns)
                    } else {
                        ratio(ns, refv)
                    };
                    print!(" {} ±{:.0}% | {} |", fmt_ns(ns), sp, fmt_ratio(rt));
                }
                None => print!(" - | - |"),
            }
        }
        println!();
    }
    println!("\n{ratio_note}");
}

// ---- SVG ------------------------------------------------------------------------------------

pub(crate) fn write_svg(path: &Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let panel_h = |w: &str| {
        let n = rows
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| r.contender.as_str())
            .collect::<BTreeSet<_>>()
            .len();
        (80 + n * 42) as u32
    };
    let total: u32 = workloads.iter().map(|w| panel_h(w)).sum();
    let root = SVGBackend::new(path, (1000, total.max(100))).into_drawing_area();
    root.fill(&WHITE)?;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];
    let mut breaks = Vec::new();
    let mut y_off = 0u32;
    for w in &workloads {
        y_off += panel_h(w);
        breaks.push(y_off);
    }
    breaks.pop();
    let areas = root.split_by_breakpoints([] as [u32; 0], breaks);
    for (w, area) in workloads.iter().zip(areas) {
        let wr: Vec<&Row> = rows.iter().filter(|r| r.workload == *w).collect();
        let mut names: Vec<&str> = Vec::new();
        for r in &wr {
            if !names.contains(&r.contender.as_str()) {
                names.push(&r.contender);
            }
        }
        let finite = wr
            .iter()
            .map(|r| r.ns)
            .filter(|x| x.is_finite() && *x > 0.0);
        let lo = finite.clone().fold(f64::INFINITY, f64::min) / 1.5;
        let hi = finite.fold(0.0, f64::max) * 1.5;
        if !(lo.is_finite() && hi > lo) {
            continue;
        }
        let n = names.len() as f64;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("{w}: ns per object (log scale, lower is better)"),
                ("sans-serif", 18),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(190)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..n)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(8)
            .x_label_formatter(&|v| format!("{v}"))
            .x_desc("ns per object")
            .draw()?;
        for (k, size) in SIZES.iter().enumerate() {
            let color = colors[k];
            let bars: Vec<_> = names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| {
                    wr.iter()
                        .find(|r| r.contender == *name && r.object_size == *size)
                        .filter(|r| r.ns.is_finite())
                        .map(|r| {
                            let y0 = (names.len() - 1 - i) as f64 + 0.1 + k as f64 * 0.27;
                            Rectangle::new([(lo, y0), (r.ns, y0 + 0.25)], color.filled())
                        })
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            chart
                .draw_series(bars)?
                .label(size_label(*size))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        for (i, name) in names.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(lo, (names.len() - 1 - i) as f64 + 0.5));
            root.draw(&Text::new(
                name.to_string(),
                (px - 185, py - 7),
                ("sans-serif", 14).into_font(),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}
