//! The recoverable ring of a shared region: one operation in flight per ring (its lock), each
//! described by a redo record in the operator's process slot before it changes anything and applied
//! by absolute stores only, so a process killed at any instruction inside it is completed by
//! whoever takes the lock over ([`SharedPool::lock_holder_gone`], [`SharedPool::complete_dead`]).
//! Why the four steps make an operation atomic for everyone else: DESIGN.md, "Recovery semantics".
//! Like DPDK's HTS ring mode, it trades the MPMC ring's overlapping operations for one at a time;
//! the common ring is touched once per half a cache of gets or puts (BENCHMARKS.md).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::header::ProcSlot;
use super::owner::{split_holder, GEN_MASK, RECLAIM_BIT};
use super::SharedPool;

/// One ring's state (128-byte aligned: no shared cache line pair): `lock` (0 = free, else the
/// operator's [`lock_id`]) and free-running `head` (next to take) and `tail` (next to fill).
#[repr(C, align(128))]
pub(crate) struct XRingState {
    pub lock: AtomicU64,
    pub head: AtomicU32,
    pub tail: AtomicU32,
}

/// Record states.
pub(crate) const REC_IDLE: u32 = 0;
pub(crate) const REC_PREPARED: u32 = 1;

/// Record kinds.
/// Cache of `rec_slot` (pre-image: `rec_len` entries) -> ring: the first `rec_n` entries.
pub(crate) const K_ENQ_CACHE: u32 = 1;
/// Ring -> cache of `rec_slot` (which held `rec_len` entries): `rec_n` entries.
pub(crate) const K_DEQ_CACHE: u32 = 2;
/// Held objects -> ring: `rec_n` entries, owner words set to `rec_mark`.
pub(crate) const K_ENQ_HELD: u32 = 3;
/// Ring -> held by `rec_holder`: `rec_n` entries whose owner word was `rec_mark`.
pub(crate) const K_DEQ_HELD: u32 = 4;

/// A struck record entry (an index no pool has: capacities are at most 2^31).
pub(crate) const NO_ENTRY: u32 = u32::MAX;

/// Entries a record holds besides a cache pre-image: the chunk of bulk held-object operations.
pub(crate) const REC_BATCH: u32 = 64;

/// Lock-id bit of a dead slot's reclaimer (bits 32..62 then hold the slot's reclaim sequence).
const RECLAIMER: u64 = 1 << 63;

/// Lock id of the attachment with holder id `me`.
#[inline(always)]
pub(crate) fn lock_id(me: u32) -> u64 {
    me as u64
}

/// Lock id of the reclaimer of slot `s` (holder id `dead`) at reclaim sequence `seq`.
pub(crate) fn reclaim_lock_id(dead: u32, seq: u32) -> u64 {
    RECLAIMER | ((seq as u64 & 0x7FFF_FFFF) << 32) | dead as u64
}

/// The slot a lock id's record lives in.
pub(crate) fn lock_slot(id: u64) -> u32 {
    split_holder(id as u32).0
}

/// Where a killed test process stops (the kill tests' deterministic points): `LOCKED` lock taken,
/// no record; `PREPARED` record prepared, nothing applied; `MID_APPLY` ring side applied (slots,
/// index), the other not; `APPLIED` all applied, record still PREPARED; `UNLOCKING` record idle,
/// lock held; `CACHE_POP` object held, still cached; `CACHE_PUSH` objects cached, still held;
/// `RECLAIM` dead slot taken over, cache not flushed; `CACHE_POP_RUN` / `CACHE_PUSH_RUN` a run's
/// first object marked held / free, the others not, all cached; `COUNT`: points are `1..COUNT`.
#[doc(hidden)]
pub mod kill_point {
    pub const LOCKED: u32 = 1;
    pub const PREPARED: u32 = 2;
    pub const MID_APPLY: u32 = 3;
    pub const APPLIED: u32 = 4;
    pub const UNLOCKING: u32 = 5;
    pub const CACHE_POP: u32 = 6;
    pub const CACHE_PUSH: u32 = 7;
    pub const RECLAIM: u32 = 8;
    pub const CACHE_POP_RUN: u32 = 9;
    pub const CACHE_PUSH_RUN: u32 = 10;
    pub const COUNT: u32 = 11;
}

