//! The region: one contiguous mapping that holds every object of a pool.
//!
//! Backing is tried in DPDK's order unless the caller demands one: hugetlb (`MAP_HUGETLB`, 2 MiB,
//! or 1 GiB on request), then THP (a 2 MiB-aligned anonymous mapping with `MADV_HUGEPAGE`), then 4
//! KiB pages. The region records the backing it got and why each skipped one failed.
//!
//! Mappings go through memmap2 (DESIGN.md: why not hugepage-rs); the length is rounded to the page
//! size used, and memmap2 unmaps exactly that on drop.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::error::PoolError;

pub use backing::{
    free_hugepages, free_hugepages_2m, os_page_size, Backing, BackingPolicy, BackingReport,
    HUGE_1G, HUGE_2M,
};
use backing::{hugepages_available, thp_available};

mod backing;

enum Mapping {
    Mmap(#[allow(dead_code)] memmap2::MmapMut),
    Heap(std::alloc::Layout),
    /// An address-space reservation (`PROT_NONE`, `MAP_NORESERVE`) of `len` bytes at `addr`, made
    /// usable from its start by [`Region::commit`]; unmapped on drop.
    Reserved {
        addr: *mut u8,
        len: usize,
    },
}

/// The growth state of a region reserved for more objects than it holds at build.
struct Reservation {
    /// Bytes from the base that may ever be committed (the reservation, page-rounded).
    reserved: usize,
    /// Bytes from the base committed so far (a multiple of `unit`, at most `reserved`); written
    /// only by `commit`, serialised by the pool's grow lock.
    committed: AtomicUsize,
    /// The page size of the backing: commits are whole pages.
    unit: usize,
    /// hugetlb: populate each commit with `MADV_POPULATE_WRITE`, which fails (instead of a later
    /// SIGBUS) when the huge page reserve is short.
    populate: bool,
    /// THP / 4 KiB with prefault: write one byte per 4 KiB of each commit.
    touch: bool,
}

/// One contiguous, zero-filled, writable mapping of at least `len` bytes aligned to `align`.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    mapping: Mapping,
    report: BackingReport,
    /// `Some` for a region reserved for growth ([`Region::map_growable`]).
    grow: Option<Reservation>,
}

// SAFETY: a Region is plain memory owned by the pool; the raw base pointer ties it to no thread,
// and the pool synchronises access to the bytes (each object has one owner).
unsafe impl Send for Region {}
// SAFETY: as above; &Region only hands out the base pointer.
unsafe impl Sync for Region {}

