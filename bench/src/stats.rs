//! Statistics of the harnesses: median, geometric mean, spread, the A/A noise estimate and the
//! one-glance verdict.
//!
//! The verdict compares a contender B against a reference A cell by cell (`ratio = B / A`,
//! rates, higher is better), and measures the method's noise in the same run with an A/A pair:
//! A measured twice, interleaved with the rest, `aa = A' / A`. A difference smaller than the
//! noise is not a difference.

use std::fmt::Write as _;

/// Median of the non-NaN values of `v` (mean of the two middle values for an even count);
/// NaN when there is none.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Geometric mean of the finite positive values of `v`; None when there is none.
pub fn geomean(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut n, mut sum) = (0usize, 0.0);
    for x in v {
        if x.is_finite() && x > 0.0 {
            n += 1;
            sum += x.ln();
        }
    }
    (n > 0).then(|| (sum / n as f64).exp())
}

/// `x / reference`; NaN when either is missing or the reference is not positive.
pub fn ratio(x: f64, reference: f64) -> f64 {
    if reference > 0.0 && x.is_finite() && reference.is_finite() {
        x / reference
    } else {
        f64::NAN
    }
}

/// Half the relative spread `(max - min) / 2 / median` of `v`, in percent.
pub fn spread_pct(v: &[f64]) -> f64 {
    let m = median(v);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (hi - lo) / 2.0 / m * 100.0
}

/// `q`-quantile (0..=1, nearest rank) of the non-NaN values of `v`; NaN when none.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = (q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// Which quantile of the per-cell |A/A change| is called the noise.
pub const NOISE_QUANTILE: f64 = 0.9;

/// Run-to-run noise of a run, from its A/A ratios (the same pool measured twice, `A' / A`, one
/// per cell): the [`NOISE_QUANTILE`] of `|A'/A - 1|` over the cells, as a fraction (0.03 =
/// +-3%). So about 9 in 10 cells of identical contenders differ by less than this. None when
/// no ratio is usable.
pub fn aa_noise(aa_ratios: &[f64]) -> Option<f64> {
    let dev: Vec<f64> = aa_ratios
        .iter()
        .filter(|r| r.is_finite() && **r > 0.0)
        .map(|r| (r - 1.0).abs())
        .collect();
    (!dev.is_empty()).then(|| quantile(&dev, NOISE_QUANTILE))
}

/// One cell's comparison: `ratio = B / A` (rates: above 1 when B is faster), `aa = A' / A`,
/// and the group the cell belongs to in the verdict (e.g. "touch=0").
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// Group label in the verdict's geomeans.
    pub group: String,
    /// B / A.
    pub ratio: f64,
    /// A' / A (the A/A pair); NaN when not measured.
    pub aa: f64,
}

/// The verdict over the cells measured so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Cells with a usable ratio.
    pub cells: usize,
    /// Cells where B is faster (ratio > 1).
    pub faster: usize,
    /// Cells where B is faster by more than the noise.
    pub faster_beyond_noise: usize,
    /// Cells where B is slower by more than the noise.
    pub slower_beyond_noise: usize,
    /// Geomean of the ratios over all cells.
    pub geomean: f64,
    /// Geomean per group, in order of first appearance.
    pub groups: Vec<(String, f64)>,
    /// [`aa_noise`] of the run (None: no A/A pair).
    pub noise: Option<f64>,
}

impl Verdict {
    /// Computes the verdict of `cells` (None when no cell has a usable ratio).
    pub fn of(cells: &[Compared]) -> Option<Verdict> {
        let ok: Vec<&Compared> = cells
            .iter()
            .filter(|c| c.ratio.is_finite() && c.ratio > 0.0)
            .collect();
        if ok.is_empty() {
            return None;
        }
        let noise = aa_noise(&cells.iter().map(|c| c.aa).collect::<Vec<_>>());
        let band = noise.unwrap_or(0.0);
        let mut groups: Vec<(String, f64)> = Vec::new();
        for c in &ok {
            if !groups.iter().any(|g| g.0 == c.group) {
                let g = geomean(ok.iter().filter(|d| d.group == c.group).map(|d| d.ratio));
                groups.push((c.group.clone(), g.unwrap_or(f64::NAN)));
            }
        }
        Some(Verdict {
            cells: ok.len(),
            faster: ok.iter().filter(|c| c.ratio > 1.0).count(),
            faster_beyond_noise: ok.iter().filter(|c| c.ratio - 1.0 > band).count(),
            slower_beyond_noise: ok.iter().filter(|c| 1.0 - c.ratio > band).count(),
            geomean: geomean(ok.iter().map(|c| c.ratio)).unwrap_or(f64::NAN),
            groups,
            noise,
        })
    }

