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
use super::header::{policy_code, Header, Params, ProcSlot, RegionStats, Sections, MAGIC, VERSION};
use super::owner::{holder_id, ProcessId, FREE};
use super::xring::{
    kill_hook, kill_point, lock_id, XRing, K_DEQ_CACHE, K_DEQ_HELD, K_ENQ_CACHE, K_ENQ_HELD,
    NO_ENTRY, REC_BATCH, REC_IDLE,
};
use super::{SharedHandle, SharedOptions};
use crate::cache::{self, CacheOps, CachePlan, FlushPolicy};
use crate::error::PoolError;
use crate::repr::Geometry;
use crate::ring::Behavior;
use crate::stats::Counter;

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
    pub(crate) map: memmap2::MmapMut,
    pub(crate) base: NonNull<u8>,
    pub(crate) header: Header,
    pub(crate) params: Params,
    /// The cache algorithm's decisions for this region (`params.plan()`).
    pub(crate) plan: CachePlan,
    pub(crate) sections: Sections,
    /// Where object `i` lives in this process's mapping (`objects + i x stride`): the core
    /// pool's geometry, so the address arithmetic is the core's (`Geometry::ptr_of_index`).
    geometry: Geometry,
    pub(crate) ring: XRing,
    pub(crate) chans: Vec<XRing>,
    /// Our process slot (`u32::MAX` until claimed).
    pub(crate) slot: u32,
    /// Our holder id in the owner table.
    pub(crate) me: u32,
    pub(crate) ident: ProcessId,
    /// Process-local serial of this attachment, stamped into every handle it mints (never 0,
    /// never reused in this process): see [`SharedPool::check_held`].
    pub(crate) serial: u32,
    /// Whether this attachment holds its slot's `F_OFD_SETLK` liveness lock.
    ofd_locked: bool,
    /// What this attachment holds, by its own account (issue 25): one bit per object, set
    /// when a get or receive claims the object, cleared when a put or send releases it. A
    /// claim of an object whose bit is set is a forged entry (a peer set the owner word back
    /// to FREE and listed the index again): dropped and counted, never a second handle. The
    /// owner word is the shared, cross-process view; this is the authority inside the process.
    held: Box<[Cell<u64>]>,
    /// Sealed-region mode: this attachment's member link (`.<name>.member.<pid>.<fd>.<ino>`),
    /// removed on drop.
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
    /// [`PoolError::InvalidConfig`] for a bad name (empty, NUL, a relative path, longer than
    /// [`super::MAX_NAME_LEN`] bytes, or an absolute path longer than [`super::MAX_PATH_LEN`]:
    /// the same limits in every mode, checked first), capacity (0 or above 2^31), cache size
    /// (above 512 or the capacity), process or channel count, or an alignment of `T` above
    /// 4096; [`PoolError::SizeOverflow`]; [`PoolError::SharedFile`] when the file cannot be
    /// created (`AlreadyExists` if the name is taken by a region that a live process still
    /// uses, or by a regular file: remove a stale one with [`SharedPool::remove`]), sized,
    /// reserved (`fallocate`: no huge pages / tmpfs full), sealed or mapped.
    ///
    /// # Backing
    /// By default (mode 0600: nothing for group and others; `unlink_on_drop`), the region is a
    /// memfd (`MFD_HUGETLB` on the hugetlbfs candidate) sealed against shrinking and growing,
    /// and `name` is a symbolic link to a *member link* `.<name>.member.<pid>.<fd>.<inode>`,
    /// itself a link to `/proc/<pid>/fd/<fd>`: attaching opens it like a file, but nobody can
    /// truncate the region (issue 15; [`SharedPool::is_sealed`]). Every attachment publishes
    /// a member link of its own, so the name works as long as any attached process lives,
    /// the creator or not (issue 25: an attacher whose name leads to a dead member goes
    /// through another member's link and points the name at its own). Once every process of
    /// the region is gone, the name is stale and `create` replaces it
    /// ([`SharedPool::replaced_stale`] says so). Dropping the creator's pool removes the name
    /// (`unlink_on_drop`): attached processes go on, new ones cannot attach.
    /// With a wider mode (other users must attach, and `/proc/<pid>/fd` is closed to them) or
    /// `unlink_on_drop(false)` (the region must outlive every process), the region is a
    /// regular file at `name`, which a peer with write access could truncate.
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
            policy: policy_code(opts.policy),
            _reserved: 0,
        };
        let sections = params.layout()?;
        let ident = ProcessId::current()
            .map_err(|e| file::file_err(Path::new("/proc/self/stat"), "read", e))?;
        let cands = file::candidates(name);
        // Names in the link directory change under its lock: a stale name is judged and
        // replaced atomically with respect to other creators and to attachers re-pointing it.
        let link_dir = match name.starts_with('/') {
            true => Path::new(name).parent().unwrap_or(Path::new("/")),
            false => Path::new(file::SHM_DIR),
        };
        let lock = file::lock_dir(link_dir)?;
        let mut replaced_stale = false;
        for (p, _) in &cands {
            if std::fs::symlink_metadata(p).is_err() {
                continue;
            }
            let exists = |why: &str| {
                file::file_err(
                    p,
                    "create",
                    std::io::Error::new(std::io::ErrorKind::AlreadyExists, why.to_string()),
                )
            };
            if let Some(m) = file::read_link_member(p) {
                match file::resolve_link(p, m) {
                    Ok(file::Resolved::Stale { member }) => {
                        // Every process of that region is gone (so is the region): replace.
                        file::remove_member_links(p, Some(member.ino));
                        std::fs::remove_file(p).map_err(|e| file::file_err(p, "unlink", e))?;
                        replaced_stale = true;
                        continue;
                    }
                    Ok(file::Resolved::Live { via: Some(_), .. }) => {
                        return Err(exists(
                            "a pool of this name exists: its creator is gone, but processes \
                             are still attached to it (attach to it instead)",
                        ));
                    }
                    _ => {}
                }
            }
            return Err(exists(
                "a pool of this name exists (remove a stale one with SharedPool::remove)",
            ));
        }
        // Not held while the region is built (a large one takes a while): a name that
        // another creator publishes meanwhile makes our publication fail with AlreadyExists.
        drop(lock);
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
        for (i, (path, backing)) in order.iter().enumerate() {
            match Self::create_at(
                path,
                *backing,
                &params,
                &sections,
                fingerprint,
                ident,
                &opts,
            ) {
                Ok(mut pool) => {
                    pool.replaced_stale = replaced_stale;
                    return Ok(pool);
                }
                // Auto: a hugetlbfs that cannot hold the region falls back to /dev/shm.
                Err(e) if i + 1 < order.len() && !is_exists(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| PoolError::config("no place for the shared region")))
    }

    /// Creates the region for candidate `path`: a sealed memfd published as a link at `path`
    /// when only this user may attach (mode without group/other bits, the default 0600) and
    /// the name goes with the creator (`unlink_on_drop`, the default); else a regular file
    /// built under a temporary name and linked at `path` (which a peer with write access
    /// could truncate: see DESIGN.md, threat model).
    fn create_at(
        path: &Path,
        backing: SharedBacking,
        params: &Params,
        sections: &Sections,
        fingerprint: u64,
        ident: ProcessId,
        opts: &SharedOptions,
    ) -> Result<Self, PoolError> {
        if opts.mode & 0o077 == 0 && opts.unlink_on_drop {
            // hugetlbfs cannot hold a symbolic link (EINVAL): a huge-page memfd is named from
            // /dev/shm, where attach looks next.
            let link = match (backing, path.file_name()) {
                (SharedBacking::Hugetlbfs, Some(f)) => Path::new(file::SHM_DIR).join(f),
                _ => path.to_path_buf(),
            };
            let path = link.as_path();
            let r = file::SealedRegion::create(
                path,
                sections.end,
                opts.mode,
                backing == SharedBacking::Hugetlbfs,
            )?;
            let map = map_file(&r.file, r.len, path)?;
            let mut pool = Self::from_map(
                map,
                Self::new_header(params, sections, fingerprint, ident),
                path.to_path_buf(),
                r.file,
                r.backing,
                r.page,
                ident,
            )?;
            pool.init_region();
            {
                let _lock = file::lock_dir(path.parent().unwrap_or(Path::new("/")))?;
                let (member_link, m) = file::publish_member(&pool.file, path)?;
                pool.member_link = Some(member_link);
                file::publish_link(&m, path)?;
            }
            pool.primary = true;
            pool.unlink_on_drop = opts.unlink_on_drop;
            pool.claim_slot()?;
            return Ok(pool);
        }
        let tmp = TempFile::create(path, sections.end, opts.mode)?;
        let map = map_file(&tmp.file, tmp.len, &tmp.tmp)?;
        let header = Self::new_header(params, sections, fingerprint, ident);
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
        pool.init_region();
        pool.file = tmp.publish(path)?;
        pool.primary = true;
        pool.unlink_on_drop = opts.unlink_on_drop;
        pool.claim_slot()?;
        Ok(pool)
    }

    fn new_header(
        params: &Params,
        sections: &Sections,
        fingerprint: u64,
        ident: ProcessId,
    ) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            header_size: size_of::<Header>() as u32,
            fingerprint,
            params: *params,
            sections: *sections,
            creator_pid: ident.pid,
            _pad: 0,
            creator_start: ident.start_time,
        }
    }

    /// Writes the header and fills the common ring with every object, before publication.
    fn init_region(&mut self) {
        // SAFETY: the region is ours alone until published: no other process can map it yet.
        // The header is written at offset 0 of the mapping (page-aligned, large enough).
        unsafe { self.base.as_ptr().cast::<Header>().write(self.header) };
        // The file is zero-filled: ring states unlocked and empty, owner table all FREE,
        // process slots free with idle records, stats 0. The common ring gets every object.
        for i in 0..self.params.capacity {
            self.ring.slot(i).store(i, Ordering::Relaxed);
        }
        self.ring
            .st()
            .tail
            .store(self.params.capacity, Ordering::Release);
    }

    /// Attaches to the existing region `name` (a secondary), at whatever address the kernel
    /// picks. `T` and `fingerprint` must match the creator's.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad name (as [`SharedPool::create`]);
    /// [`PoolError::SharedFile`] when no region of that name exists, or only a stale one
    /// whose processes are all gone (`source.kind()` is `NotFound`), when it cannot be opened
    /// (`PermissionDenied`, `IsADirectory`, not a regular file) or mapped;
    /// [`PoolError::LayoutMismatch`] naming the first header field that
    /// differs (`magic`, `version`, `obj_size`, `obj_align`, `stride`, a section offset,
    /// `file_len`); [`PoolError::FingerprintMismatch`]; [`PoolError::NoProcessSlot`] when every
    /// process slot is held by a live process.
    pub fn attach(name: &str, fingerprint: u64) -> Result<Self, PoolError> {
        file::check_name(name)?;
        let ident = ProcessId::current()
            .map_err(|e| file::file_err(Path::new("/proc/self/stat"), "read", e))?;
        let mut tried = Vec::new();
        for (path, _) in file::candidates(name) {
            // A sealed region's name is a link to a member link (`None` for a regular file).
            let sealed = file::read_link_member(&path);
            let (f, relink) = match sealed {
                Some(m) => match file::resolve_link(&path, m) {
                    Ok(file::Resolved::Live { file, via }) => (file, via),
                    Ok(file::Resolved::Stale { .. }) => {
                        tried.push(format!(
                            "{} (stale: every process of that region is gone)",
                            path.display()
                        ));
                        continue;
                    }
                    Err(e) => return Err(file::file_err(&path, "open", e)),
                },
                None => match file::open_existing(&path) {
                    Ok(f) => (f, None),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        tried.push(path.display().to_string());
                        continue;
                    }
                    Err(e) => return Err(file::file_err(&path, "open", e)),
                },
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
            let mut pool = Self::from_map(map, header, path.clone(), f, backing, page, ident)?;
            pool.claim_slot()?;
            if sealed.is_some() {
                // Any member's link lets later processes in (issue 25); a name whose member
                // is gone (we came in through another's) is pointed at ours. Best effort:
                // the attachment works without (only later joins depend on it).
                if let Ok((member_link, m)) = file::publish_member(&pool.file, &path) {
                    pool.member_link = Some(member_link);
                    if let Some(old) = relink {
                        let _ = file::repoint_link(&path, &old, &m);
                    }
                }
            }
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
        // parameters and lie inside the mapping, which lives as long as the pool (the ring
        // views are fields dropped with it).
        let mask = sections.ring_slot_count as u32 - 1;
        let view = |state: u64, slots: u64, id: u32| XRing {
            state: nn(state).as_ptr().cast(),
            slots: nn(slots).as_ptr().cast(),
            mask,
            capacity: params.capacity,
            id,
        };
        let ring = view(sections.ring_state, sections.ring_slots, 0);
        let chans = (0..params.channels)
            .map(|c| {
                view(
                    sections.chan_states + c as u64 * sections.state_stride,
                    sections.chan_slots + c as u64 * sections.chan_stride,
                    1 + c,
                )
            })
            .collect();
        let geometry = Geometry::new(
            nn(sections.objects),
            params.stride as usize,
            params.capacity,
        );
        Ok(SharedPool {
            map,
            base,
            geometry,
            header,
            params,
            plan: params.plan(),
            sections,
            ring,
            chans,
            slot: u32::MAX,
            me: 0,
            ident,
            serial: next_serial()?,
            ofd_locked: false,
            held: (0..params.capacity.div_ceil(64))
                .map(|_| Cell::new(0))
                .collect(),
            member_link: None,
            replaced_stale: false,
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

    /// Takes a free process slot, reclaiming dead processes' slots once if none is free.
    ///
    /// Liveness lock first, owner word second (issue 15): the slot's `F_OFD_SETLK` byte lock
    /// on this attachment's own open file description is held for the attachment's life, so
    /// "owner word set and nobody holds the lock" proves the holder dead, in any pid namespace
    /// and whatever became of its pid.
    fn claim_slot(&mut self) -> Result<(), PoolError> {
        let packed = self.ident.pack();
        for attempt in 0..2 {
            for (s, ps) in self.procs().iter().enumerate() {
                if ps.owner.load(Ordering::Relaxed) != 0 {
                    continue;
                }
                let locked = match file::lock_slot(&self.file, s as u32) {
                    Ok(true) => true,
                    Ok(false) => continue, // a live process holds it
                    Err(_) => false,       // no OFD locks here: pid liveness only
                };
                if ps
                    .owner
                    .compare_exchange(0, packed, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    let gen = ps.gen.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
                    ps.len.store(0, Ordering::Release);
                    ps.rec_state.store(REC_IDLE, Ordering::Release);
                    self.ofd_locked = locked;
                    self.slot = s as u32;
                    self.me = holder_id(s as u32, gen);
                    self.stats().attaches.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                if locked {
                    file::unlock_slot(&self.file, s as u32);
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

    /// Whether the operator of slot `s`, whose owner word is `w`, lives: another open file
    /// description holds the slot's liveness lock (any pid namespace); where the filesystem
    /// has no OFD locks, the recorded pid and start time decide.
    pub(crate) fn slot_alive(&self, s: u32, w: u64) -> bool {
        if s == self.slot {
            // Our own slot: `F_OFD_GETLK` on our own open file description, which holds the
            // lock, would report it free (issue 25).
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

    /// Moves held objects `v` into `ring`, setting their owner words to `mark` (FREE for the
    /// common ring, IN_CHANNEL for a channel), in recoverable chunks of `REC_BATCH`. Objects
    /// that do not fit (only when the region is corrupt: every ring holds every object) stay
    /// marked held by us and are counted in `corrupt_entries`.
    pub(crate) fn enq_held(&self, ring: &XRing, v: &[u32], mark: u32) {
        let (rs, id) = self.party();
        for chunk in v.chunks(REC_BATCH as usize) {
            self.with_ring(ring, rs, id, K_ENQ_HELD, |p, t| {
                let n = (chunk.len() as u32).min(t.room());
                p.commit(
                    t,
                    K_ENQ_HELD,
                    t.tail,
                    n,
                    0,
                    0,
                    mark,
                    0,
                    &chunk[..n as usize],
                );
                if (n as usize) < chunk.len() {
                    p.stats()
                        .corrupt_entries
                        .fetch_add((chunk.len() - n as usize) as u64, Ordering::Relaxed);
                }
            });
        }
    }

    /// Takes up to `max` (at most `REC_BATCH`) entries from `ring` whose owner word is `from`
    /// and claims them for this attachment; passes each claimed index to `out` (entries out
    /// of range, held elsewhere or listed twice are dropped and counted). Returns how many
    /// entries left the ring (0: it was empty).
    pub(crate) fn deq_held(
        &self,
        ring: &XRing,
        max: u32,
        from: u32,
        mut out: impl FnMut(u32),
    ) -> u32 {
        let (rs, id) = self.party();
        let n = self.with_ring(ring, rs, id, K_DEQ_HELD, |p, t| {
            let n = max.min(REC_BATCH).min(t.count());
            if n == 0 {
                return 0;
            }
            p.record_head(rs, t, n);
            p.commit(t, K_DEQ_HELD, t.head, n, 0, 0, from, p.me, &[]);
            n
        });
        let rec = &self.rec_entries(rs)[..n as usize];
        for (k, r) in rec.iter().enumerate() {
            let e = r.load(Ordering::Relaxed);
            // Struck entries (NO_ENTRY: not claimed by this operation) fail the range check.
            let ok = e < self.params.capacity
                && self.owners()[e as usize].load(Ordering::Acquire) == self.me
                && !rec[..k].iter().any(|x| x.load(Ordering::Relaxed) == e)
                // Not already ours by our own account (a forged FREE / IN_CHANNEL word).
                && self.mark_held(e);
            if ok {
                out(e);
            } else {
                self.stats().corrupt_entries.fetch_add(1, Ordering::Relaxed);
            }
        }
        n
    }

    /// Moves the first `n` entries of cache `cs` (the coldest) into the common ring, as the
    /// operator `party`. Returns the cache length afterwards.
    pub(crate) fn flush_cache(&self, cs: u32, n: u32, party: (u32, u64)) -> u32 {
        let size = self.cache_cap();
        let len_word = &self.procs()[cs as usize].len;
        self.with_ring(&self.ring, party.0, party.1, K_ENQ_CACHE, |p, t| {
            let len = len_word.load(Ordering::Relaxed).min(size);
            let n = n.min(len).min(t.room());
            if n == 0 {
                return;
            }
            let rec = p.rec_entries(party.0);
            for (r, c) in rec.iter().zip(&p.cache_of(cs)[..len as usize]) {
                r.store(c.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            p.commit(t, K_ENQ_CACHE, t.tail, n, len, cs, 0, 0, &[]);
        });
        len_word.load(Ordering::Relaxed).min(size)
    }

    /// Panics unless handle `h` was minted by this attachment and this attachment holds its
    /// object.
    ///
    /// Two checks, both needed (issue 10): the serial ties the handle to the attachment that
    /// minted it (a handle of another region, of another attachment, or of an attachment that
    /// is gone never matches: serials are unique in the process), and the owner word proves
    /// the object is still ours (not reclaimed, not sent). Between them, the only way to two
    /// `&mut T` is an `unsafe` contract broken (`from_raw`, `repair_lost`). `reset_channel` is
    /// a safe fn, not one of them: it takes back only objects whose owner word says they are
    /// in the channel, which no live handle owns (a sent handle was consumed).
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

    /// Panics unless this attachment holds object `i` by its own account (the process-local
    /// record: only a broken `from_raw` contract gets here). An owner word that disagrees is
    /// the work of a peer (a forged word, a punched hole): counted in `corrupt_entries`,
    /// never a panic (issue 25).
    ///
    /// The fast path reads only the owner word: when it names us, the handle is ours (safe
    /// code holds a handle of this attachment's serial only while the record holds its
    /// object: handles are minted from claims that set the record's bit, and the bit is
    /// cleared only by `put`/`send`, which consume the handle). The record is consulted only
    /// when the word disagrees.
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

    /// Records that this attachment now holds object `e` (`e < capacity`); false (and no
    /// change) when it held it already.
    #[inline(always)]
    pub(crate) fn mark_held(&self, e: u32) -> bool {
        let Some(w) = self.held.get((e >> 6) as usize) else {
            return false;
        };
        let (v, b) = (w.get(), 1u64 << (e & 63));
        w.set(v | b);
        v & b == 0
    }

    /// Records that this attachment released object `e`.
    #[inline(always)]
    pub(crate) fn unmark_held(&self, e: u32) {
        if let Some(w) = self.held.get((e >> 6) as usize) {
            w.set(w.get() & !(1u64 << (e & 63)));
        }
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
        RegionCache { pool: self }
    }

    /// Entries a cache array holds (`2 x cache_size`): what every cache length read from the
    /// region is clamped to.
    #[inline(always)]
    pub(crate) fn cache_cap(&self) -> u32 {
        2 * self.params.cache_size
    }

    /// The one get of the shared pool: the cache algorithm ([`cache::get`]) over this
    /// attachment's in-region cache. Fills `dst[..k]` with claimed objects (owner word ours),
    /// entries found corrupt dropped; `Bulk`: `Ok(n)` or `Err(())` with nothing taken.
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
unsafe fn assume_init(s: &[MaybeUninit<u32>]) -> &[u32] {
    // SAFETY: MaybeUninit<u32> has u32's layout; the caller vouches every entry is written.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

/// Entries a get or put handles on the stack; larger runs use a heap buffer.
const STACK_RUN: usize = 64;

/// Runs `f` on a scratch buffer of `n` entries (on the stack up to [`STACK_RUN`]).
fn with_scratch<R>(n: usize, f: impl FnOnce(&mut [MaybeUninit<u32>]) -> R) -> R {
    if n <= STACK_RUN {
        let mut a = [MaybeUninit::<u32>::uninit(); STACK_RUN];
        f(&mut a[..n])
    } else {
        f(&mut vec![MaybeUninit::<u32>::uninit(); n])
    }
}

/// The shared pool's mechanics of the cache algorithm (see [`CacheOps`]): the attachment's
/// cache array and length word in its process slot, and the recoverable common ring. Every
/// step stays recoverable after a kill at any instruction:
///
/// * **pop** (a run of `k` from the top): claim all `k` owner words (FREE -> us), then publish
///   the new length once. Killed in between, the objects are in the dead cache *and* marked
///   held by the dead attachment, which `reclaim_dead` resolves (it frees them; they stay in
///   the cache it flushes);
/// * **push** (a run of `k`): write the entries above the length, publish the new length,
///   then free the `k` owner words; killed in between, the same resolution;
/// * **refill / flush**: one ring operation each (`K_DEQ_CACHE` / `K_ENQ_CACHE`), redo
///   record first, so a completer finishes it;
/// * **ring get / put** (bypass): held-object ring operations (`K_DEQ_HELD` / `K_ENQ_HELD`)
///   in records of [`REC_BATCH`]; a bulk get that comes up short gives back what it took.
///
/// Entries found corrupt (out of range, held elsewhere) are dropped, counted in
/// `corrupt_entries`, and written as [`NO_ENTRY`] in the caller's buffer; the adapter
/// (`SharedPool::get_entries`) strikes them.
pub(crate) struct RegionCache<'p, T> {
    pool: &'p SharedPool<T>,
}

impl<T> RegionCache<'_, T> {
    fn len_word(&self) -> &AtomicU32 {
        &self.pool.my_slot().len
    }
}

impl<T> CacheOps<u32> for RegionCache<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.len_word()
            .load(Ordering::Relaxed)
            .min(self.pool.cache_cap()) as usize
    }

    #[inline]
    fn fill_limit(&self) -> usize {
        self.pool.plan.fill_limit as usize
    }

    fn pop_top(&mut self, dst: &mut [MaybeUninit<u32>]) {
        let k = dst.len();
        if k == 0 {
            return;
        }
        let p = self.pool;
        let len = self.len();
        let cache = &p.cache_of(p.slot)[len - k..len];
        // Held first, popped second (see the type's docs).
        for (i, (d, c)) in dst.iter_mut().zip(cache).enumerate() {
            let e = c.load(Ordering::Relaxed);
            d.write(if p.claim(e, FREE) { e } else { NO_ENTRY });
            if i == 0 && k > 1 {
                kill_hook(kill_point::CACHE_POP_RUN);
            }
        }
        kill_hook(kill_point::CACHE_POP);
        self.len_word().store((len - k) as u32, Ordering::Release);
    }

    fn push(&mut self, src: &[u32]) {
        let p = self.pool;
        let (len, k) = (self.len(), src.len());
        if len + k > p.cache_cap() as usize {
            // No room: only when a flush found the ring full (a corrupt region). The ring
            // put keeps what does not fit marked held by us (lost to circulation, counted).
            self.ring_put(src);
            return;
        }
        for (c, &e) in p.cache_of(p.slot)[len..].iter().zip(src) {
            c.store(e, Ordering::Relaxed);
        }
        self.len_word().store((len + k) as u32, Ordering::Release);
        kill_hook(kill_point::CACHE_PUSH);
        // In the cache first, free second (see the type's docs).
        for (i, &e) in src.iter().enumerate() {
            p.unmark_held(e);
            if let Some(w) = p.owners().get(e as usize) {
                w.store(FREE, Ordering::Release);
            }
            if i == 0 && k > 1 {
                kill_hook(kill_point::CACHE_PUSH_RUN);
            }
        }
    }

    fn refill(&mut self, want: usize, how: Behavior) -> usize {
        let p = self.pool;
        let (rs, id) = p.party();
        let len = self.len() as u32;
        let want = want as u32;
        p.with_ring(&p.ring, rs, id, K_DEQ_CACHE, |p, t| {
            let avail = t.count();
            let n = match how {
                Behavior::Bulk if avail < want => 0,
                _ => want.min(avail),
            };
            if n == 0 {
                return 0;
            }
            p.record_head(rs, t, n);
            p.commit(t, K_DEQ_CACHE, t.head, n, len, rs, 0, 0, &[]);
            n as usize
        })
    }

    /// Leaves the refilled entries in the cache: only a Dpdk2607 burst refill that came up
    /// short gets here (the other policies refill all or nothing, and a full refill serves
    /// the get), and then `len < n <= size / 2`, well within the fill limit. Moving them back
    /// would be a second recoverable ring operation for nothing.
    fn unrefill(&mut self, _k: usize) {}

    fn flush_bottom(&mut self, k: usize) {
        let p = self.pool;
        p.flush_cache(p.slot, k as u32, p.party());
    }

    fn ring_get(&mut self, dst: &mut [MaybeUninit<u32>], how: Behavior) -> usize {
        let p = self.pool;
        let n = dst.len();
        if how == Behavior::Bulk && p.ring.count() < n {
            return 0;
        }
        let mut k = 0;
        while k < n {
            let want = (n - k).min(REC_BATCH as usize);
            let mut j = k;
            let left = p.deq_held(&p.ring, want as u32, FREE, |e| {
                dst[j].write(e);
                j += 1;
            }) as usize;
            for d in &mut dst[j..k + left] {
                d.write(NO_ENTRY);
            }
            k += left;
            if left < want {
                break;
            }
        }
        if how == Behavior::Bulk && k < n {
            // Short (others took some meanwhile): give back what we claimed.
            // SAFETY: dst[..k] were written above.
            let taken: Vec<u32> = unsafe { assume_init(&dst[..k]) }
                .iter()
                .copied()
                .filter(|&e| e != NO_ENTRY)
                .collect();
            for &e in &taken {
                p.unmark_held(e);
            }
            p.enq_held(&p.ring, &taken, FREE);
            return 0;
        }
        k
    }

    fn ring_put(&mut self, src: &[u32]) {
        let p = self.pool;
        for &e in src {
            p.unmark_held(e);
        }
        p.enq_held(&p.ring, src, FREE);
    }

    fn ring_count(&self) -> usize {
        self.pool.ring.count()
    }

    /// Every step stores the length itself.
    #[inline(always)]
    fn publish(&self) {}

    /// The shared pool keeps no per-operation counters.
    #[inline(always)]
    fn count(&self, _which: Counter, _n: usize) {}
}

impl<T: Pod> SharedPool<T> {
    /// Takes one object (from this attachment's cache, refilled from the common ring).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when the cache and the ring are empty (objects may still sit in
    /// other processes' caches or in channels: see [`SharedPool::available`]).
    #[inline]
    pub fn get(&self) -> Result<SharedHandle<T>, PoolError> {
        let mut one = [MaybeUninit::uninit()];
        match self.get_entries(&mut one, Behavior::Bulk) {
            // SAFETY: a successful bulk get of one wrote it.
            Ok(_) => Ok(SharedHandle::new(
                unsafe { one[0].assume_init() },
                self.serial,
            )),
            Err(()) => Err(PoolError::Exhausted {
                requested: 1,
                available: self.reachable(),
            }),
        }
    }

    /// Appends exactly `n` handles to `out`, or none (bulk): one run through the cache
    /// algorithm (served from the cache, refilled, or bypassing it as the policy says).
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
        with_scratch(n, |buf| match self.get_entries(buf, Behavior::Bulk) {
            Ok(_) => {
                // SAFETY: a successful bulk get wrote all n.
                let got = unsafe { assume_init(buf) };
                out.extend(got.iter().map(|&e| SharedHandle::new(e, self.serial)));
                Ok(())
            }
            Err(()) => Err(PoolError::Exhausted {
                requested: n,
                available: self.reachable(),
            }),
        })
    }

    /// Objects this attachment could take now: its cache plus the common ring (a snapshot,
    /// at most the capacity).
    fn reachable(&self) -> usize {
        (self.cache_count() + self.ring.count()).min(self.params.capacity as usize)
    }

    /// Appends up to `n` handles to `out` (burst); returns how many.
    pub fn get_burst(&self, out: &mut Vec<SharedHandle<T>>, n: usize) -> usize {
        let n = n.min(self.params.capacity as usize);
        with_scratch(n, |buf| {
            let k = self.get_entries(buf, Behavior::Burst).unwrap_or(0);
            // SAFETY: a burst get of k wrote buf[..k].
            let got = unsafe { assume_init(&buf[..k]) };
            out.extend(got.iter().map(|&e| SharedHandle::new(e, self.serial)));
            k
        })
    }

    /// Returns an object to the pool.
    ///
    /// # Panics
    /// When the handle was minted by another attachment (of this or another pool, or one that
    /// is gone), or this attachment does not hold the object by its own record (a handle
    /// rebuilt by `from_raw` in the wrong place). An owner word in the region that disagrees
    /// (a peer's corruption) is counted in [`SharedPool::corrupt_entries`], not a panic.
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
    /// When the handle was minted by another attachment, or this attachment does not hold
    /// the object by its own record (as [`SharedPool::put`]; a disagreeing owner word is
    /// counted, not a panic).
    #[inline]
    pub fn get_mut<'a>(&'a self, h: &'a mut SharedHandle<T>) -> &'a mut T {
        let i = self.check_handle(h, "get_mut");
        // i < capacity; the object lies at objects + i * stride inside the mapping, aligned
        // (stride and the section offset are multiples of align_of::<T>() <= the page
        // alignment of the mapping).
        // SAFETY: (above) the handle was minted by this attachment, whose process-local record
        // says it holds the object, and the handle is borrowed mutably; handles are not Clone
        // and a claim mints a handle only if the record did not hold the object already
        // (whatever the shared owner word says), so no other reference to the object exists
        // in this process; T: Pod, so any bytes another process wrote are a valid T.
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

    /// The caches' flush policy (the creator's [`SharedOptions::policy`], recorded in the
    /// region header).
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

    /// True when the region cannot shrink: it lives in a memfd sealed with `F_SEAL_SHRINK`
    /// (the default for mode 0600; see [`SharedPool::create`]), so no peer can truncate it
    /// under the others (which would make their next access fault with SIGBUS).
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

    /// True when [`SharedPool::create`] found the name taken by a stale sealed region (its
    /// creator and every process attached to it gone: nothing can reach that region any
    /// more) and replaced it. A name whose region still has a live process is never replaced
    /// (`create` fails with `AlreadyExists`).
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

    /// Removes the region's name now (as the creator's drop does): attached processes keep
    /// their mappings and go on working; new attaches fail with `NotFound`. Removes nothing if
    /// the name now belongs to another region (a newer pool of the same name).
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
        if self.slot != u32::MAX {
            self.flush();
            // Objects still held by this attachment become orphans (reclaim_in_use_of_dead).
            self.my_slot().owner.store(0, Ordering::Release);
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