impl Region {
    /// Maps `len` bytes (> 0) aligned to `align` (a power of two) with the given policy.
    ///
    /// # Errors
    /// [`PoolError::SizeOverflow`] when rounding overflows or exceeds `isize::MAX`;
    /// [`PoolError::InvalidConfig`] for `len == 0` or a non-power-of-two `align`;
    /// [`PoolError::BackingUnavailable`] with the OS error when the demanded backing (with `Auto`,
    /// every one) fails.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn map(
        len: usize,
        align: usize,
        policy: BackingPolicy,
        prefault: bool,
    ) -> Result<Region, PoolError> {
        Self::map_growable(len, len, align, policy, prefault)
    }

    /// As [`Region::map`], but reserves address space for `max_len` (>= `len`) bytes at the same
    /// base, the first `len` usable now and the rest made usable by [`Region::commit`]: an
    /// anonymous `PROT_NONE`, `MAP_NORESERVE` mapping (with `MAP_HUGETLB` for hugetlb: huge pages,
    /// 2 MiB aligned) whose prefix is opened with `mprotect` (hugetlb: populated at once). `max_len
    /// == len` is exactly [`Region::map`].
    ///
    /// # Errors
    /// As [`Region::map`]; also [`PoolError::SizeOverflow`] for `max_len` beyond `isize::MAX`.
    pub fn map_growable(
        len: usize,
        max_len: usize,
        align: usize,
        policy: BackingPolicy,
        prefault: bool,
    ) -> Result<Region, PoolError> {
        let max_len = max_len.max(len);
        if max_len > isize::MAX as usize {
            return Err(PoolError::overflow(format!(
                "region reservation of {max_len} bytes exceeds isize::MAX"
            )));
        }
        if len == 0 {
            return Err(PoolError::config("region length is 0"));
        }
        if !align.is_power_of_two() {
            return Err(PoolError::config(format!(
                "alignment {align} is not a power of two"
            )));
        }
        if len > isize::MAX as usize {
            return Err(PoolError::overflow(format!(
                "region of {len} bytes exceeds isize::MAX"
            )));
        }
        let order: &[Backing] = match policy {
            BackingPolicy::Require(b) => &[b][..],
            _ if cfg!(miri) => &[Backing::Heap],
            BackingPolicy::Auto => &[Backing::Hugetlb2M, Backing::Thp, Backing::Pages4K],
            BackingPolicy::AutoPrefer1G => &[
                Backing::Hugetlb1G,
                Backing::Hugetlb2M,
                Backing::Thp,
                Backing::Pages4K,
            ],
        };
        // `order` borrows a temporary for Require; copy it out.
        let order: Vec<Backing> = order.to_vec();
        let mut fallbacks = Vec::new();
        let mut last_err = None;
        for backing in order {
            let got = if max_len > len {
                Self::try_reserve(len, max_len, align, backing, prefault)
            } else {
                Self::try_map(len, align, backing, prefault)
            };
            match got {
                Ok(mut region) => {
                    region.report.fallbacks = fallbacks;
                    return Ok(region);
                }
                Err(MapError::Fatal(e)) => return Err(e),
                Err(MapError::Unavailable(err)) => {
                    fallbacks.push((backing, err.to_string()));
                    last_err = Some((backing, err));
                }
            }
        }
        let (backing, source) = last_err.expect("at least one backing is always tried");
        let source = if fallbacks.len() > 1 {
            let all: Vec<String> = fallbacks
                .iter()
                .map(|(tried, why)| format!("{tried}: {why}"))
                .collect();
            io::Error::new(source.kind(), all.join("; "))
        } else {
            source
        };
        Err(PoolError::BackingUnavailable { backing, source })
    }

    fn try_map(
        len: usize,
        align: usize,
        backing: Backing,
        prefault: bool,
    ) -> Result<Region, MapError> {
        let page = backing.page_size();
        match backing {
            Backing::Heap => {
                let size = round_up(len, align.max(16))?;
                let layout = std::alloc::Layout::from_size_align(size, align.max(16))
                    .map_err(|e| MapError::Fatal(PoolError::overflow(e.to_string())))?;
                // SAFETY: layout has a non-zero size (len > 0).
                let p = unsafe { std::alloc::alloc_zeroed(layout) };
                let base = NonNull::new(p).ok_or_else(|| {
                    MapError::Unavailable(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        format!("global allocator refused {size} bytes"),
                    ))
                })?;
                Ok(Region {
                    base,
                    len,
                    mapping: Mapping::Heap(layout),
                    report: BackingReport {
                        backing,
                        fallbacks: Vec::new(),
                        mapped_bytes: size,
                        prefaulted: false,
                    },
                    grow: None,
                })
            }
            Backing::Hugetlb2M | Backing::Hugetlb1G => {
                if align > page {
                    return Err(MapError::Unavailable(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("alignment {align} exceeds the {page}-byte page"),
                    )));
                }
                let size = round_up(len, page)?;
                let bits = page.trailing_zeros() as u8;
                let mut opts = memmap2::MmapOptions::new();
                opts.len(size).huge(Some(bits));
                if prefault {
                    opts.populate();
                }
                let mut map = opts.map_anon().map_err(|e| {
                    MapError::Unavailable(io::Error::new(
                        e.kind(),
                        format!(
                            "{e} (reserve pages: echo N > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages)",
                            page >> 10
                        ),
                    ))
                })?;
                let base = NonNull::new(map.as_mut_ptr()).expect("mmap never returns null");
                Ok(Region::from_map(base, len, map, backing, size, prefault))
            }
            Backing::Thp => {
                thp_available().map_err(MapError::Unavailable)?;
                let size = round_up(len, page)?;
                let slack = page.max(align);
                let total = size
                    .checked_add(slack)
                    .ok_or_else(|| MapError::Fatal(PoolError::overflow("THP alignment slack")))?;
                let mut map = memmap2::MmapOptions::new()
                    .len(total)
                    .map_anon()
                    .map_err(MapError::Unavailable)?;
                let raw = map.as_mut_ptr();
                let offset = raw.align_offset(slack);
                map.advise_range(memmap2::Advice::HugePage, offset, size)
                    .map_err(MapError::Unavailable)?;
                // SAFETY: offset < slack, so raw + offset lies inside the total-byte mapping.
                let base = NonNull::new(unsafe { raw.add(offset) }).expect("non-null");
                if prefault {
                    touch_pages(base, size, 4096);
                }
                Ok(Region::from_map(base, len, map, backing, total, prefault))
            }
            Backing::Pages4K => {
                let slack = if align > page { align } else { 0 };
                let size = round_up(len, page)?;
                let total = size
                    .checked_add(slack)
                    .ok_or_else(|| MapError::Fatal(PoolError::overflow("alignment slack")))?;
                let mut opts = memmap2::MmapOptions::new();
                opts.len(total);
                if prefault {
                    opts.populate();
                }
                let mut map = opts.map_anon().map_err(MapError::Unavailable)?;
                let raw = map.as_mut_ptr();
                let offset = raw.align_offset(align.max(1));
                // SAFETY: offset < slack (or 0), inside the mapping.
                let base = NonNull::new(unsafe { raw.add(offset) }).expect("non-null");
                Ok(Region::from_map(base, len, map, backing, total, prefault))
            }
        }
    }

    fn from_map(
        base: NonNull<u8>,
        len: usize,
        map: memmap2::MmapMut,
        backing: Backing,
        mapped_bytes: usize,
        prefaulted: bool,
    ) -> Region {
        Region {
            base,
            len,
            mapping: Mapping::Mmap(map),
            report: BackingReport {
                backing,
                fallbacks: Vec::new(),
                mapped_bytes,
                prefaulted,
            },
            grow: None,
        }
    }

    /// [`Region::map_growable`] with one backing: reserve `max_len` bytes, commit `len`.
    fn try_reserve(
        len: usize,
        max_len: usize,
        align: usize,
        backing: Backing,
        prefault: bool,
    ) -> Result<Region, MapError> {
        if backing == Backing::Heap {
            // The heap cannot reserve without allocating: the whole maximum is allocated (zeroed)
            // now, commits are no-ops. What Miri runs.
            let mut r = Self::try_map(max_len, align, backing, prefault)?;
            r.len = len;
            r.grow = Some(Reservation {
                reserved: max_len,
                committed: AtomicUsize::new(max_len),
                unit: 1,
                populate: false,
                touch: false,
            });
            return Ok(r);
        }
        if cfg!(miri) {
            return Err(MapError::Unavailable(io::Error::new(
                io::ErrorKind::Unsupported,
                "Miri interprets no PROT_NONE reservation",
            )));
        }
        let page = backing.page_size();
        let huge = matches!(backing, Backing::Hugetlb2M | Backing::Hugetlb1G);
        if huge && align > page {
            return Err(MapError::Unavailable(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("alignment {align} exceeds the {page}-byte page"),
            )));
        }
        if backing == Backing::Thp {
            thp_available().map_err(MapError::Unavailable)?;
        }
        let size = round_up(max_len, page)?;
        // Base alignment: hugetlb starts on a huge page; THP wants 2 MiB; 4 KiB pages need slack
        // only for alignments above the page.
        let base_align = match backing {
            Backing::Thp => page.max(align),
            _ if align > page => align,
            _ => 1,
        };
        let slack = if base_align > 1 { base_align } else { 0 };
        let total = size
            .checked_add(slack)
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| MapError::Fatal(PoolError::overflow("reservation alignment slack")))?;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        if huge {
            flags |= libc::MAP_HUGETLB
                | ((page.trailing_zeros() as libc::c_int) << libc::MAP_HUGE_SHIFT);
        }
        // SAFETY: a new anonymous mapping at a kernel-chosen address touches no memory of ours;
        // PROT_NONE: nothing is accessible until `commit`.
        let raw = unsafe { libc::mmap(std::ptr::null_mut(), total, libc::PROT_NONE, flags, -1, 0) };
        if raw == libc::MAP_FAILED {
            return Err(MapError::Unavailable(io::Error::last_os_error()));
        }
        let raw = raw.cast::<u8>();
        let offset = raw.align_offset(base_align);
        // SAFETY: offset < slack (or 0), so raw + offset lies inside the total-byte mapping.
        let base = NonNull::new(unsafe { raw.add(offset) }).expect("mmap never returns null");
        // From here the region owns the mapping: an error below unmaps it (Region's drop).
        let mut region = Region {
            base,
            len,
            mapping: Mapping::Reserved {
                addr: raw,
                len: total,
            },
            report: BackingReport {
                backing,
                fallbacks: Vec::new(),
                mapped_bytes: 0,
                prefaulted: prefault || huge,
            },
            grow: Some(Reservation {
                reserved: size,
                committed: AtomicUsize::new(0),
                unit: page,
                populate: huge,
                touch: prefault && !huge,
            }),
        };
        if backing == Backing::Thp {
            // SAFETY: [base, base + size) lies inside the mapping; advice changes no contents.
            let rc = unsafe { libc::madvise(base.as_ptr().cast(), size, libc::MADV_HUGEPAGE) };
            if rc != 0 {
                return Err(MapError::Unavailable(io::Error::last_os_error()));
            }
        }
        region.commit(len).map_err(|e| match e {
            PoolError::BackingUnavailable { source, .. } => MapError::Unavailable(source),
            other => MapError::Fatal(other),
        })?;
        region.report.mapped_bytes = region.committed();
        Ok(region)
    }

    /// Bytes from the base that are usable (readable and writable).
    fn committed(&self) -> usize {
        match &self.grow {
            Some(g) => g.committed.load(Relaxed),
            None => self.len,
        }
    }

    /// Makes the first `upto` bytes usable (zero-filled, read-write) in whole pages: `mprotect` of
    /// the reservation and, for hugetlb, `MADV_POPULATE_WRITE`, so a short huge page reserve is an
    /// error here (the range is closed again), not a SIGBUS on first touch. Usable bytes are left
    /// as they are. Callers serialise (the pool's grow lock).
    ///
    /// # Errors
    /// [`PoolError::BackingUnavailable`] with the OS error when the pages cannot be had;
    /// [`PoolError::InvalidConfig`] when `upto` exceeds the reservation.
    pub fn commit(&self, upto: usize) -> Result<(), PoolError> {
        let backing = self.report.backing;
        let Some(g) = &self.grow else {
            return if upto <= self.len {
                Ok(())
            } else {
                Err(PoolError::config(format!(
                    "{upto} bytes exceed the region's {} (nothing reserved)",
                    self.len
                )))
            };
        };
        if upto > g.reserved {
            return Err(PoolError::config(format!(
                "{upto} bytes exceed the region's reservation of {}",
                g.reserved
            )));
        }
        let from = g.committed.load(Relaxed);
        if upto <= from {
            return Ok(());
        }
        // `reserved` is a multiple of `unit` for mappings (and `unit` is 1 for the heap).
        let to = upto
            .checked_next_multiple_of(g.unit)
            .map_or(g.reserved, |t| t.min(g.reserved));
        let len = to - from;
        // SAFETY: from < to <= reserved: inside the reservation, which the region owns.
        let p = unsafe { self.base.as_ptr().add(from) };
        let os_err = |what: &str| {
            let e = io::Error::last_os_error();
            PoolError::BackingUnavailable {
                backing,
                source: io::Error::new(e.kind(), format!("{what} of {len} bytes: {e}")),
            }
        };
        // SAFETY: [p, p + len) is in our own PROT_NONE reservation past every usable byte: no
        // object or reference there.
        if unsafe { libc::mprotect(p.cast(), len, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(os_err("mprotect"));
        }
        if g.populate {
            // A reserve known to be short fails here without populating (which would hold huge
            // pages others need during a failed population).
            if let Some(have) = hugepages_available(g.unit) {
                let need = len / g.unit;
                if have < need {
                    // SAFETY: as above: nothing of ours lives in [p, p + len).
                    unsafe { libc::mprotect(p.cast(), len, libc::PROT_NONE) };
                    return Err(PoolError::BackingUnavailable {
                        backing,
                        source: io::Error::new(
                            io::ErrorKind::OutOfMemory,
                            format!(
                                "{need} hugetlb pages of {} bytes needed, {have} available \
                                 (echo N > /proc/sys/vm/nr_hugepages)",
                                g.unit
                            ),
                        ),
                    });
                }
            }
            // SAFETY: as above; populating writes nothing visible (the pages read as zero).
            if unsafe { libc::madvise(p.cast(), len, libc::MADV_POPULATE_WRITE) } != 0 {
                let err = os_err(
                    "MADV_POPULATE_WRITE (hugetlb pages short? echo N > /proc/sys/vm/nr_hugepages)",
                );
                // Give back what was populated and close the range (best effort: on failure the
                // pages stay with the reservation until drop).
                // SAFETY: as above: nothing of ours lives in [p, p + len).
                unsafe {
                    libc::madvise(p.cast(), len, libc::MADV_DONTNEED);
                    libc::mprotect(p.cast(), len, libc::PROT_NONE);
                }
                return Err(err);
            }
        } else if g.touch {
            // SAFETY: p is non-null and [p, p + len) was just made writable.
            touch_pages(unsafe { NonNull::new_unchecked(p) }, len, 4096);
        }
        g.committed.store(to, Relaxed);
        Ok(())
    }

    /// First byte of the region, aligned as requested.
    #[inline]
    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Usable length in bytes (as requested; the mapping may be longer).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Backing and fallbacks.
    pub fn report(&self) -> &BackingReport {
        &self.report
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match self.mapping {
            Mapping::Heap(layout) => {
                // SAFETY: base was returned by alloc_zeroed with this layout and is freed once.
                unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
            }
            Mapping::Reserved { addr, len } => {
                // SAFETY: try_reserve's reservation, unmapped once, after every object in it was
                // dropped (the pool's drop runs before its fields').
                unsafe { libc::munmap(addr.cast(), len) };
            }
            Mapping::Mmap(_) => {}
        }
        // An Mmap unmaps itself with the exact length it mapped.
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("report", &self.report)
            .finish()
    }
}

