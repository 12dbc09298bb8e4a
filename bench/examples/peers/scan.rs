//! The scan workload: every object of a large pool touched in a random order, hugetlb
//! 2 MiB vs THP vs 4 KiB pages (the TLB effect).

#[allow(unused_imports)]
use super::*;

// ---- scan -----------------------------------------------------------------------------------

idxpool::brand!(ScanHuge);
idxpool::brand!(ScanThp);
idxpool::brand!(Scan4K);

/// Mapping facts from /proc/self/smaps for the mapping holding `addr`:
/// (size kB, AnonHugePages kB, KernelPageSize kB).
pub(crate) fn smaps_for(addr: usize) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut found = false;
    let (mut size, mut anon_huge, mut kps) = (0, 0, 0);
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                if found {
                    break;
                }
                found = (lo..hi).contains(&addr);
                continue;
            }
        }
        if found {
            let mut it = line.split_whitespace();
            let key = it.next().unwrap_or("");
            let val: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            match key {
                "Size:" => size = val,
                "AnonHugePages:" => anon_huge = val,
                "KernelPageSize:" => kps = val,
                _ => {}
            }
        }
    }
    found.then_some((size, anon_huge, kps))
}

/// One scan contender: an idxpool pool whose every object is held, in a random order.
pub(crate) trait ScanRun {
    fn name(&self) -> &'static str;
    /// Touches every object once (read-modify-write of its u64); ns per object.
    fn pass(&mut self) -> f64;
    fn detail(&self) -> String;
    /// Sum of the objects' u64 (tests).
    #[cfg(test)]
    fn sum(&self) -> u64;
}

pub(crate) struct ScanPool<T: Obj, B: NamedBrand> {
    pub(crate) name: &'static str,
    pub(crate) pool: idxpool::Pool<T, B>,
    pub(crate) hs: Vec<idxpool::Handle<T, B>>,
}

impl<T: Obj, B: NamedBrand> ScanPool<T, B> {
    pub(crate) fn new(
        name: &'static str,
        backing: Backing,
        bytes: usize,
    ) -> Result<Self, PoolError> {
        let stride = idxpool::StrideMode::Auto.stride_for(std::mem::size_of::<T>(), 8)?;
        let cap = (bytes / stride) as u32;
        let pool = PoolBuilder::<T>::with_default(cap)
            .backing(BackingPolicy::Require(backing))
            .prefault(true)
            .cache_size(0)
            .name(name)
            .build_named::<B>()?;
        let mut hs = Vec::with_capacity(cap as usize);
        pool.get_bulk(&mut hs, cap as usize)?;
        hs.shuffle(&mut SmallRng::seed_from_u64(0x5ca9));
        Ok(ScanPool { name, pool, hs })
    }
}

impl<T: Obj, B: NamedBrand> ScanRun for ScanPool<T, B> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn pass(&mut self) -> f64 {
        let pool = &self.pool;
        let t0 = cpu_now();
        for h in self.hs.iter_mut() {
            let o = pool.get_mut(h);
            o.set(o.val().wrapping_add(1));
        }
        ns_per(t0, cpu_now(), self.hs.len())
    }
    fn detail(&self) -> String {
        let b = self.pool.backing();
        let mut s = format!(
            "{} objects x stride {} B, {}",
            self.pool.capacity(),
            self.pool.stride(),
            b
        );
        if let Some((size, huge, kps)) = smaps_for(self.pool.base().as_ptr() as usize) {
            let _ = write!(
                s,
                "; smaps: {size} kB, KernelPageSize {kps} kB, AnonHugePages {huge} kB"
            );
        }
        s
    }
    #[cfg(test)]
    fn sum(&self) -> u64 {
        self.hs.iter().map(|h| self.pool.get_ref(h).val()).sum()
    }
}

impl<T: Obj, B: NamedBrand> Drop for ScanPool<T, B> {
    fn drop(&mut self) {
        self.pool.put_bulk(&mut self.hs);
    }
}

/// Free 2 MiB hugetlb pages (the per-size sysfs counter, right whatever the default size).
pub(crate) fn hugepages_free() -> String {
    idxpool::region::free_hugepages_2m().map_or_else(|| "?".into(), |n| n.to_string())
}

/// Builds the three scan pools of `T` over `bytes`; skipped ones come back as (name, reason).
/// Scan contenders built, and (name, reason) of those skipped.
pub(crate) type ScanSet = (Vec<Box<dyn ScanRun>>, Vec<(String, String)>);

pub(crate) fn scan_pools<T: Obj>(bytes: usize) -> ScanSet {
    let mut runs: Vec<Box<dyn ScanRun>> = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |r: Result<Box<dyn ScanRun>, String>, name: &str| match r {
        Ok(p) => runs.push(p),
        Err(e) => skipped.push((name.to_string(), e)),
    };
    let free_before = hugepages_free();
    add(
        ScanPool::<T, ScanHuge>::new("idxpool-hugetlb2m", Backing::Hugetlb2M, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| {
                format!(
                    "{e} (free 2 MiB hugepages were {free_before}; needs {} 2 MiB pages: \
                     echo 600 > /proc/sys/vm/nr_hugepages as root)",
                    bytes.div_ceil(2 << 20)
                )
            }),
        "idxpool-hugetlb2m",
    );
    add(
        ScanPool::<T, ScanThp>::new("idxpool-thp", Backing::Thp, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| e.to_string()),
        "idxpool-thp",
    );
    add(
        ScanPool::<T, Scan4K>::new("idxpool-4k", Backing::Pages4K, bytes)
            .map(|p| Box::new(p) as Box<dyn ScanRun>)
            .map_err(|e| e.to_string()),
        "idxpool-4k",
    );
    (runs, skipped)
}

/// Runs scan for `T`: one untimed pass each, then `reps` round-robin rounds.
pub(crate) fn scan_size<T: Obj>(bytes: usize, reps: usize, terms: &[String], rows: &mut Vec<Row>) {
    let t = Instant::now();
    let (mut runs, skipped) = scan_pools::<T>(bytes);
    runs.retain(|r| matches(terms, "scan", r.name()));
    println!(
        "  scan {}: pools of {} MiB built and shuffled in {:.1} s",
        T::LABEL,
        bytes >> 20,
        t.elapsed().as_secs_f64()
    );
    for r in &runs {
        println!("    {}: {}", r.name(), r.detail());
    }
    for (n, why) in &skipped {
        println!("    {n}: SKIPPED: {why}");
    }
    for r in runs.iter_mut() {
        r.pass();
    }
    let mut samples = vec![Vec::new(); runs.len()];
    for rep in 0..reps {
        for j in 0..runs.len() {
            let k = (j + rep) % runs.len();
            samples[k].push(runs[k].pass());
        }
    }
    for (r, s) in runs.iter().zip(&samples) {
        rows.push(Row {
            workload: "scan".into(),
            contender: r.name().into(),
            object_size: std::mem::size_of::<T>(),
            threads: 1,
            ns: median(s),
            spread: spread_pct(s),
        });
    }
}
