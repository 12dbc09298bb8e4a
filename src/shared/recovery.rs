//! Dead processes: listing slots, reclaiming caches and held objects, auditing the region.

use std::fmt;
use std::sync::atomic::Ordering;

use super::owner::{holder_id, split_holder, ProcessId, FREE, GEN_MASK, IN_CHANNEL, RECLAIM_BIT};
use super::xring::{
    kill_hook, kill_point, lock_slot, reclaim_lock_id, XRing, K_ENQ_HELD, REC_BATCH, REC_IDLE,
    REC_PREPARED,
};
use super::{file, SharedPool};

/// One claimed process slot, as [`SharedPool::processes`] reports it.
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-slots", std::process::id());
/// let pool = SharedPool::<u64>::create(&name, 64, fingerprint("u64"), SharedOptions::default())?;
/// let me = pool.processes().into_iter().find(|p| p.is_self).expect("our slot");
/// assert!(me.alive && !me.reclaiming);
/// assert_eq!((me.slot, me.process), (pool.slot(), pool.process_id()));
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSlotInfo {
    /// Slot number.
    pub slot: u32,
    /// The holder (or, while `reclaiming`, the reclaimer).
    pub process: ProcessId,
    /// Whether the slot's holder lives: another open file description holds the slot's
    /// `F_OFD_SETLK` liveness lock (else, without OFD locks: pid + start time, not a zombie).
    pub alive: bool,
    /// A reclaimer owns the slot of a dead holder.
    pub reclaiming: bool,
    /// Objects in the slot's cache.
    pub cached: u32,
    /// Objects the owner table says this attachment holds.
    pub held: u32,
    /// This is the calling attachment's slot.
    pub is_self: bool,
}

/// What [`SharedPool::reclaim_dead`] did.
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, ReclaimReport, SharedPool};
/// let name = format!("idxpool-doc-{}-reclaim", std::process::id());
/// let pool = SharedPool::<u64>::create(&name, 64, fingerprint("u64"), SharedOptions::default())?;
/// let r: ReclaimReport = pool.reclaim_dead(); // e.g. after a peer was killed
/// assert_eq!(r, ReclaimReport::default()); // no process of this region died
/// println!("{r}");
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// Slots of dead processes freed.
    pub slots_freed: u32,
    /// pids whose slots were freed.
    pub dead_pids: Vec<u32>,
    /// Objects moved from their caches to the common ring.
    pub cached_returned: usize,
    /// Objects held by attachments that are gone (dead, or detached without putting them):
    /// reported, not reclaimed; see [`SharedPool::reclaim_in_use_of_dead`].
    pub in_use_of_dead: usize,
}

impl fmt::Display for ReclaimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} dead slot(s) freed (pids {:?}), {} cached object(s) returned to the ring, \
             {} object(s) held by gone attachments",
            self.slots_freed, self.dead_pids, self.cached_returned, self.in_use_of_dead
        )
    }
}

/// A census of every object of the region ([`SharedPool::audit`]). Exact only while no process
/// operates on the pool; otherwise objects in flight show up as lost or as duplicates.
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-audit", std::process::id());
/// let pool = SharedPool::<u64>::create(&name, 64, fingerprint("u64"), SharedOptions::default())?;
/// let h = pool.get()?;
/// let a = pool.audit(); // a `SharedAudit`
/// assert!(a.is_consistent());
/// assert_eq!((a.capacity, a.held_attached, a.accounted()), (64, 1, 64));
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedAudit {
    /// Number of objects.
    pub capacity: u32,
    /// Entries in the common ring.
    pub in_ring: usize,
    /// Entries in process caches (claimed slots).
    pub in_caches: usize,
    /// Entries in handle channels.
    pub in_channels: usize,
    /// Objects held by current attachments (live, or dead but not yet freed by `reclaim_dead`).
    pub held_attached: usize,
    /// Objects held by attachments that are gone (reclaimable with `reclaim_in_use_of_dead`).
    pub held_orphaned: usize,
    /// Objects held and still in the holder's cache (killed mid get/put; `reclaim_dead` fixes it).
    pub held_and_cached: usize,
    /// Free objects (owner word FREE) found in no ring and no cache: damage (corrupt ring
    /// indices emptied, or a broken `unsafe` contract). Returned by `repair_lost`.
    pub lost_free: Vec<u32>,
    /// Objects marked in a channel but in none: damage, as `lost_free`.
    pub lost_in_channel: Vec<u32>,
    /// Objects found in more than one place, or in a place their owner word contradicts.
    pub duplicates: Vec<u32>,
    /// Entries naming no object (index >= capacity).
    pub out_of_range: usize,
    /// Rings whose lock is held (`"ring"`, `"channel N"`, with the holder and whether it is
    /// gone) and slots whose redo record is prepared: an operation is in flight, or a process
    /// died inside one (the next operation on that ring, or `reclaim_dead`, completes it).
    pub stuck_rings: Vec<String>,
}

