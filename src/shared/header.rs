//! The region header and layout: where every section starts.
//!
//! The layout is a pure function of [`Params`]: the creator writes the parameters and the resulting
//! offsets into the header; an attacher recomputes the offsets from a copy of the parameters and
//! compares them field by field. So a process never uses an offset it did not compute, and every
//! offset lies inside the mapping (the file's length must be the computed end, page-rounded).

use std::mem::{align_of, size_of};
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::xring::{XRingState, REC_BATCH};
use crate::cache::{CachePlan, FlushPolicy};
use crate::error::PoolError;

/// `"IDXPSHRD"` in little-endian byte order.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"IDXPSHRD");
/// Format version of the region; bump on any layout change. 2: recoverable rings (lock, head,
/// tail), redo records in the process slots. 3: the flush policy in [`Params`]; cache arrays and
/// records of `2 x cache_size` entries (a Classic refill overshoots the fill limit transiently).
pub(crate) const VERSION: u32 = 3;
/// Alignment of every section: the ring state's (128): rings' states never share a line pair.
pub(crate) const SECTION_ALIGN: u64 = {
    let a = align_of::<XRingState>();
    if a > 128 {
        a as u64
    } else {
        128
    }
};
/// Largest object alignment a shared pool accepts: the smallest page size, so that an offset
/// aligned to it is an address aligned to it in any mapping (mappings start on a page).
pub(crate) const MAX_OBJ_ALIGN: u64 = 4096;
/// Most process slots a region can have (the holder id keeps `slot + 1` in 8 bits).
pub(crate) const MAX_PROCESSES: u32 = 128;
/// Most handle channels a region can have.
pub(crate) const MAX_CHANNELS: u32 = 64;
/// Largest pool capacity (the rings' slot counts stay within 2^31).
pub(crate) const MAX_CAPACITY: u32 = 1 << 31;

/// What the layout is computed from: plain integers, no padding holes. `obj_size`/`obj_align`:
/// `size_of`/`align_of::<T>()`; `stride`: bytes between objects; `cache_size`: per process, 0 =
/// none; `max_procs`: process slots; `policy`: [`policy_code`]; `_reserved`: zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub obj_size: u64,
    pub obj_align: u64,
    pub stride: u64,
    pub capacity: u32,
    pub cache_size: u32,
    pub max_procs: u32,
    pub channels: u32,
    pub policy: u32,
    pub _reserved: u32,
}

/// The region's code of a flush policy (never 0, so a zeroed header names none).
pub(crate) fn policy_code(p: FlushPolicy) -> u32 {
    match p {
        FlushPolicy::Classic => 1,
        FlushPolicy::Dpdk2607 => 2,
        FlushPolicy::SizeAligned => 3,
    }
}

/// The flush policy of a region's code, if it names one.
pub(crate) fn policy_of(code: u32) -> Option<FlushPolicy> {
    FlushPolicy::ALL
        .into_iter()
        .find(|&p| policy_code(p) == code)
}

