//! [`SharedPool`]: the attachment, its get/put through the in-region per-process cache, detach.
//! Creating and attaching: `attach.rs`; the cache's mechanics over the region: `region_cache.rs`.

use std::cell::Cell;
use std::fs::File;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use bytemuck::Pod;

use super::file::{self, SharedBacking};
use super::header::{Header, Params, ProcSlot, RegionStats, Sections};
use super::owner::ProcessId;
use super::registry::ProcessRegion;
use super::xring::{lock_id, XRing, K_DEQ_HELD, K_ENQ_CACHE, K_ENQ_HELD, NO_ENTRY, REC_BATCH};
use super::SharedHandle;
use crate::cache::{self, CachePlan, FlushPolicy};
use crate::error::PoolError;
use crate::mempool::{forward, Mempool};
use crate::repr::Geometry;
use crate::ring::Behavior;

mod attach;
mod region_cache;

use region_cache::{with_entries, with_scratch, RegionCache};

/// A fixed-size pool of `T` shared by several processes through a named region.
///
/// Created once by a primary ([`SharedPool::create`]) and attached by name by any number of
/// secondaries ([`SharedPool::attach`]), mapped at any address. Each value is one *attachment*: a
/// process slot with an in-region LIFO cache; `Send`, not `Sync`.
///
/// Dropping an attachment flushes its cache and frees its slot; the creator's also removes the name
/// (unless disabled), while attached processes go on. Ownership, recovery: [`crate::shared`].
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-pool", std::process::id());
/// let fp = fingerprint("[u64; 8] v1");
/// let pool = SharedPool::<[u64; 8]>::create(&name, 64, fp, SharedOptions::default())?;
/// let other = SharedPool::<[u64; 8]>::attach(&name, fp)?; // as another process would
/// let mut h = pool.get()?;
/// pool.get_mut(&mut h)[0] = 42;
/// pool.send(0, h); // channel 0
/// let h = other.recv(0).expect("a handle");
/// assert_eq!(other.get_ref(&h)[0], 42);
/// other.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct SharedPool<T> {
    /// This process's record of the region (`registry`). First, so it drops before the mapping and
    /// the file: a record never outlives the hold on the inode, whose number could be reused.
    region: Arc<ProcessRegion>,
    pub(crate) map: memmap2::MmapMut,
    pub(crate) base: NonNull<u8>,
    pub(crate) header: Header,
    pub(crate) params: Params,
    /// The cache algorithm's decisions for this region (`params.plan()`).
    pub(crate) plan: CachePlan,
    pub(crate) sections: Sections,
    /// Where object `i` lives in this mapping: the core's geometry (`objects + i x stride`).
    geometry: Geometry,
    pub(crate) ring: XRing,
    pub(crate) chans: Vec<XRing>,
    /// Our process slot (`u32::MAX` until claimed).
    pub(crate) slot: u32,
    /// Our holder id in the owner table.
    pub(crate) me: u32,
    pub(crate) ident: ProcessId,
    /// Process-local serial of this attachment (never 0, never reused), stamped into its handles.
    pub(crate) serial: u32,
    /// Whether this attachment holds its slot's `F_OFD_SETLK` liveness lock.
    ofd_locked: bool,
    /// Its descriptor's key with the fork handlers (`file::list_for_fork`; 0: not listed).
    fork_key: usize,
    /// What this attachment holds by its own account (a bit per object), kept with the process-wide
    /// record (`region`): for the handle checks and the release at drop.
    held: Box<[Cell<u64>]>,
    /// Sealed region: this attachment's member link, removed on drop.
    member_link: Option<PathBuf>,
    /// `create` found the name left by a region whose processes are all gone and replaced it.
    replaced_stale: bool,
    path: PathBuf,
    pub(crate) file: File,
    backing: SharedBacking,
    page_size: u64,
    primary: bool,
    unlink_on_drop: bool,
    _object: PhantomData<fn(T) -> T>,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the attachment's state (mapping, rings, slot) is not tied to a thread; objects cross
// threads only as T: Send values. Not Sync (PhantomData<Cell>): one user of the cache at a time.
unsafe impl<T: Send> Send for SharedPool<T> {}

