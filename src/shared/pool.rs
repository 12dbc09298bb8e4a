//! [`SharedPool`]: create, attach, get/put through the in-region per-process cache, detach.

use std::cell::Cell;
use std::fs::File;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use bytemuck::Pod;

use super::file::{self, SharedBacking, SharedBackingPolicy, TempFile};
use super::header::{Header, Params, ProcSlot, RegionStats, Sections, MAGIC, RING_FLAGS, VERSION};
use super::owner::{holder_id, ProcessId, FREE};
use super::{SharedHandle, SharedOptions};
use crate::error::PoolError;
use crate::ring::{Ring, RingState};

/// A fixed-size pool of `T` shared by several processes through a named region.
///
/// Created once by a primary ([`SharedPool::create`]) and attached by name by any number of
/// secondaries ([`SharedPool::attach`]), which may map the region at any address. Each value is
/// one *attachment*: it holds one process slot with an in-region LIFO cache (DPDK 26.07
/// flush/refill: a full cache sends its coldest half to the common ring, an empty one takes half
/// a cache from it). `Send`, not `Sync`: one thread uses an attachment at a time.
///
/// Dropping an attachment flushes its cache and frees its slot; dropping the creator's also
/// removes the name (unless disabled), while attached processes keep working on their
/// mappings. See the [module documentation](crate::shared) for the ownership model and what is
/// recoverable when a process dies.
pub struct SharedPool<T> {
    pub(crate) map: memmap2::MmapMut,
    pub(crate) base: NonNull<u8>,
    pub(crate) header: Header,
    pub(crate) params: Params,
    pub(crate) sections: Sections,
    pub(crate) ring: Ring<u32>,
    pub(crate) chans: Vec<Ring<u32>>,
    /// Our process slot (`u32::MAX` until claimed).
    pub(crate) slot: u32,
    /// Our holder id in the owner table.
    pub(crate) me: u32,
    pub(crate) ident: ProcessId,
    /// Process-local serial of this attachment, stamped into every handle it mints (never 0,
    /// never reused in this process): see [`SharedPool::check_held`].
    pub(crate) serial: u32,
    path: PathBuf,
    file: File,
    backing: SharedBacking,
    page_size: u64,
    primary: bool,
    unlink_on_drop: bool,
    _object: PhantomData<fn() -> T>,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the attachment's state (mapping, rings over it, slot) is not tied to a thread; objects
// move between threads only as T: Send values. Not Sync (PhantomData<Cell>): the in-region
// cache has one user at a time.
unsafe impl<T: Send> Send for SharedPool<T> {}

impl<T: Pod> SharedPool<T> {
    /// Creates the region `name` holding `capacity` objects of `T` and attaches to it (the
    /// primary). `name` is a file name, looked up in the hugetlbfs mount and `/dev/shm`, or an
    /// absolute path. `fingerprint` identifies `T` (see [`super::fingerprint`]): attaches that
    /// pass another value fail. Objects start zeroed.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad name, capacity (0 or above 2^31), cache size
    /// (above 512 or the capacity), process or channel count, or an alignment of `T` above
    /// 4096; [`PoolError::SizeOverflow`]; [`PoolError::SharedFile`] when the file cannot be
    /// created (`AlreadyExists` if the name is taken: remove a stale one with
    /// [`SharedPool::remove`]), sized, reserved (`fallocate`: no huge pages / tmpfs full) or
    /// mapped.
    pub fn create(
        name: &str,
        capacity: u32,
        fingerprint: u64,
        opts: SharedOptions,
    ) -> Result<Self, PoolError> {
        file::check_name(name)?;
        let stride = opts
            .stride
            .stride_for(size_of::<T>(), std::mem::align_of::<T>())? as u64;
        let params = Params {
            obj_size: size_of::<T>() as u64,
            obj_align: std::mem::align_of::<T>() as u64,
            stride,
            capacity,
            cache_size: opts.cache_size.unwrap_or(capacity.min(32)),
            max_procs: opts.max_processes,
            channels: opts.channels,
        };
        let sections = params.layout()?;
        let ident = ProcessId::current()
            .map_err(|e| file::file_err(Path::new("/proc/self/stat"), "read", e))?;
        let cands = file::candidates(name);
        for (p, _) in &cands {
            if p.exists() {
                return Err(file::file_err(
                    p,
                    "create",
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "a pool of this name exists (remove a stale one with SharedPool::remove)",
                    ),
                ));
            }
        }
        let order: Vec<(PathBuf, SharedBacking)> = match opts.backing {
            _ if name.starts_with('/') => cands,
            SharedBackingPolicy::Auto => cands,
            SharedBackingPolicy::Require(b) => {
                let v: Vec<_> = cands.into_iter().filter(|c| c.1 == b).collect();
                if v.is_empty() {
                    return Err(PoolError::BackingUnavailable {
                        backing: crate::region::Backing::Hugetlb2M,
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!(
                                "no {b} location (hugetlbfs: none writable in /proc/mounts; \
                                 mount -t hugetlbfs nodev /dev/hugepages)"
                            ),
                        ),
                    });
                }
                v
            }
        };
        let mut last = None;
        for (i, (path, _)) in order.iter().enumerate() {
            match Self::create_at(path, &params, &sections, fingerprint, ident, &opts) {
                Ok(pool) => return Ok(pool),
                // Auto: a hugetlbfs that cannot hold the region falls back to /dev/shm.
                Err(e) if i + 1 < order.len() && !is_exists(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| PoolError::config("no place for the shared region")))
    }