impl Params {
    /// The parameters by name (the names `LayoutMismatch` reports).
    pub(crate) fn fields(&self) -> [(&'static str, u64); 9] {
        [
            ("obj_size", self.obj_size),
            ("obj_align", self.obj_align),
            ("stride", self.stride),
            ("capacity", self.capacity as u64),
            ("cache_size", self.cache_size as u64),
            ("max_procs", self.max_procs as u64),
            ("channels", self.channels as u64),
            ("policy", self.policy as u64),
            ("reserved", self._reserved as u64),
        ]
    }

    /// The caches' flush policy (checked by [`Params::check`]; the default when invalid).
    pub(crate) fn flush_policy(&self) -> FlushPolicy {
        policy_of(self.policy).unwrap_or_default()
    }

    /// The decisions of every cache of the region.
    pub(crate) fn plan(&self) -> CachePlan {
        CachePlan::new(self.cache_size, self.flush_policy())
    }
}

/// Byte offsets of the sections, in order, and derived sizes: `channels` ring states and slot
/// arrays, `state_stride` and `chan_stride` bytes apart; `max_procs` [`ProcSlot`]s, record arrays
/// (`rec_cap` u32 entries, `rec_stride` apart) and cache arrays (`2 x cache_size` u32 entries,
/// `cache_stride` apart); the owner table (`capacity` u32 words) and the objects.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sections {
    pub stats: u64,
    pub ring_state: u64,
    pub ring_slots: u64,
    /// Slot count of the common ring and of each channel ring (a power of two).
    pub ring_slot_count: u64,
    pub chan_states: u64,
    pub chan_slots: u64,
    pub state_stride: u64,
    pub chan_stride: u64,
    pub procs: u64,
    pub records: u64,
    /// Entries of a record array: `max(2 x cache_size, REC_BATCH)`.
    pub rec_cap: u64,
    pub rec_stride: u64,
    pub caches: u64,
    pub cache_stride: u64,
    pub owners: u64,
    pub objects: u64,
    /// End of the region (its length before page rounding).
    pub end: u64,
}

impl Sections {
    /// The offsets and sizes by name (the names `LayoutMismatch` reports).
    pub(crate) fn fields(&self) -> [(&'static str, u64); 17] {
        [
            ("stats_offset", self.stats),
            ("ring_state_offset", self.ring_state),
            ("ring_slots_offset", self.ring_slots),
            ("ring_slot_count", self.ring_slot_count),
            ("chan_states_offset", self.chan_states),
            ("chan_slots_offset", self.chan_slots),
            ("state_stride", self.state_stride),
            ("chan_stride", self.chan_stride),
            ("procs_offset", self.procs),
            ("records_offset", self.records),
            ("rec_cap", self.rec_cap),
            ("rec_stride", self.rec_stride),
            ("caches_offset", self.caches),
            ("cache_stride", self.cache_stride),
            ("owners_offset", self.owners),
            ("objects_offset", self.objects),
            ("region_end", self.end),
        ]
    }
}

/// The first bytes of a region: [`MAGIC`], [`VERSION`], `size_of::<Header>()`, the user's type
/// fingerprint, the layout's inputs and outputs, and the creator's pid and start time (clock ticks
/// since boot, `/proc/<pid>/stat` field 22). Written once by the creator before the region is
/// published, immutable afterwards; read by copy (`read_volatile`), never by reference.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub magic: u64,
    pub version: u32,
    pub header_size: u32,
    pub fingerprint: u64,
    pub params: Params,
    pub sections: Sections,
    pub creator_pid: u32,
    pub _pad: u32,
    pub creator_start: u64,
}

/// Region-wide counters (atomics): `corrupt_entries` (entries dropped: out of range or naming a
/// held object), `reclaimed_slots` and `reclaimed_cached` (dead processes' slots freed and cached
/// objects returned by `reclaim_dead`), `reclaimed_in_use` (gone attachments' objects returned by
/// `reclaim_in_use_of_dead`), `repaired_lost` (by `repair_lost`), `completed_ops` (ring locks taken
/// from dead operators, their operation completed), `attaches` (the creator's included).
#[repr(C)]
pub(crate) struct RegionStats {
    pub corrupt_entries: AtomicU64,
    pub reclaimed_slots: AtomicU64,
    pub reclaimed_cached: AtomicU64,
    pub reclaimed_in_use: AtomicU64,
    pub repaired_lost: AtomicU64,
    pub completed_ops: AtomicU64,
    pub attaches: AtomicU64,
}

