//! The pool: region + common ring + caches, generic over the entry representation. Every get
//! and put is a short adapter (pool/adapters.rs, pool/table.rs): find the cache ([`Pool`]'s
//! thread cache or a [`crate::LocalCache`]'s own), run the one cache algorithm (cache/mod.rs,
//! through the token in cache/token.rs), convert entries to handles, and call the debug hook
//! of that direction (pool/debug.rs).

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use crate::brand::{Brand, BrandSlot};
use crate::cache::{Cache, CacheMut, FlushPolicy, Put};
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::region::{BackingReport, Region};
use crate::repr::{Geometry, Repr};
use crate::ring::{Behavior, Ring};
use crate::stats::Stats;
use crate::thread::{ExitFlush, Registry};

mod adapters;
mod counts;
pub(crate) mod debug;
mod identity;
mod objects;
mod resolver;
mod table;

pub(crate) use adapters::{entries_of, Token};
use debug::ObjectStates;
pub use debug::DEBUG_CHECKS;
pub(crate) use identity::*;
pub(crate) use objects::{drop_objects, Growth, InitFn, ObjectInit, UninitObject};
pub use resolver::Resolver;
pub(crate) use table::Lazy;

/// The untyped part of a pool, which thread-exit destructors may outlive the pool with: the
/// common ring, the registry of caches, and the zero-size cache of callers without one.
pub(crate) struct PoolCore<E> {
    pub(crate) ring: Ring<E>,
    pub(crate) registry: Registry<E>,
    /// The cache of callers that have none (cache size 0, threads beyond `max_threads`, code
    /// running during thread exit): size 0, so every operation goes to the ring.
    pub(crate) uncached: Cache<E>,
    pub(crate) cache_size: u32,
    pub(crate) policy: FlushPolicy,
    /// Counters of caches that are gone (dropped local caches, exited threads' caches), folded
    /// in when they go, so that `stats()` keeps counting their operations.
    /// (Boxed, as `baseline`: the fork handlers reach their locks by raw pointers, `CoreLocks`.)
    retired: Box<crate::fork::Lock<Stats>>,
    /// What `stats_reset()` subtracts.
    baseline: Box<crate::fork::Lock<Stats>>,
    /// Objects lent to the kernel (published in an io_uring provided-buffer ring by
    /// `idxpool::uring`): neither free nor held by a handle. Written only by their lender.
    pub(crate) kernel_lent: std::sync::atomic::AtomicUsize,
    /// Getters waiting for objects, attached at build (wait.rs); their count is on the
    /// ring's producer line. Reached only through [`PoolCore::after_put`] (and by the waiting
    /// gets themselves).
    pub(crate) waiters: Box<dyn Waiters<E>>,
}

/// The getters waiting for objects (wait.rs), as the core sees them: attached at build, woken
/// by the operations whose token reached the ring. This is the seam of waiting, one per
/// direction: such an operation calls [`PoolCore::after_put`] once, after its token is gone
/// (out of line, cold), which tests the ring's count of waiters and only then calls in here.
pub(crate) trait Waiters<E>: std::any::Any + Send + Sync {
    /// Wakes waiters for the entries now in `ring`.
    fn wake_for(&self, ring: &Ring<E>);
    /// The fork's prepare handler: takes the waiters' lock (crate::fork, a leaf of its order).
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_prepare(&self);
    /// In the parent after the fork: releases it.
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_parent(&self);
    /// In the child after the fork (one thread, the lock still held): repairs the waiters,
    /// sets `waiting` (the ring's count of waiters) to those left, releases the lock.
    #[cfg(all(unix, not(miri), not(loom)))]
    fn fork_child(&self, waiting: &crate::sync::AtomicU32);
}

impl<E> PoolCore<E> {
    /// Adds the counters of a cache that is going away to the pool's totals.
    pub(crate) fn retire_counters(&self, c: &Cache<E>) {
        if Stats::COUNTING {
            *self.retired.lock() += c.counters.snapshot();
        }
    }
}

