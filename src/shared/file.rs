//! The backing file of a shared region: where it lives, how it is created and published.
//!
//! A region is a file on hugetlbfs (2 MiB pages, when a hugetlbfs is mounted and writable and
//! its pages can be reserved) or on `/dev/shm` (tmpfs). The creator builds the file under a
//! temporary name, sizes it, reserves its pages with `fallocate` (so a short reserve fails at
//! creation, not with SIGBUS on first touch), initialises the region, and only then links it
//! under its final name: an attaching process never sees a half-initialised region.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::PoolError;

/// The filesystem behind a shared region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedBacking {
    /// A file on hugetlbfs: huge pages (the mount's page size, 2 MiB by default), reserved at
    /// creation, never swapped.
    Hugetlbfs,
    /// A file on `/dev/shm` (tmpfs, 4 KiB pages).
    Shm,
    /// A file at an explicit path on another filesystem.
    File,
}

impl fmt::Display for SharedBacking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SharedBacking::Hugetlbfs => "hugetlbfs",
            SharedBacking::Shm => "/dev/shm",
            SharedBacking::File => "file",
        })
    }
}

/// Which filesystem a new shared region goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SharedBackingPolicy {
    /// hugetlbfs when one is mounted and can hold the region, else `/dev/shm`.
    #[default]
    Auto,
    /// Exactly this one (`Hugetlbfs` or `Shm`), or an error.
    Require(SharedBacking),
}

/// Directory of tmpfs shared memory.
pub(crate) const SHM_DIR: &str = "/dev/shm";
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// The first writable hugetlbfs mount point in `/proc/mounts` (`/dev/hugepages` preferred).
pub(crate) fn hugetlbfs_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let mut found: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_dev, dir, fstype) = (it.next()?, it.next()?, it.next()?);
            let opts = it.next().unwrap_or("");
            (fstype == "hugetlbfs" && opts.split(',').any(|o| o == "rw"))
                .then(|| PathBuf::from(dir.replace("\\040", " ")))
        })
        .collect();
    found.sort_by_key(|p| p != Path::new("/dev/hugepages"));
    found.into_iter().next()
}

