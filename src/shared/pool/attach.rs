//! Creating a shared pool's region and attaching to one by name.

use std::cell::Cell;
use std::fs::File;
use std::marker::PhantomData;
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use bytemuck::Pod;

use super::SharedPool;
use crate::error::PoolError;
use crate::repr::Geometry;
use crate::shared::file::{self, SharedBacking, SharedBackingPolicy, TempFile};
use crate::shared::header::{policy_code, Header, Params, Sections, MAGIC, VERSION};
use crate::shared::owner::{holder_id, ProcessId};
use crate::shared::registry::ProcessRegion;
use crate::shared::xring::{XRing, REC_IDLE};
use crate::shared::SharedOptions;

impl<T: Pod> SharedPool<T> {
    /// Creates the region `name` with `capacity` zeroed objects of `T` and attaches (the primary).
    /// `name`: a file name (in the hugetlbfs mount or `/dev/shm`) or an absolute path.
    /// `fingerprint` identifies `T` ([`crate::shared::fingerprint`]); attaches with another fail.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad name (empty, NUL, relative path, over
    /// [`crate::shared::MAX_NAME_LEN`] bytes or an absolute path over
    /// [`crate::shared::MAX_PATH_LEN`]; checked first), capacity (0 or above 2^31), cache size
    /// (above 512 or the capacity), process or channel count, or `T` aligned above 4096;
    /// [`PoolError::SizeOverflow`]; [`PoolError::SharedFile`] when the file cannot be created
    /// (`AlreadyExists`: the name is taken by a region a live process uses, or by a regular file:
    /// remove a stale one with [`SharedPool::remove`]), sized, reserved (`fallocate`: no huge
    /// pages, tmpfs full), sealed or mapped.
    ///
    /// # Backing
    /// By default (mode 0600, `unlink_on_drop`) the region is a memfd (`MFD_HUGETLB` on hugetlbfs)
    /// sealed against resizing ([`SharedPool::is_sealed`]), and `name` a symbolic link to a *member
    /// link* `.<name>.member.<pid>.<fd>.<inode>` -> `/proc/<pid>/fd/<fd>`, opened like a file. Each
    /// attachment publishes its own, so the name works while any attached process lives (an
    /// attacher finding the name's member dead comes in through another's and re-points the name);
    /// once all are gone it is stale and `create` replaces it ([`SharedPool::replaced_stale`]).
    /// With a wider mode (`/proc/<pid>/fd` is closed to others) or `unlink_on_drop(false)` (to
    /// outlive every process), it is a regular file at `name`, which any writer could truncate.
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
        // Unlocked while the region is built (can be slow): a rival's name then fails our publish.
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

    /// Creates the region at candidate `path`: a sealed memfd published as a link, or a regular
    /// file built under a temporary name and linked at `path` (as `create`'s "Backing" says).
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
            // hugetlbfs has no symlinks (EINVAL): name huge-page memfds from /dev/shm (tried next).
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
        // SAFETY: unpublished, so ours alone; offset 0 of the mapping: page-aligned, big enough.
        unsafe { self.base.as_ptr().cast::<Header>().write(self.header) };
        // Zero-filled: rings unlocked and empty, owners FREE, slots free and idle, stats 0.
        for i in 0..self.params.capacity {
            self.ring.slot(i).store(i, Ordering::Relaxed);
        }
        self.ring
            .st()
            .tail
            .store(self.params.capacity, Ordering::Release);
    }

    /// Attaches to the existing region `name` (a secondary), at whatever address the kernel picks.
    /// `T` and `fingerprint` must match the creator's.
    ///
    /// # Errors
    /// [`PoolError::InvalidConfig`] for a bad name (as [`SharedPool::create`]);
    /// [`PoolError::SharedFile`] when no region of that name exists, or only a stale one
    /// (`source.kind()` is `NotFound`), or it cannot be opened (`PermissionDenied`, `IsADirectory`,
    /// not a regular file) or mapped; [`PoolError::LayoutMismatch`] naming the first header field
    /// that differs (`magic`, `version`, `obj_size`, `obj_align`, `stride`, a section offset,
    /// `file_len`: the size is not the layout's end rounded up to the page), or, when this process
    /// has the region attached already, the first field differing from the header it was attached
    /// with (`expected`: that one's; a peer rewrote the header);
    /// [`PoolError::FingerprintMismatch`]; [`PoolError::NoProcessSlot`] when live processes hold
    /// every slot.
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
            // As the creator rounds the file's size (`file::SealedRegion`, `TempFile`).
            let page = page.max(4096);
            let map = map_file(&f, len, &path)?;
            // SAFETY: the mapping is page-aligned and >= size_of::<Header>() (checked); the header
            // is plain integers. Volatile: another process could be writing the shared memory.
            let header = unsafe { map.as_ptr().cast::<Header>().read_volatile() };
            header.validate(
                len,
                page,
                size_of::<T>() as u64,
                std::mem::align_of::<T>() as u64,
                fingerprint,
            )?;
            let mut pool = Self::from_map(map, header, path.clone(), f, backing, page, ident)?;
            pool.claim_slot()?;
            if sealed.is_some() {
                // Any member's link lets later processes in; a name whose member is gone (we came
                // through another's) is pointed at ours. Best effort: only later joins need it.
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

    /// The process-local view of a mapping whose header is validated or computed; claims no slot.
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
        // The offsets were computed here from validated parameters and lie inside the mapping,
        // which outlives the ring views (fields dropped with the pool).
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
        // The process's record of the region: an earlier attachment's (same header), or new.
        let region = ProcessRegion::join(&file, &path, &header)?;
        Ok(SharedPool {
            region,
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
            fork_key: 0,
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
    /// Liveness lock first, owner word second: the slot's `F_OFD_SETLK` byte lock on this
    /// attachment's open file description is held for its life, so "owner word set, lock free"
    /// proves the holder dead, in any pid namespace, whatever became of its pid.
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
                    if locked {
                        self.fork_key =
                            file::list_for_fork(&self.file, self.map.as_ptr(), self.map.len());
                    }
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

/// The process's next attachment serial (1, 2, ...), never reused: gone ones' handles match none.
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
    // A MAP_SHARED mapping of a file other processes map too, by design; the process forms no
    // references to region bytes except atomics and objects held under the owner-table protocol.
    // SAFETY: (above); another process truncating the file would fault us (SIGBUS): sealed regions
    // cannot shrink, and the pool never truncates.
    unsafe { memmap2::MmapOptions::new().len(len).map_mut(f) }
        .map_err(|e| file::file_err(path, "map", e))
}