impl<E: Copy + Send + 'static> PoolCore<E> {
    /// A new user-owned cache (`LocalCache`) of the pool's cache size and flush policy,
    /// registered (counts, stats and audits see it; its objects count as in use), and its
    /// token. The token holds raw pointers only: its nominal `'static` lends nothing.
    ///
    /// # Safety
    /// This core stays in place and alive while the token is used, and the token is not used
    /// after [`PoolCore::release_explicit_cache`] freed its cache.
    pub(crate) unsafe fn explicit_cache(&self) -> CacheMut<'static, E> {
        let cache = NonNull::from(Box::leak(Box::new(Cache::new(
            self.cache_size,
            self.policy,
        ))));
        self.registry.add_explicit(cache);
        // SAFETY: the cache was just allocated and is owned by the token alone until
        // release_explicit_cache frees it (the registry only reads its atomic length); the
        // ring lives as long as this core (the caller's contract).
        unsafe { CacheMut::new(cache, &*(&self.ring as *const Ring<E>)) }
    }

    /// Unregisters and frees a cache made by [`PoolCore::explicit_cache`] (its token flushed
    /// it first), adding its counters to the pool's totals; nothing when `cache` is not one
    /// registered here.
    pub(crate) fn release_explicit_cache(&self, cache: NonNull<Cache<E>>) {
        let retire = || {
            // SAFETY: called only when `cache` was registered (remove_explicit), so allocated
            // by Box in explicit_cache and not yet freed.
            self.retire_counters(unsafe { cache.as_ref() });
        };
        if self.registry.remove_explicit(cache, retire) {
            // SAFETY: registered, so allocated by Box in explicit_cache and not yet freed;
            // unregistered now, so no reader remains but its token, which its contract forbids
            // to be used again.
            drop(unsafe { Box::from_raw(cache.as_ptr()) });
        }
    }

    /// The check of an operation whose token reached the ring, after the token is gone: wakes
    /// waiters if the ring counts any ([`Waiters`]). Out of line and cold: it is reached only
    /// from the slow paths, and inlined there it changed the register allocation of the
    /// callers' loops (BENCHMARKS.md 17).
    #[cold]
    #[inline(never)]
    pub(crate) fn after_put(&self) {
        if self.ring.has_waiters() {
            self.waiters.wake_for(&self.ring);
        }
    }

    /// # Errors
    /// [`PoolError::SizeOverflow`] when the slot array of `max_threads` slots cannot be
    /// allocated (fallible reserve: never an abort); the builder bounds `max_threads` first.
    pub(crate) fn new(
        ring: Ring<E>,
        max_threads: usize,
        cache_size: u32,
        policy: FlushPolicy,
        waiters: Box<dyn Waiters<E>>,
    ) -> Result<Self, PoolError> {
        Ok(PoolCore {
            ring,
            registry: Registry::new(max_threads)?,
            uncached: Cache::uncached(policy),
            cache_size,
            policy,
            retired: Box::new(crate::fork::Lock::new(Stats::default())),
            baseline: Box::new(crate::fork::Lock::new(Stats::default())),
            kernel_lent: std::sync::atomic::AtomicUsize::new(0),
            waiters,
        })
    }
}

impl<E: Copy + Send + 'static> PoolCore<E> {
    /// Gives the entries of forgotten `LocalCache`s (still registered although their owner is
    /// gone) back to the ring and frees their caches; returns how many there were.
    ///
    /// # Safety
    /// As [`Registry::reclaim_orphans`]: the caller holds `&mut` on the pool.
    pub(crate) unsafe fn reclaim_forgotten_caches(&self) -> usize {
        let reclaim = |c: NonNull<Cache<E>>| {
            // SAFETY: the cache's owner is gone (the caller's contract): this is its only user.
            unsafe { CacheMut::new(c, &self.ring) }.flush();
            // SAFETY: still allocated (reclaim_orphans frees it after this call).
            self.retire_counters(unsafe { c.as_ref() });
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.registry.reclaim_orphans(reclaim) }
    }
}

impl<E: Copy + Send + 'static> ExitFlush for PoolCore<E> {
    fn flush_exiting(&self, tid: usize) {
        self.registry.take_exiting(tid, |cache| {
            // SAFETY: the exiting thread owns its cache, just taken out of its slot.
            unsafe { CacheMut::new(NonNull::from(cache), &self.ring) }.flush();
            self.retire_counters(cache);
        });
        // After the token: the flushed objects may serve waiters.
        self.after_put();
    }
}

/// A pool's part in a fork (crate::fork): its locks in the fork's order (the registry's slot
/// locks and `LocalCache` list, the stats totals, the waiter queue), and in the child the
/// waiter queue's repair. Raw pointers into the core's heap parts only, never into the core:
/// its last drop (`Arc`'s, then `Drop::drop`) holds `&mut` on the core while it unlists this
/// part, which the handlers may be reading until then. Listed (owned by the fork's list) from
/// `Pool::from_parts`, when the core is in its `Arc`, until the core's drop.
#[cfg(all(unix, not(miri), not(loom)))]
struct CoreLocks<E> {
    registry: crate::thread::RegistryLocks<E>,
    retired: *const crate::fork::RawLock,
    baseline: *const crate::fork::RawLock,
    waiters: *const dyn Waiters<E>,
    waiting: *const crate::sync::AtomicU32,
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E: Copy + Send + 'static> PoolCore<E> {
    /// Lists the core's locks with the fork handlers (once it is in its `Arc`).
    fn list_for_fork(&self) {
        let part = CoreLocks {
            registry: self.registry.fork_locks(),
            retired: self.retired.raw(),
            baseline: self.baseline.raw(),
            waiters: &*self.waiters,
            waiting: self.ring.waiting(),
        };
        // SAFETY: the parts pointed to (the registry's slot array and list box, the stats
        // boxes, the waiters' box, the ring's state) are freed only after the core's drop
        // unlists it (they are its fields, dropped after `Drop::drop`).
        unsafe { crate::fork::register_owned((self as *const Self).cast(), Box::new(part)) };
    }
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E: Copy + Send + 'static> crate::fork::Participant for CoreLocks<E> {
    fn fork_prepare(&self) {
        // SAFETY: listed only while the core lives (see `list_for_fork`); so in the two below.
        unsafe {
            self.registry.fork_prepare();
            (*self.retired).fork_take();
            (*self.baseline).fork_take();
            (*self.waiters).fork_prepare();
        }
    }