impl SharedAudit {
    /// Every object is in exactly one place, all rings are idle, nothing is lost.
    pub fn is_consistent(&self) -> bool {
        self.lost_free.is_empty()
            && self.lost_in_channel.is_empty()
            && self.duplicates.is_empty()
            && self.out_of_range == 0
            && self.held_and_cached == 0
            && self.stuck_rings.is_empty()
            && self.accounted() == self.capacity as usize
    }

    /// Objects accounted for: ring + caches + channels + held (live and orphaned), each once.
    pub fn accounted(&self) -> usize {
        self.in_ring + self.in_caches + self.in_channels + self.held_attached + self.held_orphaned
            - self.held_and_cached
    }
}

impl fmt::Display for SharedAudit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "capacity {}: ring {}, caches {}, channels {}, held attached {}, held orphaned {} \
             (= {}); held+cached {}, lost free {}, lost in channel {}, duplicates {}, \
             out of range {}, stuck rings {}",
            self.capacity,
            self.in_ring,
            self.in_caches,
            self.in_channels,
            self.held_attached,
            self.held_orphaned,
            self.accounted(),
            self.held_and_cached,
            self.lost_free.len(),
            self.lost_in_channel.len(),
            self.duplicates.len(),
            self.out_of_range,
            if self.stuck_rings.is_empty() {
                "none".to_string()
            } else {
                self.stuck_rings.join("; ")
            }
        )
    }
}

impl<T> SharedPool<T> {
    /// Claimed process slots with their holder, liveness, cache fill and held objects.
    pub fn processes(&self) -> Vec<ProcessSlotInfo> {
        let mut held = vec![0u32; self.params.max_procs as usize];
        for w in self.owners() {
            let w = w.load(Ordering::Relaxed);
            if w == FREE || w == IN_CHANNEL {
                continue;
            }
            let (s, g) = split_holder(w);
            if let Some(ps) = self.procs().get(s as usize) {
                if ps.gen.load(Ordering::Relaxed) & GEN_MASK == g {
                    held[s as usize] += 1;
                }
            }
        }
        self.procs()
            .iter()
            .enumerate()
            .filter_map(|(s, ps)| {
                let w = ps.owner.load(Ordering::Acquire);
                if w == 0 {
                    return None;
                }
                let process = ProcessId::unpack(w);
                Some(ProcessSlotInfo {
                    slot: s as u32,
                    process,
                    alive: self.slot_alive(s as u32, w),
                    reclaiming: w & RECLAIM_BIT != 0,
                    cached: ps.len.load(Ordering::Relaxed).min(self.cache_cap()),
                    held: held[s],
                    is_self: s as u32 == self.slot,
                })
            })
            .collect()
    }

    /// True when holder id `w` belongs to an attachment that is gone: its slot is free, or
    /// was claimed again since (another generation). Read `w` (acquire) before calling.
    fn is_orphan(&self, w: u32) -> bool {
        let (s, g) = split_holder(w);
        let Some(ps) = self.procs().get(s as usize) else {
            return true; // names no slot: garbage, nobody can hold it
        };
        let owner = ps.owner.load(Ordering::SeqCst);
        let cur = ps.gen.load(Ordering::SeqCst) & GEN_MASK;
        owner == 0 || cur != g
    }

