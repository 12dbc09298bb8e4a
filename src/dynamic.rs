//! Run-time pools: any number at once, created from configuration, stored in structs, shared
//! with spawned threads, with no brand to declare and no `unsafe` (issue 11).
//!
//! A [`DynPool<T>`] is a pool whose handles ([`DynHandle<T>`], 8 bytes) carry the pool's id
//! next to the 4-byte entry. Every access checks the id against the pool's: **one compare**
//! of two `u32`s, after which the access is the branded pool's (one multiply-add, no bounds
//! check). A handle of another pool, or of a dropped pool, panics naming both pools (or is a
//! typed [`PoolError::ForeignHandle`] with the `try_` methods); it never reaches an object.
//! The caches and the common ring still hold 4-byte entries: the id lives only in the handles
//! users hold, never in the pool's own structures.
//!
//! Why it is sound: pool ids are process-unique and **never reused** (a `u32` counter; creation
//! fails with [`PoolError::PoolIdsExhausted`] after 2^32 - 2 pools rather than wrap). A handle
//! is minted only by the pool whose id it carries, from an entry that pool took out of a cache
//! or its ring, so an id match proves the entry names one of this pool's objects, exactly as a
//! brand match does for [`crate::Pool`] (DESIGN.md, "Handle soundness"). A handle that outlives
//! its pool carries an id no live pool has. Inside, the pool is an
//! [`Unchecked`] pool whose bare handles never leave this module unless
//! wrapped with its id: this module is the caller that upholds `build_unchecked`'s contract.
//!
//! `DynPool<T>` is a cheap, clonable reference to a shared pool (an `Arc` inside): clones are
//! the same pool. Its [`DynLocalCache`], [`DynProducer`] and [`DynConsumer`] each hold a clone,
//! so they are `'static` and move into `std::thread::spawn`; the pool's objects are dropped
//! when the last of them goes.
//!
//! ```
//! use idxpool::{DynPool, DynHandle, PoolBuilder};
//!
//! struct BufferManager {
//!     pool: DynPool<[u8; 2048]>,
//! }
//! impl BufferManager {
//!     fn new(buffers: u32) -> Result<Self, idxpool::PoolError> {
//!         Ok(BufferManager { pool: DynPool::new(PoolBuilder::zeroed(buffers).cache_size(32))? })
//!     }
//!     fn fill(&self, byte: u8) -> Result<DynHandle<[u8; 2048]>, idxpool::PoolError> {
//!         let mut h = self.pool.get()?;
//!         self.pool.get_mut(&mut h).fill(byte);
//!         Ok(h)
//!     }
//! }
//! // Two instances at once (a named brand would refuse the second):
//! let a = BufferManager::new(64)?;
//! let b = BufferManager::new(64)?;
//! let ha = a.fill(1)?;
//! assert_eq!(a.pool.get_ref(&ha)[0], 1);
//! assert!(b.pool.try_get_ref(&ha).is_err()); // a's handle is rejected by b
//! a.pool.put(ha);
//! # Ok::<(), idxpool::PoolError>(())
//! ```
//!
//! Cost against the branded pool: the compare on each access, 8-byte handles in the caller's
//! vectors and rings of handles, and a copy of the handles between the caller's `Vec` of
//! `DynHandle`s and the cache's 4-byte entries on bulk operations (BENCHMARKS.md, "Run-time
//! pools"). Named brands and `scoped` stay for code that wants no check at all.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::fmt;
use std::mem::ManuallyDrop;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::audit::AuditReport;
use crate::brand::Unchecked;
use crate::builder::PoolBuilder;
use crate::cache::FlushPolicy;
use crate::error::PoolError;
use crate::handle_ring::{Consumer, Producer, Zeroing};
use crate::local::LocalCache;
use crate::owned::Dangling;
use crate::pool::{GenericPool, Resolver};
use crate::region::BackingReport;
use crate::repr::Index;
use crate::stats::Stats;

type Inner<T> = GenericPool<T, Unchecked, Index>;
// Index entries: `DynHandle::index()` needs the index without the pool (offset entries, the
// default of `Pool`, would need the stride; see BENCHMARKS.md "Handle to `&mut T`").
type Bare<T> = crate::GenericHandle<T, Unchecked, Index>;

/// Names of live run-time pools by id, for the foreign-handle message (touched only at pool
/// creation, at drop and on the cold error path).
static NAMES: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());

fn label(id: NonZeroU32) -> String {
    match NAMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id.get())
    {
        Some(name) => format!("'{name}' (#{id})"),
        None => format!("#{id} (dropped)"),
    }
}