/// One process slot (128 bytes: no shared cache line): its holder, cache length, and the redo
/// record of the ring operation its operator (holder, or a dead holder's reclaimer) has in flight
/// (`xring`): `rec_state` (`REC_IDLE` or `REC_PREPARED`), `rec_lock` (the lock id it was prepared
/// under), `rec_ring` (0 common, 1 + c channel c), `rec_kind` (`xring::K_*`), `rec_pos` (ring index
/// before: tail for enqueues, head for dequeues), `rec_n` (entries moved), `rec_len` and `rec_slot`
/// (cache kinds: cache length before, cache slot), `rec_mark` (owner word set by a held enqueue,
/// expected by a held dequeue), `rec_holder` (a held dequeue's new holder).
#[repr(C, align(128))]
pub(crate) struct ProcSlot {
    /// 0 = free; else the packed identity of the holder (see `owner::ProcessId::pack`), with
    /// `RECLAIM_BIT` set while a reclaimer of a dead holder owns the slot.
    pub owner: AtomicU64,
    /// Bumped by each claim; the holder id of the attachment is `(gen, slot)`.
    pub gen: AtomicU32,
    /// Entries in this slot's cache (written by the holder, its reclaimer, or their completer).
    pub len: AtomicU32,
    /// Bumped by each takeover of the slot by a reclaimer (part of reclaimer lock ids).
    pub reclaim_seq: AtomicU32,
    pub rec_state: AtomicU32,
    pub rec_lock: AtomicU64,
    pub rec_ring: AtomicU32,
    pub rec_kind: AtomicU32,
    pub rec_pos: AtomicU32,
    pub rec_n: AtomicU32,
    pub rec_len: AtomicU32,
    pub rec_slot: AtomicU32,
    pub rec_mark: AtomicU32,
    pub rec_holder: AtomicU32,
}

fn round_up(v: u64, to: u64) -> Result<u64, PoolError> {
    v.checked_next_multiple_of(to)
        .ok_or_else(|| PoolError::overflow(format!("{v} rounded up to {to}")))
}

fn add(a: u64, b: u64) -> Result<u64, PoolError> {
    a.checked_add(b)
        .ok_or_else(|| PoolError::overflow("shared region size"))
}

fn mul(a: u64, b: u64) -> Result<u64, PoolError> {
    a.checked_mul(b)
        .ok_or_else(|| PoolError::overflow("shared region size"))
}

