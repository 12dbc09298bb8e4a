//! One pool, many processes: a named shared region with position-independent handles.
//!
//! A [`SharedPool`] lives entirely inside one file-backed `MAP_SHARED` region (hugetlbfs when
//! mounted, else `/dev/shm`): header, common ring, handle channels, per-process caches, owner
//! table, objects. No pointers: sections are found by offset, objects by index (`objects + index x
//! stride`). A [`SharedHandle`] is that index (plus its attachment's serial), so it names the same
//! object in every process, wherever the mapping landed; DPDK's secondaries must map the hugepages
//! at the primary's addresses, as its rings and caches hold pointers.
//!
//! ```no_run
//! use idxpool::shared::{SharedOptions, SharedPool, fingerprint};
//! # fn main() -> Result<(), idxpool::PoolError> {
//! let fp = fingerprint("myapp::Msg v1");
//! // Primary:
//! let pool = SharedPool::<[u64; 8]>::create("myapp-pool", 4096, fp, SharedOptions::default())?;
//! let mut h = pool.get()?;
//! pool.get_mut(&mut h)[0] = 42;
//! pool.send(0, h);                          // to whoever receives on channel 0
//! // Secondary (another process, any address):
//! let other = SharedPool::<[u64; 8]>::attach("myapp-pool", fp)?;
//! let mut h = other.recv(0).expect("a handle");
//! assert_eq!(other.get_mut(&mut h)[0], 42);
//! other.put(h);
//! # Ok(()) }
//! ```
//!
//! # Ownership model (DESIGN.md, "Ownership model" and "Threat model")
//!
//! * **Objects are `bytemuck::Pod`**: whatever another process writes is a valid `T`.
//! * **One holder per object**, recorded in the owner table (free, in a channel, or one attachment)
//!   and changed by CAS; the process's own record of its attachments' objects drops and counts a
//!   forged entry ([`SharedPool::corrupt_entries`]) instead of minting a second handle.
//! * **A handle is accepted only by the attachment that minted it** ([`SharedHandle`]): safe code
//!   cannot hold two `&mut T` to one object in one process.
//! * **A [`SharedPool`] value is one attachment with one cache**: `Send`, not `Sync`; a thread or
//!   `fork` child wanting its own cache attaches separately.
//! * **Peers' mistakes are contained**: they cannot make this process access memory outside its
//!   mapping (geometry validated at attach and kept local, shared values read once, indices
//!   range-checked). Not contained: two processes believing they hold one object; a forged ring
//!   lock naming a live process (that ring waits while it lives).
//!
//! # Recovery after a process dies (DESIGN.md, "Recovery semantics")
//!
//! Every ring operation writes a redo record first, and whoever finds the ring's lock held by a
//! dead process completes it: a process killed at any instruction costs the others at most its own
//! work. [`SharedPool::reclaim_dead`] frees its slot and cache;
//! [`SharedPool::reclaim_in_use_of_dead`] returns the objects it held (only the caller knows no
//! live process still uses them); [`SharedPool::reset_channel`] returns a channel's messages;
//! [`SharedPool::audit`] checks every object is in one place; the `unsafe`
//! [`SharedPool::repair_lost`] repairs what corruption lost.
//!
//! Linux only. Liveness is a per-slot open-file-description lock (`F_OFD_SETLK`) on the region
//! file, so processes may live in different pid namespaces; pid + start time is the fallback.

mod file;
mod handle_ring;
mod header;
mod owner;
mod pool;
mod recovery;
mod registry;
mod xring;

use std::fmt;

pub use file::{SharedBacking, SharedBackingPolicy, MAX_NAME_LEN, MAX_PATH_LEN};
pub use owner::ProcessId;
pub use pool::SharedPool;
pub use recovery::{ProcessSlotInfo, ReclaimReport, SharedAudit};
#[doc(hidden)]
pub use xring::{arm_kill_point, kill_point, op_code};

use crate::builder::StrideMode;
use crate::cache::FlushPolicy;
use crate::handle::Handle;
use crate::pool::Invariant;
use crate::repr::Index;

/// The position-independent handle of a [`SharedPool`] object: its index (the same in every
/// process) plus the minting attachment's serial (8 bytes, as is `Option<SharedHandle<T>>`).
///
/// It owns its object like a `Box` (neither `Clone` nor `Copy`), and only its minting attachment
/// accepts it: every access checks the serial and the owner table (another's panics). Objects move
/// between attachments by [`SharedPool::send`]. A dropped handle leaks its object until its
/// attachment is gone and [`SharedPool::reclaim_in_use_of_dead`] runs.
///
/// ```
/// use idxpool::shared::{fingerprint, SharedHandle, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-handle", std::process::id());
/// let fp = fingerprint("[u8; 32]");
/// let pool = SharedPool::<[u8; 32]>::create(&name, 16, fp, SharedOptions::default())?;
/// let mut h: SharedHandle<[u8; 32]> = pool.get()?;
/// assert!(h.index() < 16); // the same index in every process
/// pool.get_mut(&mut h)[0] = 1;
/// let raw = h.into_raw();
/// // SAFETY: `raw` comes from `into_raw` of a handle minted by `pool`, rebuilt once.
/// let h = unsafe { SharedHandle::from_raw(&pool, raw) };
/// assert_eq!(pool.get_ref(&h)[0], 1);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[must_use = "dropping a handle leaks its object; put it back into its pool"]
pub struct SharedHandle<T> {
    /// The core's handle code (entry `index + 1` in a `NonZeroU32`) for the shared brand;
    /// `Invariant<T>` keeps it invariant in `T` and `Send + Sync` whatever `T`.
    handle: Handle<Invariant<T>, SharedBrand, Index>,
    /// Process-local serial of the minting attachment (`SharedPool::serial`), never 0.
    serial: u32,
}