fn foreign_error(handle_pool: NonZeroU32, pool: NonZeroU32) -> PoolError {
    PoolError::ForeignHandle {
        handle_pool: label(handle_pool),
        pool: label(pool),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn foreign_panic(handle_pool: NonZeroU32, pool: NonZeroU32) -> ! {
    panic!("idxpool: {}", foreign_error(handle_pool, pool))
}

/// Checks that `h` was minted by pool `id`: the one compare of a run-time pool access.
#[inline(always)]
#[track_caller]
fn check<T>(h: &DynHandle<T>, id: NonZeroU32) {
    if h.pool != id {
        foreign_panic(h.pool, id)
    }
}

/// Checks that every handle of `hs` was minted by pool `id`: one compare each, branch-free
/// (the loop vectorises), then one branch for the whole batch.
#[inline(always)]
#[track_caller]
fn check_all<T>(hs: &[DynHandle<T>], id: NonZeroU32) {
    let mut bad = false;
    for h in hs {
        bad |= h.pool != id;
    }
    if bad {
        let h = hs.iter().find(|h| h.pool != id).expect("a foreign handle");
        foreign_panic(h.pool, id)
    }
}

/// `Ok` when every handle of `hs` was minted by pool `id`; else the typed error for the first
/// foreign one (one compare each, then one branch for the batch, as [`check_all`]).
#[inline(always)]
fn try_check_all<T>(hs: &[DynHandle<T>], id: NonZeroU32) -> Result<(), PoolError> {
    let mut bad = false;
    for h in hs {
        bad |= h.pool != id;
    }
    if bad {
        let h = hs.iter().find(|h| h.pool != id).expect("a foreign handle");
        return Err(foreign_error(h.pool, id));
    }
    Ok(())
}

/// Moves every handle of `src` (left empty) to the end of `dst`, tagged with pool `id`.
#[inline(always)]
fn tag_into<T>(src: &mut Vec<Bare<T>>, dst: &mut Vec<DynHandle<T>>, id: NonZeroU32) {
    let n = src.len();
    dst.reserve(n);
    let len = dst.len();
    // Two slices the compiler knows are disjoint: the loop vectorises.
    for (d, s) in dst.spare_capacity_mut()[..n].iter_mut().zip(src.iter()) {
        // SAFETY: each handle of `src` is read once here and forgotten by set_len(0) below.
        d.write(DynHandle::new(unsafe { std::ptr::read(s) }, id));
    }
    // SAFETY: the first `n` spare slots of `dst` were written above; `src`'s handles were moved
    // out (handles have no destructor, and nothing in the loop can panic).
    unsafe {
        src.set_len(0);
        dst.set_len(len + n);
    }
}

/// Moves `src[start..]` (checked by the caller) untagged to the end of `dst`, truncating
/// `src` to `start`.
#[inline(always)]
fn untag_tail_into<T>(src: &mut Vec<DynHandle<T>>, start: usize, dst: &mut Vec<Bare<T>>) {
    let n = src.len() - start;
    dst.reserve(n);
    let len = dst.len();
    for (d, s) in dst.spare_capacity_mut()[..n]
        .iter_mut()
        .zip(src[start..].iter())
    {
        // SAFETY: each handle of src[start..] is read once here and forgotten by set_len below.
        d.write(unsafe { std::ptr::read(&s.h) });
    }
    // SAFETY: the first `n` spare slots of `dst` were written above; src[start..] was moved
    // out (no destructor, nothing in the loop can panic).
    unsafe {
        src.set_len(start);
        dst.set_len(len + n);
    }
}

fn next_id() -> Result<NonZeroU32, PoolError> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    // Never wraps: at u32::MAX every later creation fails (ids must never be reused).
    NEXT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n != u32::MAX).then(|| n + 1)
    })
    .ok()
    .and_then(NonZeroU32::new)
    .ok_or(PoolError::PoolIdsExhausted(u32::MAX - 1))
}

struct Shared<T> {
    id: NonZeroU32,
    pool: Inner<T>,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        NAMES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id.get());
        // The pool's own drop follows: it reports objects still out (crate::leaks).
    }
}

/// Ownership of one object of a [`DynPool`]: the object's 4-byte entry and the pool's 4-byte
/// id (8 bytes; `Option<DynHandle<T>>` too). Like [`crate::Handle`], it is neither `Clone` nor
/// `Copy`, and dropping it instead of putting it back leaks its object (reported when the pool
/// is dropped, see [`crate::leaks`]). Every pool operation checks the id first.
#[must_use = "a DynHandle owns a pool object: give it back with pool.put(h) (or cache.put(h)), \
              or hold it in a DynPooled guard (pool.pooled(h)) that does; dropping it leaks the object"]
pub struct DynHandle<T> {
    h: Bare<T>,
    pool: NonZeroU32,
}

impl<T> DynHandle<T> {
    #[inline(always)]
    fn new(h: Bare<T>, pool: NonZeroU32) -> Self {
        DynHandle { h, pool }
    }

    /// 0-based index of the object in its pool.
    #[inline]
    pub fn index(&self) -> u32 {
        self.h.index()
    }

    /// Id of the pool that minted this handle ([`DynPool::id`]).
    #[inline]
    pub fn pool_id(&self) -> u32 {
        self.pool.get()
    }
}

impl<T> fmt::Debug for DynHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DynHandle(pool #{}, index {})", self.pool, self.index())
    }
}

impl<T> PartialEq for DynHandle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.pool == other.pool && self.h == other.h
    }
}
impl<T> Eq for DynHandle<T> {}

/// A pool created at run time: any number may coexist (also of one `T`), it can be stored in
/// any struct, cloned (clones share the pool) and moved between threads, and its handles are
/// checked against it on every access (see the [module docs](self)).
///
/// The implicit-cache operations (`get`, `put`, ...) use a per-thread cache as
/// [`GenericPool::get`] does; [`DynPool::local_cache`] gives an explicit cache for hot loops.
pub struct DynPool<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for DynPool<T> {
    /// Another reference to the same pool (an `Arc` clone).
    fn clone(&self) -> Self {
        DynPool {
            shared: self.shared.clone(),
        }
    }
}