impl Params {
    /// Range checks shared by create and attach.
    pub(crate) fn check(&self) -> Result<(), PoolError> {
        if self.obj_size == 0 {
            return Err(PoolError::config(
                "zero-sized objects cannot be pooled in a shared region",
            ));
        }
        if !self.obj_align.is_power_of_two() || self.obj_align > MAX_OBJ_ALIGN {
            return Err(PoolError::config(format!(
                "object alignment {} must be a power of two <= {MAX_OBJ_ALIGN}",
                self.obj_align
            )));
        }
        if self.stride < self.obj_size || !self.stride.is_multiple_of(self.obj_align) {
            return Err(PoolError::config(format!(
                "stride {} must be >= object size {} and a multiple of its alignment {}",
                self.stride, self.obj_size, self.obj_align
            )));
        }
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(PoolError::config(format!(
                "capacity {} must be in 1..={MAX_CAPACITY}",
                self.capacity
            )));
        }
        let Some(policy) = policy_of(self.policy) else {
            return Err(PoolError::config(format!(
                "flush policy code {} names no policy",
                self.policy
            )));
        };
        policy.validate(self.cache_size, self.capacity)?;
        if self.max_procs == 0 || self.max_procs > MAX_PROCESSES {
            return Err(PoolError::config(format!(
                "max processes {} must be in 1..={MAX_PROCESSES}",
                self.max_procs
            )));
        }
        if self.channels > MAX_CHANNELS {
            return Err(PoolError::config(format!(
                "channels {} must be <= {MAX_CHANNELS}",
                self.channels
            )));
        }
        Ok(())
    }

    /// The section offsets for these parameters (checked arithmetic throughout).
    pub(crate) fn layout(&self) -> Result<Sections, PoolError> {
        self.check()?;
        let a = SECTION_ALIGN;
        let mut off = round_up(size_of::<Header>() as u64, a)?;
        let stats = off;
        off = round_up(add(off, size_of::<RegionStats>() as u64)?, a)?;
        let state_stride = round_up(size_of::<XRingState>() as u64, a)?;
        let ring_state = off;
        off = add(off, state_stride)?;
        let ring_slot_count = (self.capacity as u64).next_power_of_two();
        let slots_bytes = round_up(mul(ring_slot_count, 4)?, a)?;
        let ring_slots = off;
        off = add(off, slots_bytes)?;
        let chan_states = off;
        off = add(off, mul(state_stride, self.channels as u64)?)?;
        let chan_stride = slots_bytes;
        let chan_slots = off;
        off = add(off, mul(chan_stride, self.channels as u64)?)?;
        let procs = off;
        off = add(
            off,
            mul(size_of::<ProcSlot>() as u64, self.max_procs as u64)?,
        )?;
        let cache_cap = self.plan().capacity() as u64;
        let rec_cap = cache_cap.max(REC_BATCH as u64);
        let rec_stride = round_up(mul(rec_cap, 4)?, 64)?;
        let records = off;
        off = round_up(add(off, mul(rec_stride, self.max_procs as u64)?)?, a)?;
        let cache_stride = round_up(mul(cache_cap, 4)?, 64)?;
        let caches = off;
        off = round_up(add(off, mul(cache_stride, self.max_procs as u64)?)?, a)?;
        let owners = off;
        off = add(off, mul(self.capacity as u64, 4)?)?;
        off = round_up(off, a.max(self.obj_align))?;
        let objects = off;
        let end = add(off, mul(self.capacity as u64, self.stride)?)?;
        if end > isize::MAX as u64 {
            return Err(PoolError::overflow(format!(
                "shared region of {end} bytes exceeds isize::MAX"
            )));
        }
        Ok(Sections {
            stats,
            ring_state,
            ring_slots,
            ring_slot_count,
            chan_states,
            chan_slots,
            state_stride,
            chan_stride,
            procs,
            records,
            rec_cap,
            rec_stride,
            caches,
            cache_stride,
            owners,
            objects,
            end,
        })
    }
}

fn mismatch(field: &'static str, expected: u64, found: u64) -> Result<(), PoolError> {
    if expected == found {
        Ok(())
    } else {
        Err(PoolError::LayoutMismatch {
            field,
            expected,
            found,
        })
    }
}

