//! What backs a region (hugetlb, THP, 4 KiB pages, heap), the policy choosing it, the report, and
//! what the host offers (page sizes, free huge pages).

use std::fmt;
use std::io;

/// 2 MiB: the x86-64 / arm64 PMD huge page size.
pub const HUGE_2M: usize = 2 << 20;
/// 1 GiB: the x86-64 PUD huge page size.
pub const HUGE_1G: usize = 1 << 30;

// The enum is defined with the errors that name it (`PoolError::BackingUnavailable`), so `error`
// imports nothing above it; its methods are here.
pub use crate::error::Backing;

impl Backing {
    /// Page size of this backing in bytes (the heap reports the OS page size).
    pub fn page_size(self) -> usize {
        match self {
            Backing::Hugetlb2M | Backing::Thp => HUGE_2M,
            Backing::Hugetlb1G => HUGE_1G,
            Backing::Pages4K | Backing::Heap => os_page_size(),
        }
    }
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backing::Hugetlb2M => "hugetlb 2 MiB",
            Backing::Hugetlb1G => "hugetlb 1 GiB",
            Backing::Thp => "THP",
            Backing::Pages4K => "4 KiB pages",
            Backing::Heap => "heap",
        })
    }
}

/// Which backing to use.
///
/// ```
/// use idxpool::{Backing, BackingPolicy, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(64)
///     .backing(BackingPolicy::Require(Backing::Pages4K)) // no fallback
///     .build()?;
/// assert_eq!(pool.backing().backing, Backing::Pages4K);
/// assert!(pool.backing().fallbacks.is_empty());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackingPolicy {
    /// Try hugetlb 2 MiB, then THP, then 4 KiB pages; record why each skipped one failed.
    #[default]
    Auto,
    /// As `Auto`, but try hugetlb 1 GiB pages first.
    AutoPrefer1G,
    /// Exactly this backing, or [`PoolError::BackingUnavailable`](crate::PoolError::BackingUnavailable): no fallback.
    Require(Backing),
}

/// What a pool got: the backing, the fallbacks on the way, and the mapping's size.
///
/// ```
/// use idxpool::{BackingReport, PoolBuilder};
/// let pool = PoolBuilder::<[u8; 256]>::zeroed(1024).build()?;
/// let r: &BackingReport = pool.backing();
/// assert!(r.mapped_bytes >= 1024 * 256);
/// assert_eq!(r.mapped_bytes % r.backing.page_size(), 0);
/// println!("{r}"); // e.g. "THP (2097152 bytes mapped); hugetlb 2 MiB unavailable: ..."
/// for (tried, why) in &r.fallbacks {
///     assert!(*tried != r.backing && !why.is_empty());
/// }
/// // Nothing was skipped exactly when the first choice (hugetlb 2 MiB) was had.
/// assert_eq!(r.fallbacks.is_empty(), r.backing == idxpool::Backing::Hugetlb2M);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackingReport {
    /// The backing in use.
    pub backing: Backing,
    /// The backings tried before it, in order, each with the OS error or configuration that ruled
    /// it out. Empty when the first choice succeeded.
    pub fallbacks: Vec<(Backing, String)>,
    /// Bytes mapped (a multiple of the page size, alignment slack included). With a larger
    /// [`crate::PoolBuilder::max_capacity`]: the bytes usable at build (the rest is address space
    /// until `grow` maps it).
    pub mapped_bytes: usize,
    /// Whether the pages were faulted in at creation.
    pub prefaulted: bool,
}

impl fmt::Display for BackingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes mapped", self.backing, self.mapped_bytes)?;
        if self.prefaulted {
            f.write_str(", prefaulted")?;
        }
        f.write_str(")")?;
        for (tried, why) in &self.fallbacks {
            write!(f, "; {tried} unavailable: {why}")?;
        }
        Ok(())
    }
}

/// `Ok` when the kernel may back memory with transparent huge pages.
pub(super) fn thp_available() -> Result<(), io::Error> {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if mode.contains("[never]") {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "transparent_hugepage/enabled is [never]",
        ));
    }
    if mode.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "kernel has no transparent hugepage support",
        ));
    }
    Ok(())
}

/// The OS page size (sysconf), 4096 on x86-64.
pub fn os_page_size() -> usize {
    #[cfg(not(miri))]
    {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            return v as usize;
        }
    }
    4096
}