    fn fork_parent(&self) {
        // SAFETY: as above.
        unsafe {
            (*self.waiters).fork_parent();
            (*self.baseline).fork_release();
            (*self.retired).fork_release();
            self.registry.fork_release();
        }
    }

    fn fork_child(&self) {
        // SAFETY: as above.
        unsafe {
            (*self.waiters).fork_child(&*self.waiting);
            (*self.baseline).fork_release();
            (*self.retired).fork_release();
            self.registry.fork_release();
        }
    }
}

impl<E> Drop for PoolCore<E> {
    fn drop(&mut self) {
        // Before any field is dropped (a no-op for a core never listed). Only the address:
        // the handlers read the core's heap parts, never the core (`CoreLocks`).
        crate::fork::unregister((self as *const Self).cast());
    }
}

/// A fixed-size object pool (DPDK's `rte_mempool`) of `T`s, with two independent choices as
/// type parameters:
///
/// * `B`, its **identity**: how a handle proves it belongs to this pool. [`crate::Runtime`]
///   (the default: any number of pools, stored anywhere, one range compare per use of a
///   handle), or a brand ([`brand!`](macro@crate::brand) types, [`crate::Scoped`],
///   [`crate::Unchecked`]: checked by the compiler, no run-time check at all);
/// * `R`, its **entry representation** ([`crate::repr`]): [`crate::Offset`] (the default:
///   4-byte scaled byte offsets, handle -> address is the store's addressing mode),
///   [`crate::Index`] (4-byte indices, any region size) or [`crate::Pointer`] (8-byte
///   pointers: the DPDK baseline the benchmarks compare with).
///
/// All objects live in one region at `base + index x stride`; free ones are named by entries
/// in the common ring or in a cache. Objects are created once at pool creation and dropped
/// when the pool is dropped; `get`/`put` only move ownership (an object comes back in the state
/// it was put in, as with rte_mempool).
///
/// Thread safety: `&Pool` may be shared between threads (`Sync` when `T: Send`), and so may an
/// `Arc<Pool>`; the implicit-cache API (`get`, `put`, ...) uses a per-thread cache;
/// [`crate::LocalCache`] is an explicit cache owned by one user, over a `&Pool` or an
/// `Arc<Pool>`.
///
/// ```
/// use std::sync::Arc;
/// use idxpool::{LocalCache, Pool, PoolBuilder};
///
/// struct Packet { len: u16, data: [u8; 2046] }
/// // A run-time pool (the default identity): built from configuration, kept in an Arc.
/// let pool: Arc<Pool<Packet>> = Arc::new(
///     PoolBuilder::with_init(1024, |_i, slot| slot.write(Packet { len: 0, data: [0; 2046] }))
///         .cache_size(64)
///         .build()?,
/// );
/// let worker = std::thread::spawn({
///     let mut cache = LocalCache::new(pool.clone()); // 'static: holds a clone of the Arc
///     move || {
///         let mut h = cache.get().unwrap();
///         cache.pool().get_mut(&mut h).len = 64;
///         cache.put(h);
///     }
/// });
/// worker.join().unwrap();
/// assert_eq!(pool.in_use(), 0);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Pool<T: ?Sized + Element, B = crate::brand::Runtime, R: Repr = crate::repr::DefaultRepr>
{
    pub(crate) geometry: Geometry,
    pub(crate) core: Arc<PoolCore<R::Entry>>,
    /// Process-unique, never reused: the key of the per-thread cache memo.
    id: u64,
    /// Per-object states for the debug checks (debug.rs).
    pub(crate) states: ObjectStates,
    name: String,
    brand: Option<&'static BrandSlot>,
    /// The pool's range of the handle space (run-time pools), released or quarantined at drop.
    space: Option<crate::space::Range>,
    /// The live capacity and what `grow` needs (grow.rs).
    pub(crate) growth: Growth,
    pub(crate) region: Region,
    /// The reset hook run on every object put back ([`crate::PoolBuilder::on_put`];
    /// `geometry.put_hook` says whether there is one), attached at build by on_put.rs.
    pub(crate) on_put: Option<ResetHook<T>>,
    /// Owns `T`s (drop check), invariant in `T` and `B` (see [`Invariant`]).
    _marker: PhantomData<(Invariant<T>, Invariant<B>, T)>,
}

pub(crate) use crate::handle::Invariant;

// SAFETY: the pool hands each object to one handle owner at a time; sharing &pool between
// threads moves objects (T) between threads, which needs T: Send only. Geometry and Region are
// address bookkeeping; PoolCore is Sync.
unsafe impl<T: ?Sized + Element + Send, B, R: Repr> Sync for Pool<T, B, R> {}

