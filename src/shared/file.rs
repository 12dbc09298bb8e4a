//! The backing file of a shared region (DESIGN.md, "Backing file"): where it lives, how it is made
//! (sealed memfd, or regular file under a temp name) and published once initialised.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::PoolError;

/// The filesystem behind a shared region.
///
/// ```
/// use idxpool::shared::{fingerprint, SharedBacking, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-backing", std::process::id());
/// let pool = SharedPool::<u64>::create(&name, 64, fingerprint("u64"), SharedOptions::default())?;
/// let b: SharedBacking = pool.backing(); // `File` only for regions at an explicit path
/// assert!(matches!(b, SharedBacking::Hugetlbfs | SharedBacking::Shm));
/// println!("{b}: {} byte pages", pool.page_size());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedBacking {
    /// A file on hugetlbfs: huge pages (the mount's, 2 MiB by default), reserved, never swapped.
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
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
/// use idxpool::shared::{SharedBacking, SharedBackingPolicy};
/// let name = format!("idxpool-doc-{}-policy", std::process::id());
/// let opts = SharedOptions { backing: SharedBackingPolicy::Require(SharedBacking::Shm), ..SharedOptions::default() };
/// let pool = SharedPool::<u64>::create(&name, 64, fingerprint("u64"), opts)?;
/// assert_eq!(pool.backing(), SharedBacking::Shm);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
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

/// The longest pool name in bytes (a plain name or an absolute path's last part), in every mode:
/// derived names (memfd `idxpool:<name>`, temporary `.<name>.<pid>.<nanos>.tmp`, member links
/// `.<name>.member.<pid>.<fd>.<inode>`) then fit the kernel's limits (249 bytes memfd, 255 file).
pub const MAX_NAME_LEN: usize = 200;

/// The longest absolute-path pool name, in bytes (`PATH_MAX` 4096; derived names add up to 48).
pub const MAX_PATH_LEN: usize = 4000;

/// Checks a pool name: non-empty, no NUL, a plain file name (no `/`, not `.` or `..`) or an
/// absolute path, within [`MAX_NAME_LEN`] and [`MAX_PATH_LEN`].
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
    let base = if name.starts_with('/') {
        if name.len() > MAX_PATH_LEN {
            return bad(&format!(
                "an absolute path of {} bytes; at most {MAX_PATH_LEN} bytes",
                name.len()
            ));
        }
        name.rsplit('/').next().unwrap_or("")
    } else if name.contains('/') {
        return bad("a name is a file name or an absolute path");
    } else {
        name
    };
    if base.is_empty() || base == "." || base == ".." {
        return bad("not a file name");
    }
    if base.len() > MAX_NAME_LEN {
        return bad(&format!(
            "a name of {} bytes; at most {MAX_NAME_LEN} bytes (an absolute path: its last \
             component)",
            base.len()
        ));
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

    /// Links the initialised file at `final_path` (`AlreadyExists` if taken), unlinks the tmp name.
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

/// A new region in a sealed memfd (no peer can shrink it under the others):
/// `memfd_create(MFD_ALLOW_SEALING [| MFD_HUGETLB])`, `fchmod`, sized to `len` rounded up to the
/// page, reserved with `fallocate`, then sealed `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`:
/// `ftruncate` (and `open(O_TRUNC)`) then fails (`EPERM`), the seals are permanent, and no access
/// can fault (SIGBUS) on a shrunk file. The name is a symbolic link to `/proc/<pid>/fd/<fd>`
/// ([`publish_link`]).
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

/// An exclusive `flock` on a directory, held while a sealed region's name is created, replaced or
/// re-pointed (two processes never both judge a name stale and replace it); released on drop (or
/// death).
pub(crate) struct DirLock(#[allow(dead_code)] File);

/// How long [`lock_dir`] waits for another holder (who holds it for a few system calls).
const DIR_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Locks directory `dir` (`flock(LOCK_EX | LOCK_NB)`, retried while another process changes a name
/// in it). Fails with `WouldBlock` after [`DIR_LOCK_WAIT`] (a holder that never lets go).
pub(crate) fn lock_dir(dir: &Path) -> Result<DirLock, PoolError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| file_err(dir, "open directory", e))?;
    let start = std::time::Instant::now();
    loop {
        // SAFETY: plain syscall on an open fd.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(DirLock(f));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock if start.elapsed() < DIR_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            _ => return Err(file_err(dir, "lock directory (flock)", e)),
        }
    }
}

/// The directory and file name of a sealed region's link `path`.
pub(crate) fn split_link(path: &Path) -> (PathBuf, String) {
    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let base = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, base)
}

/// Inode number of an open file.
pub(crate) fn ino(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.ino())
}

/// One member of a sealed region, as its link names it: `.<base>.member.<pid>.<fd>.<ino>` ->
/// `/proc/<pid>/fd/<fd>` (its descriptor of the memfd of inode `ino`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) pid: u32,
    pub(crate) fd: i32,
    pub(crate) ino: u64,
}