/// Where the kernel publishes per-size hugetlb counters.
const SYSFS_HUGEPAGES: &str = "/sys/kernel/mm/hugepages";

/// Free hugetlb pages of `page_size` bytes (e.g. [`HUGE_2M`], [`HUGE_1G`]), from
/// `/sys/kernel/mm/hugepages/hugepages-<page_size / 1024>kB/free_hugepages`; `None` when the kernel
/// has no pool of that size or the file is unreadable. Per-size counters, not `/proc/meminfo`'s
/// `HugePages_Free`, which counts only the *default* size (1 GiB with `default_hugepagesz=1G`).
pub fn free_hugepages(page_size: usize) -> Option<usize> {
    free_hugepages_in(std::path::Path::new(SYSFS_HUGEPAGES), page_size)
}

/// Free 2 MiB hugetlb pages: [`free_hugepages`]`(HUGE_2M)`.
pub fn free_hugepages_2m() -> Option<usize> {
    free_hugepages(HUGE_2M)
}

/// Huge pages of `page_size` a mapping could get now: free plus possible surplus
/// (`nr_overcommit_hugepages - surplus_hugepages`); `None` when unreadable. A hint (others take
/// pages too), to fail a growth early.
pub(super) fn hugepages_available(page_size: usize) -> Option<usize> {
    let dir =
        std::path::Path::new(SYSFS_HUGEPAGES).join(format!("hugepages-{}kB", page_size / 1024));
    let read = |f: &str| -> Option<usize> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let free = read("free_hugepages")?;
    let extra = read("nr_overcommit_hugepages")
        .zip(read("surplus_hugepages"))
        .map_or(0, |(o, s)| o.saturating_sub(s));
    Some(free + extra)
}

/// [`free_hugepages`] under another sysfs root (for tests).
fn free_hugepages_in(root: &std::path::Path, page_size: usize) -> Option<usize> {
    if page_size < 1024 {
        return None;
    }
    let path = root
        .join(format!("hugepages-{}kB", page_size / 1024))
        .join("free_hugepages");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-size counters are read from the size's own directory whatever the default size (a fake
    /// sysfs: 1 GiB default pages plus 2 MiB ones, where `HugePages_Free` would report the 1 GiB
    /// count for both).
    #[test]
    #[cfg_attr(miri, ignore = "file system access is isolated under Miri")]
    fn free_hugepages_reads_the_per_size_counter() {
        let root = std::env::temp_dir().join(format!(
            "idxpool-sysfs-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        for (dir, free) in [("hugepages-2048kB", "17\n"), ("hugepages-1048576kB", "3\n")] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join("free_hugepages"), free).unwrap();
        }
        assert_eq!(free_hugepages_in(&root, HUGE_2M), Some(17));
        assert_eq!(free_hugepages_in(&root, HUGE_1G), Some(3));
        assert_eq!(
            free_hugepages_in(&root, 64 << 10),
            None,
            "no such pool size"
        );
        assert_eq!(free_hugepages_in(&root, 0), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// On this machine: the answer is the real sysfs file's content, for every size offered.
    #[test]
    #[cfg_attr(miri, ignore = "file system access is isolated under Miri")]
    fn free_hugepages_matches_the_sysfs_files() {
        let Ok(dirs) = std::fs::read_dir(SYSFS_HUGEPAGES) else {
            eprintln!("skip: no {SYSFS_HUGEPAGES} (no hugetlb support)");
            return;
        };
        for d in dirs.flatten() {
            let name = d.file_name().into_string().unwrap();
            let kb: usize = name
                .strip_prefix("hugepages-")
                .and_then(|s| s.strip_suffix("kB"))
                .and_then(|s| s.parse().ok())
                .unwrap();
            let read = || -> usize {
                let text = std::fs::read_to_string(d.path().join("free_hugepages")).unwrap();
                text.trim().parse().unwrap()
            };
            // Others may map huge pages meanwhile: compare only when the file reads the same before
            // and after (a few tries, else no verdict).
            for _ in 0..100 {
                let before = read();
                let got = free_hugepages(kb << 10);
                if before == read() {
                    assert_eq!(got, Some(before), "{name}");
                    break;
                }
            }
        }
        assert_eq!(
            free_hugepages_2m(),
            free_hugepages(HUGE_2M),
            "the 2 MiB shortcut is the per-size counter"
        );
    }
}