impl<T> DynPool<T> {
    /// Creates a run-time pool from a configured builder (capacity, init, cache size,
    /// policy, backing, name, ...).
    ///
    /// ```
    /// let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(1024).name("ids"))?;
    /// assert_eq!(pool.capacity(), 1024);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// The builder's errors ([`PoolError::InvalidConfig`], [`PoolError::SizeOverflow`],
    /// [`PoolError::BackingUnavailable`]), and [`PoolError::PoolIdsExhausted`].
    pub fn new(builder: PoolBuilder<'_, T>) -> Result<Self, PoolError> {
        // SAFETY: build_unchecked's contract (never mix handles of two Unchecked pools, never
        // use one after its pool is dropped) is kept by this module: the pool's bare handles
        // leave it only inside a DynHandle carrying this pool's never-reused id, and every
        // operation that unwraps a DynHandle checks the id against its pool's first.
        let pool = unsafe { builder.build_unchecked_repr::<Index>() }?;
        let id = next_id()?;
        NAMES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.get(), pool.name().to_owned());
        Ok(DynPool {
            shared: Arc::new(Shared { id, pool }),
        })
    }

    #[inline(always)]
    fn inner(&self) -> &Inner<T> {
        &self.shared.pool
    }

    #[inline(always)]
    fn nz_id(&self) -> NonZeroU32 {
        self.shared.id
    }

    #[inline(always)]
    fn wrap(&self, h: Bare<T>) -> DynHandle<T> {
        DynHandle::new(h, self.shared.id)
    }

    /// This pool's process-unique id (never reused), carried by its handles.
    pub fn id(&self) -> u32 {
        self.shared.id.get()
    }

    /// True when `self` and `other` are the same pool (clones of one another).
    pub fn same_pool(&self, other: &DynPool<T>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// True when `h` was minted by this pool.
    #[inline]
    pub fn owns(&self, h: &DynHandle<T>) -> bool {
        h.pool == self.nz_id()
    }

    /// `Ok` when `h` was minted by this pool.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] naming both pools.
    pub fn check(&self, h: &DynHandle<T>) -> Result<(), PoolError> {
        if self.owns(h) {
            Ok(())
        } else {
            Err(foreign_error(h.pool, self.nz_id()))
        }
    }

    // ---- configuration and counts (as GenericPool) -----------------------------------------

    /// Number of objects.
    pub fn capacity(&self) -> u32 {
        self.inner().capacity()
    }
    /// Bytes between consecutive objects.
    pub fn stride(&self) -> usize {
        self.inner().stride()
    }
    /// The pool's name.
    pub fn name(&self) -> &str {
        self.inner().name()
    }
    /// Per-cache size (0: no caching).
    pub fn cache_size(&self) -> u32 {
        self.inner().cache_size()
    }
    /// The caches' flush/refill policy.
    pub fn policy(&self) -> FlushPolicy {
        self.inner().policy()
    }
    /// The backing the region got.
    pub fn backing(&self) -> &BackingReport {
        self.inner().backing()
    }
    /// Free objects (ring + caches), as [`GenericPool::available`].
    pub fn available(&self) -> usize {
        self.inner().available()
    }
    /// Objects held by handles, as [`GenericPool::in_use`].
    pub fn in_use(&self) -> usize {
        self.inner().in_use()
    }
    /// True when every object is free.
    pub fn is_full(&self) -> bool {
        self.inner().is_full()
    }
    /// True when no object is free.
    pub fn is_empty(&self) -> bool {
        self.inner().is_empty()
    }
    /// Counters, as [`GenericPool::stats`] (needs the crate's `stats` feature; see
    /// [`Stats::COUNTING`]).
    pub fn stats(&self) -> Stats {
        self.inner().stats()
    }
    /// Starts the counters from 0 again, as [`GenericPool::stats_reset`].
    pub fn stats_reset(&self) {
        self.inner().stats_reset()
    }
    /// `(label, objects held)` of every live cache.
    pub fn cache_counts(&self) -> Vec<(String, usize)> {
        self.inner().cache_counts()
    }
    /// A description for a person, as [`GenericPool::dump`].
    pub fn dump(&self) -> String {
        format!("run-time pool #{}\n{}", self.id(), self.inner().dump())
    }
    /// Flushes the calling thread's implicit cache into the ring.
    pub fn flush(&self) {
        self.inner().flush()
    }

    /// Checks the invariants, as [`GenericPool::audit`]; the pool must be quiescent, which is
    /// proven here by `&mut self` on the only reference to the pool.
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] for a broken invariant, or when other clones of this pool
    /// (or caches, rings or guards holding one) are alive.
    pub fn audit(&mut self) -> Result<AuditReport, PoolError> {
        let n = Arc::strong_count(&self.shared);
        match Arc::get_mut(&mut self.shared) {
            Some(s) => s.pool.audit(),
            None => Err(PoolError::AuditFailed(format!(
                "pool {}: {} references are alive; audit needs the only one",
                self.name(),
                n
            ))),
        }
    }

    // ---- implicit per-thread cache ----------------------------------------------------------

    /// Takes one object through the calling thread's cache (as [`GenericPool::get`]).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`].
    #[inline]
    #[must_use = "the handle owns an object: put it back with pool.put(h), or use get_pooled()"]
    pub fn get(&self) -> Result<DynHandle<T>, PoolError> {
        self.inner().get().map(|h| self.wrap(h))
    }

    /// Takes one object in a guard that puts it back when dropped.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`].
    pub fn get_pooled(&self) -> Result<DynPooled<'_, T>, PoolError> {
        Ok(self.pooled(self.get()?))
    }

    /// Wraps `h` in a guard that puts it back when dropped.
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[track_caller]
    pub fn pooled(&self, h: DynHandle<T>) -> DynPooled<'_, T> {
        check(&h, self.nz_id());
        DynPooled {
            pool: self,
            h: ManuallyDrop::new(h),
        }
    }

    /// Returns one object through the calling thread's cache.
    ///
    /// # Panics
    /// If `h` belongs to another pool (naming both); see [`DynPool::try_put`].
    #[inline]
    #[track_caller]
    pub fn put(&self, h: DynHandle<T>) {
        check(&h, self.nz_id());
        self.inner().put(h.h)
    }

    /// Returns one object, or gives the handle back when it belongs to another pool.
    ///
    /// # Errors
    /// The handle itself, unchanged, when [`DynPool::owns`] is false.
    pub fn try_put(&self, h: DynHandle<T>) -> Result<(), DynHandle<T>> {
        if self.owns(&h) {
            self.inner().put(h.h);
            Ok(())
        } else {
            Err(h)
        }
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`]; `out` unchanged.
    #[must_use = "on Ok, `out` holds objects that must be put back"]
    pub fn get_bulk(&self, out: &mut Vec<DynHandle<T>>, n: usize) -> Result<(), PoolError> {
        // No reserve here: the branded pool compares `n` with what it holds before it
        // allocates, so a huge `n` is `Exhausted`, never a capacity overflow or an abort.
        let mut tmp = Vec::new();
        self.inner().get_bulk(&mut tmp, n)?;
        tag_into(&mut tmp, out, self.nz_id());
        Ok(())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[must_use = "the count says how many objects were appended to `out`"]
    pub fn get_burst(&self, out: &mut Vec<DynHandle<T>>, n: usize) -> usize {
        // As get_bulk: the branded pool clamps `n` before it reserves.
        let mut tmp = Vec::new();
        let got = self.inner().get_burst(&mut tmp, n);
        tag_into(&mut tmp, out, self.nz_id());
        got
    }

    /// Returns every handle of `handles` (left empty).
    ///
    /// # Panics
    /// If any handle belongs to another pool; then nothing is put and `handles` is unchanged.
    #[track_caller]
    pub fn put_bulk(&self, handles: &mut Vec<DynHandle<T>>) {
        check_all(handles, self.nz_id());
        let mut tmp = Vec::with_capacity(handles.len());
        untag_tail_into(handles, 0, &mut tmp);
        self.inner().put_bulk(&mut tmp);
    }

    // ---- handle access ----------------------------------------------------------------------

    /// Shared access to the object of `h`: one compare of pool ids, then the branded pool's
    /// address computation.
    ///
    /// # Panics
    /// If `h` belongs to another pool (naming both); see [`DynPool::try_get_ref`].
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&'a self, h: &'a DynHandle<T>) -> &'a T {
        check(h, self.nz_id());
        self.inner().get_ref(&h.h)
    }

    /// Exclusive access to the object of `h` (one compare, then as [`GenericPool::get_mut`]).
    /// The reference borrows the pool and the handle; to keep one while allocating from a
    /// [`DynLocalCache`], use the cache's own `get_mut` (it takes `&self`) or a
    /// [`DynPool::resolver`].
    ///
    /// # Panics
    /// If `h` belongs to another pool (naming both); see [`DynPool::try_get_mut`].
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&'a self, h: &'a mut DynHandle<T>) -> &'a mut T {
        check(h, self.nz_id());
        self.inner().get_mut(&mut h.h)
    }

    /// As [`DynPool::get_ref`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] naming both pools.
    pub fn try_get_ref<'a>(&'a self, h: &'a DynHandle<T>) -> Result<&'a T, PoolError> {
        self.check(h)?;
        Ok(self.inner().get_ref(&h.h))
    }

    /// As [`DynPool::get_mut`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] naming both pools.
    pub fn try_get_mut<'a>(&'a self, h: &'a mut DynHandle<T>) -> Result<&'a mut T, PoolError> {
        self.check(h)?;
        Ok(self.inner().get_mut(&mut h.h))
    }

    /// Prefetches the object of `h` for writing (as [`DynResolver::prefetch`]: a handle of
    /// another pool is ignored).
    #[inline(always)]
    pub fn prefetch(&self, h: &DynHandle<T>) {
        self.resolver().prefetch(h)
    }

    /// Prefetches the objects of every handle of `hs` (as [`DynResolver::prefetch_all`]).
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[DynHandle<T>]) {
        self.resolver().prefetch_all(hs)
    }

    /// Raw object pointers of `min(hs.len(), out.len())` handles (as
    /// [`DynResolver::resolve_bulk`]); dereferencing them is the caller's `unsafe`
    /// responsibility.
    ///
    /// # Panics
    /// If one of those handles belongs to another pool; see [`DynPool::try_resolve_bulk`].
    #[inline]
    #[track_caller]
    pub fn resolve_bulk(&self, hs: &[DynHandle<T>], out: &mut [NonNull<T>]) -> usize {
        self.resolver().resolve_bulk(hs, out)
    }

    /// As [`DynPool::resolve_bulk`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`]; `out` unchanged.
    #[inline]
    pub fn try_resolve_bulk(
        &self,
        hs: &[DynHandle<T>],
        out: &mut [NonNull<T>],
    ) -> Result<usize, PoolError> {
        self.resolver().try_resolve_bulk(hs, out)
    }

    /// `&mut T` to the object of each handle of `hs`, in order (as
    /// [`DynResolver::get_mut_all`]). Borrows the pool and `hs` (mutably) for `'a`.
    ///
    /// # Panics
    /// If any handle belongs to another pool, before anything is yielded; see
    /// [`DynPool::try_get_mut_all`].
    #[inline]
    #[track_caller]
    pub fn get_mut_all<'a>(&'a self, hs: &'a mut [DynHandle<T>]) -> DynObjectsMut<'a, T> {
        self.resolver().get_mut_all(hs)
    }

    /// As [`DynPool::get_mut_all`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] for the first foreign handle, before anything is yielded.
    #[inline]
    pub fn try_get_mut_all<'a>(
        &'a self,
        hs: &'a mut [DynHandle<T>],
    ) -> Result<DynObjectsMut<'a, T>, PoolError> {
        self.resolver().try_get_mut_all(hs)
    }

    /// A copyable handle-to-object converter borrowing the pool (not a cache), for hot loops
    /// that keep references while they allocate (as [`GenericPool::resolver`]).
    #[inline(always)]
    pub fn resolver(&self) -> DynResolver<'_, T> {
        DynResolver {
            objs: self.inner().resolver(),
            id: self.nz_id(),
        }
    }
}