impl<T> SharedPool<T> {
    /// Pointer to `off` bytes into the region.
    #[inline(always)]
    pub(crate) fn at<U>(&self, off: u64) -> *mut U {
        self.base.as_ptr().wrapping_add(off as usize).cast()
    }

    /// The process slots.
    pub(crate) fn procs(&self) -> &[ProcSlot] {
        // SAFETY: max_procs ProcSlots (atomics only) at a 128-aligned in-bounds offset; the
        // zero-filled file is a valid initial value; they live as long as the mapping.
        unsafe {
            std::slice::from_raw_parts(
                self.at::<ProcSlot>(self.sections.procs),
                self.params.max_procs as usize,
            )
        }
    }

    /// The owner table.
    #[inline(always)]
    pub(crate) fn owners(&self) -> &[AtomicU32] {
        // SAFETY: capacity u32 words at an aligned in-bounds offset, atomics over shared memory.
        unsafe {
            std::slice::from_raw_parts(
                self.at::<AtomicU32>(self.sections.owners),
                self.params.capacity as usize,
            )
        }
    }

    /// The cache entries of slot `s` (`2 x cache_size` words: see [`SharedPool::cache_cap`]).
    #[inline(always)]
    pub(crate) fn cache_of(&self, s: u32) -> &[AtomicU32] {
        debug_assert!(s < self.params.max_procs);
        // SAFETY: slot s's array lies inside the caches section (s < max_procs), 64-aligned.
        unsafe {
            std::slice::from_raw_parts(
                self.at::<AtomicU32>(self.sections.caches + s as u64 * self.sections.cache_stride),
                self.cache_cap() as usize,
            )
        }
    }

    pub(crate) fn stats(&self) -> &RegionStats {
        // SAFETY: RegionStats (atomics) at its aligned in-bounds offset.
        unsafe { &*self.at::<RegionStats>(self.sections.stats) }
    }

    fn my_slot(&self) -> &ProcSlot {
        &self.procs()[self.slot as usize]
    }

    /// Whether the operator of slot `s` (owner word `w`) lives: another open file description holds
    /// the slot's liveness lock; without OFD locks, pid and start time decide.
    pub(crate) fn slot_alive(&self, s: u32, w: u64) -> bool {
        if s == self.slot {
            // Our own slot: `F_OFD_GETLK` on our own (locking) description would say free.
            return true;
        }
        match file::slot_locked_by_other(&self.file, s) {
            Some(held) => held,
            None => ProcessId::unpack(w).is_alive(),
        }
    }