enum MapError {
    /// This backing failed; the next one may work.
    Unavailable(io::Error),
    /// The request itself is bad; no backing can serve it.
    Fatal(PoolError),
}

fn round_up(len: usize, to: usize) -> Result<usize, MapError> {
    len.checked_next_multiple_of(to)
        .filter(|&v| v <= isize::MAX as usize)
        .ok_or_else(|| {
            MapError::Fatal(PoolError::overflow(format!(
                "{len} bytes rounded up to a multiple of {to}"
            )))
        })
}

fn touch_pages(base: NonNull<u8>, len: usize, step: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: off < len and the mapping is writable and at least len bytes long.
        unsafe { base.as_ptr().add(off).write_volatile(0) };
        off += step;
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_k_region_is_zeroed_aligned_and_writable() {
        let r = Region::map(10_000, 64, BackingPolicy::Require(Backing::Pages4K), false).unwrap();
        assert_eq!(r.report().backing, Backing::Pages4K);
        assert_eq!(r.report().mapped_bytes % 4096, 0);
        assert!(r.report().mapped_bytes >= 10_000);
        assert_eq!(r.base().as_ptr() as usize % 64, 0);
        // SAFETY: the region is 10_000 writable bytes.
        let s = unsafe { std::slice::from_raw_parts_mut(r.base().as_ptr(), r.len()) };
        assert!(s.iter().all(|&b| b == 0));
        s[9_999] = 7;
        assert_eq!(s[9_999], 7);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "MAP_POPULATE: Miri only supports MAP_PRIVATE|MAP_ANONYMOUS mmap"
    )]
    fn large_alignment_is_honoured() {
        let r = Region::map(100, 1 << 16, BackingPolicy::Require(Backing::Pages4K), true).unwrap();
        assert_eq!(r.base().as_ptr() as usize % (1 << 16), 0);
        assert!(r.report().prefaulted);
    }

    /// A growable 4 KiB region: the prefix is usable at once, commits are whole pages and
    /// idempotent, contents survive later commits, and a commit past the reservation is a typed
    /// error.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "PROT_NONE reservations and mprotect are not interpreted by Miri"
    )]
    fn growable_region_commits_whole_pages_in_place() {
        let r = Region::map_growable(
            5000,
            100_000,
            64,
            BackingPolicy::Require(Backing::Pages4K),
            false,
        )
        .unwrap();
        assert_eq!(r.report().mapped_bytes, 8192);
        assert_eq!(r.committed(), 8192);
        let base = r.base();
        // SAFETY: the first 5000 bytes are committed.
        unsafe { base.as_ptr().add(4999).write(9) };
        r.commit(8192).unwrap();
        assert_eq!(r.committed(), 8192, "already usable: nothing to do");
        r.commit(50_001).unwrap();
        assert_eq!(r.committed(), 53_248);
        assert_eq!(r.base(), base);
        // SAFETY: committed now; and byte 4999 was written above.
        unsafe {
            assert_eq!(base.as_ptr().add(4999).read(), 9);
            assert_eq!(base.as_ptr().add(50_000).read(), 0);
        }
        r.commit(100_000).unwrap();
        assert!(matches!(
            r.commit(102_401),
            Err(PoolError::InvalidConfig { .. })
        ));
        let fixed = Region::map(100, 64, BackingPolicy::Require(Backing::Pages4K), false).unwrap();
        assert!(fixed.commit(100).is_ok());
        assert!(matches!(
            fixed.commit(101),
            Err(PoolError::InvalidConfig { .. })
        ));
    }

    #[test]
    fn heap_backing_works() {
        let r = Region::map(100, 128, BackingPolicy::Require(Backing::Heap), false).unwrap();
        assert_eq!(r.base().as_ptr() as usize % 128, 0);
        assert_eq!(r.report().backing, Backing::Heap);
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        assert!(matches!(
            Region::map(0, 8, BackingPolicy::Auto, false),
            Err(PoolError::InvalidConfig { .. })
        ));
        assert!(matches!(
            Region::map(8, 3, BackingPolicy::Auto, false),
            Err(PoolError::InvalidConfig { .. })
        ));
        assert!(matches!(
            Region::map(usize::MAX - 10, 8, BackingPolicy::Auto, false),
            Err(PoolError::SizeOverflow { .. })
        ));
        assert!(matches!(
            Region::map(
                isize::MAX as usize - 10,
                8,
                BackingPolicy::Require(Backing::Pages4K),
                false
            ),
            Err(PoolError::SizeOverflow { .. })
        ));
    }

    #[cfg(not(miri))]
    #[test]
    fn auto_reports_a_backing_and_its_fallbacks() {
        let r = Region::map(3 << 20, 64, BackingPolicy::Auto, false).unwrap();
        let rep = r.report();
        match rep.backing {
            Backing::Hugetlb2M => assert!(rep.fallbacks.is_empty()),
            Backing::Thp => assert_eq!(rep.fallbacks[0].0, Backing::Hugetlb2M),
            Backing::Pages4K => assert_eq!(rep.fallbacks.len(), 2),
            other => panic!("unexpected backing {other}"),
        }
        assert_eq!(rep.mapped_bytes % 4096, 0);
        assert!(!rep.to_string().is_empty());
    }
}