/// Companions that hold a clone of the pool (hence `T: 'static`).
impl<T: 'static> DynPool<T> {
    // ---- owned companions ---------------------------------------------------------------------

    /// An explicit cache holding a clone of the pool: `'static`, `Send` (move it into a
    /// spawned thread), not `Sync`. See [`DynLocalCache`].
    pub fn local_cache(&self) -> DynLocalCache<T> {
        let pool = self.clone();
        let p = pool.static_inner();
        DynLocalCache {
            cache: Dangling::new(UnsafeCell::new(p.local_cache())),
            scratch: UnsafeCell::new(Vec::new()),
            objs: p.resolver(),
            id: pool.nz_id(),
            pool,
        }
    }

    /// A ring of `size` slots moving this pool's handles from one thread to another
    /// ([`crate::HandleRing`]: 4-byte slots, ptr_ring batching). Both halves hold a clone of the
    /// pool, so they are `'static` and move into `std::thread::spawn`; handles left in the
    /// ring return to the pool when both halves are dropped.
    ///
    /// # Errors
    /// As [`crate::handle_ring::GenericHandleRing::new`] (`size` 0, `BatchOf(0)`, allocation).
    pub fn handle_ring(
        &self,
        size: usize,
        zeroing: Zeroing,
    ) -> Result<(DynProducer<T>, DynConsumer<T>), PoolError> {
        let p = self.static_inner();
        let (tx, rx) = crate::handle_ring::GenericHandleRing::new(p, size, zeroing)?;
        Ok((
            DynProducer {
                tx,
                scratch: Vec::new(),
                id: self.nz_id(),
                pool: self.clone(),
            },
            DynConsumer {
                rx,
                scratch: Vec::new(),
                id: self.nz_id(),
                pool: self.clone(),
            },
        ))
    }

    /// The inner pool with its lifetime extended, for companions that also hold a clone of
    /// `self` and drop the borrower before that clone.
    fn static_inner(&self) -> &'static Inner<T> {
        // SAFETY: the pool lives in the Arc allocation, which does not move and lives as long
        // as any clone. Every caller stores the result (inside a LocalCache, a Resolver or a
        // handle ring half) in a struct that also holds a clone of this DynPool in a field
        // declared after it, so the borrower is dropped before that clone, and never hands
        // the 'static reference (or anything carrying it) out of this module.
        unsafe { &*std::ptr::from_ref(&self.shared.pool) }
    }
}