    fn create_at(
        path: &Path,
        params: &Params,
        sections: &Sections,
        fingerprint: u64,
        ident: ProcessId,
        opts: &SharedOptions,
    ) -> Result<Self, PoolError> {
        let tmp = TempFile::create(path, sections.end, opts.mode)?;
        let map = map_file(&tmp.file, tmp.len, &tmp.tmp)?;
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            header_size: size_of::<Header>() as u32,
            fingerprint,
            params: *params,
            sections: *sections,
            creator_pid: ident.pid,
            _pad: 0,
            creator_start: ident.start_time,
        };
        let mut pool = Self::from_map(
            map,
            header,
            path.to_path_buf(),
            tmp.file
                .try_clone()
                .map_err(|e| file::file_err(path, "dup", e))?,
            tmp.backing,
            tmp.page,
            ident,
        )?;
        // SAFETY: the region is ours alone until published: no other process can map it yet.
        // Header and ring states are written at their computed, in-bounds, aligned offsets.
        unsafe {
            pool.base.as_ptr().cast::<Header>().write(header);
            pool.at::<RingState>(sections.ring_state)
                .write(RingState::new(0));
            for c in 0..params.channels as u64 {
                pool.at::<RingState>(sections.chan_states + c * sections.state_stride)
                    .write(RingState::new(0));
            }
        }
        // The file is zero-filled: owner table all FREE, process slots free, stats 0.
        let mut batch = Vec::with_capacity(1024);
        for i in 0..params.capacity {
            batch.push(i);
            if batch.len() == 1024 || i + 1 == params.capacity {
                assert!(pool.ring.enqueue_bulk(&batch), "fresh ring holds the pool");
                batch.clear();
            }
        }
        pool.file = tmp.publish(path)?;
        pool.primary = true;
        pool.unlink_on_drop = opts.unlink_on_drop;
        pool.claim_slot()?;
        Ok(pool)
    }

    /// Attaches to the existing region `name` (a secondary), at whatever address the kernel
    /// picks. `T` and `fingerprint` must match the creator's.
    ///
    /// # Errors
    /// [`PoolError::SharedFile`] when no region of that name exists (`source.kind()` is
    /// `NotFound`), when it cannot be opened (`PermissionDenied`, `IsADirectory`, not a regular
    /// file) or mapped; [`PoolError::LayoutMismatch`] naming the first header field that
    /// differs (`magic`, `version`, `obj_size`, `obj_align`, `stride`, a section offset,
    /// `file_len`); [`PoolError::FingerprintMismatch`]; [`PoolError::NoProcessSlot`] when every
    /// process slot is held by a live process.
    pub fn attach(name: &str, fingerprint: u64) -> Result<Self, PoolError> {
        file::check_name(name)?;
        let ident = ProcessId::current()
            .map_err(|e| file::file_err(Path::new("/proc/self/stat"), "read", e))?;
        let mut tried = Vec::new();
        for (path, _) in file::candidates(name) {
            let f = match file::open_existing(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tried.push(path.display().to_string());
                    continue;
                }
                Err(e) => return Err(file::file_err(&path, "open", e)),
            };
            let len = f
                .metadata()
                .map_err(|e| file::file_err(&path, "stat", e))?
                .len();
            if len < size_of::<Header>() as u64 {
                return Err(PoolError::LayoutMismatch {
                    field: "file_len",
                    expected: size_of::<Header>() as u64,
                    found: len,
                });
            }
            let (backing, page) =
                file::fs_info(&f).map_err(|e| file::file_err(&path, "statfs", e))?;
            let map = map_file(&f, len, &path)?;
            // SAFETY: the mapping is at least size_of::<Header>() bytes (checked above) and
            // page-aligned; the header is plain integers (any bit pattern valid). A volatile
            // copy: the region is shared memory that another process could be writing.
            let header = unsafe { map.as_ptr().cast::<Header>().read_volatile() };
            header.validate(
                len,
                size_of::<T>() as u64,
                std::mem::align_of::<T>() as u64,
                fingerprint,
            )?;
            let mut pool = Self::from_map(map, header, path, f, backing, page, ident)?;
            pool.claim_slot()?;
            return Ok(pool);
        }
        Err(PoolError::SharedFile {
            path: tried.join(", "),
            op: "open",
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no shared pool named {name:?}"),
            ),
        })
    }

    /// Builds the process-local view over a mapping whose header copy is validated (attach) or
    /// was just computed (create). Does not claim a slot.
    fn from_map(
        mut map: memmap2::MmapMut,
        header: Header,
        path: PathBuf,
        file: File,
        backing: SharedBacking,
        page_size: u64,
        ident: ProcessId,
    ) -> Result<Self, PoolError> {
        let base = NonNull::new(map.as_mut_ptr()).expect("mmap never returns null");
        let (params, sections) = (header.params, header.sections);
        debug_assert!(sections.end as usize <= map.len());
        let nn =
            |off: u64| NonNull::new(base.as_ptr().wrapping_add(off as usize)).expect("non-null");
        // The state and slot offsets were computed by this process from the validated
        // parameters and lie inside the mapping, which lives as long as the pool (the rings
        // are fields dropped with it).
        // SAFETY: (above) and every ring over these bytes, in every process, uses the same
        // count (capacity) and flags (RING_FLAGS).
        let ring = unsafe {
            Ring::from_raw_parts(
                nn(sections.ring_state).cast(),
                nn(sections.ring_slots).cast::<MaybeUninit<u32>>(),
                params.capacity,
                RING_FLAGS,
            )?
        };
        let mut chans = Vec::with_capacity(params.channels as usize);
        for c in 0..params.channels as u64 {
            // SAFETY: as above, for channel c's state and slots.
            chans.push(unsafe {
                Ring::from_raw_parts(
                    nn(sections.chan_states + c * sections.state_stride).cast(),
                    nn(sections.chan_slots + c * sections.chan_stride).cast::<MaybeUninit<u32>>(),
                    params.capacity,
                    RING_FLAGS,
                )?
            });
        }
        Ok(SharedPool {
            map,
            base,
            header,
            params,
            sections,
            ring,
            chans,
            slot: u32::MAX,
            me: 0,
            ident,
            serial: next_serial()?,
            path,
            file,
            backing,
            page_size,
            primary: false,
            unlink_on_drop: false,
            _object: PhantomData,
            _not_sync: PhantomData,
        })
    }

    /// Takes a free process slot (CAS on its owner word), reclaiming dead processes' slots
    /// once if none is free.
    fn claim_slot(&mut self) -> Result<(), PoolError> {
        let packed = self.ident.pack();
        for attempt in 0..2 {
            for (s, ps) in self.procs().iter().enumerate() {
                if ps
                    .owner
                    .compare_exchange(0, packed, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    let gen = ps.gen.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
                    ps.len.store(0, Ordering::Release);
                    self.slot = s as u32;
                    self.me = holder_id(s as u32, gen);
                    self.stats().attaches.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
            if attempt == 0 {
                self.reclaim_dead();
            }
        }
        Err(PoolError::NoProcessSlot {
            slots: self.params.max_procs,
        })
    }
}

/// The next attachment serial of this process: 1, 2, ... Never reused, so a handle of an
/// attachment that is gone matches no attachment of this process.
fn next_serial() -> Result<u32, PoolError> {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
        .map_err(|_| {
            PoolError::config(
                "this process has used up its 2^32 - 1 shared-pool attachment serials",
            )
        })
}

fn is_exists(e: &PoolError) -> bool {
    matches!(e, PoolError::SharedFile { source, .. }
        if source.kind() == std::io::ErrorKind::AlreadyExists)
}

fn map_file(f: &File, len: u64, path: &Path) -> Result<memmap2::MmapMut, PoolError> {
    let len = usize::try_from(len).map_err(|_| PoolError::overflow("shared region length"))?;
    // A MAP_SHARED mapping of a file that other processes map too, by design. The process
    // never forms references to region bytes except atomics and objects held under the
    // owner-table protocol (see the module docs).
    // SAFETY: (above); truncation of the file by another process would fault (SIGBUS), which
    // the pool's files never do.
    unsafe { memmap2::MmapOptions::new().len(len).map_mut(f) }
        .map_err(|e| file::file_err(path, "map", e))
}

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

    /// The cache entries of slot `s` (`cache_size` words).
    #[inline(always)]
    pub(crate) fn cache_of(&self, s: u32) -> &[AtomicU32] {
        debug_assert!(s < self.params.max_procs);
        // SAFETY: slot s's array lies inside the caches section (s < max_procs), 64-aligned.
        unsafe {
            std::slice::from_raw_parts(
                self.at::<AtomicU32>(self.sections.caches + s as u64 * self.sections.cache_stride),
                self.params.cache_size as usize,
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

    /// Claims object `e` for this attachment if its owner word is `from`; counts and rejects an
    /// out-of-range entry or an object held elsewhere (a duplicate entry: corruption).
    #[inline]
    pub(crate) fn claim(&self, e: u32, from: u32) -> bool {
        let ok = e < self.params.capacity
            && self.owners()[e as usize]
                .compare_exchange(from, self.me, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if !ok {
            self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Enqueues entries the common ring must have room for (it holds every object).
    pub(crate) fn enqueue_all(&self, ring: &Ring<u32>, v: &[u32]) {
        assert!(
            ring.enqueue_bulk(v),
            "idxpool shared: ring overflow putting {} entries: an object is in two places \
             (corrupted region or a broken from_raw / repair_lost contract)",
            v.len()
        );
    }

    /// Panics unless handle `h` was minted by this attachment and this attachment holds its
    /// object.
    ///
    /// Two checks, both needed (issue 10): the serial ties the handle to the attachment that
    /// minted it (a handle of another region, of another attachment, or of an attachment that
    /// is gone never matches: serials are unique in the process), and the owner word proves
    /// the object is still ours (not reclaimed, not sent). Between them, the only way to two
    /// `&mut T` is an `unsafe` contract broken (`from_raw`, `repair_lost`, `reset_channel`).
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

    /// Panics unless this attachment holds object `i`.
    #[inline]
    pub(crate) fn check_held(&self, i: u32, what: &str) {
        assert!(
            i < self.params.capacity,
            "idxpool shared: {what} of index {i} out of range (capacity {})",
            self.params.capacity
        );
        let w = self.owners()[i as usize].load(Ordering::Acquire);
        assert!(
            w == self.me,
            "idxpool shared: {what} of object {i}, whose owner word is {w:#x}, not this \
             attachment's {:#x} (broken from_raw contract, handle of another attachment, or \
             a reclaimed object)",
            self.me
        );
    }

    /// Takes one object: from the cache (refilled with half a cache from the ring when empty),
    /// or from the ring when the cache size is 0. Marks it held before it leaves the cache.
    fn take_one(&self) -> Option<u32> {
        let size = self.params.cache_size;
        if size == 0 {
            loop {
                let mut b = [MaybeUninit::<u32>::uninit()];
                if self.ring.dequeue_burst(&mut b) == 0 {
                    return None;
                }
                // SAFETY: dequeue_burst wrote one entry.
                let e = unsafe { b[0].assume_init() };
                if self.claim(e, FREE) {
                    return Some(e);
                }
            }
        }
        let slot = self.my_slot();
        let cache = self.cache_of(self.slot);
        loop {
            let mut len = slot.len.load(Ordering::Relaxed).min(size);
            if len == 0 {
                let want = (size / 2).max(1) as usize;
                let mut buf = [MaybeUninit::<u32>::uninit(); 256];
                let got = self.ring.dequeue_burst(&mut buf[..want]);
                if got == 0 {
                    return None;
                }
                for (c, b) in cache.iter().zip(&buf[..got]) {
                    // SAFETY: the first `got` entries were written by dequeue_burst.
                    c.store(unsafe { b.assume_init() }, Ordering::Relaxed);
                }
                len = got as u32;
                slot.len.store(len, Ordering::Release);
            }
            let e = cache[len as usize - 1].load(Ordering::Relaxed);
            // Held first, popped second: killed in between, the object is in the dead cache
            // *and* marked held by the dead attachment, which reclaim_dead resolves (once).
            let ok = self.claim(e, FREE);
            slot.len.store(len - 1, Ordering::Release);
            if ok {
                return Some(e);
            }
        }
    }

    /// Returns one held object: into the cache (flushing its coldest half to the ring first
    /// when full), or to the ring when the cache size is 0.
    fn give_one(&self, e: u32) {
        let size = self.params.cache_size;
        if size == 0 {
            // Free first, enqueue second: killed in between, the object is lost (found by
            // audit), never in two places.
            self.owners()[e as usize].store(FREE, Ordering::Release);
            self.enqueue_all(&self.ring, &[e]);
            return;
        }
        let slot = self.my_slot();
        let cache = self.cache_of(self.slot);
        let mut len = slot.len.load(Ordering::Relaxed).min(size);
        if len == size {
            // DPDK 26.07: flush the coldest half (the bottom of the LIFO). Out of the cache
            // first, into the ring second (a kill in between loses them, never duplicates).
            let half = (size / 2).max(1);
            let mut buf = [0u32; 256];
            for (b, c) in buf.iter_mut().zip(&cache[..half as usize]) {
                *b = c.load(Ordering::Relaxed);
            }
            for i in half..len {
                cache[(i - half) as usize]
                    .store(cache[i as usize].load(Ordering::Relaxed), Ordering::Relaxed);
            }
            len -= half;
            slot.len.store(len, Ordering::Release);
            self.enqueue_all(&self.ring, &buf[..half as usize]);
        }
        cache[len as usize].store(e, Ordering::Relaxed);
        slot.len.store(len + 1, Ordering::Release);
        // In the cache first, free second: killed in between, the object is in the dead cache
        // and marked held by the dead attachment, which reclaim_dead resolves.
        self.owners()[e as usize].store(FREE, Ordering::Release);
    }

    /// Returns every object in this attachment's cache to the common ring.
    pub fn flush(&self) {
        if self.params.cache_size == 0 || self.slot == u32::MAX {
            return;
        }
        let slot = self.my_slot();
        let cache = self.cache_of(self.slot);
        let len = slot.len.load(Ordering::Relaxed).min(self.params.cache_size) as usize;
        let v: Vec<u32> = cache[..len]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        slot.len.store(0, Ordering::Release);
        self.enqueue_all(&self.ring, &v);
    }
}

impl<T: Pod> SharedPool<T> {
    /// Takes one object (from this attachment's cache, refilled from the common ring).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when the cache and the ring are empty (objects may still sit in
    /// other processes' caches or in channels: see [`SharedPool::available`]).
    #[inline]
    pub fn get(&self) -> Result<SharedHandle<T>, PoolError> {
        match self.take_one() {
            Some(e) => Ok(SharedHandle::new(e, self.serial)),
            None => Err(PoolError::Exhausted {
                requested: 1,
                available: self.reachable(),
            }),
        }
    }

    /// Appends exactly `n` handles to `out`, or none (bulk).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when fewer than `n` could be taken (at once, without
    /// allocating, when `n` exceeds the capacity); those taken go back. `available` counts
    /// what this attachment could reach afterwards: its cache plus the common ring.
    pub fn get_bulk(&self, out: &mut Vec<SharedHandle<T>>, n: usize) -> Result<(), PoolError> {
        if n > self.params.capacity as usize {
            return Err(PoolError::Exhausted {
                requested: n,
                available: self.reachable(),
            });
        }
        let start = out.len();
        out.reserve(n);
        for _ in 0..n {
            match self.take_one() {
                Some(e) => out.push(SharedHandle::new(e, self.serial)),
                None => {
                    for h in out.drain(start..) {
                        self.give_one(h.into_raw());
                    }
                    return Err(PoolError::Exhausted {
                        requested: n,
                        available: self.reachable(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Objects this attachment could take now: its cache plus the common ring (a snapshot,
    /// at most the capacity).
    fn reachable(&self) -> usize {
        (self.cache_count() + self.ring.count()).min(self.params.capacity as usize)
    }

    /// Appends up to `n` handles to `out` (burst); returns how many.
    pub fn get_burst(&self, out: &mut Vec<SharedHandle<T>>, n: usize) -> usize {
        let mut k = 0;
        while k < n {
            match self.take_one() {
                Some(e) => out.push(SharedHandle::new(e, self.serial)),
                None => break,
            }
            k += 1;
        }
        k
    }

    /// Returns an object to the pool.
    ///
    /// # Panics
    /// When the handle was minted by another attachment (of this or another pool, or one that
    /// is gone), or the owner table says this attachment does not hold the object (a handle
    /// rebuilt by `from_raw` in the wrong place).
    #[inline]
    pub fn put(&self, h: SharedHandle<T>) {
        let e = self.check_handle(&h, "put");
        self.give_one(e);
    }

    /// Returns every handle in `v` (drains it).
    ///
    /// # Panics
    /// As [`SharedPool::put`].
    pub fn put_bulk(&self, v: &mut Vec<SharedHandle<T>>) {
        for h in v.drain(..) {
            self.put(h);
        }
    }

    /// The object of a handle this attachment holds.
    ///
    /// # Panics
    /// When the handle was minted by another attachment, or the owner table does not name
    /// this attachment as the holder.
    #[inline]
    pub fn get_mut<'a>(&'a self, h: &'a mut SharedHandle<T>) -> &'a mut T {
        let i = self.check_handle(h, "get_mut");
        // i < capacity; the object lies at objects + i * stride inside the mapping, aligned
        // (stride and the section offset are multiples of align_of::<T>() <= the page
        // alignment of the mapping).
        // SAFETY: (above) the handle was minted by this attachment, the owner table names us,
        // and the handle is borrowed mutably; handles are not Clone and this attachment mints
        // one handle per claim, so no other reference to the object exists in this process; T: Pod, so any bytes another
        // process wrote are a valid T.
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
        self.at::<T>(self.sections.objects + i as u64 * self.params.stride)
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
            self.my_slot().len.load(Ordering::Relaxed) as usize
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
                .map(|p| p.len.load(Ordering::Relaxed).min(self.params.cache_size) as usize)
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

    /// Attaches so far (the creator's included).
    pub fn attach_count(&self) -> u64 {
        self.stats().attaches.load(Ordering::Relaxed)
    }

    /// Removes the region's name now (as the creator's drop does): attached processes keep
    /// their mappings and go on working; new attaches fail with `NotFound`. Removes nothing if
    /// the name now belongs to another region (a newer pool of the same name).
    ///
    /// # Errors
    /// [`PoolError::SharedFile`] with `NotFound` when the name is already gone or taken by
    /// another region, or the error of `unlink`.
    pub fn unlink(&self) -> Result<(), PoolError> {
        if !file::same_inode(&self.path, &self.file) {
            return Err(file::file_err(
                &self.path,
                "unlink",
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the name no longer refers to this region",
                ),
            ));
        }
        std::fs::remove_file(&self.path).map_err(|e| file::file_err(&self.path, "unlink", e))
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
        if self.slot != u32::MAX {
            self.flush();
            // Objects still held by this attachment become orphans (reclaim_in_use_of_dead).
            self.my_slot().owner.store(0, Ordering::Release);
        }
        if self.primary && self.unlink_on_drop && file::same_inode(&self.path, &self.file) {
            let _ = std::fs::remove_file(&self.path);
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
            .field("slot", &self.slot)
            .field("primary", &self.primary)
            .finish()
    }
}