impl Member {
    /// The member link's file name for a region named `base`.
    pub(crate) fn link_name(&self, base: &str) -> String {
        format!(".{base}.member.{}.{}.{}", self.pid, self.fd, self.ino)
    }

    /// Parses a member link's file name of the region named `base`.
    pub(crate) fn parse(base: &str, fname: &str) -> Option<Member> {
        let rest = fname
            .strip_prefix('.')?
            .strip_prefix(base)?
            .strip_prefix(".member.")?;
        let mut it = rest.split('.');
        let m = Member {
            pid: it.next()?.parse().ok()?,
            fd: it.next()?.parse().ok()?,
            ino: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(m)
    }

    /// Opens the member's descriptor (`/proc/<pid>/fd/<fd>`) if it is still the region of inode
    /// `ino`; `Ok(None)` when the member is gone (no such process or descriptor, or another file).
    fn open(&self) -> io::Result<Option<File>> {
        match open_existing(Path::new(&format!("/proc/{}/fd/{}", self.pid, self.fd))) {
            Ok(f) if ino(&f)? == self.ino => Ok(Some(f)),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Publishes this process's membership of the sealed region `file` named by `link`: creates
/// `<dir>/.<base>.member.<pid>.<fd>.<ino> -> /proc/<pid>/fd/<fd>`; returns its path and the member.
/// After the creator's death, [`resolve_link`] reaches the region through any member's link.
pub(crate) fn publish_member(file: &File, link: &Path) -> Result<(PathBuf, Member), PoolError> {
    let (dir, base) = split_link(link);
    let m = Member {
        pid: std::process::id(),
        fd: file.as_raw_fd(),
        ino: ino(file).map_err(|e| file_err(link, "stat", e))?,
    };
    let path = dir.join(m.link_name(&base));
    // A stale link of the same name (a dead process with our pid and fd) is replaced.
    let _ = std::fs::remove_file(&path);
    let target = format!("/proc/{}/fd/{}", m.pid, m.fd);
    std::os::unix::fs::symlink(target, &path).map_err(|e| file_err(&path, "create", e))?;
    Ok((path, m))
}

/// Publishes the sealed region's name `final_path` (atomic `symlink`: `AlreadyExists` if taken): a
/// relative link to `m`'s member link, which leads to `/proc/<pid>/fd/<fd>`; `open` follows both
/// into the memfd (a new open file description; mode and ptrace rules: same user).
pub(crate) fn publish_link(m: &Member, final_path: &Path) -> Result<(), PoolError> {
    let (_, base) = split_link(final_path);
    std::os::unix::fs::symlink(m.link_name(&base), final_path)
        .map_err(|e| file_err(final_path, "create", e))
}

/// Points the name `link` at member `m` if it still names `old` (atomic `rename` under the
/// directory lock): for an attacher that came in through another member, the name's being gone.
pub(crate) fn repoint_link(link: &Path, old: &Member, m: &Member) -> Result<(), PoolError> {
    let (dir, base) = split_link(link);
    let _lock = lock_dir(&dir)?;
    if read_link_member(link) != Some(*old) {
        return Ok(()); // re-pointed or replaced by someone else meanwhile
    }
    let tmp = dir.join(format!(".{base}.relink.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(m.link_name(&base), &tmp)
        .map_err(|e| file_err(&tmp, "create", e))?;
    std::fs::rename(&tmp, link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        file_err(link, "rename", e)
    })
}

/// The member a sealed region's name `link` points to, when `link` is such a name.
pub(crate) fn read_link_member(link: &Path) -> Option<Member> {
    let (_, base) = split_link(link);
    let target = std::fs::read_link(link).ok()?;
    let t = target.to_str()?;
    if t.contains('/') {
        return None;
    }
    Member::parse(&base, t)
}

/// The member links named `link` of the region of inode `ino` (`None`: any region).
fn member_links(link: &Path, ino: Option<u64>) -> Vec<(PathBuf, Member)> {
    let (dir, base) = split_link(link);
    let prefix = format!(".{base}.member.");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let e = e.ok()?;
        let f = e.file_name();
        let f = f.to_str()?;
        if !f.starts_with(&prefix) {
            return None;
        }
        let m = Member::parse(&base, f)?;
        ino.is_none_or(|i| i == m.ino).then(|| (e.path(), m))
    })
    .collect()
}

/// What a name in the sealed-region form (a link to a member link) leads to.
pub(crate) enum Resolved {
    /// The region, opened through the name (`via: None`) or, when the name's member is gone,
    /// through the link of another live member (`via: Some(old)`, the name's dead member).
    Live { file: File, via: Option<Member> },
    /// Every member of the region is gone: a stale name (the region itself is gone too).
    Stale { member: Member },
}

/// Resolves the sealed-region name `link` of member `m` ([`read_link_member`]): opens the region
/// through it if `m` lives, else through any live member's link (removing gone members' links).
pub(crate) fn resolve_link(link: &Path, m: Member) -> io::Result<Resolved> {
    match open_existing(link) {
        Ok(f) if ino(&f)? == m.ino => return Ok(Resolved::Live { file: f, via: None }),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut err = None;
    for (path, other) in member_links(link, Some(m.ino)) {
        match other.open() {
            Ok(Some(file)) => return Ok(Resolved::Live { file, via: Some(m) }),
            Ok(None) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => err = Some(e),
        }
    }
    match err {
        // A member we may not open (another user's process): not proven gone.
        Some(e) => Err(e),
        None => Ok(Resolved::Stale { member: m }),
    }
}

/// Removes the links of the gone members (killed ones leave theirs) of region `ino` named `link`.
pub(crate) fn prune_member_links(link: &Path, ino: u64) {
    for (path, m) in member_links(link, Some(ino)) {
        if matches!(m.open(), Ok(None)) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Removes the member links of the region of inode `ino` (`None`: any region named `link`) once the
/// name is replaced or removed: attached processes go on; a nameless region is unreachable anyway.
pub(crate) fn remove_member_links(link: &Path, ino: Option<u64>) {
    for (path, _) in member_links(link, ino) {
        let _ = std::fs::remove_file(path);
    }
}

/// The seals of `file` (`F_GET_SEALS`), 0 when it cannot have any.
pub(crate) fn seals(file: &File) -> i32 {
    // SAFETY: plain fcntl on an open fd.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    r.max(0)
}

/// Slot `s`'s liveness lock range: the byte at offset `s` (past the file's end is fine).
fn slot_flock(s: u32, ty: libc::c_short) -> libc::flock {
    // SAFETY: flock is plain integers; all-zero is a valid value, every used field is set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = s as libc::off_t;
    fl.l_len = 1;
    fl
}

/// Takes slot `s`'s open-file-description lock on `file` (`F_OFD_SETLK`, write, non-blocking):
/// `Ok(false)` when another open file description (a live process) holds it. The kernel releases it
/// when the description's last fd closes (e.g. its process dies), in any pid namespace.
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

/// An attachment holding a slot's liveness lock, for the fork handlers. A child's inherited
/// descriptor and mapping keep the parent's open file description, and so its `F_OFD_SETLK` slot
/// lock, alive: while the child lives, a dead parent's slot would read as alive and a ring lock it
/// died holding never taken over (tests/shared_fork.rs). So in the child the descriptor is pointed
/// at `/dev/null` and the mapping replaced in place by zero pages: the child's copy (unused there:
/// DESIGN.md, "Limits") reaches nothing, and its drop closes `/dev/null` and unmaps those pages.
#[cfg(not(any(miri, loom)))]
struct ForkedAttachment {
    fd: libc::c_int,
    addr: usize,
    len: usize,
}

#[cfg(not(any(miri, loom)))]
impl crate::fork::Participant for ForkedAttachment {
    fn fork_child(&self) {
        // SAFETY: raw system calls only (no lock, no allocation, as a multithreaded fork's child
        // requires); a NUL-terminated path; dup3 replaces descriptor `fd` and MAP_FIXED the mapping
        // [addr, addr + len), both this process's copy's, never used in the child.
        unsafe {
            let nul = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if nul >= 0 {
                libc::dup3(nul, self.fd, libc::O_CLOEXEC);
                libc::close(nul);
            }
            libc::mmap(
                self.addr as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
        }
    }
}

/// Lists an attachment holding a slot lock (descriptor `file`, mapping `[addr, addr + len)`) with
/// the fork handlers ([`ForkedAttachment`]); returns the key for [`unlist_for_fork`] (0: none).
pub(crate) fn list_for_fork(file: &File, addr: *const u8, len: usize) -> usize {
    #[cfg(not(any(miri, loom)))]
    {
        let part = Box::new(ForkedAttachment {
            fd: file.as_raw_fd(),
            addr: addr as usize,
            len,
        });
        let key = (&*part as *const ForkedAttachment).cast::<()>();
        // SAFETY: the list owns the part until unlisted by `key`; it holds numbers, no pointers.
        unsafe { crate::fork::register_owned(key, part) };
        key as usize
    }
    #[cfg(any(miri, loom))]
    {
        let _ = (file, addr, len);
        0
    }
}

/// Unlists what [`list_for_fork`] listed (nothing for key 0).
pub(crate) fn unlist_for_fork(key: usize) {
    if key != 0 {
        crate::fork::unregister(key as *const ());
    }
}

/// Releases the lock of slot `s` taken with [`lock_slot`].
pub(crate) fn unlock_slot(file: &File, s: u32) {
    let fl = slot_flock(s, libc::F_UNLCK as libc::c_short);
    // SAFETY: fcntl with a valid flock on an open fd.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
}

/// Whether another description holds slot `s`'s lock (`F_OFD_GETLK`); `None` if unsupported.
pub(crate) fn slot_locked_by_other(file: &File, s: u32) -> Option<bool> {
    let mut fl = slot_flock(s, libc::F_WRLCK as libc::c_short);
    // SAFETY: fcntl with a valid flock on an open fd; the kernel writes the result into fl.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    (r == 0).then_some(fl.l_type != libc::F_UNLCK as libc::c_short)
}