impl<T> fmt::Debug for DynPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynPool")
            .field("id", &self.id())
            .field("pool", self.inner())
            .finish()
    }
}

/// Converts handles of one [`DynPool`] to references, checking each handle's pool id (one
/// compare); `Copy`, and it borrows the pool, not a cache. See [`DynPool::resolver`].
pub struct DynResolver<'p, T> {
    objs: Resolver<'p, T, Unchecked, Index>,
    id: NonZeroU32,
}

impl<T> Clone for DynResolver<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DynResolver<'_, T> {}

impl<'p, T> DynResolver<'p, T> {
    /// Shared access to the object of `h`.
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&self, h: &'a DynHandle<T>) -> &'a T
    where
        'p: 'a,
    {
        check(h, self.id);
        self.objs.get_ref(&h.h)
    }

    /// Exclusive access to the object of `h`.
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&self, h: &'a mut DynHandle<T>) -> &'a mut T
    where
        'p: 'a,
    {
        check(h, self.id);
        self.objs.get_mut(&mut h.h)
    }

    /// Prefetches the first cache line of the object of `h` for writing (as
    /// [`Resolver::prefetch`]: DPDK's `rte_prefetch0_write`, VPP's
    /// `vlib_prefetch_buffer_header`). A hint only: nothing is read or written.
    ///
    /// A handle of another pool is ignored (no prefetch, no panic): a hint has nothing to
    /// report, and the access that follows ([`DynResolver::get_mut`], ...) rejects the handle.
    #[inline(always)]
    pub fn prefetch(&self, h: &DynHandle<T>) {
        if h.pool == self.id {
            self.objs.prefetch(&h.h)
        }
    }

    /// [`DynResolver::prefetch`] of every handle of `hs`, in order (VPP's burst prefetch);
    /// handles of other pools are skipped.
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[DynHandle<T>]) {
        for h in hs {
            self.prefetch(h);
        }
    }

    /// Converts `n = min(hs.len(), out.len())` handles to raw object pointers (`out[..n]`) and
    /// returns `n`, as [`Resolver::resolve_bulk`] (VPP's `vlib_get_buffers`). Dereferencing
    /// the pointers is the caller's `unsafe` responsibility, as for [`Resolver::as_ptr`].
    ///
    /// # Panics
    /// If any of the `n` handles belongs to another pool (naming both); then `out` is
    /// unchanged. See [`DynResolver::try_resolve_bulk`].
    #[inline]
    #[track_caller]
    pub fn resolve_bulk(&self, hs: &[DynHandle<T>], out: &mut [NonNull<T>]) -> usize {
        let n = hs.len().min(out.len());
        check_all(&hs[..n], self.id);
        for (o, h) in out[..n].iter_mut().zip(&hs[..n]) {
            *o = self.objs.as_ptr(&h.h);
        }
        n
    }

    /// As [`DynResolver::resolve_bulk`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] for the first of the `min(hs.len(), out.len())` handles
    /// that belongs to another pool; `out` is then unchanged.
    #[inline]
    pub fn try_resolve_bulk(
        &self,
        hs: &[DynHandle<T>],
        out: &mut [NonNull<T>],
    ) -> Result<usize, PoolError> {
        let n = hs.len().min(out.len());
        try_check_all(&hs[..n], self.id)?;
        for (o, h) in out[..n].iter_mut().zip(&hs[..n]) {
            *o = self.objs.as_ptr(&h.h);
        }
        Ok(n)
    }

    /// `&mut T` to the object of each handle of `hs`, in order (as [`Resolver::get_mut_all`]:
    /// sound because distinct handles own distinct objects). Every pool id is checked once,
    /// up front (one compare per handle, one branch for the batch); the iterator then converts
    /// without checks. Borrows `hs` mutably and the pool for `'a`.
    ///
    /// # Panics
    /// If any handle of `hs` belongs to another pool (naming both), before anything is
    /// yielded. See [`DynResolver::try_get_mut_all`].
    #[inline]
    #[track_caller]
    pub fn get_mut_all<'a>(&self, hs: &'a mut [DynHandle<T>]) -> DynObjectsMut<'a, T>
    where
        'p: 'a,
    {
        check_all(hs, self.id);
        DynObjectsMut {
            objs: self.objs,
            hs: hs.iter_mut(),
        }
    }

    /// As [`DynResolver::get_mut_all`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] for the first handle of `hs` that belongs to another pool,
    /// before anything is yielded.
    #[inline]
    pub fn try_get_mut_all<'a>(
        &self,
        hs: &'a mut [DynHandle<T>],
    ) -> Result<DynObjectsMut<'a, T>, PoolError>
    where
        'p: 'a,
    {
        try_check_all(hs, self.id)?;
        Ok(DynObjectsMut {
            objs: self.objs,
            hs: hs.iter_mut(),
        })
    }
}

