//! The cells of the matrix: DPDK's axes (22.11's, and 26.07's with `--matrix 2607`), the three
//! modes' subsets, `--filter` and the plan.

use idxpool::FlushPolicy;

/// DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`, the cache size of the cached half of the matrix.
pub const CACHE_SIZE: u32 = 512;
/// DPDK's `MAX_KEEP`: largest `n_keep`, part of the pool size formula.
pub const MAX_KEEP: u32 = 512;
/// Bulk sizes of DPDK 22.11 (1, 4, a cache line of pointers, 32).
pub const BULK_SIZES: [usize; 4] = [1, 4, 8, 32];
/// `n_keep` values of DPDK 22.11.
pub const KEEPS: [usize; 3] = [32, 128, 512];
/// DPDK 26.07's `MAX_KEEP`.
pub const MAX_KEEP_2607: u32 = 32768;
/// Bulk sizes of DPDK 26.07 (`bulk_tab_get`/`bulk_tab_put`: up to the cache size).
pub const BULK_SIZES_2607: [usize; 8] = [1, 4, 8, 32, 64, 128, 256, 512];
/// `n_keep` values of DPDK 26.07.
pub const KEEPS_2607: [usize; 6] = [32, 128, 512, 2048, 8192, 32768];
/// Largest random bulk sizes of DPDK 26.07's random-bulk pass (`bulk_tab_max`).
pub const MAX_BULKS_2607: [usize; 6] = [8, 32, 64, 128, 256, 512];

/// Which DPDK release's `mempool_perf_autotest` a cell comes from: it fixes the pool size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dpdk {
    /// DPDK 22.11: `MEMPOOL_SIZE = lcores x (512 + 512) - 1`.
    #[default]
    V2211,
    /// DPDK 26.07: `MEMPOOL_SIZE = lcores x (32768 + 2 x 512) - 1`.
    V2607,
}

/// One cell of the matrix (a pool configuration and a workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub cache: u32,
    pub cores: usize,
    pub get: usize,
    pub put: usize,
    pub keep: usize,
    pub constant: bool,
    pub touch: bool,
    /// 26.07's random-bulk pass: every get and put takes a pseudorandom size in
    /// `1..=max_bulk` (a power of two), DPDK's sequence; 0 for the fixed-bulk cells.
    pub max_bulk: usize,
    /// The release the cell (and its pool size) comes from.
    pub dpdk: Dpdk,
    /// `--prefetch` on a touch=1 cell: the objects of each got burst are prefetched for
    /// writing (`prefetch_all`) before the writes. Labels carry ` prefetch=1`.
    pub prefetch: bool,
}

impl Cell {
    /// Label used by `--filter`, progress and the summary (random-bulk cells: `max=` instead of
    /// `get= put=` and `const=`).
    pub fn label(&self) -> String {
        let prefetch = if self.prefetch { " prefetch=1" } else { "" };
        if self.max_bulk != 0 {
            return format!(
                "cache={} cores={} keep={} max={} touch={}{prefetch}",
                self.cache,
                self.cores,
                self.keep,
                self.max_bulk,
                u8::from(self.touch)
            );
        }
        format!(
            "cache={} cores={} get={} put={} keep={} const={} touch={}{prefetch}",
            self.cache,
            self.cores,
            self.get,
            self.put,
            self.keep,
            u8::from(self.constant),
            u8::from(self.touch)
        )
    }

    /// DPDK's `MEMPOOL_SIZE`: `threads x (MAX_KEEP + cache max) - 1` (22.11), `threads x
    /// (MAX_KEEP + 2 x cache max) - 1` (26.07).
    pub fn pool_size(&self) -> u32 {
        match self.dpdk {
            Dpdk::V2211 => self.cores as u32 * (MAX_KEEP + CACHE_SIZE) - 1,
            Dpdk::V2607 => self.cores as u32 * (MAX_KEEP_2607 + 2 * CACHE_SIZE) - 1,
        }
    }
}

/// The label of a cell under a policy, as `--filter` sees it.
pub fn full_label(policy: FlushPolicy, cell: &Cell) -> String {
    format!("policy={} {}", policy.name(), cell.label())
}

/// The axes of a matrix.
#[derive(Clone, Debug)]
pub struct MatrixSpec {
    pub caches: Vec<u32>,
    pub cores: Vec<usize>,
    pub pairs: Vec<(usize, usize)>,
    pub keeps: Vec<usize>,
    /// `constant_n` values tried where get == put.
    pub constants: Vec<bool>,
    pub touches: Vec<bool>,
}