/// Page size and backing of the filesystem that holds `f`.
pub(crate) fn fs_info(f: &File) -> io::Result<(SharedBacking, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs writes a statfs into the buffer on success; the fd is open.
    let r = unsafe { libc::fstatfs(f.as_raw_fd(), st.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs returned 0, so the struct is initialised.
    let st = unsafe { st.assume_init() };
    // The statfs field types differ between libc targets (c_long, c_uint, ...).
    #[allow(clippy::unnecessary_cast)]
    let (ftype, bsize, tmpfs) = (
        st.f_type as i64,
        st.f_bsize as u64,
        libc::TMPFS_MAGIC as i64,
    );
    if ftype == HUGETLBFS_MAGIC {
        Ok((SharedBacking::Hugetlbfs, bsize))
    } else if ftype == tmpfs {
        Ok((SharedBacking::Shm, crate::region::os_page_size() as u64))
    } else {
        Ok((SharedBacking::File, crate::region::os_page_size() as u64))
    }
}

/// Checks a pool name: non-empty, no NUL, and either a plain file name (no `/`, not `.` or
/// `..`) or an absolute path.
pub(crate) fn check_name(name: &str) -> Result<(), PoolError> {
    let bad = |why: &str| {
        Err(PoolError::config(format!(
            "shared pool name {name:?}: {why}"
        )))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.contains('\0') {
        return bad("contains NUL");
    }
    if name.starts_with('/') {
        return Ok(());
    }
    if name.contains('/') {
        return bad("a name is a file name or an absolute path");
    }
    if name == "." || name == ".." {
        return bad("not a file name");
    }
    Ok(())
}

/// Where a pool of this name may live, in lookup order: an absolute path as given; else the
/// hugetlbfs mount (if any), then `/dev/shm`.
pub(crate) fn candidates(name: &str) -> Vec<(PathBuf, SharedBacking)> {
    if name.starts_with('/') {
        return vec![(PathBuf::from(name), SharedBacking::File)];
    }
    let mut v = Vec::new();
    if let Some(dir) = hugetlbfs_mount() {
        v.push((dir.join(name), SharedBacking::Hugetlbfs));
    }
    v.push((Path::new(SHM_DIR).join(name), SharedBacking::Shm));
    v
}

pub(crate) fn file_err(path: &Path, op: &'static str, source: io::Error) -> PoolError {
    PoolError::SharedFile {
        path: path.display().to_string(),
        op,
        source,
    }
}

/// A new file under a temporary name next to `final_path`, removed on drop unless published.
pub(crate) struct TempFile {
    pub(crate) file: File,
    pub(crate) tmp: PathBuf,
    pub(crate) len: u64,
    pub(crate) backing: SharedBacking,
    pub(crate) page: u64,
    published: bool,
}

impl TempFile {
    /// Creates, sizes (rounded to the filesystem's page) and reserves the file.
    pub(crate) fn create(final_path: &Path, len: u64, mode: u32) -> Result<TempFile, PoolError> {
        let dir = final_path.parent().unwrap_or(Path::new("/"));
        let base = final_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = dir.join(format!(".{base}.{}.{nanos}.tmp", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(|e| file_err(&tmp, "create", e))?;
        let mut t = TempFile {
            file,
            tmp,
            len: 0,
            backing: SharedBacking::File,
            page: 4096,
            published: false,
        };
        // Exact mode, regardless of the umask.
        t.file
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| file_err(&t.tmp, "chmod", e))?;
        let (backing, page) = fs_info(&t.file).map_err(|e| file_err(&t.tmp, "statfs", e))?;
        t.backing = backing;
        t.page = page.max(4096);
        t.len = len
            .checked_next_multiple_of(t.page)
            .ok_or_else(|| PoolError::overflow("shared region length"))?;
        t.file
            .set_len(t.len)
            .map_err(|e| file_err(&t.tmp, "truncate", e))?;
        let off_len = libc::off_t::try_from(t.len)
            .map_err(|_| PoolError::overflow("shared region length"))?;
        // SAFETY: plain syscall on an open fd.
        let r = unsafe { libc::fallocate(t.file.as_raw_fd(), 0, 0, off_len) };
        if r != 0 {
            let e = io::Error::last_os_error();
            // Filesystems without fallocate still work; pages are allocated on first touch.
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(file_err(&t.tmp, "reserve pages (fallocate)", e));
            }
        }
        Ok(t)
    }

    /// Links the initialised file under `final_path` (fails with `AlreadyExists` if taken) and
    /// removes the temporary name.
    pub(crate) fn publish(mut self, final_path: &Path) -> Result<File, PoolError> {
        std::fs::hard_link(&self.tmp, final_path).map_err(|e| file_err(final_path, "create", e))?;
        self.published = true;
        let _ = std::fs::remove_file(&self.tmp);
        let file = self
            .file
            .try_clone()
            .map_err(|e| file_err(final_path, "dup", e))?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Opens an existing region file for reading and writing; checks that it is a regular file.
pub(crate) fn open_existing(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let md = file.metadata()?;
    if !md.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// True when `path` names the same inode as the open `file`.
pub(crate) fn same_inode(path: &Path, file: &File) -> bool {
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// A new region in a sealed memfd (issue 15: a peer cannot shrink it under the others).
///
/// `memfd_create(MFD_ALLOW_SEALING [| MFD_HUGETLB])`, mode set with `fchmod`, sized to `len`
/// rounded up to the page, pages reserved with `fallocate`, then sealed with `F_SEAL_SHRINK |
/// F_SEAL_GROW | F_SEAL_SEAL`: from then on `ftruncate` (and `open(O_TRUNC)`) fails with
/// `EPERM` for everyone, the seals cannot be removed, and no access to the mapping can fault
/// with SIGBUS because the file shrank. The name is published as a symbolic link to
/// `/proc/<pid>/fd/<fd>` ([`publish_link`]).
pub(crate) struct SealedRegion {
    pub(crate) file: File,
    pub(crate) len: u64,
    pub(crate) backing: SharedBacking,
    pub(crate) page: u64,
}

impl SealedRegion {
    pub(crate) fn create(
        final_path: &Path,
        len: u64,
        mode: u32,
        huge: bool,
    ) -> Result<SealedRegion, PoolError> {
        let base = final_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cname = std::ffi::CString::new(format!("idxpool:{base}"))
            .map_err(|_| PoolError::config("shared pool name contains NUL"))?;
        let mut flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        if huge {
            flags |= libc::MFD_HUGETLB;
        }
        // SAFETY: a NUL-terminated name and valid flags; returns a new fd or -1.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), flags) };
        if fd < 0 {
            return Err(file_err(
                final_path,
                "memfd_create",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: fd is a new, open descriptor that nothing else owns.
        let file = unsafe { <File as std::os::unix::io::FromRawFd>::from_raw_fd(fd) };
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| file_err(final_path, "chmod", e))?;
        let (backing, page) = fs_info(&file).map_err(|e| file_err(final_path, "statfs", e))?;
        let page = page.max(4096);
        let len = len
            .checked_next_multiple_of(page)
            .ok_or_else(|| PoolError::overflow("shared region length"))?;
        file.set_len(len)
            .map_err(|e| file_err(final_path, "truncate", e))?;
        let off_len =
            libc::off_t::try_from(len).map_err(|_| PoolError::overflow("shared region length"))?;
        // SAFETY: plain syscall on an open fd.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, off_len) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(file_err(final_path, "reserve pages (fallocate)", e));
            }
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: plain fcntl on an open memfd created with MFD_ALLOW_SEALING.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(file_err(
                final_path,
                "seal (F_ADD_SEALS)",
                io::Error::last_os_error(),
            ));
        }
        Ok(SealedRegion {
            file,
            len,
            backing,
            page,
        })
    }
}

/// Publishes the sealed region `file` under `final_path`: a symbolic link to
/// `/proc/<pid>/fd/<fd>`, which `open` follows into the memfd (a new open file description,
/// checked against the memfd's mode and the kernel's ptrace access rules: same user). Fails
/// with `AlreadyExists` if the name is taken (`symlink` is atomic).
pub(crate) fn publish_link(file: &File, final_path: &Path) -> Result<(), PoolError> {
    let target = format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd());
    std::os::unix::fs::symlink(target, final_path).map_err(|e| file_err(final_path, "create", e))
}

/// The seals of `file` (`F_GET_SEALS`), 0 when it cannot have any.
pub(crate) fn seals(file: &File) -> i32 {
    // SAFETY: plain fcntl on an open fd.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    r.max(0)
}

/// Byte range of the per-slot liveness lock of process slot `s` in the region file: one byte
/// at offset `s` (locks may lie beyond the end of a file; they do not touch its data).
fn slot_flock(s: u32, ty: libc::c_short) -> libc::flock {
    // SAFETY: flock is plain integers; all-zero is a valid value, every used field is set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = s as libc::off_t;
    fl.l_len = 1;
    fl
}

/// Takes the open-file-description lock of slot `s` on `file` (`F_OFD_SETLK`, write,
/// non-blocking). `Ok(false)` when another open file description holds it (a live process).
/// The kernel releases it when the description's last fd closes, e.g. when its process dies,
/// in any pid namespace.
pub(crate) fn lock_slot(file: &File, s: u32) -> io::Result<bool> {
    let fl = slot_flock(s, libc::F_WRLCK as libc::c_short);
    // SAFETY: fcntl with a valid flock on an open fd.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Releases the lock of slot `s` taken with [`lock_slot`].
pub(crate) fn unlock_slot(file: &File, s: u32) {
    let fl = slot_flock(s, libc::F_UNLCK as libc::c_short);
    // SAFETY: fcntl with a valid flock on an open fd.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
}

/// Whether another open file description holds the lock of slot `s` (`F_OFD_GETLK`); `None`
/// when the filesystem does not support it.
pub(crate) fn slot_locked_by_other(file: &File, s: u32) -> Option<bool> {
    let mut fl = slot_flock(s, libc::F_WRLCK as libc::c_short);
    // SAFETY: fcntl with a valid flock on an open fd; the kernel writes the result into fl.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    (r == 0).then_some(fl.l_type != libc::F_UNLCK as libc::c_short)
}