/// The objects of a slice of [`DynHandle`]s as `&'a mut T`, in order (pool ids checked before
/// it was made); made by [`DynResolver::get_mut_all`] and the `get_mut_all` /
/// `try_get_mut_all` of [`DynPool`] and [`DynLocalCache`].
pub struct DynObjectsMut<'a, T> {
    objs: Resolver<'a, T, Unchecked, Index>,
    hs: std::slice::IterMut<'a, DynHandle<T>>,
}

impl<'a, T> Iterator for DynObjectsMut<'a, T> {
    type Item = &'a mut T;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut T> {
        // Ids checked when the iterator was made; each handle is yielded once.
        self.hs.next().map(|h| self.objs.get_mut(&mut h.h))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.hs.size_hint()
    }
}

impl<T> DoubleEndedIterator for DynObjectsMut<'_, T> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.hs.next_back().map(|h| self.objs.get_mut(&mut h.h))
    }
}

impl<T> ExactSizeIterator for DynObjectsMut<'_, T> {}
impl<T> std::iter::FusedIterator for DynObjectsMut<'_, T> {}

impl<T> fmt::Debug for DynObjectsMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynObjectsMut")
            .field("remaining", &self.hs.len())
            .finish()
    }
}

/// An explicit cache of a [`DynPool`] (as [`LocalCache`]) that holds a clone of the pool: it is
/// `'static` and `Send`, so it can be stored next to the pool in a struct or moved into a
/// spawned thread; it is not `Sync`.
///
/// Every method takes `&self` (the cache is `!Sync`, and no method runs user code while it
/// works on the cache), so a reference from [`DynLocalCache::get_mut`] can be held while the
/// same cache keeps allocating:
///
/// ```
/// let pool = idxpool::DynPool::new(idxpool::PoolBuilder::<u64>::with_default(64).cache_size(16))?;
/// let cache = pool.local_cache();
/// let mut first = cache.get()?;
/// let x = cache.get_mut(&mut first);     // a &mut u64 held ...
/// let second = cache.get()?;             // ... while the cache allocates
/// *x = 7;
/// cache.put(second);
/// cache.put(first);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// Dropping it flushes its objects back to the ring.
pub struct DynLocalCache<T: 'static> {
    // Field order matters: the cache (which borrows the pool) is dropped before `pool`.
    // In a `Dangling`: it may be the last owner of the pool when passed by value.
    cache: Dangling<UnsafeCell<LocalCache<'static, T, Unchecked, Index>>>,
    scratch: UnsafeCell<Vec<Bare<T>>>,
    objs: Resolver<'static, T, Unchecked, Index>,
    id: NonZeroU32,
    pool: DynPool<T>,
}

