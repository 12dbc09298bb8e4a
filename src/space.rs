//! The process-wide handle space of run-time pools ([`crate::brand::Runtime`]): each run-time pool
//! owns a disjoint block of the 32-bit entry values, so its handle is the 4-byte cache entry itself
//! and another pool's handle fails one range check.
//!
//! Blocks are powers of two aligned to their size (buddy-style): a pool's entries are `e0 .. e0 +
//! 2^k` with `e0` a multiple of `2^k`, so `e ^ e0 < 2^k` checks one handle and the OR of `e ^ e0`
//! checks a burst (an OR reduction vectorises; a max reduction SSE2 must emulate). The price: up to
//! half a block unused, and fragmentation. The space (entries `1 .. 2^32`, 32 GiB of regions at 8
//! bytes per offset entry) gives a pool at most 2^31 entries (16 GiB with offset entries; index
//! entries need only `capacity`), only as the upper half (entry 0 does not exist); a small pool in
//! a half (quarter, ...) blocks every larger block there. `HandleSpaceExhausted` reports the block
//! needed and the largest free range.
//!
//! This is VPP's buffer-index space: one index space over every buffer pool of the process. Here it
//! is only the numbering: each pool maps its region anywhere and its geometry folds the range's
//! start into its base (`Geometry::with_range`), so entry -> address is the branded pool's
//! addressing mode.
//!
//! **Reuse rule.** A range returns to the free list only when its pool was dropped with every
//! object home (then no handle of it exists: handles are not `Clone`/`Copy`, `put` consumes them,
//! `from_raw` is `unsafe` and requires `into_raw` of a live pool). A pool dropped with objects out
//! **quarantines** its range for the process's life: its handles can never meet a new pool that
//! would accept them. The space holds `u32::MAX` raw values; a claim finding no large enough free
//! range is [`PoolError::HandleSpaceExhausted`], never a wrap or overlap.
//!
//! The table is touched at pool creation and drop, and on a foreign handle's cold path (to name its
//! pool); never on get, put or access.

use std::collections::BTreeMap;

use crate::error::PoolError;
use crate::fork::{GlobalLock, LockGuard};

/// Entry values of the space: `1 ..= u32::MAX` (entry 0 never names an object).
pub(crate) const SPACE: u64 = u32::MAX as u64;
/// The largest block: 2^31 entries (a block of 2^32 would contain entry 0).
pub(crate) const MAX_BLOCK: u64 = 1 << 31;

/// Everything below is in entry units (`raw + 1`).
struct Table {
    /// Free ranges by start: `start -> len`, disjoint, merged with their neighbours.
    free: BTreeMap<u64, u64>,
    /// Live pools' ranges by start: `start -> (len, name)`.
    live: BTreeMap<u64, (u64, String)>,
    /// Ranges of pools dropped with objects out, by start: `start -> (len, name)`.
    quarantined: BTreeMap<u64, (u64, String)>,
    /// Whether `free` was seeded with the whole space (a const BTreeMap cannot hold it). A flag
    /// under the lock, not a `Once`: a child forked while another thread ran a `Once`'s closure
    /// would inherit it running for ever.
    seeded: bool,
}

/// The table (a global lock of crate::fork's order; nothing is called back under it).
static TABLE: GlobalLock<Table> = GlobalLock::new(Table {
    free: BTreeMap::new(),
    live: BTreeMap::new(),
    quarantined: BTreeMap::new(),
    seeded: false,
});

fn table() -> LockGuard<'static, Table> {
    let mut t = TABLE.lock();
    if !t.seeded {
        t.seeded = true;
        t.free.insert(1, SPACE);
    }
    t
}

/// A pool's block of the handle space: raw entries `lo .. lo + span` (entries `lo + 1 ..`), `span`
/// a power of two and `lo + 1` a multiple of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) lo: u32,
    pub(crate) span: u32,
}

/// Claims the lowest aligned block of the next power of two >= `need` entries for the pool `name`.
///
/// # Errors
/// [`PoolError::HandleSpaceExhausted`] when no free range holds such a block (or `need` exceeds
/// 2^31 entries).
pub(crate) fn claim(need: u64, name: &str) -> Result<Range, PoolError> {
    let mut t = table();
    let block = need.max(1).next_power_of_two();
    let found = (block <= MAX_BLOCK)
        .then(|| {
            t.free.iter().find_map(|(&start, &len)| {
                let at = start.next_multiple_of(block);
                (at + block <= start + len).then_some((start, len, at))
            })
        })
        .flatten();
    let Some((start, len, at)) = found else {
        let largest_free = t.free.values().copied().max().unwrap_or(0);
        let quarantined = t.quarantined.values().map(|(l, _)| *l).sum();
        return Err(PoolError::HandleSpaceExhausted {
            requested: need,
            block,
            largest_free,
            quarantined,
        });
    };
    t.free.remove(&start);
    if at > start {
        t.free.insert(start, at - start);
    }
    if start + len > at + block {
        t.free.insert(at + block, start + len - (at + block));
    }
    t.live.insert(at, (block, name.to_owned()));
    // 1 <= at and at + block <= 2^32: the raw start and the block size fit in u32.
    Ok(Range {
        lo: (at - 1) as u32,
        span: block as u32,
    })
}