/// The reset hook ([`crate::PoolBuilder::on_put`]) as the core sees it: the user's closure,
/// attached at build (on_put.rs). This is the seam of the put direction: a put tests
/// `geometry.put_hook` (a byte its geometry already holds) once and, when it is set, makes one
/// cold call, [`Pool::run_on_put`], before its token exists.
pub(crate) struct ResetHook<T: ?Sized> {
    /// The user's hook.
    pub(crate) hook: Box<dyn Fn(&mut T) + Send + Sync>,
}

/// The burst of a reset hook that unwinds: its drop (reached only while the panic unwinds)
/// gives the whole burst back and empties the caller's table, if any.
struct GiveBack<'p, T: ?Sized + Element, B, R: Repr> {
    pool: &'p Pool<T, B, R>,
    hs: *const [H<T, B, R>],
    table: Option<*mut [Slot<T, B, R>]>,
}

impl<T: ?Sized + Element, B, R: Repr> Drop for GiveBack<'_, T, B, R> {
    fn drop(&mut self) {
        let core = &*self.pool.core;
        // SAFETY: the handles are readable until this put (run_on_put's contract) and are
        // the burst's, which the adapter would have put: they are given back here instead.
        let src = entries_of(unsafe { &*self.hs });
        // Through the pool's zero-size cache, not the caller's: its token may be made at any
        // time on any thread (size 0: every entry goes to the ring, and it writes only atomics;
        // CacheMut::new), so this needs nothing the unwinding caller holds. The ring has room
        // for every object of the pool. Counted there, once.
        // SAFETY: the zero-size cache lives as long as the pool's core.
        unsafe { CacheMut::new(NonNull::from(&core.uncached), &core.ring) }.put(src);
        if let Some(t) = self.table {
            // SAFETY: the caller's table (run_on_put's contract), its handles moved just above.
            table::clear(unsafe { &mut *t });
        }
        // Waiters for objects (wait.rs): the burst is in the ring (the token above is gone).
        core.after_put();
    }
}

/// A slot of the caller's table (DPDK's `obj_table`): `Option<Handle>`, 4 bytes for 4-byte
/// entries (the entry's niche).
pub(crate) type Slot<T, B, R> = Option<H<T, B, R>>;

impl<T: ?Sized + Element, B, R: Repr> Pool<T, B, R> {
    /// Runs the reset hook on the object of each handle of `hs`, in order; the caller puts
    /// the burst after it returns. If the hook unwinds, the whole burst goes back to the pool
    /// and `table`, if given, is emptied, then the panic goes on: nothing is lost, nothing is
    /// put twice (on_put.rs).
    ///
    /// Out of line and cold, with no pointer into the caller's `LocalCache` among its
    /// arguments: the caller's loop keeps the cache's state and the pool pointer in registers
    /// (an argument pointing into the `LocalCache`, such as its token, makes the loop reload
    /// that state after every put).
    ///
    /// # Safety
    /// Every handle of `hs` is this pool's (checked by the caller for run-time pools), owned
    /// by the caller, which puts them right after this call returns, and readable until then;
    /// no reference to their objects is live. `table`, if given, is the caller's table holding
    /// those handles, valid for writes, and not otherwise borrowed during the call.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn run_on_put(
        &self,
        hs: *const [H<T, B, R>],
        table: Option<*mut [Slot<T, B, R>]>,
    ) {
        let give_back = GiveBack {
            pool: self,
            hs,
            table,
        };
        if let Some(r) = &self.on_put {
            let g = &self.geometry;
            // SAFETY: the contract; this view ends with the loop (no reference argument: the
            // table's clear on unwind writes the same memory).
            for h in unsafe { &*hs } {
                // SAFETY: `h` is this pool's and is being given back by its owner, so nothing
                // else borrows its object; distinct handles own distinct objects, and each
                // `&mut` ends with its call. Objects live from the build to the pool's drop.
                (r.hook)(unsafe { &mut *T::from_addr(R::ptr(g, h.entry()), g.elem_len) });
            }
        }
        std::mem::forget(give_back);
    }
}

/// Handle type of a pool.
pub(crate) type H<T, B, R> = Handle<T, B, R>;

impl<T: ?Sized + Element, B, R: Repr> Pool<T, B, R> {
    /// Gives the entries of forgotten `LocalCache`s back to the ring (see
    /// `PoolCore::reclaim_forgotten_caches`); returns how many caches there were.
    pub(crate) fn reclaim_forgotten_caches(&mut self) -> usize {
        // SAFETY: &mut self: no LocalCache of this pool is alive, so any still registered was
        // forgotten (its owner is gone).
        unsafe { self.core.reclaim_forgotten_caches() }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    #[allow(clippy::too_many_arguments)] // the parts of a pool, named once, by the builder
    pub(crate) fn from_parts(
        geometry: Geometry,
        region: Region,
        core: Arc<PoolCore<R::Entry>>,
        name: String,
        brand: Option<&'static BrandSlot>,
        space: Option<crate::space::Range>,
        states: ObjectStates,
        growth: Growth,
    ) -> Self {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        #[cfg(all(unix, not(miri), not(loom)))]
        core.list_for_fork();
        Pool {
            geometry,
            core,
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            states,
            name,
            brand,
            space,
            growth,
            region,
            on_put: None,
            _marker: PhantomData,
        }
    }

    // ---- geometry and configuration -------------------------------------------------------

    /// Number of objects: as built, plus what [`Pool::grow`] added (at most the
    /// [`crate::PoolBuilder::max_capacity`]). While another thread grows the pool, a
    /// snapshot: it changes after the new objects are in the ring.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.growth.capacity()
    }