impl<T: 'static> DynLocalCache<T> {
    /// The cache and the scratch vector, exclusively for the duration of one method.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    fn parts(
        &self,
    ) -> (
        &mut LocalCache<'static, T, Unchecked, Index>,
        &mut Vec<Bare<T>>,
    ) {
        // SAFETY: DynLocalCache is !Sync (UnsafeCell), so only this thread reaches it; each
        // method takes these references once, uses them without calling user code (handles
        // have no destructor, no T is dropped or created) and drops them before returning, so
        // they are never aliased. get_ref/get_mut do not touch these cells.
        unsafe { (&mut *self.cache.get().get(), &mut *self.scratch.get()) }
    }

    #[inline(always)]
    fn wrap(&self, h: Bare<T>) -> DynHandle<T> {
        DynHandle::new(h, self.id)
    }

    /// The pool.
    pub fn pool(&self) -> &DynPool<T> {
        &self.pool
    }

    /// Objects held by this cache now.
    pub fn len(&self) -> usize {
        self.parts().0.len()
    }

    /// True when the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes one object (LIFO).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when this cache and the ring are empty.
    #[inline(always)]
    #[must_use = "the handle owns an object: put it back with cache.put(h)"]
    pub fn get(&self) -> Result<DynHandle<T>, PoolError> {
        let h = self.parts().0.get()?;
        Ok(self.wrap(h))
    }

    /// Returns one object.
    ///
    /// # Panics
    /// If `h` belongs to another pool (naming both).
    #[inline(always)]
    #[track_caller]
    pub fn put(&self, h: DynHandle<T>) {
        check(&h, self.id);
        self.parts().0.put(h.h)
    }

    /// Appends exactly `n` handles to `out`, or none.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`]; `out` unchanged.
    #[inline]
    #[must_use = "on Ok, `out` holds objects that must be put back"]
    pub fn get_bulk(&self, out: &mut Vec<DynHandle<T>>, n: usize) -> Result<(), PoolError> {
        let (c, scratch) = self.parts();
        scratch.clear();
        c.get_bulk(scratch, n)?;
        tag_into(scratch, out, self.id);
        Ok(())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[inline]
    #[must_use = "the count says how many objects were appended to `out`"]
    pub fn get_burst(&self, out: &mut Vec<DynHandle<T>>, n: usize) -> usize {
        let (c, scratch) = self.parts();
        scratch.clear();
        let got = c.get_burst(scratch, n);
        tag_into(scratch, out, self.id);
        got
    }

    /// Returns every handle of `handles` (left empty). Always succeeds.
    ///
    /// # Panics
    /// If any handle belongs to another pool; then nothing is put and `handles` is unchanged.
    #[inline]
    #[track_caller]
    pub fn put_bulk(&self, handles: &mut Vec<DynHandle<T>>) {
        self.put_bulk_tail(handles, usize::MAX)
    }

    /// Returns the last `n` handles of `handles` (all of them if it holds fewer) and
    /// truncates it (as [`LocalCache::put_bulk_tail`]).
    ///
    /// # Panics
    /// If any of those handles belongs to another pool; then nothing is put.
    #[inline]
    #[track_caller]
    pub fn put_bulk_tail(&self, handles: &mut Vec<DynHandle<T>>, n: usize) {
        let start = handles.len() - n.min(handles.len());
        check_all(&handles[start..], self.id);
        let (c, scratch) = self.parts();
        scratch.clear();
        untag_tail_into(handles, start, scratch);
        c.put_bulk(scratch);
    }

    /// Shared access to an object (one compare of pool ids).
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&'a self, h: &'a DynHandle<T>) -> &'a T {
        check(h, self.id);
        self.objs.get_ref(&h.h)
    }

    /// Exclusive access to an object (one compare of pool ids). The reference borrows the
    /// handle and the cache *shared*, so the cache can keep allocating while it lives (see
    /// the type's example); it cannot outlive the cache, which keeps the pool alive. A
    /// [`DynPool::resolver`] gives references tied to the pool instead.
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&'a self, h: &'a mut DynHandle<T>) -> &'a mut T {
        check(h, self.id);
        self.objs.get_mut(&mut h.h)
    }

    /// A resolver borrowing this cache (which keeps the pool alive).
    #[inline(always)]
    fn objs(&self) -> DynResolver<'_, T> {
        DynResolver {
            objs: self.objs,
            id: self.id,
        }
    }

    /// Prefetches the object of `h` for writing (as [`DynResolver::prefetch`]: a handle of
    /// another pool is ignored).
    #[inline(always)]
    pub fn prefetch(&self, h: &DynHandle<T>) {
        self.objs().prefetch(h)
    }

    /// Prefetches the objects of every handle of `hs` (as [`DynResolver::prefetch_all`]),
    /// e.g. right after [`DynLocalCache::get_bulk`].
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[DynHandle<T>]) {
        self.objs().prefetch_all(hs)
    }

    /// Raw object pointers of `min(hs.len(), out.len())` handles (as
    /// [`DynResolver::resolve_bulk`]); dereferencing them is the caller's `unsafe`
    /// responsibility.
    ///
    /// # Panics
    /// If one of those handles belongs to another pool; see
    /// [`DynLocalCache::try_resolve_bulk`].
    #[inline]
    #[track_caller]
    pub fn resolve_bulk(&self, hs: &[DynHandle<T>], out: &mut [NonNull<T>]) -> usize {
        self.objs().resolve_bulk(hs, out)
    }

    /// As [`DynLocalCache::resolve_bulk`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`]; `out` unchanged.
    #[inline]
    pub fn try_resolve_bulk(
        &self,
        hs: &[DynHandle<T>],
        out: &mut [NonNull<T>],
    ) -> Result<usize, PoolError> {
        self.objs().try_resolve_bulk(hs, out)
    }

    /// `&mut T` to the object of each handle of `hs`, in order (as
    /// [`DynResolver::get_mut_all`]). Borrows `hs` mutably and this cache shared, so the
    /// cache can keep allocating while the references live.
    ///
    /// # Panics
    /// If any handle belongs to another pool, before anything is yielded; see
    /// [`DynLocalCache::try_get_mut_all`].
    #[inline]
    #[track_caller]
    pub fn get_mut_all<'a>(&'a self, hs: &'a mut [DynHandle<T>]) -> DynObjectsMut<'a, T> {
        self.objs().get_mut_all(hs)
    }

    /// As [`DynLocalCache::get_mut_all`], with a typed error for a foreign handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] for the first foreign handle, before anything is yielded.
    #[inline]
    pub fn try_get_mut_all<'a>(
        &'a self,
        hs: &'a mut [DynHandle<T>],
    ) -> Result<DynObjectsMut<'a, T>, PoolError> {
        self.objs().try_get_mut_all(hs)
    }

    /// Returns every cached object to the ring.
    pub fn flush(&self) {
        self.parts().0.flush()
    }
}

impl<T: 'static> fmt::Debug for DynLocalCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynLocalCache")
            .field("pool", &self.pool.name())
            .field("id", &self.id)
            .field("len", &self.len())
            .finish()
    }
}

/// The producing half of a [`DynPool::handle_ring`]: `'static`, `Send` when `T: Send`.
pub struct DynProducer<T: 'static> {
    // Field order: the ring half (which borrows the pool) is dropped before `pool`.
    tx: Producer<'static, T, Unchecked, Index>,
    scratch: Vec<Bare<T>>,
    id: NonZeroU32,
    pool: DynPool<T>,
}