/// Brand of shared handles: the attachment is checked at run time (serial, owner word).
pub(crate) enum SharedBrand {}

impl<T> SharedHandle<T> {
    #[inline(always)]
    pub(crate) fn new(index: u32, serial: u32) -> Self {
        SharedHandle {
            handle: Handle::from_raw_entry(index),
            serial,
        }
    }

    /// 0-based index of the object (`0..capacity`).
    #[inline]
    pub fn index(&self) -> u32 {
        self.handle.entry().get() - 1
    }

    /// Serial of the attachment that minted the handle (process-local).
    #[inline(always)]
    pub(crate) fn serial(&self) -> u32 {
        self.serial
    }

    /// Gives up the handle and returns the object's index; the object stays held by this attachment
    /// until a handle rebuilt by [`SharedHandle::from_raw`] is put or sent.
    #[inline]
    pub fn into_raw(self) -> u32 {
        self.handle.into_raw()
    }

    /// Rebuilds a handle of attachment `pool` from [`SharedHandle::into_raw`].
    ///
    /// # Safety
    /// `index` must come from `into_raw` of a handle minted by `pool`, and this must be the only
    /// handle rebuilt from it. Accesses check the owner table (an object `pool` does not hold
    /// panics), but two handles to one held object would give two `&mut T`.
    #[inline]
    pub unsafe fn from_raw(pool: &SharedPool<T>, index: u32) -> Self {
        Self::new(index, pool.serial)
    }
}

impl<T> fmt::Debug for SharedHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedHandle({})", self.index())
    }
}

impl<T> PartialEq for SharedHandle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.handle == other.handle && self.serial == other.serial
    }
}
impl<T> Eq for SharedHandle<T> {}

/// Options of [`SharedPool::create`].
///
/// ```
/// use idxpool::shared::{fingerprint, SharedOptions, SharedPool};
/// let name = format!("idxpool-doc-{}-options", std::process::id());
/// let opts = SharedOptions { cache_size: Some(16), channels: 2, max_processes: 4, policy: idxpool::FlushPolicy::Classic, ..SharedOptions::default() };
/// let pool = SharedPool::<[u32; 4]>::create(&name, 256, fingerprint("[u32; 4]"), opts)?;
/// assert_eq!((pool.cache_size(), pool.channels(), pool.max_processes()), (16, 2, 4));
/// assert_eq!(pool.policy(), idxpool::FlushPolicy::Classic);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SharedOptions {
    /// Per-process cache size in objects (0..=512; 0 = no cache; `None`, the default: `min(32,
    /// capacity)`), run by the core's cache algorithm under [`SharedOptions::policy`] (default DPDK
    /// 26.07: a full cache flushes its coldest half to the common ring, an empty one refills half)
    /// within its limit (`1.5 x size <= capacity` for Classic, else `size <= capacity`;
    /// [`SharedPool::create`] fails otherwise).
    pub cache_size: Option<u32>,
    /// Process slots (1..=128): how many attachments may exist at once (default 16).
    pub max_processes: u32,
    /// Number of handle channels (0..=64, default 1), each an MPMC ring that can hold every object.
    pub channels: u32,
    /// Filesystem of the region. Default: [`SharedBackingPolicy::Auto`].
    pub backing: SharedBackingPolicy,
    /// File mode of the backing file (default 0o600: only the creating user may attach).
    pub mode: u32,
    /// Whether dropping the creator's pool removes the name (default true; mappings stay).
    pub unlink_on_drop: bool,
    /// Object placement, as [`crate::PoolBuilder::stride`] (default [`StrideMode::Auto`]).
    pub stride: StrideMode,
    /// The caches' flush policy, as [`crate::PoolBuilder::policy`] (default
    /// [`FlushPolicy::DEFAULT`]), recorded in the header: every attachment runs the creator's.
    pub policy: FlushPolicy,
}

impl Default for SharedOptions {
    fn default() -> Self {
        SharedOptions {
            cache_size: None,
            max_processes: 16,
            channels: 1,
            backing: SharedBackingPolicy::Auto,
            mode: 0o600,
            unlink_on_drop: true,
            stride: StrideMode::Auto,
            policy: FlushPolicy::DEFAULT,
        }
    }
}

/// A 64-bit FNV-1a hash of `s`: a convenient type fingerprint, e.g.
/// `fingerprint("myapp::Msg v3")`. Any `u64` agreed between the processes works.
pub fn fingerprint(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