impl Header {
    /// Validates a header copy from a region of `file_len` bytes (`page`-byte pages) against the
    /// attacher's `obj_size`, `obj_align` and `fingerprint`, in order: magic, version, header size,
    /// policy, object size and alignment, fingerprint, parameter ranges (stride too), every
    /// recomputed offset, then the file length (the end, page-rounded, as created).
    pub(crate) fn validate(
        &self,
        file_len: u64,
        page: u64,
        obj_size: u64,
        obj_align: u64,
        fingerprint: u64,
    ) -> Result<(), PoolError> {
        mismatch("magic", MAGIC, self.magic)?;
        mismatch("version", VERSION as u64, self.version as u64)?;
        mismatch(
            "header_size",
            size_of::<Header>() as u64,
            self.header_size as u64,
        )?;
        let p = &self.params;
        if policy_of(p.policy).is_none() {
            return Err(PoolError::LayoutMismatch {
                field: "policy",
                expected: policy_code(FlushPolicy::DEFAULT) as u64,
                found: p.policy as u64,
            });
        }
        mismatch("obj_size", obj_size, p.obj_size)?;
        mismatch("obj_align", obj_align, p.obj_align)?;
        if self.fingerprint != fingerprint {
            return Err(PoolError::FingerprintMismatch {
                expected: fingerprint,
                found: self.fingerprint,
            });
        }
        if p.stride < obj_size || !p.stride.is_multiple_of(obj_align) {
            // The smallest valid stride is the expectation.
            return Err(PoolError::LayoutMismatch {
                field: "stride",
                expected: obj_size.next_multiple_of(obj_align),
                found: p.stride,
            });
        }
        let want = p.layout()?;
        for ((field, e), (_, f)) in want.fields().into_iter().zip(self.sections.fields()) {
            mismatch(field, e, f)?;
        }
        // The file's size, which a peer cannot change (the memfd is sealed), is the layout's end
        // rounded up to the page: a forged layout must end in the same page as the true one. Within
        // a process, the region's record (`registry`) refuses any other layout outright.
        let sized = want
            .end
            .checked_next_multiple_of(page)
            .ok_or_else(|| PoolError::overflow("shared region length"))?;
        if sized != file_len {
            return Err(PoolError::LayoutMismatch {
                field: "file_len",
                expected: sized,
                found: file_len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            obj_size: 24,
            obj_align: 8,
            stride: 32,
            capacity: 1000,
            cache_size: 32,
            max_procs: 8,
            channels: 2,
            policy: policy_code(FlushPolicy::DEFAULT),
            _reserved: 0,
        }
    }

    #[test]
    fn sections_are_aligned_ordered_and_disjoint() {
        let s = params().layout().unwrap();
        let order = [
            s.stats,
            s.ring_state,
            s.ring_slots,
            s.chan_states,
            s.chan_slots,
            s.procs,
            s.records,
            s.caches,
            s.owners,
            s.objects,
            s.end,
        ];
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{s:?}");
        for o in &order[..order.len() - 1] {
            assert_eq!(o % SECTION_ALIGN, 0, "{s:?}");
        }
        assert_eq!(s.ring_slot_count, 1024);
        assert_eq!(s.ring_slots - s.ring_state, s.state_stride);
        assert_eq!(s.end - s.objects, 1000 * 32);
        assert!(s.owners + 4000 <= s.objects);
    }

    #[test]
    fn validate_names_the_field() {
        let p = params();
        let h = Header {
            magic: MAGIC,
            version: VERSION,
            header_size: size_of::<Header>() as u32,
            fingerprint: 7,
            params: p,
            sections: p.layout().unwrap(),
            creator_pid: 1,
            _pad: 0,
            creator_start: 1,
        };
        let len = h.sections.end.next_multiple_of(4096);
        h.validate(len, 4096, 24, 8, 7).unwrap();
        let field = |r: Result<(), PoolError>| match r {
            Err(PoolError::LayoutMismatch { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(h.validate(len, 4096, 32, 8, 7)), "obj_size");
        assert_eq!(field(h.validate(len, 4096, 24, 4, 7)), "obj_align");
        assert_eq!(field(h.validate(len - 1, 4096, 24, 8, 7)), "file_len");
        // Longer than the layout's last page: another layout's file (or a forged header).
        assert_eq!(field(h.validate(len + 4096, 4096, 24, 8, 7)), "file_len");
        assert!(matches!(
            h.validate(len, 4096, 24, 8, 8),
            Err(PoolError::FingerprintMismatch {
                expected: 8,
                found: 7
            })
        ));
        let mut bad = h;
        bad.sections.owners += 128;
        assert_eq!(field(bad.validate(len, 4096, 24, 8, 7)), "owners_offset");
        let mut bad = h;
        bad.version = 1; // the format before recoverable rings
        assert_eq!(field(bad.validate(len, 4096, 24, 8, 7)), "version");
        let mut bad = h;
        bad.version = 2; // the format before the flush policy was recorded (no policy, caches of cache_size)
        assert_eq!(field(bad.validate(len, 4096, 24, 8, 7)), "version");
        let mut bad = h;
        bad.params.policy = 0; // no policy
        assert_eq!(field(bad.validate(len, 4096, 24, 8, 7)), "policy");
        // Every policy gives the same offsets (caches of 2 x size): the region's is what all run.
        for p in FlushPolicy::ALL {
            let mut other = h;
            other.params.policy = policy_code(p);
            other.validate(len, 4096, 24, 8, 7).unwrap();
            assert_eq!(other.params.flush_policy(), p);
        }
    }
}