/// Gives a dropped pool's range back (`all_home`), or quarantines it for the process's life
/// (objects out: their handles must never meet another pool).
pub(crate) fn release(r: Range, all_home: bool) {
    let mut t = table();
    let start = r.lo as u64 + 1;
    let Some((len, name)) = t.live.remove(&start) else {
        debug_assert!(false, "released a range that is not live");
        return;
    };
    if !all_home {
        t.quarantined.insert(start, (len, name));
        return;
    }
    // Merge with the free neighbours.
    let (mut s, mut l) = (start, len);
    if let Some((&ps, &pl)) = t.free.range(..s).next_back() {
        if ps + pl == s {
            t.free.remove(&ps);
            s = ps;
            l += pl;
        }
    }
    if let Some(&nl) = t.free.get(&(s + l)) {
        t.free.remove(&(s + l));
        l += nl;
    }
    t.free.insert(s, l);
}

/// Who owns raw entry `raw`: `'name' (live)`, `'name' (dropped with objects out)`, or no pool (for
/// the foreign-handle message; cold path).
pub(crate) fn describe(raw: u32) -> String {
    let t = table();
    let raw = raw as u64 + 1; // entry units
    let find = |m: &BTreeMap<u64, (u64, String)>| {
        m.range(..=raw)
            .next_back()
            .filter(|(&s, (l, _))| raw < s + l)
            .map(|(_, (_, n))| n.clone())
    };
    if let Some(n) = find(&t.live) {
        format!("'{n}'")
    } else if let Some(n) = find(&t.quarantined) {
        format!("'{n}' (dropped)")
    } else {
        format!("no live pool (raw entry {})", raw - 1)
    }
}

/// The name a pool's range was claimed with (for messages about the pool itself).
pub(crate) fn name_of(r: Range) -> String {
    let t = table();
    t.live
        .get(&(r.lo as u64 + 1))
        .map(|(_, n)| format!("'{n}'"))
        .unwrap_or_else(|| format!("range {}", r.lo))
}

/// How the process's handle space is used now ([`crate::Runtime::space_usage`]).
pub(crate) fn usage() -> SpaceUsage {
    let t = table();
    SpaceUsage {
        free: t.free.values().sum(),
        quarantined: t.quarantined.values().map(|(l, _)| *l).sum(),
    }
}

/// How the process's 32-bit handle space (every run-time pool's entries, `u32::MAX` in all) is
/// used, from [`crate::Runtime::space_usage`]. Live run-time pools hold what is neither free nor
/// quarantined.
///
/// ```
/// use idxpool::{PoolBuilder, Runtime, SpaceUsage};
/// // A pool of 1000 u64 with offset entries needs 1000 entries: it holds a block of 1024.
/// let pool = PoolBuilder::<u64>::with_default(1000).build()?;
/// let SpaceUsage { free, quarantined } = Runtime::space_usage();
/// assert!(free + quarantined + 1024 <= u32::MAX as u64);
/// drop(pool); // every object home: its block is free again, not quarantined
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceUsage {
    /// Raw entries free for new run-time pools.
    pub free: u64,
    /// Raw entries held for good by pools dropped with objects out (their stale handles must never
    /// meet a later pool).
    pub quarantined: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_disjoint_and_come_back_merged() {
        let a = claim(1000, "a").unwrap();
        let b = claim(500, "b").unwrap();
        // Power-of-two blocks aligned to their size (entries lo + 1 ..).
        assert_eq!((a.span, b.span), (1024, 512));
        assert_eq!(((a.lo + 1) % 1024, (b.lo + 1) % 512), (0, 0));
        let (a_end, b_end) = (a.lo as u64 + 1024, b.lo as u64 + 512);
        assert!(a_end <= b.lo as u64 || b_end <= a.lo as u64, "{a:?} {b:?}");
        assert!(describe(a.lo + 999).contains("'a'"));
        assert!(describe(b.lo).contains("'b'"));
        release(a, true);
        release(b, true);
        let c = claim(1500, "c").unwrap();
        release(c, true);
        // The largest block, and one more entry than it.
        let big = claim(MAX_BLOCK, "big");
        if let Ok(r) = big {
            assert_eq!((r.lo as u64 + 1, r.span as u64), (MAX_BLOCK, MAX_BLOCK));
            release(r, true);
        }
        assert!(claim(MAX_BLOCK + 1, "too big").is_err());
    }

    #[test]
    fn a_range_with_objects_out_is_never_reused() {
        let q = claim(4096, "leaky").unwrap();
        release(q, false);
        assert!(describe(q.lo).contains("(dropped)"));
        for _ in 0..100 {
            let r = claim(4096, "next").unwrap();
            let overlap = (r.lo as u64) < q.lo as u64 + 4096 && (q.lo as u64) < r.lo as u64 + 4096;
            assert!(!overlap, "quarantined range {q:?} reused as {r:?}");
            release(r, true);
        }
    }

    #[test]
    fn more_than_the_space_is_a_typed_error() {
        match claim(SPACE + 1, "huge") {
            Err(PoolError::HandleSpaceExhausted { requested, .. }) => {
                assert_eq!(requested, SPACE + 1)
            }
            other => panic!("expected HandleSpaceExhausted, got {other:?}"),
        }
    }
}