    /// Frees dead processes' slots (pid gone, reused, or a zombie), returning their cached objects
    /// to the common ring; objects they held are only counted ([`ReclaimReport::in_use_of_dead`]).
    ///
    /// A ring operation the dead process was inside is completed first (lock taken over, prepared
    /// record applied: `xring`), so the slot's cache and owner words are settled before they are
    /// read. Safe from any attachment at any time, by several processes at once (each dead slot is
    /// taken over by CAS; a reclaimer that dies is taken over in turn).
    pub fn reclaim_dead(&self) -> ReclaimReport {
        let mut rep = ReclaimReport::default();
        let mine = RECLAIM_BIT | self.ident.pack();
        for (s, ps) in self.procs().iter().enumerate() {
            let s = s as u32;
            if s == self.slot {
                continue;
            }
            let w = ps.owner.load(Ordering::Acquire);
            if w == 0 {
                continue;
            }
            // Liveness lock: held while holder/reclaimer lives; taking it makes us sole reclaimer.
            let locked = match file::lock_slot(&self.file, s) {
                Ok(true) => true,
                Ok(false) => continue,
                Err(_) => {
                    if ProcessId::unpack(w).is_alive() {
                        continue;
                    }
                    false
                }
            };
            if ps
                .owner
                .compare_exchange(w, mine, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                if locked {
                    file::unlock_slot(&self.file, s);
                }
                continue;
            }
            let seq = ps
                .reclaim_seq
                .fetch_add(1, Ordering::SeqCst)
                .wrapping_add(1);
            let dead_id = holder_id(s, ps.gen.load(Ordering::SeqCst));
            let my_lock = reclaim_lock_id(dead_id, seq);
            let party = (s, my_lock);
            // 1. Ring locks held for this slot (by the dead holder or a dead reclaimer): take them
            //    over, complete what was prepared, release.
            for r in std::iter::once(&self.ring).chain(&self.chans) {
                let x = r.st().lock.load(Ordering::Acquire);
                if x != 0
                    && lock_slot(x) == s
                    && r.st()
                        .lock
                        .compare_exchange(x, my_lock, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    self.complete_dead(r);
                    r.st().lock.store(0, Ordering::Release);
                }
            }
            //    Still prepared: another process took the lock over and completes it; wait for it.
            if ps.rec_state.load(Ordering::Acquire) == REC_PREPARED {
                match self.ring_by_id(ps.rec_ring.load(Ordering::Relaxed)) {
                    Some(r) => {
                        self.lock_ring(r, my_lock);
                        if ps.rec_state.load(Ordering::Acquire) == REC_PREPARED {
                            // Prepared, yet its lock was free: not a state the protocol
                            // leaves (corruption). Dropped, counted.
                            ps.rec_state.store(REC_IDLE, Ordering::Release);
                            self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                        }
                        r.st().lock.store(0, Ordering::Release);
                    }
                    None => {
                        ps.rec_state.store(REC_IDLE, Ordering::Release);
                        self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // 2. The cache: entries held by the dead attachment *and* still cached (it died between
            //    a get's or put's two steps) are freed; entries out of range, held elsewhere or
            //    listed twice are dropped (the in-place rewrite keeps valid entries at or before
            //    their old positions, so a reclaimer killed halfway leaves the same valid set).
            let len = ps.len.load(Ordering::Acquire).min(self.cache_cap()) as usize;
            let cache = self.cache_of(s);
            let mut back = Vec::with_capacity(len);
            for c in &cache[..len] {
                let e = c.load(Ordering::Relaxed);
                if e >= self.params.capacity {
                    self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // One read of the word: the exchange's (freed now, or free already).
                let free = match self.owners()[e as usize].compare_exchange(
                    dead_id,
                    FREE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => true,
                    Err(w) => w == FREE,
                };
                if free && !back.contains(&e) {
                    back.push(e);
                } else {
                    self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
                }
            }
            if back.len() < len {
                for (c, &e) in cache.iter().zip(&back) {
                    c.store(e, Ordering::Relaxed);
                }
                ps.len.store(back.len() as u32, Ordering::Release);
            }
            kill_hook(kill_point::RECLAIM);
            // 3. Flush it to the common ring, recoverably (the record is the dead slot's own:
            //    a reclaimer killed here is completed by the next user of the ring).
            self.flush_cache(s, back.len() as u32, back.len() as u32, party);
            ps.owner.store(0, Ordering::SeqCst);
            if locked {
                file::unlock_slot(&self.file, s);
            }
            self.stats().reclaimed_slots.fetch_add(1, Ordering::Relaxed);
            self.stats()
                .reclaimed_cached
                .fetch_add(back.len() as u64, Ordering::Relaxed);
            rep.slots_freed += 1;
            rep.dead_pids.push(ProcessId::unpack(w).pid);
            rep.cached_returned += back.len();
        }
        rep.in_use_of_dead = self.count_orphans();
        if rep.slots_freed > 0 {
            // Their member links lead nowhere now.
            self.prune_member_links();
        }
        rep
    }

    fn count_orphans(&self) -> usize {
        self.owners()
            .iter()
            .filter(|w| {
                let w = w.load(Ordering::Acquire);
                w != FREE && w != IN_CHANNEL && self.is_orphan(w)
            })
            .count()
    }

    /// Runs [`SharedPool::reclaim_dead`], then returns the objects of gone attachments (dead
    /// processes, pool values dropped with handles out) to the common ring; returns how many.
    ///
    /// Explicit, because only the caller knows no live process still uses those objects (e.g. the
    /// dead one stored an index elsewhere; using it is then a logic error). A gone attachment's
    /// leftover handle matches no serial; one rebuilt by [`super::SharedHandle::from_raw`] fails
    /// the owner check unless the object went back to that very attachment.
    pub fn reclaim_in_use_of_dead(&self) -> usize {
        self.reclaim_dead();
        let (rs, id) = self.party();
        let mut total = 0;
        let mut from = 0usize;
        loop {
            // Under the ring's lock: no object returned twice; a killed reclaimer is completed.
            let (n, next) = self.with_ring(&self.ring, rs, id, K_ENQ_HELD, |p, t| {
                let mut back = Vec::new();
                let mut i = from;
                let owners = p.owners();
                while i < owners.len() && back.len() < REC_BATCH as usize {
                    let w = owners[i].load(Ordering::Acquire);
                    if w != FREE && w != IN_CHANNEL && p.is_orphan(w) {
                        back.push(i as u32);
                    }
                    i += 1;
                }
                let n = (back.len() as u32).min(t.room());
                if n > 0 {
                    p.commit(
                        t,
                        K_ENQ_HELD,
                        t.tail,
                        n,
                        0,
                        0,
                        FREE,
                        0,
                        &mut back[..n as usize],
                    );
                }
                (n as usize, i)
            });
            total += n;
            from = next;
            if from >= self.params.capacity as usize {
                break;
            }
        }
        self.stats()
            .reclaimed_in_use
            .fetch_add(total as u64, Ordering::Relaxed);
        total
    }

    /// A ring's entries, read without consuming (quiescent use), and its held lock described.
    pub(crate) fn ring_entries(&self, ring: &XRing) -> (Vec<u32>, Option<String>) {
        let st = ring.st();
        let lock = st.lock.load(Ordering::Acquire);
        let (h, t) = (
            st.head.load(Ordering::Acquire),
            st.tail.load(Ordering::Acquire),
        );
        let stuck = (lock != 0).then(|| {
            format!(
                "lock held by {lock:#x} ({}), head {h} tail {t}",
                if self.lock_holder_gone(lock) {
                    "gone: the next operation or reclaim_dead completes it"
                } else {
                    "live"
                }
            )
        });
        let n = t.wrapping_sub(h).min(self.params.capacity);
        let v = (0..n)
            .map(|k| ring.slot(h.wrapping_add(k)).load(Ordering::Relaxed))
            .collect();
        (v, stuck)
    }

    /// Read-only census of every object: its entry in ring, caches or channels vs its owner word.
    /// Exact only while no process operates on the pool (e.g. the others exited or wait).
    pub fn audit(&self) -> SharedAudit {
        let cap = self.params.capacity;
        let mut a = SharedAudit {
            capacity: cap,
            ..Default::default()
        };
        // Per object: places as free (ring/cache), places in channels, cache slot + 1.
        let mut free_places = vec![0u8; cap as usize];
        let mut chan_places = vec![0u8; cap as usize];
        let mut cache_slot = vec![0u8; cap as usize];
        let (ring, stuck) = self.ring_entries(&self.ring);
        if let Some(s) = stuck {
            a.stuck_rings.push(format!("ring: {s}"));
        }
        a.in_ring = ring.len();
        for e in ring {
            match free_places.get_mut(e as usize) {
                Some(p) => *p = p.saturating_add(1),
                None => a.out_of_range += 1,
            }
        }
        for (s, ps) in self.procs().iter().enumerate() {
            if ps.owner.load(Ordering::Acquire) == 0 {
                continue;
            }
            let len = ps.len.load(Ordering::Acquire).min(self.cache_cap()) as usize;
            a.in_caches += len;
            for c in &self.cache_of(s as u32)[..len] {
                let e = c.load(Ordering::Relaxed);
                match free_places.get_mut(e as usize) {
                    Some(p) => {
                        *p = p.saturating_add(1);
                        cache_slot[e as usize] = s as u8 + 1;
                    }
                    None => a.out_of_range += 1,
                }
            }
        }
        for (s, ps) in self.procs().iter().enumerate() {
            if ps.rec_state.load(Ordering::Acquire) == REC_PREPARED {
                a.stuck_rings.push(format!(
                    "slot {s}: record prepared for ring {}",
                    ps.rec_ring.load(Ordering::Relaxed)
                ));
            }
        }
        for (c, ring) in self.chans.iter().enumerate() {
            let (v, stuck) = self.ring_entries(ring);
            if let Some(s) = stuck {
                a.stuck_rings.push(format!("channel {c}: {s}"));
            }
            a.in_channels += v.len();
            for e in v {
                match chan_places.get_mut(e as usize) {
                    Some(p) => *p = p.saturating_add(1),
                    None => a.out_of_range += 1,
                }
            }
        }
        for (i, word) in self.owners().iter().enumerate() {
            let w = word.load(Ordering::Acquire);
            let (f, c) = (free_places[i], chan_places[i]);
            let idx = i as u32;
            match w {
                FREE => match (f, c) {
                    (1, 0) => {}
                    (0, 0) => a.lost_free.push(idx),
                    _ => a.duplicates.push(idx),
                },
                IN_CHANNEL => match (f, c) {
                    (0, 1) => {}
                    (0, 0) => a.lost_in_channel.push(idx),
                    _ => a.duplicates.push(idx),
                },
                _ => {
                    if self.is_orphan(w) {
                        a.held_orphaned += 1;
                    } else {
                        a.held_attached += 1;
                    }
                    // The holder's cache number (slot + 1), if any: a peer may write holder byte 0.
                    let own_cache = split_holder(w)
                        .0
                        .checked_add(1)
                        .and_then(|n| u8::try_from(n).ok());
                    match (f, c) {
                        (0, 0) => {}
                        (1, 0) if Some(cache_slot[i]) == own_cache => a.held_and_cached += 1,
                        _ => a.duplicates.push(idx),
                    }
                }
            }
        }
        a
    }

    /// Returns to the common ring the objects [`SharedPool::audit`] finds lost (free but in no ring
    /// or cache; in a channel by their word but in none); returns how many.
    ///
    /// # Safety
    /// No other process or attachment may operate on the pool during the call: objects in flight
    /// elsewhere look lost and would end up with two holders.
    pub unsafe fn repair_lost(&self) -> usize {
        let a = self.audit();
        let mut back = a.lost_free;
        back.extend(a.lost_in_channel);
        // Ours by our own account: not lost (a forged word); returning it would mint a 2nd handle.
        back.retain(|&e| !self.process_holds(e));
        self.enq_held(&self.ring, &back, FREE);
        self.stats()
            .repaired_lost
            .fetch_add(back.len() as u64, Ordering::Relaxed);
        back.len()
    }
}
