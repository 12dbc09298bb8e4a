//! Files the harnesses write: CSV tables and the per-cell change chart (SVG, plotters).

use std::error::Error;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Creates the CSV file at `path` now, so that a bad path fails before a long run rather than
/// after it. The error names the path.
pub fn create_csv(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("cannot create --csv {}: {e}", path.display()))
}

/// Writes `header` and then each row (one line each, without newline) to `w`, and flushes.
pub fn write_csv<W: Write>(
    w: W,
    header: &str,
    rows: impl IntoIterator<Item = String>,
) -> io::Result<()> {
    let mut w = BufWriter::new(w);
    writeln!(w, "{header}")?;
    for r in rows {
        writeln!(w, "{r}")?;
    }
    w.flush()
}

/// `csv` with its extension replaced by `.svg` (where the chart of a CSV goes).
pub fn svg_path(csv: &Path) -> PathBuf {
    csv.with_extension("svg")
}

/// Horizontal bar chart of a change in percent per labelled row, first row on top: green above
/// zero, orange down to `-tolerance_pct`, red below. Writes nothing for no row.
pub fn change_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    rows: &[(String, f64)],
    tolerance_pct: f64,
) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;

    let n = rows.len();
    if n == 0 {
        return Ok(());
    }
    let changes: Vec<f64> = rows
        .iter()
        .map(|r| if r.1.is_finite() { r.1 } else { 0.0 })
        .collect();
    let lo = changes.iter().copied().fold(0.0f64, f64::min).floor() - 2.0;
    let hi = changes.iter().copied().fold(0.0f64, f64::max).ceil() + 2.0;
    let height = 90 + 16 * n as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let label_width = 7 * rows.iter().map(|l| l.0.len()).max().unwrap_or(10) as u32 + 20;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(label_width)
        .build_cartesian_2d(lo..hi, (0..n as i32 - 1).into_segmented())?;
    // Row i (from the bottom) shows entry n - 1 - i, so that the first entry is on top.
    let row_label = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            let idx = n as i32 - 1 - *i;
            usize::try_from(idx)
                .ok()
                .and_then(|k| rows.get(k).map(|r| r.0.clone()))
                .unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .y_labels(n)
        .y_label_formatter(&row_label)
        .y_label_style(("monospace", 11))
        .x_desc(x_desc)
        .disable_y_mesh()
        .draw()?;
    chart.draw_series(
        Histogram::horizontal(&chart)
            .style_func(|_, v: &f64| {
                if *v >= 0.0 {
                    GREEN.mix(0.8).filled()
                } else if *v >= -tolerance_pct {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_chart_are_written() {
        let dir = std::env::temp_dir().join(format!("idxpool_bench_report_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("out.csv");
        let f = create_csv(&csv).unwrap();
        write_csv(f, "a,b", ["1,2".to_string(), "3,4".to_string()]).unwrap();
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), "a,b\n1,2\n3,4\n");
        let svg = svg_path(&csv);
        assert_eq!(svg, dir.join("out.svg"));
        change_chart(
            &svg,
            "title",
            "change, %",
            &[("row one".into(), 5.0), ("row two".into(), -4.0)],
            3.0,
        )
        .unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("row two"));
        assert!(create_csv(&dir.join("missing/x.csv"))
            .unwrap_err()
            .contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