    /// The one-glance line, e.g. "index pool faster in 41 of 48 cells (35 beyond noise,
    /// 2 slower beyond noise); geomean +18% (touch=0) / +6% (touch=1), +12% overall; run-to-run
    /// noise (A/A) +-3%".
    pub fn line(&self, b_name: &str) -> String {
        let mut s = format!(
            "{b_name} faster in {} of {} cells ({} beyond noise, {} slower beyond noise); geomean ",
            self.faster, self.cells, self.faster_beyond_noise, self.slower_beyond_noise
        );
        if self.groups.len() > 1 {
            let parts: Vec<String> = self
                .groups
                .iter()
                .map(|(g, r)| format!("{} ({g})", pct(*r)))
                .collect();
            let _ = write!(s, "{}, {} overall", parts.join(" / "), pct(self.geomean));
        } else {
            s.push_str(&pct(self.geomean));
        }
        match self.noise {
            Some(n) => {
                let _ = write!(s, "; run-to-run noise (A/A) +-{:.1}%", n * 100.0);
            }
            None => s.push_str("; run-to-run noise (A/A) not measured"),
        }
        s
    }
}

/// A ratio as a signed change in percent ("+18%", "-3.2%": one decimal below 10%).
pub fn pct(r: f64) -> String {
    let c = (r - 1.0) * 100.0;
    if !c.is_finite() {
        "n/a".into()
    } else if c.abs() < 10.0 {
        format!("{c:+.1}%")
    } else {
        format!("{c:+.0}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(group: &str, ratio: f64, aa: f64) -> Compared {
        Compared {
            group: group.into(),
            ratio,
            aa,
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[5.0, 1.0, 100.0, 2.0, 3.0]), 3.0);
        assert_eq!(median(&[f64::NAN, 7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn geomean_ratio_spread_quantile() {
        assert!((geomean([2.0, 0.5, 4.0, 1.0]).unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(geomean([f64::NAN, -1.0, 0.0]), None);
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert!(ratio(3.0, 0.0).is_nan());
        assert!((spread_pct(&[9.0, 10.0, 11.0]) - 10.0).abs() < 1e-12);
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.9), 9.0);
        assert_eq!(quantile(&v, 1.0), 10.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn aa_noise_is_the_90th_percentile_of_the_deviation() {
        // Deviations 1%..10% (both signs): the 90th percentile is 9%.
        let aa: Vec<f64> = (1..=10)
            .map(|k| 1.0 + if k % 2 == 0 { 1.0 } else { -1.0 } * k as f64 / 100.0)
            .collect();
        assert!((aa_noise(&aa).unwrap() - 0.09).abs() < 1e-12);
        // Identical runs: no noise.
        assert_eq!(aa_noise(&[1.0, 1.0, 1.0]), Some(0.0));
        // Missing or broken pairs are skipped; none left: None.
        assert_eq!(aa_noise(&[f64::NAN, 0.0]), None);
        assert!((aa_noise(&[f64::NAN, 1.05]).unwrap() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn verdict_counts_cells_beyond_noise_and_groups() {
        let cells = vec![
            cmp("touch=0", 1.20, 1.01),
            cmp("touch=0", 1.02, 0.99),
            cmp("touch=1", 0.90, 1.03),
            cmp("touch=1", 1.10, 0.98),
            cmp("touch=1", f64::NAN, 1.0),
        ];
        let v = Verdict::of(&cells).unwrap();
        assert_eq!(v.cells, 4);
        assert_eq!(v.faster, 3);
        // Noise: 90th percentile of {1%, 1%, 3%, 2%, 0%} = 3%.
        assert!((v.noise.unwrap() - 0.03).abs() < 1e-12);
        // +20% and +10% beyond 3%; +2% within; -10% slower beyond.
        assert_eq!(v.faster_beyond_noise, 2);
        assert_eq!(v.slower_beyond_noise, 1);
        assert_eq!(v.groups.len(), 2);
        assert!((v.groups[0].1 - (1.20f64 * 1.02).sqrt()).abs() < 1e-12);
        assert_eq!(
            v.line("index pool"),
            "index pool faster in 3 of 4 cells (2 beyond noise, 1 slower beyond noise); \
             geomean +11% (touch=0) / -0.5% (touch=1), +4.9% overall; run-to-run noise (A/A) +-3.0%"
        );
        assert_eq!(Verdict::of(&[cmp("x", f64::NAN, 1.0)]), None);
        let one = Verdict::of(&[cmp("x", 0.5, f64::NAN)]).unwrap();
        assert_eq!(one.noise, None);
        assert_eq!(
            one.line("B"),
            "B faster in 0 of 1 cells (0 beyond noise, 1 slower beyond noise); geomean -50%; \
             run-to-run noise (A/A) not measured"
        );
    }

    #[test]
    fn pct_formats() {
        assert_eq!(pct(1.18), "+18%");
        assert_eq!(pct(0.968), "-3.2%");
        assert_eq!(pct(f64::NAN), "n/a");
    }
}