static KILL_ARMED: AtomicU32 = AtomicU32::new(0);
static KILL_LEFT: AtomicU32 = AtomicU32::new(0);
/// The ring operation a kill is restricted to (`op_code`), 0 = any.
static KILL_OP: AtomicU32 = AtomicU32::new(0);
/// The ring operation in progress in this process (recorded only while a kill is armed).
static CUR_OP: AtomicU32 = AtomicU32::new(0);

/// Code of a ring operation for [`arm_kill_point`]: its kind (`1` cache -> ring, `2` ring ->
/// cache, `3` held -> ring, `4` ring -> held) plus 16 on a channel (send, receive).
#[doc(hidden)]
pub fn op_code(kind: u32, channel: bool) -> u32 {
    kind | if channel { 16 } else { 0 }
}

/// Test hook: SIGKILL this process the `nth` time (1-based) it passes kill point `point`
/// ([`kill_point`]), counting only inside ring operations of code `op` ([`op_code`]; 0 = any; the
/// cache and reclaim points ignore it). Costs one relaxed load per point when unarmed.
#[doc(hidden)]
pub fn arm_kill_point(point: u32, op: u32, nth: u32) {
    KILL_LEFT.store(nth.max(1), Ordering::SeqCst);
    KILL_OP.store(op, Ordering::SeqCst);
    KILL_ARMED.store(point, Ordering::SeqCst);
}

#[inline(always)]
pub(crate) fn kill_hook(point: u32) {
    if KILL_ARMED.load(Ordering::Relaxed) == point {
        kill_hook_slow(point);
    }
}