    /// Bytes of one object: `size_of::<T>()`, or the length a byte-buffer pool was built
    /// with ([`crate::PoolBuilder::bytes`]).
    pub fn object_size(&self) -> usize {
        T::fixed_layout().map_or(self.geometry.elem_len, |l| l.size())
    }

    /// Bytes between consecutive objects.
    #[inline]
    pub fn stride(&self) -> usize {
        self.geometry.stride
    }

    /// Address of object 0 (the region's base).
    pub fn base(&self) -> NonNull<u8> {
        self.geometry.base
    }

    /// The backing the region got, and why it fell back if it did.
    pub fn backing(&self) -> &BackingReport {
        self.region.report()
    }

    /// Per-cache size (0: no caching).
    pub fn cache_size(&self) -> u32 {
        self.core.cache_size
    }

    /// The caches' flush/refill policy.
    pub fn policy(&self) -> FlushPolicy {
        self.core.policy
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    // ---- handle access --------------------------------------------------------------------

    /// Pointer to the object of `h` (valid while the pool lives).
    ///
    /// # Panics
    /// Run-time pools ([`crate::Runtime`]): when `h` is another pool's (the message names both
    /// pools); [`Pool::check`] tests first. Never for brands.
    #[inline(always)]
    #[track_caller]
    pub fn as_ptr(&self, h: &H<T, B, R>) -> NonNull<T> {
        resolve::<T, B, R>(&self.geometry, h.entry())
    }

    /// Shared access to the object of `h`: the entry's address (one addressing mode for offset
    /// entries), no bounds check. Brands prove at compile time that the handle is this pool's;
    /// a run-time pool checks it with one range compare.
    ///
    /// # Panics
    /// As [`Pool::as_ptr`]; [`Pool::try_get_ref`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        // SAFETY: h is this pool's (brand, or the range check in as_ptr) and owns its object;
        // the object is initialised; the borrow of h prevents a &mut through the same handle,
        // and no other handle names it.
        unsafe { self.as_ptr(h).as_ref() }
    }