impl MatrixSpec {
    /// `--full`: DPDK 22.11's matrix plus touch 0/1 (480 cells on 2 cores).
    pub fn full(cores: &[usize]) -> Self {
        MatrixSpec {
            caches: vec![CACHE_SIZE, 0],
            cores: cores.to_vec(),
            pairs: BULK_SIZES
                .iter()
                .flat_map(|&g| BULK_SIZES.iter().map(move |&p| (g, p)))
                .collect(),
            keeps: KEEPS.to_vec(),
            constants: vec![false, true],
            touches: vec![false, true],
        }
    }

    /// The default: cache 512, get == put in {1, 4, 32}, n_keep 32 and 512, constant_n 0/1,
    /// touch 0/1 (24 cells per thread count: 48 on 2 cores).
    pub fn standard(cores: &[usize]) -> Self {
        MatrixSpec {
            caches: vec![CACHE_SIZE],
            cores: cores.to_vec(),
            pairs: vec![(1, 1), (4, 4), (32, 32)],
            keeps: vec![32, 512],
            constants: vec![false, true],
            touches: vec![false, true],
        }
    }

    /// `--quick`: the default's cells with constant_n = 0 only (24 cells on 2 cores).
    pub fn quick(cores: &[usize]) -> Self {
        MatrixSpec {
            constants: vec![false],
            ..MatrixSpec::standard(cores)
        }
    }
}

/// DPDK 26.07's matrix (`--matrix 2607`): per (cache 512 then 0, cores), in the autotest's
/// order, first the random-bulk pass (`n_keep` x `max_bulk`, where `max_bulk <= n_keep`), then
/// every (get, put) pair of [`BULK_SIZES_2607`] with both `<= n_keep`, each `n_keep`
/// (`constant_n = 1` replayed where get == put); touch 0 only (DPDK's cells): 380 cells per
/// (cache, cores).
pub fn build_matrix_2607(caches: &[u32], cores: &[usize]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for &cache in caches {
        for &threads in cores {
            let base = Cell {
                cache,
                cores: threads,
                get: 0,
                put: 0,
                keep: 0,
                constant: false,
                touch: false,
                max_bulk: 0,
                dpdk: Dpdk::V2607,
                prefetch: false,
            };
            for &keep in &KEEPS_2607 {
                for &max_bulk in MAX_BULKS_2607.iter().filter(|&&m| m <= keep) {
                    cells.push(Cell {
                        keep,
                        max_bulk,
                        ..base
                    });
                }
            }
            for &keep in &KEEPS_2607 {
                for &get in BULK_SIZES_2607.iter().filter(|&&g| g <= keep) {
                    for &put in BULK_SIZES_2607.iter().filter(|&&p| p <= keep) {
                        let cell = Cell {
                            keep,
                            get,
                            put,
                            ..base
                        };
                        cells.push(cell);
                        if get == put {
                            cells.push(Cell {
                                constant: true,
                                ..cell
                            });
                        }
                    }
                }
            }
        }
    }
    cells
}

/// Every cell of `spec`, grouped by (cache, cores) in that order; `constant_n = 1` cells only
/// where get == put (as DPDK replays them).
pub fn build_matrix(spec: &MatrixSpec) -> Vec<Cell> {
    let mut cells = Vec::new();
    for &cache in &spec.caches {
        for &cores in &spec.cores {
            for &(get, put) in &spec.pairs {
                for &keep in &spec.keeps {
                    let consts: Vec<bool> = if get == put {
                        spec.constants.clone()
                    } else {
                        vec![false]
                    };
                    for constant in consts {
                        for &touch in &spec.touches {
                            cells.push(Cell {
                                cache,
                                cores,
                                get,
                                put,
                                keep,
                                constant,
                                touch,
                                max_bulk: 0,
                                dpdk: Dpdk::V2211,
                                prefetch: false,
                            });
                        }
                    }
                }
            }
        }
    }
    cells
}

/// True when `label` contains `filter`, or holds every whitespace-separated word of it; a
/// filter of alternatives separated by `|` matches when one of them does (empty alternatives
/// are ignored; an empty filter matches every label).
pub fn matches_filter(label: &str, filter: &str) -> bool {
    if filter.trim().is_empty() {
        return true;
    }
    let words: Vec<&str> = label.split_whitespace().collect();
    filter
        .split('|')
        .map(str::trim)
        .filter(|alt| !alt.is_empty())
        .any(|alt| label.contains(alt) || alt.split_whitespace().all(|w| words.contains(&w)))
}