impl<T: 'static> DynProducer<T> {
    /// The pool.
    pub fn pool(&self) -> &DynPool<T> {
        &self.pool
    }

    /// Slot count of the ring.
    pub fn size(&self) -> usize {
        self.tx.ring().size()
    }

    /// True when the next produce would fail.
    pub fn is_full(&self) -> bool {
        self.tx.is_full()
    }

    /// Hands `h` to the consumer, or gives it back when the ring is full
    /// (see [`Producer::produce`]).
    ///
    /// # Errors
    /// The handle, when the ring is full.
    ///
    /// # Panics
    /// If `h` belongs to another pool.
    #[inline]
    #[track_caller]
    pub fn produce(&mut self, h: DynHandle<T>) -> Result<(), DynHandle<T>> {
        check(&h, self.id);
        let id = self.id;
        self.tx.produce(h.h).map_err(|h| DynHandle::new(h, id))
    }

    /// Hands every handle of `handles` over, or none (false: they stay in `handles`).
    ///
    /// # Panics
    /// If any handle belongs to another pool; `handles` is then unchanged.
    #[must_use = "on false the handles are still in the Vec"]
    #[track_caller]
    pub fn produce_bulk(&mut self, handles: &mut Vec<DynHandle<T>>) -> bool {
        check_all(handles, self.id);
        self.scratch.clear();
        untag_tail_into(handles, 0, &mut self.scratch);
        if self.tx.produce_bulk(&mut self.scratch) {
            true
        } else {
            tag_into(&mut self.scratch, handles, self.id);
            false
        }
    }

    /// Hands over as many handles from the front of `handles` as fit; returns how many
    /// (the rest stay in `handles`, in order).
    ///
    /// # Panics
    /// If any handle belongs to another pool; `handles` is then unchanged.
    #[track_caller]
    pub fn produce_burst(&mut self, handles: &mut Vec<DynHandle<T>>) -> usize {
        check_all(handles, self.id);
        self.scratch.clear();
        untag_tail_into(handles, 0, &mut self.scratch);
        let k = self.tx.produce_burst(&mut self.scratch);
        tag_into(&mut self.scratch, handles, self.id);
        k
    }
}

impl<T: 'static> fmt::Debug for DynProducer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynProducer")
            .field("pool", &self.pool.name())
            .field("tx", &self.tx)
            .finish()
    }
}

/// The consuming half of a [`DynPool::handle_ring`]: `'static`, `Send` when `T: Send`.
pub struct DynConsumer<T: 'static> {
    // Field order: the ring half (which borrows the pool) is dropped before `pool`.
    rx: Consumer<'static, T, Unchecked, Index>,
    scratch: Vec<Bare<T>>,
    id: NonZeroU32,
    pool: DynPool<T>,
}

impl<T: 'static> DynConsumer<T> {
    /// The pool.
    pub fn pool(&self) -> &DynPool<T> {
        &self.pool
    }

    /// True when there is nothing to consume now.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// Takes the next handle, if any (see [`Consumer::consume`]).
    #[inline]
    #[must_use = "the handle owns an object: put it back into the pool"]
    pub fn consume(&mut self) -> Option<DynHandle<T>> {
        let id = self.id;
        self.rx.consume().map(|h| DynHandle::new(h, id))
    }

    /// Appends exactly `n` handles to `out`, or none (false).
    #[must_use = "on true, `out` holds objects that must be put back"]
    pub fn consume_bulk(&mut self, out: &mut Vec<DynHandle<T>>, n: usize) -> bool {
        self.scratch.clear();
        let ok = self.rx.consume_bulk(&mut self.scratch, n);
        tag_into(&mut self.scratch, out, self.id);
        ok
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[must_use = "the count says how many objects were appended to `out`"]
    pub fn consume_burst(&mut self, out: &mut Vec<DynHandle<T>>, n: usize) -> usize {
        self.scratch.clear();
        let k = self.rx.consume_burst(&mut self.scratch, n);
        tag_into(&mut self.scratch, out, self.id);
        k
    }
}

impl<T: 'static> fmt::Debug for DynConsumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynConsumer")
            .field("pool", &self.pool.name())
            .field("rx", &self.rx)
            .finish()
    }
}

/// An object of a [`DynPool`] that goes back to its pool when the guard is dropped (also
/// when a panic unwinds through it). `Deref`/`DerefMut` to the object; [`DynPooled::into_handle`]
/// gives the plain handle back. Made by [`DynPool::get_pooled`] or [`DynPool::pooled`].
#[must_use = "dropping the guard at once puts the object straight back"]
pub struct DynPooled<'p, T> {
    pool: &'p DynPool<T>,
    h: ManuallyDrop<DynHandle<T>>,
}

impl<'p, T> DynPooled<'p, T> {
    /// Gives up the guard and returns the plain handle (to be put back by hand).
    pub fn into_handle(self) -> DynHandle<T> {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the handle is taken out exactly once.
        unsafe { ManuallyDrop::take(&mut me.h) }
    }

    /// The handle, by reference.
    pub fn handle(&self) -> &DynHandle<T> {
        &self.h
    }

    /// The pool the object goes back to.
    pub fn pool(&self) -> &'p DynPool<T> {
        self.pool
    }
}

impl<T> std::ops::Deref for DynPooled<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        self.pool.inner().get_ref(&self.h.h)
    }
}

impl<T> std::ops::DerefMut for DynPooled<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // The id was checked when the guard was made.
        self.pool.inner().get_mut(&mut self.h.h)
    }
}

impl<T> Drop for DynPooled<'_, T> {
    fn drop(&mut self) {
        // SAFETY: drop runs once; the handle is not used afterwards.
        let h = unsafe { ManuallyDrop::take(&mut self.h) };
        self.pool.inner().put(h.h);
    }
}

impl<T: fmt::Debug> fmt::Debug for DynPooled<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DynPooled").field(&**self).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<DynHandle<[u8; 2048]>>(), 8);
        assert_eq!(std::mem::size_of::<Option<DynHandle<[u8; 2048]>>>(), 8);
    }

    #[test]
    fn ids_are_distinct_and_named_in_errors() {
        let a = DynPool::new(PoolBuilder::<u32>::with_default(4).name("unit-a")).unwrap();
        let b = DynPool::new(PoolBuilder::<u32>::with_default(4).name("unit-b")).unwrap();
        assert_ne!(a.id(), b.id());
        let h = a.get().unwrap();
        let e = b.check(&h).unwrap_err().to_string();
        assert!(e.contains("'unit-a'") && e.contains("'unit-b'"), "{e}");
        a.put(h);
    }
}