    /// Exclusive access to the object of `h`: the one place where an entry becomes an address
    /// (`obase0 + entry x 8` for offsets: the store's addressing mode; no bounds check).
    ///
    /// # Panics
    /// As [`Pool::as_ptr`]; [`Pool::try_get_mut`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        // SAFETY: as get_ref; &mut h makes this the only borrow of the object.
        unsafe { self.as_ptr(h).as_mut() }
    }

    /// True when `h` is this pool's: always for brands (the compiler proved it); for run-time
    /// pools, when its entry lies in this pool's range of the handle space.
    #[inline]
    pub fn owns(&self, h: &H<T, B, R>) -> bool {
        !B::CHECKED || R::owns(&self.geometry, h.entry())
    }

    /// `Ok` when `h` is this pool's ([`Pool::owns`]).
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] naming the pool that minted `h` (or that it was dropped)
    /// and this one.
    #[inline]
    pub fn check(&self, h: &H<T, B, R>) -> Result<(), PoolError> {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))
    }

    /// [`Pool::get_ref`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> Result<&'a T, PoolError> {
        self.check(h)?;
        Ok(self.get_ref(h))
    }

    /// [`Pool::get_mut`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> Result<&'a mut T, PoolError> {
        self.check(h)?;
        Ok(self.get_mut(h))
    }

    /// A copyable handle-to-object converter for hot loops: it holds the base and stride by
    /// value, so that after inlining they stay in registers across object writes (a write
    /// through `&mut T` would otherwise force a reload from the pool). Borrows the pool, not a
    /// cache, so it can live across `LocalCache` gets and puts.
    ///
    /// ```
    /// idxpool::PoolBuilder::<u64>::with_default(64).scoped(|pool| {
    ///     let mut cache = pool.local_cache();
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     cache.get_bulk(&mut burst, 32).unwrap();
    ///     for (k, h) in burst.iter_mut().enumerate() {
    ///         *objs.get_mut(h) = k as u64;
    ///     }
    ///     cache.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    #[inline(always)]
    pub fn resolver(&self) -> Resolver<'_, T, B, R> {
        Resolver {
            geometry: self.geometry,
            _pool: PhantomData,
        }
    }

    /// Prefetches the first cache line of the object of `h` for writing (as
    /// [`Resolver::prefetch`]: DPDK's `rte_prefetch0_write`, VPP's
    /// `vlib_prefetch_buffer_header`). A hint only: nothing is read or written.
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        self.resolver().prefetch(h)
    }

    /// 0-based index of the object of `h` (`0..capacity`).
    ///
    /// # Panics
    /// Run-time pools: when `h` is another pool's (as [`Pool::get_ref`]).
    #[inline]
    #[track_caller]
    pub fn index_of(&self, h: &H<T, B, R>) -> u32 {
        check_owned::<B, R>(&self.geometry, h.entry());
        R::index(&self.geometry, h.entry())
    }

    /// Visits every object with its index (DPDK's `rte_mempool_obj_iter`), e.g. to set up or
    /// inspect objects. Takes `&mut self`, so no handle can be resolved meanwhile.
    pub fn obj_iter(&mut self) -> impl Iterator<Item = (u32, &mut T)> + '_ {
        let g = self.geometry;
        (0..self.capacity()).map(move |i| {
            let p = T::from_addr(g.ptr_of_index(i), g.elem_len);
            // SAFETY: &mut self excludes every other access to the objects for the iterator's
            // life; distinct indices are distinct, initialised, aligned objects.
            (i, unsafe { &mut *p })
        })
    }

    // ---- get and put through the calling thread's cache ------------------------------------

    /// The calling thread's cache, allocating it on first use, or the pool's zero-size cache
    /// when the thread may not have one.
    #[inline(always)]
    fn thread_cache(&self) -> &Cache<R::Entry> {
        match self.core.registry.current(self.id) {
            Some(c) => c,
            None => self.thread_cache_slow(),
        }
    }

    /// Flushes the calling thread's cache, if it has one, and pins it (`Cache::pin`): until
    /// no waiter is left, this thread's gets and puts bypass it, so that a put from another
    /// task of this thread reaches the ring and wakes a future of this thread that waits
    /// (wait.rs; tests/wait.rs, `a_future_is_woken_by_a_put_from_its_own_thread`).
    ///
    /// The order matters: the cache is emptied, then pinned, and only then are waiters woken
    /// (`after_put`): a waker is user code, which may put on this thread, and a put between
    /// the flush and the pin went into the cache and left a pinned cache holding objects
    /// (`tests/wait.rs`, `a_waker_that_puts_during_the_pin_leaves_the_cache_within_its_limit`).
    #[cold]
    pub(crate) fn pin_thread_cache(&self) {
        self.flush_thread_cache(true);
    }

    /// Empties the calling thread's cache into the ring, pins it when `pin`, and only then
    /// wakes waiters (the one sequence of [`Pool::flush`] and [`Pool::pin_thread_cache`]).
    fn flush_thread_cache(&self, pin: bool) {
        if let Some(c) = self.core.registry.current(self.id) {
            // SAFETY: the calling thread's own cache; no other token of it is live (no token
            // is live across a poll or a call into the pool, and nothing below runs user code
            // until after_put).
            unsafe { CacheMut::new(NonNull::from(c), &self.core.ring) }.flush();
            if pin {
                c.pin();
            }
            self.core.after_put();
        }
    }

    /// Counts a get of `n` objects taken straight from the ring, without a cache token (a
    /// waiting get's retry, wait.rs), in the calling thread's counters (its cache's, whose
    /// owner it is, or the pool's shared ones), as a cache's bypass get is counted.
    #[cold]
    pub(crate) fn count_ring_get(&self, n: usize) {
        use crate::stats::Counter;
        if !Stats::COUNTING {
            return; // no registry lookup for counters that count nothing
        }
        let c = self
            .core
            .registry
            .current(self.id)
            .unwrap_or(&self.core.uncached);
        c.counters.add(Counter::GetCommonBulk, 1);
        c.counters.add(Counter::GetCommonObjs, n);
        c.counters.add(Counter::GetSuccessBulk, 1);
        c.counters.add(Counter::GetSuccessObjs, n);
    }

    #[cold]
    fn thread_cache_slow(&self) -> &Cache<R::Entry> {
        if self.core.cache_size == 0 {
            return &self.core.uncached;
        }
        let exit: Weak<PoolCore<R::Entry>> = Arc::downgrade(&self.core);
        let (size, policy) = (self.core.cache_size, self.core.policy);
        self.core
            .registry
            .install(self.id, exit, || Cache::new(size, policy))
            .unwrap_or(&self.core.uncached)
    }

    /// The owner token of the calling thread's cache.
    #[inline(always)]
    pub(crate) fn thread_cache_mut(&self) -> CacheMut<'_, R::Entry> {
        let c = self.thread_cache();
        // SAFETY: c is the calling thread's own cache (only this thread uses it, and each
        // adapter makes this token only after its allocations and checks, and then only
        // copies entries: nothing can re-enter the pool on this thread while it lives; see
        // "the adapters" below), or the zero-size cache.
        unsafe { CacheMut::new(NonNull::from(c), &self.core.ring) }
    }

    /// Takes one object using the calling thread's cache (rte_mempool_get).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when this thread's cache and the ring are empty. Objects
    /// held in other threads' caches are not reachable (up to `threads x flush threshold`);
    /// size the pool for them, or have those threads call [`Pool::flush`].
    #[inline]
    #[must_use = "the handle owns an object: give it back with pool.put(h), or use Pooled::get(&pool) for a guard that does"]
    pub fn get(&self) -> Result<H<T, B, R>, PoolError> {
        self.get_array_via::<_, 1>(|| self.thread_cache_mut())
            .map(|[h]| h)
    }

    /// Returns one object through the calling thread's cache (rte_mempool_put).
    ///
    /// # Panics
    /// Run-time pools: when `h` is another pool's (nothing is moved);
    /// [`Pool::try_put`] gives it back instead.
    #[inline]
    #[track_caller]
    pub fn put(&self, h: H<T, B, R>) {
        self.put_via(&self.geometry, || self.thread_cache_mut(), &[h]);
    }

    /// [`Pool::put`] that gives a foreign handle back (`Err(h)`) instead of panicking.
    ///
    /// # Errors
    /// `Err(h)` when `h` is another pool's ([`Pool::check`] says which).
    #[inline]
    pub fn try_put(&self, h: H<T, B, R>) -> Result<(), H<T, B, R>> {
        if !self.owns(&h) {
            return Err(h);
        }
        self.put(h);
        Ok(())
    }

    /// Appends exactly `n` handles to `out`, or none (rte_mempool_get_bulk).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and what was reachable; `out` unchanged
    /// (nothing is allocated for a request larger than the pool).
    #[must_use = "on Ok, `out` holds objects that must be given back with pool.put_bulk"]
    pub fn get_bulk(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        self.get_vec_via(|| self.thread_cache_mut(), out, n, Behavior::Bulk, true)
            .map(|_| ())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[must_use = "the count says how many objects were appended to `out`; give them back with pool.put_bulk"]
    pub fn get_burst(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        self.get_vec_via(|| self.thread_cache_mut(), out, n, Behavior::Burst, true)
            .unwrap_or(0)
    }

    /// Returns every handle of `handles` (left empty); always succeeds (rte_mempool_put_bulk).
    pub fn put_bulk(&self, handles: &mut Vec<H<T, B, R>>) {
        let n = handles.len();
        self.put_vec_tail_via(&self.geometry, || self.thread_cache_mut(), handles, n);
    }

    /// Flushes the calling thread's cache into the ring (rte_mempool_cache_flush). Other
    /// threads' caches are theirs to flush.
    pub fn flush(&self) {
        self.flush_thread_cache(false);
    }
}