#[cold]
#[inline(never)]
fn kill_hook_slow(point: u32) {
    let op = KILL_OP.load(Ordering::Relaxed);
    let ring_point = point <= kill_point::UNLOCKING;
    if ring_point && op != 0 && CUR_OP.load(Ordering::Relaxed) != op {
        return;
    }
    if KILL_LEFT.fetch_sub(1, Ordering::SeqCst) == 1 {
        // SAFETY: raising a signal has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}

/// A view of one ring of the mapping (process-local; offsets validated at attach).
pub(crate) struct XRing {
    pub(crate) state: *const XRingState,
    pub(crate) slots: *const AtomicU32,
    pub(crate) mask: u32,
    pub(crate) capacity: u32,
    /// 0 = the common ring, 1 + c = channel c.
    pub(crate) id: u32,
}

impl XRing {
    #[inline(always)]
    pub(crate) fn st(&self) -> &XRingState {
        // SAFETY: validated, aligned offset in the mapping, which outlives the view (pool fields).
        unsafe { &*self.state }
    }

    #[inline(always)]
    pub(crate) fn slot(&self, pos: u32) -> &AtomicU32 {
        // SAFETY: pos & mask < slot_count: inside this ring's slot array (as above).
        unsafe { &*self.slots.add((pos & self.mask) as usize) }
    }

    /// Entries in the ring (snapshot; at most the capacity even if the indices are corrupt).
    pub(crate) fn count(&self) -> usize {
        let s = self.st();
        let h = s.head.load(Ordering::Acquire);
        let t = s.tail.load(Ordering::Acquire);
        t.wrapping_sub(h).min(self.capacity) as usize
    }
}

/// What an operation inside [`SharedPool::with_ring`] sees and does.
pub(crate) struct Txn<'a> {
    pub(crate) ring: &'a XRing,
    /// The slot whose record describes the operation.
    pub(crate) rec_slot: u32,
    pub(crate) lock: u64,
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl Txn<'_> {
    /// Entries in the ring, clamped to the capacity (corrupt indices count as damage).
    pub(crate) fn count(&self) -> u32 {
        self.tail.wrapping_sub(self.head).min(self.ring.capacity)
    }

    /// Free room in the ring.
    pub(crate) fn room(&self) -> u32 {
        self.ring.capacity - self.count()
    }
}

impl<T> SharedPool<T> {
    /// Reads the `buf.len()` (<= `t.count()`) entries at the ring's head, each slot once: a
    /// dequeue's entries, which [`SharedPool::commit`] records before the head moves.
    #[inline]
    pub(crate) fn read_head(t: &Txn<'_>, buf: &mut [u32]) {
        for (k, b) in buf.iter_mut().enumerate() {
            *b = t
                .ring
                .slot(t.head.wrapping_add(k as u32))
                .load(Ordering::Relaxed);
        }
    }

    /// The record entries of slot `s` (`rec_cap` words).
    #[inline(always)]
    pub(crate) fn rec_entries(&self, s: u32) -> &[AtomicU32] {
        debug_assert!(s < self.params.max_procs);
        // SAFETY: slot s's record array lies inside the records section (s < max_procs).
        unsafe {
            std::slice::from_raw_parts(
                self.at::<AtomicU32>(self.sections.records + s as u64 * self.sections.rec_stride),
                self.sections.rec_cap as usize,
            )
        }
    }

    /// The ring with id `id` (0 = common, 1 + c = channel c).
    pub(crate) fn ring_by_id(&self, id: u32) -> Option<&XRing> {
        if id == 0 {
            Some(&self.ring)
        } else {
            self.chans.get(id as usize - 1)
        }
    }

    /// True when the operator named by lock id `id` is gone for good: its slot is out of
    /// range, free, of another generation or reclaim sequence, or its process is dead.
    pub(crate) fn lock_holder_gone(&self, id: u64) -> bool {
        let (s, g) = split_holder(id as u32);
        if s == self.slot {
            // Our own slot: this attachment is in no ring operation when it asks (one user, no
            // nesting) and nobody reclaims a live slot: a forged or leftover word, taken over.
            return true;
        }
        let Some(ps) = self.procs().get(s as usize) else {
            return true;
        };
        let owner = ps.owner.load(Ordering::SeqCst);
        if owner == 0 || ps.gen.load(Ordering::SeqCst) & GEN_MASK != g {
            return true;
        }
        if id & RECLAIMER != 0 {
            // A reclaimer's lock: alive while that reclaimer still owns the slot.
            let seq = ((id >> 32) & 0x7FFF_FFFF) as u32;
            owner & RECLAIM_BIT == 0
                || ps.reclaim_seq.load(Ordering::SeqCst) & 0x7FFF_FFFF != seq
                || !self.slot_alive(s, owner)
        } else {
            // The attachment's own lock: gone once a reclaimer took its slot over.
            owner & RECLAIM_BIT != 0 || !self.slot_alive(s, owner)
        }
    }

    /// Takes `ring`'s lock for `id`; after a bounded spin, steals it from a dead holder (completing
    /// its prepared operation). Waits as long as a live holder holds it.
    pub(crate) fn lock_ring(&self, ring: &XRing, id: u64) {
        let lock = &ring.st().lock;
        let mut spins = 0u32;
        loop {
            let cur = lock.load(Ordering::Relaxed);
            if cur == 0 {
                if lock
                    .compare_exchange_weak(0, id, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins < 128 {
                std::hint::spin_loop();
                continue;
            }
            std::thread::yield_now();
            if spins.is_multiple_of(64)
                && self.lock_holder_gone(cur)
                && lock
                    .compare_exchange(cur, id, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                self.complete_dead(ring);
                return;
            }
        }
    }

    /// With `ring` locked by us after a steal from a dead operator: completes every record prepared
    /// for this ring. At most one exists, but not necessarily the dead operator's (it may have died
    /// completing an earlier dead holder's), so every slot (<= 128) is scanned.
    pub(crate) fn complete_dead(&self, ring: &XRing) {
        for (s, ps) in self.procs().iter().enumerate() {
            if ps.rec_state.load(Ordering::Acquire) == REC_PREPARED
                && ps.rec_ring.load(Ordering::Relaxed) == ring.id
            {
                self.apply(ring, s as u32);
                ps.rec_state.store(REC_IDLE, Ordering::Release);
                self.stats().completed_ops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Runs `f` with `ring` locked for operator `(rec_slot, id)`; `f` uses [`SharedPool::commit`].
    pub(crate) fn with_ring<R>(
        &self,
        ring: &XRing,
        rec_slot: u32,
        id: u64,
        kind: u32,
        f: impl FnOnce(&Self, &Txn<'_>) -> R,
    ) -> R {
        if KILL_ARMED.load(Ordering::Relaxed) != 0 {
            CUR_OP.store(op_code(kind, ring.id != 0), Ordering::Relaxed);
        }
        self.lock_ring(ring, id);
        kill_hook(kill_point::LOCKED);
        let st = ring.st();
        let head = st.head.load(Ordering::Relaxed);
        let tail = st.tail.load(Ordering::Relaxed);
        let head = if tail.wrapping_sub(head) > ring.capacity {
            // Corrupt indices (more entries than objects): empty the ring, count the damage
            // (`audit().lost_free` shows its objects, `repair_lost` returns them); else a dequeue
            // could take the same slots forever.
            st.head.store(tail, Ordering::Release);
            self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
            tail
        } else {
            head
        };
        let txn = Txn {
            ring,
            rec_slot,
            lock: id,
            head,
            tail,
        };
        let r = f(self, &txn);
        kill_hook(kill_point::UNLOCKING);
        st.lock.store(0, Ordering::Release);
        r
    }

    /// Records `txn`'s operation (`entries` first), marks it prepared, applies it, marks it idle.
    ///
    /// The operator applies its own decisions (`kind` .. `holder`) and its own copy of the entries
    /// (the ring's head for a dequeue, the cache's pre-image for a flush, the objects for a held
    /// enqueue), never the record read back, which a peer may have rewritten: the record is for a
    /// completer. A held dequeue strikes in `entries` (as [`NO_ENTRY`]) those it did not claim.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit(
        &self,
        txn: &Txn<'_>,
        kind: u32,
        pos: u32,
        n: u32,
        len: u32,
        cache_slot: u32,
        mark: u32,
        holder: u32,
        entries: &mut [u32],
    ) {
        let s = txn.rec_slot;
        let ps = &self.procs()[s as usize];
        let rec = self.rec_entries(s);
        debug_assert!(entries.len() <= rec.len());
        for (r, &e) in rec.iter().zip(entries.iter()) {
            r.store(e, Ordering::Relaxed);
        }
        let op = Op {
            kind,
            pos,
            n,
            len,
            cache_slot,
            mark,
            holder,
        };
        set_record(ps, txn.ring.id, txn.lock, &op);
        ps.rec_state.store(REC_PREPARED, Ordering::Release);
        kill_hook(kill_point::PREPARED);
        self.apply_op(txn.ring, &op, entries);
        kill_hook(kill_point::APPLIED);
        ps.rec_state.store(REC_IDLE, Ordering::Release);
    }

    /// The completer's redo: applies slot `s`'s prepared record to `ring` (locked by the caller)
    /// from process-local copies of its fields and entries, each read once.
    pub(crate) fn apply(&self, ring: &XRing, s: u32) {
        let ps = &self.procs()[s as usize];
        let rec = self.rec_entries(s);
        let rcap = rec.len() as u32;
        let op = Op {
            kind: ps.rec_kind.load(Ordering::Relaxed),
            pos: ps.rec_pos.load(Ordering::Relaxed),
            n: ps.rec_n.load(Ordering::Relaxed).min(rcap),
            len: ps.rec_len.load(Ordering::Relaxed).min(rcap),
            cache_slot: ps.rec_slot.load(Ordering::Relaxed),
            mark: ps.rec_mark.load(Ordering::Relaxed),
            holder: ps.rec_holder.load(Ordering::Relaxed),
        };
        let mut entries: Vec<u32> = rec[..op.n.max(op.len) as usize]
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect();
        self.apply_op(ring, &op, &mut entries);
    }

    /// Applies `op` with `entries` to `ring` (locked by the caller). Idempotent (absolute stores
    /// computed from `op` and `entries`); counts are clamped to `entries`, indices checked.
    fn apply_op(&self, ring: &XRing, op: &Op, entries: &mut [u32]) {
        let cap = self.params.capacity;
        let have = entries.len() as u32;
        let n = op.n.min(have);
        let cs = op.cache_slot;
        let st = ring.st();
        let csize = self.cache_cap();
        match op.kind {
            K_ENQ_CACHE | K_ENQ_HELD => {
                for (k, &e) in entries[..n as usize].iter().enumerate() {
                    ring.slot(op.pos.wrapping_add(k as u32))
                        .store(e, Ordering::Relaxed);
                }
                st.tail.store(op.pos.wrapping_add(n), Ordering::Release);
                kill_hook(kill_point::MID_APPLY);
                if op.kind == K_ENQ_CACHE {
                    if cs >= self.params.max_procs || csize == 0 {
                        self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    let len = op.len.min(csize).min(have).max(n);
                    let cache = self.cache_of(cs);
                    for (c, &e) in cache.iter().zip(&entries[n as usize..len as usize]) {
                        c.store(e, Ordering::Relaxed);
                    }
                    self.procs()[cs as usize]
                        .len
                        .store(len - n, Ordering::Release);
                } else {
                    for &e in &entries[..n as usize] {
                        if e < cap {
                            self.owners()[e as usize].store(op.mark, Ordering::Release);
                        }
                    }
                }
            }
            K_DEQ_CACHE | K_DEQ_HELD => {
                if op.kind == K_DEQ_CACHE {
                    if cs >= self.params.max_procs || op.len.saturating_add(n) > csize {
                        self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    let cache = &self.cache_of(cs)[op.len as usize..];
                    for (c, &e) in cache.iter().zip(&entries[..n as usize]) {
                        c.store(e, Ordering::Relaxed);
                    }
                    st.head.store(op.pos.wrapping_add(n), Ordering::Release);
                    kill_hook(kill_point::MID_APPLY);
                    self.procs()[cs as usize]
                        .len
                        .store(op.len + n, Ordering::Release);
                } else {
                    st.head.store(op.pos.wrapping_add(n), Ordering::Release);
                    kill_hook(kill_point::MID_APPLY);
                    for e in &mut entries[..n as usize] {
                        if *e >= cap {
                            continue;
                        }
                        // A word other than `mark` (held already, even by the claimer: a duplicate)
                        // is not claimed and the entry struck: no handle for it. A completer's redo
                        // may strike what the first pass claimed: harmless, no handle is minted
                        // from a dead operator's record.
                        if self.owners()[*e as usize]
                            .compare_exchange(
                                op.mark,
                                op.holder,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_err()
                        {
                            *e = NO_ENTRY;
                        }
                    }
                }
            }
            _ => {
                // A garbage record (corruption): nothing to apply.
                self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A ring operation: what its redo record says (see [`ProcSlot`]).
pub(crate) struct Op {
    kind: u32,
    pos: u32,
    n: u32,
    len: u32,
    cache_slot: u32,
    mark: u32,
    holder: u32,
}

fn set_record(ps: &ProcSlot, ring: u32, lock: u64, op: &Op) {
    ps.rec_ring.store(ring, Ordering::Relaxed);
    ps.rec_kind.store(op.kind, Ordering::Relaxed);
    ps.rec_lock.store(lock, Ordering::Relaxed);
    ps.rec_pos.store(op.pos, Ordering::Relaxed);
    ps.rec_n.store(op.n, Ordering::Relaxed);
    ps.rec_len.store(op.len, Ordering::Relaxed);
    ps.rec_slot.store(op.cache_slot, Ordering::Relaxed);
    ps.rec_mark.store(op.mark, Ordering::Relaxed);
    ps.rec_holder.store(op.holder, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::owner::{FREE, IN_CHANNEL};
    use crate::shared::{SharedOptions, SharedPool};

    /// A pool of `cap` `u64`s whose caches hold `cache`, in a region named after `tag`.
    fn pool(tag: &str, cap: u32, cache: u32) -> (String, SharedPool<u64>) {
        let name = format!("idxpool-unit-{}-{tag}", std::process::id());
        let opts = SharedOptions {
            cache_size: Some(cache),
            ..SharedOptions::default()
        };
        let pool = SharedPool::create(&name, cap, 1, opts).unwrap();
        (name, pool)
    }

    /// A hostile peer's plain append of entry `i` at the tail of `ring`.
    fn append(ring: &XRing, i: u32) {
        let t = ring.st().tail.load(Ordering::SeqCst);
        ring.slot(t).store(i, Ordering::SeqCst);
        ring.st().tail.store(t + 1, Ordering::SeqCst);
    }

    /// A lock naming no slot, a garbage prepared record: taken over, dropped and counted; no hang.
    #[test]
    fn corrupt_lock_and_record_are_contained() {
        let (name, pool) = pool("xcorrupt", 32, 4);
        // Lock id naming slot 200 of 16; slot 3's record: common ring, no such kind, absurd sizes.
        pool.ring.st().lock.store(0xdead_00c9, Ordering::SeqCst);
        let ps = &pool.procs()[3];
        let garbage = Op {
            kind: 99,
            pos: 7,
            n: u32::MAX,
            len: u32::MAX,
            cache_slot: 77,
            mark: 5,
            holder: 5,
        };
        set_record(ps, 0, 0xdead_00c9, &garbage);
        ps.rec_state.store(REC_PREPARED, Ordering::SeqCst);
        let mut v = Vec::new();
        pool.get_bulk(&mut v, 32).unwrap();
        assert!(pool.corrupt_entries() > 0);
        pool.put_bulk(&mut v);
        pool.flush();
        let a = pool.audit();
        assert!(a.is_consistent(), "{a}");
        // Garbage indices: counts clamped; the next operation empties the ring (counted); repaired.
        pool.ring.st().head.store(5, Ordering::SeqCst);
        pool.ring.st().tail.store(u32::MAX - 3, Ordering::SeqCst);
        assert!(pool.ring_count() <= 32);
        let before = pool.corrupt_entries();
        assert!(pool.get().is_err());
        assert_eq!(pool.corrupt_entries(), before + 1);
        let a = pool.audit();
        assert_eq!(a.lost_free.len(), 32, "{a}");
        // SAFETY: nothing else uses the pool.
        assert_eq!(unsafe { pool.repair_lost() }, 32);
        assert!(pool.audit().is_consistent());
        assert_eq!(pool.available(), 32);
        let _ = SharedPool::<u8>::remove(&name);
    }

    /// A forged channel entry for an object the receiver holds mints no second handle (`&mut T`).
    #[test]
    fn duplicate_of_a_held_object_in_a_channel_is_dropped() {
        let (name, pool) = pool("xdup", 8, 0);
        let mut h = pool.get().unwrap();
        let i = h.index();
        let ch = &pool.chans[0];
        append(ch, i);
        assert!(pool.recv(0).is_none(), "a second handle to a held object");
        assert_eq!(pool.corrupt_entries(), 1);
        *pool.get_mut(&mut h) = 5;
        // The same through the common ring (a cache-less get).
        append(&pool.ring, i);
        let mut others = Vec::new();
        while let Ok(o) = pool.get() {
            assert_ne!(o.index(), i, "a second handle to a held object");
            others.push(o);
        }
        assert_eq!(others.len(), 7);
        pool.put_bulk(&mut others);
        pool.put(h);
        let _ = SharedPool::<u8>::remove(&name);
    }

    /// A hostile peer's two plain writes (a held object's owner word set to FREE and its index
    /// appended to the common ring, or to a channel with the word IN_CHANNEL) must not mint a
    /// second handle through a refill, a cache-less get or a receive: the forged entry is dropped
    /// and counted, the first handle keeps working.
    #[test]
    fn forged_free_of_a_held_object_mints_no_second_handle() {
        for cache in [0u32, 4] {
            let (name, pool) = pool(&format!("xforge{cache}"), 16, cache);
            let mut h = pool.get().unwrap();
            let i = h.index();
            *pool.get_mut(&mut h) = 7;
            // The two writes.
            pool.owners()[i as usize].store(FREE, Ordering::SeqCst);
            append(&pool.ring, i);
            let mut others = Vec::new();
            while let Ok(o) = pool.get() {
                assert_ne!(
                    o.index(),
                    i,
                    "cache {cache}: a second handle to a held object"
                );
                others.push(o);
            }
            assert_eq!(others.len(), 15, "cache {cache}");
            assert_eq!(
                pool.corrupt_entries(),
                1,
                "cache {cache}: the forged entry counted"
            );
            // The claim of the forged entry left the word ours: the first handle is clean.
            assert_eq!(pool.owners()[i as usize].load(Ordering::SeqCst), pool.me);
            *pool.get_mut(&mut h) += 1;
            assert_eq!(pool.corrupt_entries(), 1);
            // An access while the word is forged: counted, not a panic.
            pool.owners()[i as usize].store(FREE, Ordering::SeqCst);
            assert_eq!(*pool.get_ref(&h), 8);
            assert_eq!(pool.corrupt_entries(), 2, "cache {cache}");
            // The same through a channel.
            pool.owners()[i as usize].store(IN_CHANNEL, Ordering::SeqCst);
            let ch = &pool.chans[0];
            append(ch, i);
            assert!(
                pool.recv(0).is_none(),
                "cache {cache}: a second handle to a held object"
            );
            assert_eq!(pool.corrupt_entries(), 3, "cache {cache}");
            // A repair does not hand the held object out again either.
            pool.owners()[i as usize].store(FREE, Ordering::SeqCst);
            // SAFETY: nothing else uses the pool.
            assert_eq!(unsafe { pool.repair_lost() }, 0, "cache {cache}");
            pool.owners()[i as usize].store(pool.me, Ordering::SeqCst);
            pool.put_bulk(&mut others);
            assert_eq!(*pool.get_ref(&h), 8);
            pool.put(h);
            pool.flush();
            let a = pool.audit();
            assert!(a.is_consistent(), "cache {cache}: {a}");
            let _ = SharedPool::<u8>::remove(&name);
        }
    }

    /// `fallocate(FALLOC_FL_PUNCH_HOLE)` on the sealed region succeeds (seals don't stop it) and
    /// zeroes everything. The attachments must go on without a panic: every owner word no longer
    /// naming the holder is counted, and the pool stays usable.
    #[test]
    fn punched_hole_is_counted_not_a_panic() {
        use std::os::unix::io::AsRawFd;
        let (name, pool) = pool("xpunch", 32, 4);
        let other = SharedPool::<u64>::attach(&name, 1).unwrap();
        assert!(pool.is_sealed());
        let mut held = Vec::new();
        pool.get_bulk(&mut held, 10).unwrap();
        let mut theirs = Vec::new();
        other.get_bulk(&mut theirs, 5).unwrap();
        // The hostile peer: its own descriptor of the region, a hole over all of it.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(pool.path())
            .unwrap();
        let len = pool.mapped_len() as libc::off_t;
        // SAFETY: plain syscall on an open fd.
        let r = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                len,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        assert!(pool.owners().iter().all(|w| w.load(Ordering::SeqCst) == 0));
        for (k, h) in held.iter_mut().enumerate() {
            *pool.get_mut(h) = k as u64;
            assert_eq!(*pool.get_ref(h), k as u64);
        }
        assert_eq!(
            pool.corrupt_entries(),
            20,
            "each access with a zeroed word counted"
        );
        pool.put_bulk(&mut held);
        other.put_bulk(&mut theirs);
        // Usable afterwards (what was put back circulates; the rest is lost to audit).
        let mut again = Vec::new();
        let n = pool.get_burst(&mut again, 32);
        assert!(n >= 1);
        pool.put_bulk(&mut again);
        let _ = (pool.processes(), pool.reclaim_dead(), pool.audit());
        pool.flush();
        other.flush();
        drop(other);
        drop(pool);
        let _ = SharedPool::<u8>::remove(&name);
    }
}