/// The (policy, cell) pairs to run: cache-0 cells only under the first policy (the policy has
/// no cache to act on), filtered.
pub fn plan(
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
            if filter.is_none_or(|f| matches_filter(&full_label(policy, cell), f)) {
                out.push((policy, *cell));
            }
        }
    }
    out
}

/// Default thread counts: 1 and every available core up to 2.
pub fn default_cores(available: usize) -> Vec<usize> {
    (1..=available.clamp(1, 2)).collect()
}

/// Parses `--policy`: a name, `all`, or none (the default policy).
pub fn parse_policies(arg: Option<&str>) -> Result<Vec<FlushPolicy>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        for c in cells.iter().filter(|c| c.get == c.put && !c.constant) {
            assert!(cells.contains(&Cell {
                constant: true,
                ..*c
            }));
        }
        let mut groups: Vec<(u32, usize)> = cells.iter().map(|c| (c.cache, c.cores)).collect();
        groups.dedup();
        assert_eq!(groups, vec![(512, 1), (512, 2), (0, 1), (0, 2)]);
        assert!(cells
            .iter()
            .all(|c| c.keep % c.get == 0 && c.keep % c.put == 0));
    }

    #[test]
    fn standard_and_quick_subsets() {
        let std2 = build_matrix(&MatrixSpec::standard(&[1, 2]));
        // 3 pairs x 2 keeps x 2 const x 2 touch, x 2 core counts.
        assert_eq!(std2.len(), 48);
        let full = build_matrix(&MatrixSpec::full(&[1, 2]));
        assert!(std2.iter().all(|c| full.contains(c)));
        let quick = build_matrix(&MatrixSpec::quick(&[1, 2]));
        assert_eq!(quick.len(), 24);
        assert!(quick.iter().all(|c| std2.contains(c) && !c.constant));
        assert!(quick.iter().all(|c| c.cache == 512));
    }

    #[test]
    fn matrix_2607_is_dpdks() {
        let cells = build_matrix_2607(&[512, 0], &[1, 2]);
        // Random pass: 2 + 4 + 6 + 6 + 6 + 6 cells; fixed: keep 32: 4x4 pairs, keep 128: 6x6,
        // keep 512 and larger: 8x8, plus constant_n = 1 where get == put.
        let random = 2 + 4 + 6 + 6 + 6 + 6;
        let fixed = (16 + 4) + (36 + 6) + 4 * (64 + 8);
        assert_eq!(random + fixed, 380);
        assert_eq!(cells.len(), 380 * 4);
        assert!(cells.iter().all(|c| c.dpdk == Dpdk::V2607 && !c.touch));
        assert!(cells
            .iter()
            .all(|c| c.max_bulk != 0 || (c.keep % c.get == 0 && c.keep % c.put == 0)));
        assert!(cells
            .iter()
            .all(|c| c.max_bulk <= c.keep && c.get <= c.keep));
        // DPDK's order: the random pass of a group comes before its fixed cells.
        assert_eq!(cells[0].label(), "cache=512 cores=1 keep=32 max=8 touch=0");
        assert_eq!(
            cells[random].label(),
            "cache=512 cores=1 get=1 put=1 keep=32 const=0 touch=0"
        );
        let big = Cell {
            cores: 2,
            ..cells[0]
        };
        assert_eq!(big.pool_size(), 2 * (32768 + 1024) - 1);
        // Labels are unique, so that --filter picks one cell.
        let mut labels: Vec<String> = cells.iter().map(Cell::label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), cells.len());
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
            max_bulk: 0,
            dpdk: Dpdk::V2211,
            prefetch: false,
        };
        let l = full_label(FlushPolicy::Dpdk2607, &c);
        assert_eq!(
            l,
            "policy=dpdk2607 cache=512 cores=1 get=32 put=32 keep=512 const=0 touch=1"
        );
        assert!(matches_filter(&l, "cache=512 cores=1"));
        assert!(matches_filter(&l, "keep=512 touch=1"));
        assert!(matches_filter(&l, ""));
        assert!(!matches_filter(&l, "cache=0"));
        assert!(!matches_filter(&l, "cores=2 touch=1"));
        assert!(!matches_filter(&l, "keep=32 touch=1"));
        // Alternatives: one of them is enough; empty ones match nothing.
        assert!(matches_filter(&l, "cores=2 touch=1|keep=512 touch=1"));
        assert!(!matches_filter(&l, "cores=2 touch=1|keep=32"));
        assert!(!matches_filter(&l, "cache=0| |"));
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
    fn policies_and_cores_parse() {
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
}