impl<T: ?Sized + Element, B, R: Repr> Drop for Pool<T, B, R> {
    fn drop(&mut self) {
        // Quiescent (we own the pool); exiting threads may still flush, under the slot locks.
        self.reclaim_forgotten_caches();
        let mut in_ring = 0;
        let free = self.core.registry.held_by_threads_and(|| {
            in_ring = self.core.ring.count();
            in_ring
        });
        // The live capacity: &mut self, so no grow runs (it takes &self).
        let capacity = self.growth.capacity();
        let cap = capacity as usize;
        // A panicking leak hook is caught and resumed at the end (leaks::rethrow).
        let hook_panic = if free < cap {
            let lent_to_kernel = self
                .core
                .kernel_lent
                .load(std::sync::atomic::Ordering::Relaxed);
            crate::leaks::report(crate::leaks::AuditReport {
                pool: self.name.clone(),
                capacity: cap,
                in_ring,
                in_caches: free - in_ring,
                in_use: cap - free - lent_to_kernel.min(cap - free),
                lent_to_kernel,
                caches: Vec::new(),
            })
        } else {
            None
        };
        if let Some(slot) = self.brand {
            slot.release(free == cap);
        }
        if let Some(range) = self.space {
            // Objects still out: their handles must never meet a later pool (quarantine).
            crate::space::release(range, free == cap);
        }
        if T::needs_drop() {
            // SAFETY: every object below the live capacity was initialised (at creation or
            // by grow) and is dropped once here; no reference to it can outlive the pool (all
            // borrow &self). Objects beyond it were never made.
            unsafe { drop_objects::<T>(&self.geometry, 0, capacity) };
        }
        crate::leaks::rethrow(hook_panic);
        // The region unmaps after this (field drop order).
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> fmt::Debug for Pool<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("repr", &R::NAME)
            .field("object_size", &self.object_size())
            .field("stride", &self.stride())
            .field("capacity", &self.capacity())
            .field("backing", &self.backing().backing)
            .field("cache_size", &self.cache_size())
            .field("policy", &self.policy())
            .field("ring_count", &self.core.ring.count())
            .field("available", &self.available())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Index, Offset, Pointer, PoolBuilder};