    /// Claims object `e` for this attachment if its owner word is `from`; counts and rejects an
    /// out-of-range entry or an object held elsewhere (a duplicate entry: corruption).
    #[inline]
    pub(crate) fn claim(&self, e: u32, from: u32) -> bool {
        let ok = e < self.params.capacity
            && self.owners()[e as usize]
                .compare_exchange(from, self.me, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            // Already ours by our own account: a forged FREE (the word stays ours).
            && self.mark_held(e);
        if !ok {
            self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// This attachment as a ring operator: its record slot and lock id.
    #[inline(always)]
    pub(crate) fn party(&self) -> (u32, u64) {
        (self.slot, lock_id(self.me))
    }

    /// Moves held objects `v` into `ring` with owner words set to `mark` (FREE: common ring;
    /// IN_CHANNEL: channel), in recoverable chunks of `REC_BATCH`. What does not fit (only in a
    /// corrupt region: every ring holds every object) stays ours, counted in `corrupt_entries`.
    pub(crate) fn enq_held(&self, ring: &XRing, v: &[u32], mark: u32) {
        let (rs, id) = self.party();
        for chunk in v.chunks(REC_BATCH as usize) {
            self.with_ring(ring, rs, id, K_ENQ_HELD, |p, t| {
                let n = (chunk.len() as u32).min(t.room());
                let mut buf = [0u32; REC_BATCH as usize];
                let buf = &mut buf[..n as usize];
                buf.copy_from_slice(&chunk[..n as usize]);
                p.commit(t, K_ENQ_HELD, t.tail, n, 0, 0, mark, 0, buf);
                if (n as usize) < chunk.len() {
                    p.stats()
                        .corrupt_entries
                        .fetch_add((chunk.len() - n as usize) as u64, Ordering::Relaxed);
                }
            });
        }
    }

    /// Takes up to `max` (<= `REC_BATCH`) entries with owner word `from` from `ring`, claims them,
    /// and passes each claimed index to `out` (entries out of range, held elsewhere or listed twice
    /// are dropped and counted). Returns how many left the ring (0: empty).
    pub(crate) fn deq_held(
        &self,
        ring: &XRing,
        max: u32,
        from: u32,
        mut out: impl FnMut(u32),
    ) -> u32 {
        let (rs, id) = self.party();
        let mut buf = [NO_ENTRY; REC_BATCH as usize];
        let n = self.with_ring(ring, rs, id, K_DEQ_HELD, |p, t| {
            let n = max.min(REC_BATCH).min(t.count());
            if n == 0 {
                return 0;
            }
            let buf = &mut buf[..n as usize];
            Self::read_head(t, buf);
            p.commit(t, K_DEQ_HELD, t.head, n, 0, 0, from, p.me, buf);
            n
        });
        // The entries as read (each ring slot once); those not claimed are struck (NO_ENTRY).
        for &e in &buf[..n as usize] {
            // Struck entries fail the range check; a claimed one must not be held in this process
            // already (a forged FREE / IN_CHANNEL word, or an entry listed twice).
            let ok = e < self.params.capacity && self.mark_held(e);
            if ok {
                out(e);
            } else {
                self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
            }
        }
        n
    }

    /// Moves the first (coldest) `n` entries of cache `cs` into the common ring as operator
    /// `party`; `len` is the caller's copy of the cache length. Returns the new length, computed
    /// from `len`, never read back (a peer may have written the word).
    pub(crate) fn flush_cache(&self, cs: u32, len: u32, n: u32, party: (u32, u64)) -> u32 {
        let len = len.min(self.cache_cap());
        let moved = self.with_ring(&self.ring, party.0, party.1, K_ENQ_CACHE, |p, t| {
            let n = n.min(len).min(t.room());
            if n == 0 {
                return 0;
            }
            // The cache's pre-image, read once: what the record holds and the flush applies.
            with_entries(len as usize, |pre| {
                for (b, c) in pre.iter_mut().zip(&p.cache_of(cs)[..len as usize]) {
                    *b = c.load(Ordering::Relaxed);
                }
                p.commit(t, K_ENQ_CACHE, t.tail, n, len, cs, 0, 0, pre);
            });
            n
        });
        len - moved
    }

    /// Panics unless `h` was minted by this attachment (serial, unique in the process) and this
    /// attachment holds its object ([`SharedPool::check_held`]). Past both checks, only a broken
    /// `unsafe` contract (`from_raw`, `repair_lost`) gives two `&mut T`; `reset_channel` takes back
    /// only objects in a channel, which no live handle owns.
    #[inline]
    pub(crate) fn check_handle(&self, h: &SharedHandle<T>, what: &str) -> u32 {
        let i = h.index();
        assert!(
            h.serial() == self.serial,
            "idxpool shared: {what} of object {i} with a handle minted by attachment serial {}, \
             not this attachment's {} (a handle of another pool or attachment, or of one that \
             is gone)",
            h.serial(),
            self.serial
        );
        self.check_held(i, what);
        i
    }

    /// Panics unless this attachment holds object `i` by its process-local record (only a broken
    /// `from_raw` contract fails). An owner word that disagrees is a peer's work (a forged word, a
    /// punched hole): counted in `corrupt_entries`, never a panic.
    ///
    /// Fast path: a word naming us proves the handle ours (handles come from claims that set the
    /// record's bit, cleared only by `put`/`send`, which consume the handle).
    #[inline]
    pub(crate) fn check_held(&self, i: u32, what: &str) {
        match self.owners().get(i as usize) {
            Some(w) if w.load(Ordering::Acquire) == self.me => {}
            _ => self.owner_word_disagrees(i, what),
        }
    }

    #[cold]
    #[inline(never)]
    fn owner_word_disagrees(&self, i: u32, what: &str) {
        // Bits are set only for indices below the capacity.
        assert!(
            self.holds(i),
            "idxpool shared: {what} of object {i}, which this attachment does not hold \
             (capacity {}; broken from_raw contract)",
            self.params.capacity
        );
        self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that this attachment now holds object `e` (`e < capacity`); false (no change) when
    /// an attachment of this process holds it already.
    #[inline(always)]
    pub(crate) fn mark_held(&self, e: u32) -> bool {
        let Some(w) = self.held.get((e >> 6) as usize) else {
            return false;
        };
        if !self.region.claim(e) {
            return false;
        }
        w.set(w.get() | 1u64 << (e & 63));
        true
    }

    /// Records that this attachment released object `e` (nothing if it did not hold it: the
    /// process-wide bit may be another attachment's).
    #[inline(always)]
    pub(crate) fn unmark_held(&self, e: u32) {
        if let Some(w) = self.held.get((e >> 6) as usize) {
            let b = 1u64 << (e & 63);
            let v = w.get();
            if v & b != 0 {
                w.set(v & !b);
                self.region.release(e);
            }
        }
    }

    /// Whether an attachment of this process holds object `e`.
    pub(crate) fn process_holds(&self, e: u32) -> bool {
        self.region.holds(e)
    }

    /// Whether this attachment holds object `e` by its own account.
    #[inline(always)]
    pub(crate) fn holds(&self, e: u32) -> bool {
        self.held
            .get((e >> 6) as usize)
            .is_some_and(|w| w.get() & (1u64 << (e & 63)) != 0)
    }

    /// This attachment's cache as mechanics of the one cache algorithm (`crate::cache`).
    #[inline(always)]
    fn region_cache(&self) -> RegionCache<'_, T> {
        debug_assert!(self.slot != u32::MAX);
        RegionCache::new(self)
    }

    /// Entries a cache array holds (`2 x cache_size`); every length read is clamped to it.
    #[inline(always)]
    pub(crate) fn cache_cap(&self) -> u32 {
        2 * self.params.cache_size
    }

    /// The one get: [`cache::get`] over this attachment's in-region cache. Fills `dst[..k]` with
    /// claimed objects, dropping corrupt entries; `Bulk`: `Ok(n)` or `Err(())` with nothing taken.
    fn get_entries(&self, dst: &mut [MaybeUninit<u32>], behavior: Behavior) -> Result<usize, ()> {
        let n = dst.len();
        let mut have = 0;
        while have < n {
            let got = match cache::get(
                &mut self.region_cache(),
                &self.plan,
                &mut dst[have..],
                behavior,
            ) {
                Ok(k) => k,
                Err(_) if have == 0 || behavior == Behavior::Burst => break,
                Err(_) => {
                    // Bulk, short after corrupt entries were dropped: give back what we took.
                    // SAFETY: dst[..have] were written by the gets above.
                    let taken = unsafe { assume_init(&dst[..have]) };
                    cache::put(&mut self.region_cache(), &self.plan, taken);
                    return Err(());
                }
            };
            // Strike the entries the mechanics dropped as corrupt (NO_ENTRY), keeping order.
            let mut w = have;
            for r in have..have + got {
                // SAFETY: the get wrote dst[have .. have + got].
                let e = unsafe { dst[r].assume_init() };
                if e != NO_ENTRY {
                    dst[w].write(e);
                    w += 1;
                }
            }
            let struck = have + got - w;
            have = w;
            if behavior == Behavior::Burst || struck == 0 {
                break;
            }
        }
        if have == 0 && n > 0 {
            Err(())
        } else {
            Ok(have)
        }
    }

    /// Returns every object in this attachment's cache to the common ring.
    pub fn flush(&self) {
        if self.params.cache_size == 0 || self.slot == u32::MAX {
            return;
        }
        cache::flush_all(&mut self.region_cache());
    }
}

/// `&[MaybeUninit<u32>]` whose entries are written, as `&[u32]`.
///
/// # Safety
/// Every entry of `s` is initialised.
pub(super) unsafe fn assume_init(s: &[MaybeUninit<u32>]) -> &[u32] {
    // SAFETY: MaybeUninit<u32> has u32's layout; the caller vouches every entry is written.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

impl<T: Pod> SharedPool<T> {
    /// Takes one object (from this attachment's cache, refilled from the common ring).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when cache and ring are empty (objects may still sit in other
    /// caches or channels: [`SharedPool::available`]).
    #[inline]
    pub fn get(&self) -> Result<SharedHandle<T>, PoolError> {
        let mut one = [MaybeUninit::uninit()];
        self.get_entries(&mut one, Behavior::Bulk)
            .map_err(|()| self.exhausted(1))?;
        // SAFETY: a successful bulk get of one wrote it.
        Ok(SharedHandle::new(
            unsafe { one[0].assume_init() },
            self.serial,
        ))
    }

    /// Appends exactly `n` handles to `out`, or none (bulk): one run of the cache algorithm.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when fewer than `n` could be taken (at once, without allocating,
    /// when `n` exceeds the capacity); those taken go back. `available`: this cache plus the ring.
    pub fn get_bulk(&self, out: &mut Vec<SharedHandle<T>>, n: usize) -> Result<(), PoolError> {
        if n > self.params.capacity as usize {
            return Err(self.exhausted(n));
        }
        self.get_vec(out, n, Behavior::Bulk).map(drop)
    }

    /// Appends up to `n` handles to `out` (burst); returns how many.
    pub fn get_burst(&self, out: &mut Vec<SharedHandle<T>>, n: usize) -> usize {
        let n = n.min(self.params.capacity as usize);
        self.get_vec(out, n, Behavior::Burst).unwrap_or(0)
    }

    /// The `Vec` forms' get: appends the handles of what [`SharedPool::get_entries`] takes.
    fn get_vec(
        &self,
        out: &mut Vec<SharedHandle<T>>,
        n: usize,
        behavior: Behavior,
    ) -> Result<usize, PoolError> {
        with_scratch(n, |buf| {
            let k = self
                .get_entries(buf, behavior)
                .map_err(|()| self.exhausted(n))?;
            // SAFETY: a get of k wrote buf[..k].
            let got = unsafe { assume_init(&buf[..k]) };
            out.extend(got.iter().map(|&e| SharedHandle::new(e, self.serial)));
            Ok(k)
        })
    }

    /// Error of a failed get of `n`; `available`: this cache plus the common ring (snapshot).
    fn exhausted(&self, n: usize) -> PoolError {
        PoolError::Exhausted {
            requested: n,
            available: (self.cache_count() + self.ring.count()).min(self.params.capacity as usize),
        }
    }

    /// Returns an object to the pool.
    ///
    /// # Panics
    /// When the handle was minted by another attachment (of any pool, or gone), or this attachment
    /// does not hold the object by its own record (a misplaced `from_raw`). An owner word that
    /// disagrees (a peer's corruption) is counted in [`SharedPool::corrupt_entries`], not a panic.
    #[inline]
    pub fn put(&self, h: SharedHandle<T>) {
        let e = self.check_handle(&h, "put");
        cache::put(&mut self.region_cache(), &self.plan, &[e]);
    }

    /// Returns every handle in `v` (drains it): one run through the cache algorithm.
    ///
    /// # Panics
    /// As [`SharedPool::put`] (checked for every handle before any goes back).
    pub fn put_bulk(&self, v: &mut Vec<SharedHandle<T>>) {
        with_scratch(v.len(), |buf| {
            for (b, h) in buf.iter_mut().zip(v.iter()) {
                b.write(self.check_handle(h, "put"));
            }
            // SAFETY: every entry was written above.
            let src = unsafe { assume_init(buf) };
            v.clear();
            cache::put(&mut self.region_cache(), &self.plan, src);
        })
    }

    /// The object of a handle this attachment holds.
    ///
    /// # Panics
    /// As [`SharedPool::put`].
    #[inline]
    pub fn get_mut<'a>(&'a self, h: &'a mut SharedHandle<T>) -> &'a mut T {
        let i = self.check_handle(h, "get_mut");
        // SAFETY: i < capacity: the object lies aligned in the mapping at objects + i * stride
        // (stride, offset: multiples of align_of::<T>() <= page alignment). The handle is this
        // attachment's, borrowed mutably, and its process-local record holds the object; handles
        // are not Clone and a claim mints one only if the record did not hold it already (whatever
        // the word says), so nothing else here refers to it. T: Pod: any bytes are a valid T.
        unsafe { &mut *self.obj_ptr(i) }
    }

    /// Shared view of the object of a handle this attachment holds.
    ///
    /// # Panics
    /// As [`SharedPool::get_mut`].
    #[inline]
    pub fn get_ref<'a>(&'a self, h: &'a SharedHandle<T>) -> &'a T {
        let i = self.check_handle(h, "get_ref");
        // SAFETY: as in get_mut; the handle is borrowed shared, so no &mut to it exists.
        unsafe { &*self.obj_ptr(i) }
    }

    #[inline(always)]
    fn obj_ptr(&self, i: u32) -> *mut T {
        self.geometry.ptr_of_index(i).cast()
    }
}

impl<T: Pod> Mempool for SharedPool<T> {
    type Object = T;
    type Handle = SharedHandle<T>;
    forward!(get put get_bulk get_burst put_bulk get_ref get_mut capacity stride
        cache_size policy available in_use ring_count flush);
    /// True when this attachment minted `h` (serial): `check_handle`'s check, without the panic.
    #[inline(always)]
    fn owns(&self, h: &SharedHandle<T>) -> bool {
        h.serial() == self.serial
    }
}

impl<T> SharedPool<T> {
    /// Number of objects.
    pub fn capacity(&self) -> u32 {
        self.params.capacity
    }

    /// Bytes between consecutive objects.
    pub fn stride(&self) -> usize {
        self.params.stride as usize
    }

    /// Per-process cache size.
    pub fn cache_size(&self) -> u32 {
        self.params.cache_size
    }

    /// Caches' flush policy: the creator's [`SharedOptions::policy`](super::SharedOptions::policy).
    pub fn policy(&self) -> FlushPolicy {
        self.plan.policy
    }

    /// Number of process slots.
    pub fn max_processes(&self) -> u32 {
        self.params.max_procs
    }

    /// Where this process mapped the region (differs between processes and mappings).
    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Bytes mapped (the file length, a multiple of the backing's page size).
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// The backing file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The filesystem behind the region.
    pub fn backing(&self) -> SharedBacking {
        self.backing
    }

    /// Page size of the backing (2 MiB on a default hugetlbfs mount, 4 KiB on `/dev/shm`).
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// True when the region is a memfd sealed with `F_SEAL_SHRINK` (default for mode 0600, see
    /// [`SharedPool::create`]): no peer can truncate it under the others (SIGBUS).
    pub fn is_sealed(&self) -> bool {
        file::seals(&self.file) & libc::F_SEAL_SHRINK != 0
    }

    /// True for the attachment that created the region.
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// The creator recorded in the header.
    pub fn creator(&self) -> ProcessId {
        ProcessId {
            pid: self.header.creator_pid,
            start_time: self.header.creator_start,
        }
    }

    /// This attachment's process slot.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// This process's identity as recorded in its slot.
    pub fn process_id(&self) -> ProcessId {
        self.ident
    }

    /// Free objects in the common ring (snapshot).
    pub fn ring_count(&self) -> usize {
        self.ring.count()
    }

    /// Objects in this attachment's cache.
    pub fn cache_count(&self) -> usize {
        if self.params.cache_size == 0 || self.slot == u32::MAX {
            0
        } else {
            self.my_slot()
                .len
                .load(Ordering::Relaxed)
                .min(self.cache_cap()) as usize
        }
    }

    /// Free objects: the common ring plus every claimed slot's cache (a snapshot, as DPDK's
    /// `rte_mempool_avail_count`).
    pub fn available(&self) -> usize {
        let cached: usize = if self.params.cache_size == 0 {
            0
        } else {
            self.procs()
                .iter()
                .filter(|p| p.owner.load(Ordering::Acquire) != 0)
                .map(|p| p.len.load(Ordering::Relaxed).min(self.cache_cap()) as usize)
                .sum()
        };
        (self.ring.count() + cached).min(self.params.capacity as usize)
    }

    /// Objects not free: held by processes or travelling in channels (snapshot).
    pub fn in_use(&self) -> usize {
        self.params.capacity as usize - self.available()
    }

    /// Entries dropped because they were out of range or named an object already held: should
    /// stay 0 unless a process corrupted the region or broke a `from_raw` contract.
    pub fn corrupt_entries(&self) -> u64 {
        self.stats().corrupt_entries.load(Ordering::Relaxed)
    }

    /// True when [`SharedPool::create`] replaced a stale sealed region of the same name (its
    /// creator and every attached process gone). A name whose region has a live process is never
    /// replaced (`AlreadyExists`).
    pub fn replaced_stale(&self) -> bool {
        self.replaced_stale
    }

    /// Whether `self.path` names this region: the file itself, or (sealed region) a link to
    /// a member link of this memfd, even one whose member is gone.
    fn names_this_region(&self) -> bool {
        file::same_inode(&self.path, &self.file)
            || file::read_link_member(&self.path)
                .is_some_and(|m| file::ino(&self.file).is_ok_and(|i| i == m.ino))
    }

    /// Attaches so far (the creator's included).
    pub fn attach_count(&self) -> u64 {
        self.stats().attaches.load(Ordering::Relaxed)
    }

    /// Removes the region's name now (as the creator's drop does): attached processes go on, new
    /// attaches fail with `NotFound`. Removes nothing if the name now names another region.
    ///
    /// # Errors
    /// [`PoolError::SharedFile`] with `NotFound` when the name is already gone or taken by
    /// another region, or the error of `unlink`.
    pub fn unlink(&self) -> Result<(), PoolError> {
        if !self.names_this_region() {
            return Err(file::file_err(
                &self.path,
                "unlink",
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the name no longer refers to this region",
                ),
            ));
        }
        std::fs::remove_file(&self.path).map_err(|e| file::file_err(&self.path, "unlink", e))?;
        self.remove_member_links();
        Ok(())
    }

    /// Removes the links of this (sealed) region's members that are gone.
    pub(crate) fn prune_member_links(&self) {
        if self.member_link.is_some() {
            if let Ok(i) = file::ino(&self.file) {
                file::prune_member_links(&self.path, i);
            }
        }
    }

    /// Removes the member links of this (sealed) region, once its name is gone.
    fn remove_member_links(&self) {
        if self.member_link.is_some() {
            if let Ok(i) = file::ino(&self.file) {
                file::remove_member_links(&self.path, Some(i));
            }
        }
    }

    /// Removes the name of a region, e.g. one left behind by a crashed creator. Returns whether
    /// a file was removed. Processes attached to it keep their mappings.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad name; [`PoolError::SharedFile`] when `unlink`
    /// fails for another reason than absence.
    pub fn remove(name: &str) -> Result<bool, PoolError> {
        file::check_name(name)?;
        let mut removed = false;
        for (p, _) in file::candidates(name) {
            file::remove_member_links(&p, None);
            match std::fs::remove_file(&p) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(file::file_err(&p, "unlink", e)),
            }
        }
        Ok(removed)
    }
}

impl<T> Drop for SharedPool<T> {
    fn drop(&mut self) {
        // A forked child's copy is not the attachment (slot, cache, liveness lock, name are the
        // parent's): only the fields' drops run (`file::ForkedAttachment`, tests/shared_fork.rs).
        file::unlist_for_fork(self.fork_key);
        if self.ident.pid != std::process::id() {
            return;
        }
        if self.slot != u32::MAX {
            self.flush();
            // Objects still held by this attachment become orphans (reclaim_in_use_of_dead).
            self.my_slot().owner.store(0, Ordering::Release);
            // ... and released here, so this process's other attachments can claim them later.
            for (w, bits) in self.held.iter().enumerate() {
                if bits.get() != 0 {
                    self.region.release_word(w, bits.get());
                    bits.set(0);
                }
            }
            if self.ofd_locked {
                file::unlock_slot(&self.file, self.slot);
            }
        }
        if let Some(p) = &self.member_link {
            let _ = std::fs::remove_file(p);
        }
        if self.primary && self.unlink_on_drop && self.names_this_region() {
            let _ = std::fs::remove_file(&self.path);
            self.remove_member_links();
        }
    }
}

impl<T> std::fmt::Debug for SharedPool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPool")
            .field("path", &self.path)
            .field("backing", &self.backing)
            .field("base", &self.base)
            .field("capacity", &self.params.capacity)
            .field("stride", &self.params.stride)
            .field("cache_size", &self.params.cache_size)
            .field("policy", &self.plan.policy)
            .field("slot", &self.slot)
            .field("primary", &self.primary)
            .finish()
    }
}