    /// The prefetch / bulk-resolve API on a full pool of `R` entries.
    fn bulk_api<R: Repr>() {
        let cap = if cfg!(miri) { 16 } else { 256 };
        PoolBuilder::<[u64; 9]>::zeroed(cap)
            .cache_size(8)
            .repr::<R>()
            .scoped(|pool| {
                let objs = pool.resolver();
                let mut hs = Vec::new();
                pool.get_bulk(&mut hs, cap as usize).unwrap();
                // Prefetch of every object of a full pool: a hint, no fault.
                objs.prefetch_all(&hs);
                pool.resolver().prefetch_all(&hs);
                for h in &hs {
                    objs.prefetch(h);
                    pool.prefetch(h);
                }
                // resolve_bulk: min(len) pointers, the same as as_ptr.
                let mut out = vec![NonNull::<[u64; 9]>::dangling(); hs.len() + 3];
                assert_eq!(objs.resolve_bulk(&hs, &mut out), hs.len());
                for (h, p) in hs.iter().zip(&out) {
                    assert_eq!(*p, pool.as_ptr(h));
                    assert_eq!(*p, objs.as_ptr(h));
                }
                assert_eq!(out[hs.len()], NonNull::dangling(), "out[n..] untouched");
                let mut short = vec![NonNull::<[u64; 9]>::dangling(); 5];
                assert_eq!(pool.resolver().resolve_bulk(&hs, &mut short), 5);
                assert_eq!(short[4], pool.as_ptr(&hs[4]));
                assert_eq!(objs.resolve_bulk(&hs[..0], &mut short), 0);
                // get_mut_all: one &mut per handle, in order; writes reach each object.
                let it = objs.get_mut_all(&mut hs);
                assert_eq!(it.len(), cap as usize);
                for (k, o) in it.enumerate() {
                    o[0] = k as u64 + 1;
                    o[8] = pool.stride() as u64;
                }
                for (k, h) in hs.iter().enumerate() {
                    assert_eq!(pool.get_ref(h)[0], k as u64 + 1);
                    assert_eq!(pool.get_ref(h)[8], pool.stride() as u64);
                }
                // Held all at once, from both ends.
                let mut refs: Vec<&mut [u64; 9]> =
                    pool.resolver().get_mut_all(&mut hs).rev().collect();
                refs[0][1] = 7; // the last handle's object
                drop(refs);
                assert_eq!(pool.get_ref(hs.last().unwrap())[1], 7);
                {
                    let mut it = pool.resolver().get_mut_all(&mut hs);
                    it.next().unwrap()[2] = 1;
                    it.next_back().unwrap()[2] = 2;
                    assert_eq!(it.len(), cap as usize - 2);
                }
                assert_eq!(pool.get_ref(&hs[0])[2], 1);
                assert_eq!(pool.get_ref(hs.last().unwrap())[2], 2);
                // Through a LocalCache, which keeps allocating while the references live.
                let mut cache = pool.local_cache();
                let mut burst = Vec::new();
                pool.put_bulk(&mut hs);
                cache.get_bulk(&mut burst, 4).unwrap();
                objs.prefetch_all(&burst);
                objs.prefetch(&burst[0]);
                let mut ptrs = [NonNull::dangling(); 4];
                assert_eq!(objs.resolve_bulk(&burst, &mut ptrs), 4);
                let refs: Vec<_> = objs.get_mut_all(&mut burst).collect();
                let extra = cache.get().unwrap();
                for (r, p) in refs.into_iter().zip(ptrs) {
                    assert_eq!(NonNull::from(&mut *r), p);
                    r[3] = 33;
                }
                cache.put(extra);
                assert!(burst.iter().all(|h| objs.get_ref(h)[3] == 33));
                cache.put_bulk(&mut burst);
                drop(cache);
                assert!(pool.is_full());
            })
            .unwrap();
    }

    #[test]
    fn bulk_api_offset() {
        bulk_api::<Offset>();
    }

    #[test]
    fn bulk_api_index() {
        bulk_api::<Index>();
    }

    #[test]
    fn bulk_api_pointer() {
        bulk_api::<Pointer>();
    }

    #[test]
    fn get_mut_all_of_no_handles_is_empty() {
        PoolBuilder::<u64>::with_default(4)
            .scoped(|pool| {
                let mut none: Vec<H<u64, _, _>> = Vec::new();
                assert_eq!(pool.resolver().get_mut_all(&mut none).len(), 0);
                assert!(pool.resolver().get_mut_all(&mut none).next().is_none());
                pool.resolver().prefetch_all(&none);
            })
            .unwrap();
    }

    /// The object view an initialiser gets checks the element type: an initialiser for a
    /// larger type panics before writing (nothing past the object is touched), and the
    /// objects made before it are dropped by `init_objects`' guard.
    #[test]
    fn an_initialiser_for_a_larger_type_panics_before_writing() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct D(u64);
        impl Drop for D {
            fn drop(&mut self) {
                assert_eq!(self.0, 7);
                DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut buf = vec![0u64; 4]; // 4 objects of 8 bytes, 8-aligned
        let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        let g = Geometry::new(base, 8, 4).with_elem_len(8);
        let mut init = |i: u32, obj: UninitObject<'_>, written: &AtomicBool| {
            if i < 2 {
                obj.into_uninit::<D>().write(D(7));
            } else {
                obj.into_uninit::<[u64; 2]>().write([1, 1]);
            }
            written.store(true, Ordering::Relaxed);
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: objects 0..4 lie in `buf` (4 x 8 bytes, 8-aligned), hold no value that
            // needs dropping, and nothing else uses `buf` during the call.
            unsafe { objects::init_objects::<D>(&g, 0, 4, &mut init) }
        }));
        assert!(r.is_err(), "the mismatched view panics");
        assert_eq!(
            DROPS.load(Ordering::Relaxed),
            2,
            "the two objects made are dropped"
        );
        assert_eq!(
            buf[2..],
            [0, 0],
            "nothing written by the mismatched initialiser"
        );
    }
}
