//! The pool: region + common ring + caches, generic over the entry representation. Every get
//! and put is a short adapter: find the cache ([`Pool`]'s thread cache or a
//! [`crate::LocalCache`]'s own), run the one cache algorithm ([`CacheMut::get`] /
//! [`CacheMut::put`] in cache.rs), convert entries to handles, and call the debug hook of
//! that direction (debug.rs).

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use crate::brand::{Brand, BrandSlot};
use crate::cache::{Cache, CacheMut, FlushPolicy, Put};
use crate::debug::{self, ObjectStates};
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::region::{BackingReport, Region};
use crate::repr::{Geometry, Repr};
use crate::ring::{Behavior, Ring};
use crate::stats::Stats;
use crate::thread::{ExitFlush, Registry};

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
    /// Getters waiting for objects (wait.rs); their count is on the ring's producer line.
    pub(crate) waiters: crate::wait::WaitQueue,
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
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the slot array of `max_threads` slots cannot be
    /// allocated (fallible reserve: never an abort); the builder bounds `max_threads` first.
    pub(crate) fn new(
        ring: Ring<E>,
        max_threads: usize,
        cache_size: u32,
        policy: FlushPolicy,
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
            waiters: crate::wait::WaitQueue::new(),
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
        // After the token (wait.rs): the flushed objects may serve waiters.
        self.waiters.after_put(&self.ring);
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
    queue: crate::wait::QueueLocks,
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E: Copy + Send + 'static> PoolCore<E> {
    /// Lists the core's locks with the fork handlers (once it is in its `Arc`).
    fn list_for_fork(&self) {
        let part = CoreLocks {
            registry: self.registry.fork_locks(),
            retired: self.retired.raw(),
            baseline: self.baseline.raw(),
            queue: self.waiters.fork_locks(&self.ring),
        };
        // SAFETY: the parts pointed to (the registry's slot array and list box, the stats
        // boxes, the queue box, the ring's state) are freed only after the core's drop
        // unlists it (they are its fields, dropped after `Drop::drop`).
        unsafe { crate::fork::register_owned((self as *const Self).cast(), Box::new(part)) };
    }
}

#[cfg(all(unix, not(miri), not(loom)))]
impl<E> crate::fork::Participant for CoreLocks<E> {
    fn fork_prepare(&self) {
        // SAFETY: listed only while the core lives (see `list_for_fork`); so in the two below.
        unsafe {
            self.registry.fork_prepare();
            (*self.retired).fork_take();
            (*self.baseline).fork_take();
            self.queue.fork_prepare();
        }
    }

    fn fork_parent(&self) {
        // SAFETY: as above.
        unsafe {
            self.queue.fork_parent();
            (*self.baseline).fork_release();
            (*self.retired).fork_release();
            self.registry.fork_release();
        }
    }

    fn fork_child(&self) {
        // SAFETY: as above.
        unsafe {
            self.queue.fork_child();
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

/// The object an entry names: the one conversion of a handle to an address (`obase0 + entry x
/// 8` for offsets: the store's addressing mode), after the identity check of run-time pools
/// (one range compare; compiled away for brands) and the debug access hook.
#[inline(always)]
#[track_caller]
pub(crate) fn resolve<T: ?Sized + Element, B: Brand, R: Repr>(
    g: &Geometry,
    e: R::Entry,
) -> NonNull<T> {
    check_owned::<B, R>(g, e);
    debug::check_access::<R>(g, e);
    // SAFETY: the entry is this pool's: for brands, handles of brand B are only minted by this
    // pool (or rebuilt under from_raw's contract); for run-time pools, check_owned just proved
    // it lies in this pool's range of the handle space, whose entries only this pool mints.
    // So it names one of the pool's objects, inside the region: never null.
    unsafe { NonNull::new_unchecked(T::from_addr(R::ptr(g, e), g.elem_len)) }
}

/// The identity check of a run-time pool ([`Brand::CHECKED`]): panics, naming both pools, when
/// `e` lies outside the pool's range of the handle space. One compare and a branch that is
/// never taken; nothing at all for brands.
#[inline(always)]
#[track_caller]
pub(crate) fn check_owned<B: Brand, R: Repr>(g: &Geometry, e: R::Entry) {
    if B::CHECKED && !R::owns(g, e) {
        foreign_panic::<R>(g, e)
    }
}

/// [`check_owned`] for every entry of `es`: the OR of the ranks of the burst against the span
/// (an OR reduction with no branch, which the compiler vectorises: the span is a power of two),
/// then one branch for the batch; nothing is moved before it passes. The failure is out of
/// line.
#[inline(always)]
#[track_caller]
pub(crate) fn check_owned_all<B: Brand, R: Repr>(g: &Geometry, es: &[R::Entry]) {
    if B::CHECKED && !all_owned::<R>(g, es) {
        foreign_panic_any::<R>(g, es)
    }
}

/// True when every entry of `es` lies in the pool's range (the reduction of
/// [`check_owned_all`]).
#[inline(always)]
fn all_owned<R: Repr>(g: &Geometry, es: &[R::Entry]) -> bool {
    // The OR of the ranks of `es`, with no loop for bursts up to 64: the first k and the last
    // k entries with k < n <= 2k (overlapping halves, as `copy_entries` copies them), so a
    // short burst costs a few ORs and no loop control (a plain loop cost 14 instructions per
    // put of one handle, callgrind, BENCHMARKS.md "Run-time pools").
    #[inline(always)]
    fn or_of<R: Repr, const K: usize>(g: &Geometry, es: &[R::Entry]) -> u32 {
        let n = es.len();
        let mut acc = 0u32;
        for i in 0..K {
            acc |= R::rank(g, es[i]) | R::rank(g, es[n - K + i]);
        }
        acc
    }
    let n = es.len();
    let acc = match n {
        0 => 0,
        1..=2 => or_of::<R, 1>(g, es),
        3..=4 => or_of::<R, 2>(g, es),
        5..=8 => or_of::<R, 4>(g, es),
        9..=16 => or_of::<R, 8>(g, es),
        17..=32 => or_of::<R, 16>(g, es),
        33..=64 => or_of::<R, 32>(g, es),
        _ => es.iter().fold(0u32, |m, &e| m | R::rank(g, e)),
    };
    acc < g.span
}

/// `Ok` when every entry of `es` lies in the pool's range (always, for brands); else the
/// typed error for the first that does not.
#[inline(always)]
pub(crate) fn try_check_owned_all<B: Brand, R: Repr>(
    g: &Geometry,
    es: &[R::Entry],
) -> Result<(), PoolError> {
    if B::CHECKED && !all_owned::<R>(g, es) {
        return Err(first_foreign::<R>(g, es));
    }
    Ok(())
}

/// The error for the first entry of `es` outside the pool's range (cold).
#[cold]
#[inline(never)]
pub(crate) fn first_foreign<R: Repr>(g: &Geometry, es: &[R::Entry]) -> PoolError {
    let e = es
        .iter()
        .find(|&&e| !R::owns(g, e))
        .expect("a foreign entry");
    foreign_error::<R>(g, *e)
}

#[cold]
#[inline(never)]
#[track_caller]
fn foreign_panic_any<R: Repr>(g: &Geometry, es: &[R::Entry]) -> ! {
    panic!("idxpool: {}", first_foreign::<R>(g, es))
}

/// The error for entry `e`, which lies outside the range of the pool of `g`: names the pool
/// that minted it (or says it was dropped) and this pool (cold path: reads the handle space's
/// table).
#[cold]
#[inline(never)]
pub(crate) fn foreign_error<R: Repr>(g: &Geometry, e: R::Entry) -> PoolError {
    PoolError::ForeignHandle {
        handle_pool: crate::space::describe(R::raw(e)),
        pool: crate::space::name_of(crate::space::Range {
            lo: g.lo,
            span: g.span,
        }),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn foreign_panic<R: Repr>(g: &Geometry, e: R::Entry) -> ! {
    panic!("idxpool: {}", foreign_error::<R>(g, e))
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
    pub(crate) growth: crate::grow::Growth,
    pub(crate) region: Region,
    /// The reset hook run on every object put back ([`crate::PoolBuilder::on_put`];
    /// `geometry.put_hook` says whether there is one). See on_put.rs.
    pub(crate) on_put: Option<crate::on_put::PutHook<T>>,
    /// Owns `T`s (drop check), invariant in `T` and `B` (see [`Invariant`]).
    _marker: PhantomData<(Invariant<T>, Invariant<B>, T)>,
}

/// Invariant in its parameter, and `Send + Sync` whatever it is. The pool hands out `&mut T`
/// from `&self`, so `T` must be invariant (as in `Cell<T>`): were the pool covariant,
/// `&Pool<&'static str, B>` would coerce to `&Pool<&'a str, B>`, a short-lived `&str` could be
/// written into an object through it, and the original type would read it back as
/// `&'static str` after it was freed (tests/ui/variance_pool.rs).
pub(crate) type Invariant<X> = fn(&X) -> &X;

// SAFETY: the pool hands each object to one handle owner at a time; sharing &pool between
// threads moves objects (T) between threads, which needs T: Send only. Geometry and Region are
// address bookkeeping; PoolCore is Sync.
unsafe impl<T: ?Sized + Element + Send, B, R: Repr> Sync for Pool<T, B, R> {}

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
        growth: crate::grow::Growth,
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
        self.get_vec_via(|| self.thread_cache_mut(), out, n, Behavior::Bulk)
            .map(|_| ())
    }

    /// Appends up to `n` handles to `out`; returns how many.
    #[must_use = "the count says how many objects were appended to `out`; give them back with pool.put_bulk"]
    pub fn get_burst(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        self.get_vec_via(|| self.thread_cache_mut(), out, n, Behavior::Burst)
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
        if let Some(c) = self.core.registry.current(self.id) {
            // SAFETY: the calling thread's own cache.
            unsafe { CacheMut::new(NonNull::from(c), &self.core.ring) }.flush();
            self.core.waiters.after_put(&self.core.ring);
        }
    }

    /// A user-owned cache borrowing this pool: get/put through it touch no thread-local state
    /// (rte_mempool_cache_create + rte_mempool_generic_get/put). Its objects go back to the
    /// ring when it is dropped. For a cache that holds an `Arc` of the pool (to move into a
    /// spawned thread), [`crate::LocalCache::new`]`(arc.clone())`.
    pub fn local_cache(&self) -> crate::LocalCache<&Self> {
        crate::LocalCache::new(self)
    }

    // ---- the adapters: cache algorithm <-> handles (shared with LocalCache) ----------------
    //
    // No user code may run while a cache token is live (issue 25): a global allocator, a panic
    // hook or a `T::drop` could re-enter the pool on this thread and take the same cache's
    // token, and the two would hand one entry out twice. So every adapter takes the token
    // from a closure (`token`) that it calls only after its own preparation, which is where
    // anything that can run user code happens: growing the caller's `Vec` (an allocation),
    // and the identity and debug checks (a panic runs the panic hook). Between the call to
    // `token` and the return, an adapter only copies entries between the cache and memory
    // it already holds.

    /// Gets `n` handles appended to `out` through the token `token` returns (bulk: all or
    /// none; burst: up to `n`). A bulk request larger than the pool's maximum fails, and a
    /// burst is clamped to it, before anything is allocated (the maximum: a constant, so the
    /// fast path reads no atomic capacity; one above the capacity fails in the cache's slow
    /// path, as any bulk larger than what is free).
    ///
    /// The hit (the cache holds `n`) returns on its own; the rest reaches the cache's
    /// out-of-line slow path (see `CacheMut::cold`), so that a loop of hits keeps the cache's
    /// state in registers.
    #[inline(always)]
    pub(crate) fn get_vec_via<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
        behavior: Behavior,
    ) -> Result<usize, PoolError> {
        let cap = self.geometry.capacity as usize;
        let n = match behavior {
            Behavior::Bulk if n > cap => {
                let mut t = token();
                let cm = t.cm();
                // Counted as every failed get is (issue 25: it was missed before).
                cm.count_failed_get(n);
                return Err(PoolError::Exhausted {
                    requested: n,
                    available: cm.reachable().min(cap),
                });
            }
            Behavior::Bulk => n,
            Behavior::Burst => n.min(cap),
        };
        // The allocation, before the token exists.
        out.reserve(n);
        let mut t = token();
        let cm = t.cm();
        if n <= cm.len() {
            return self.get_into_vec(out, n, |dst| {
                cm.take_top(dst);
                Ok(n)
            });
        }
        let r = self.get_into_vec(out, n, |dst| cm.get(dst, behavior));
        if r.is_err() {
            // A failed get may have given its refill back to the ring: after the token, the
            // check for waiters (wait.rs). A burst that came back short took the ring's
            // entries (its own given-back refill included) down to none.
            drop(t);
            self.core.waiters.after_put(&self.core.ring);
        }
        r
    }

    /// Appends the handles of the entries `get` writes into `n` spare slots of `out` (which
    /// has room: the caller reserved it before taking its token): `get` returns how many it
    /// wrote, or `Err(reachable)`.
    #[inline(always)]
    pub(crate) fn get_into_vec(
        &self,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
        get: impl FnOnce(&mut [MaybeUninit<R::Entry>]) -> Result<usize, usize>,
    ) -> Result<usize, PoolError> {
        let len = out.len();
        // Reserved by the only caller, get_vec_via, right before it took its token (never an
        // allocation here, see above).
        debug_assert!(
            out.capacity() - len >= n,
            "idxpool: room reserved before the token"
        );
        // SAFETY: get_vec_via reserved room for n entries after len (`out.reserve(n)`, and
        // nothing since has shrunk `out`); H is repr(transparent) over R::Entry, so the spare
        // handles are spare entries.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().add(len).cast::<MaybeUninit<R::Entry>>(),
                n,
            )
        };
        match get(dst) {
            Ok(got) => {
                // SAFETY: the first `got` spare slots were written with entries of free objects,
                // now owned by the new handles.
                unsafe { out.set_len(len + got) };
                self.debug_got(&out[len..]);
                Ok(got)
            }
            Err(available) => Err(PoolError::Exhausted {
                requested: n,
                available,
            }),
        }
    }

    /// Gets exactly `N` handles through the token `token` returns, as an array (hit inlined,
    /// as [`Pool::get_vec_via`]).
    #[inline(always)]
    pub(crate) fn get_array_via<'c, C: Token<'c, R::Entry>, const N: usize>(
        &self,
        token: impl FnOnce() -> C,
    ) -> Result<[H<T, B, R>; N], PoolError> {
        let mut t = token();
        let cm = t.cm();
        if N <= cm.len() {
            return self.get_into_array(|dst| {
                cm.take_top(dst);
                Ok(N)
            });
        }
        let r = self.get_into_array(|dst| cm.get(dst, Behavior::Bulk));
        if r.is_err() {
            drop(t); // as get_vec_via
            self.core.waiters.after_put(&self.core.ring);
        }
        r
    }

    /// The handles of the `N` entries `get` writes (all of them, or `Err(reachable)`).
    #[inline(always)]
    pub(crate) fn get_into_array<const N: usize>(
        &self,
        get: impl FnOnce(&mut [MaybeUninit<R::Entry>]) -> Result<usize, usize>,
    ) -> Result<[H<T, B, R>; N], PoolError> {
        let mut out = MaybeUninit::<[H<T, B, R>; N]>::uninit();
        // SAFETY: an uninitialised [H; N] is N uninitialised entries (H is repr(transparent)
        // over R::Entry).
        let dst = unsafe { &mut *out.as_mut_ptr().cast::<[MaybeUninit<R::Entry>; N]>() };
        match get(dst) {
            Ok(_) => {
                // SAFETY: a successful bulk get wrote all N entries.
                let hs = unsafe { out.assume_init() };
                self.debug_got(&hs);
                Ok(hs)
            }
            Err(available) => Err(PoolError::Exhausted {
                requested: N,
                available,
            }),
        }
    }

    /// Puts the handles of `hs` through the token `token` returns, after the identity check
    /// of run-time pools (against `g`: the pool's geometry, or a cache's copy of it, which the
    /// compiler keeps in registers across a loop) and the debug hook (which may panic: before the token exists).
    /// Ownership of their objects passes to the cache: the caller forgets the handles (they
    /// have no destructor). The fit (no flush) is inlined and returns on its own, as for gets.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn put_via<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        hs: &[H<T, B, R>],
    ) {
        if !self.try_put_via(g, token, hs) {
            foreign_panic_any::<R>(g, entries_of(hs))
        }
    }

    /// [`Pool::put_via`] that returns false, with nothing moved and no hook run, when a handle
    /// of `hs` is another pool's (for callers that consumed the handles and must give this
    /// pool's back before they report it: `LocalCache::put_array`).
    #[inline(always)]
    pub(crate) fn try_put_via<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        hs: &[H<T, B, R>],
    ) -> bool {
        if g.put_hook {
            // The reset hook (user code, on_put.rs) after the checks, before the token.
            if B::CHECKED && !all_owned::<R>(g, entries_of(hs)) {
                return false;
            }
            self.debug_put(hs);
            // SAFETY: checked above; the caller owns `hs` and they are put right below.
            unsafe { self.run_on_put(hs, None) };
        }
        self.put_checked_via(g, token, hs, g.put_hook)
    }

    /// The put itself, one copy of the cache code for every path (a second inlined copy for
    /// the hooked path cost +4..12 instructions per object in the callers' loops: register
    /// pressure). `prechecked`: the identity and debug checks already ran (the hooked path).
    /// False, with nothing moved, when a handle is another pool's.
    #[inline(always)]
    fn put_checked_via<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        hs: &[H<T, B, R>],
        prechecked: bool,
    ) -> bool {
        let src = entries_of(hs);
        if B::CHECKED {
            if debug::DEBUG_CHECKS && !prechecked {
                // The debug hook marks objects free: check first, so that a foreign handle
                // is refused before any mark (the fused check below then passes).
                if !all_owned::<R>(g, src) {
                    return false;
                }
                self.debug_put(hs);
            }
            // The identity check fused into the cache's copy; a failure changes nothing and is
            // reported by the caller, after the token is gone (a panic runs user code).
            return match token().cm().put_checked(src, |e| R::rank(g, e), g.span) {
                Put::Cached => true,
                // After the token (wait.rs): entries may have reached the ring.
                Put::Ring => {
                    self.core.waiters.after_put(&self.core.ring);
                    true
                }
                Put::Foreign => false,
            };
        }
        if !prechecked {
            self.debug_put(hs);
        }
        if token().cm().put(src) {
            // After the token (wait.rs): entries may have reached the ring.
            self.core.waiters.after_put(&self.core.ring);
        }
        true
    }

    /// Puts the last `n` handles of `v` (clamped to its length) through the token `token`
    /// returns, and truncates `v`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn put_vec_tail_via<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        v: &mut Vec<H<T, B, R>>,
        n: usize,
    ) {
        let len = v.len();
        let n = n.min(len);
        // SAFETY: v[len - n .. len] are n initialised handles (n <= len). A raw slice, not
        // `&v[start..]` plus `truncate`: their checks cost 3 of ~50 instructions per object at
        // bulk 1 (callgrind, BENCHMARKS.md issue 14).
        let tail = unsafe { std::slice::from_raw_parts(v.as_ptr().add(len - n), n) };
        let hooked = g.put_hook;
        if hooked {
            // The reset hook may unwind after its guard gave the burst back: `v` must not keep
            // those handles, so it is truncated before the hook (a failed check panics first,
            // leaving `v` whole: nothing moved).
            check_owned_all::<B, R>(g, entries_of(tail));
            self.debug_put(tail);
            // SAFETY: the tail's handles move into the pool below (or in the hook's guard);
            // shortening `v` leaves its buffer in place, unread and unwritten by `Vec`, and `v`
            // stays borrowed by this call.
            unsafe { v.set_len(len - n) };
            // SAFETY: checked above; this call owns the tail, put right below.
            unsafe { self.run_on_put(tail, None) };
        }
        if !self.put_checked_via(g, token, tail, hooked) {
            // Nothing moved: `v` keeps every handle (the hooked path checked them all above).
            foreign_panic_any::<R>(g, entries_of(tail))
        }
        if !hooked {
            // SAFETY: the tail's handles were moved into the cache above (handles have no
            // drop).
            unsafe { v.set_len(len - n) };
        }
    }

    // ---- counts ---------------------------------------------------------------------------

    /// Free objects: the ring plus every thread's implicit cache (rte_mempool_avail_count).
    /// Objects in a [`crate::LocalCache`] are its holder's, not counted here (as DPDK's count
    /// ignores user-owned caches): a `LocalCache` passed to `mem::forget` strands them, and
    /// they count as in use until `audit()` or the pool's drop takes them back. A snapshot
    /// while other threads work; exact when quiescent.
    pub fn available(&self) -> usize {
        self.available_of(self.capacity() as usize)
    }

    /// [`Pool::available`] clamped to `cap`, a capacity read before (under concurrent growth
    /// the ring may already hold objects of a capacity not yet published).
    fn available_of(&self, cap: usize) -> usize {
        let n = self.core.ring.count() + self.core.registry.thread_cached();
        n.min(cap)
    }

    /// Objects held by handles and by [`crate::LocalCache`]s (rte_mempool_in_use_count).
    /// Objects lent to the kernel are not among them ([`Pool::lent_to_kernel`]), so
    /// `available() + in_use() + lent_to_kernel() == capacity()` when quiescent.
    pub fn in_use(&self) -> usize {
        let cap = self.capacity() as usize;
        (cap - self.available_of(cap)).saturating_sub(self.lent_to_kernel())
    }

    /// Objects lent to the kernel now: published in an io_uring provided-buffer ring (feature
    /// `uring`, `idxpool::uring`) and not yet back in a completion. They are neither free nor
    /// held by a handle; the lender gives them back to the pool when it is dropped. Always 0
    /// without such a lender. A snapshot while other threads work.
    ///
    /// ```
    /// let pool = idxpool::PoolBuilder::<[u8; 2048]>::zeroed(64).build()?;
    /// assert_eq!(pool.lent_to_kernel(), 0);
    /// assert_eq!(pool.available() + pool.in_use() + pool.lent_to_kernel(), 64);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn lent_to_kernel(&self) -> usize {
        self.core
            .kernel_lent
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when every object is free (rte_mempool_full).
    pub fn is_full(&self) -> bool {
        let cap = self.capacity() as usize;
        self.available_of(cap) == cap
    }

    /// True when no object is free (rte_mempool_empty).
    pub fn is_empty(&self) -> bool {
        self.available() == 0
    }

    /// Objects in the common ring now.
    pub fn ring_count(&self) -> usize {
        self.core.ring.count()
    }

    /// The pool's counters (DPDK's `rte_mempool_debug_stats`): every live cache, plus the
    /// caches already gone (dropped [`crate::LocalCache`]s, exited threads' caches, folded in
    /// when they went), plus operations that used no cache, minus what
    /// [`Pool::stats_reset`] set aside. A snapshot while other threads work; exact when
    /// quiescent (e.g. after joining the workers).
    ///
    /// Counting needs the crate's **`stats` feature** (`idxpool = { features = ["stats"] }`,
    /// or `cargo test --features stats`): without it every counter is 0, the counting code
    /// compiles away, and [`Stats::COUNTING`] (`stats().is_counting()`) is false.
    pub fn stats(&self) -> Stats {
        let base = *self.core.baseline.lock();
        self.stats_total().saturating_sub(base)
    }

    /// The counters since the pool was built ([`Pool::stats`] without the reset's baseline:
    /// never decreasing, as the metrics export needs).
    pub(crate) fn stats_total(&self) -> Stats {
        let core = &*self.core;
        let mut s = core.uncached.counters.snapshot();
        core.registry
            .for_each_cache(|_, c| s += c.counters.snapshot());
        s += *core.retired.lock();
        s
    }

    /// Starts the counters of [`Pool::stats`] from 0 again (the current totals are set
    /// aside; the caches' own counters are not written, so this never races their owners).
    pub fn stats_reset(&self) {
        let s = self.stats_total();
        *self.core.baseline.lock() = s;
    }

    /// `(label, objects held)` of every live cache.
    pub fn cache_counts(&self) -> Vec<(String, usize)> {
        let mut v = Vec::new();
        self.core
            .registry
            .for_each_cache(|l, c| v.push((l, c.len())));
        v
    }
}

/// Converts handles of one pool to references; see [`Pool::resolver`].
///
/// ```
/// let pool = idxpool::PoolBuilder::<[u32; 4]>::zeroed(64).build()?;
/// let mut hs = Vec::new();
/// pool.get_bulk(&mut hs, 8)?;
/// let objs = pool.resolver(); // `Copy`: the base stays in registers
/// for h in hs.iter_mut() {
///     objs.get_mut(h)[0] += 1;
/// }
/// assert!(hs.iter().all(|h| objs.get_ref(h)[0] == 1));
/// pool.put_bulk(&mut hs);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Resolver<'p, T: ?Sized + Element, B, R: Repr> {
    geometry: Geometry,
    /// Borrows the pool for `'p`; invariant in `T` because `Pool` is.
    _pool: PhantomData<&'p Pool<T, B, R>>,
}

impl<T: ?Sized + Element, B, R: Repr> Clone for Resolver<'_, T, B, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ?Sized + Element, B, R: Repr> Copy for Resolver<'_, T, B, R> {}

impl<'p, T: ?Sized + Element, B: Brand, R: Repr> Resolver<'p, T, B, R> {
    /// Shared access to the object of `h` (as [`Pool::get_ref`]; panics as it does
    /// on another pool's handle).
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&self, h: &'a H<T, B, R>) -> &'a T
    where
        'p: 'a,
    {
        // SAFETY: as Pool::get_ref: the geometry is the pool's, the brand proves the
        // handle is this pool's, and the result lives no longer than the pool borrow 'p.
        unsafe { resolve::<T, B, R>(&self.geometry, h.entry()).as_ref() }
    }

    /// Exclusive access to the object of `h` (as [`Pool::get_mut`]; panics as it does
    /// on another pool's handle).
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> &'a mut T
    where
        'p: 'a,
    {
        // SAFETY: as Pool::get_mut; &mut h makes the borrow exclusive.
        unsafe { resolve::<T, B, R>(&self.geometry, h.entry()).as_mut() }
    }

    /// Raw pointer to the object of `h` (as [`Pool::as_ptr`]): `base + index x stride`,
    /// valid while the pool lives. Dereferencing it is the caller's `unsafe` responsibility.
    #[inline(always)]
    #[track_caller]
    pub fn as_ptr(&self, h: &H<T, B, R>) -> NonNull<T> {
        resolve::<T, B, R>(&self.geometry, h.entry())
    }

    /// [`Resolver::get_ref`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle (run-time pools) instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_ref<'a>(&self, h: &'a H<T, B, R>) -> Result<&'a T, PoolError>
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))?;
        Ok(self.get_ref(h))
    }

    /// [`Resolver::get_mut`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle (run-time pools) instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> Result<&'a mut T, PoolError>
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))?;
        Ok(self.get_mut(h))
    }

    /// Hints the CPU to bring the first cache line of the object of `h` into L1, ready for
    /// writing (x86-64 `prefetchw` with the `prfchw` target feature, else `prefetcht0`; arm64
    /// `prfm pstl1keep`; nothing elsewhere and under Miri). Issue it a few objects ahead of the
    /// writes, so the misses overlap: DPDK's `rte_prefetch0` / `rte_prefetch0_write` on mbufs,
    /// VPP's `vlib_prefetch_buffer_header(b, STORE)`.
    ///
    /// Only the object's address is computed (the conversion of [`Resolver::get_mut`]); nothing
    /// is read or written, and a prefetch never faults. Objects larger than a cache line get
    /// their first line only (where a header usually is).
    ///
    /// ```
    /// idxpool::PoolBuilder::<[u64; 8]>::zeroed(64).scoped(|pool| {
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     pool.get_bulk(&mut burst, 32).unwrap();
    ///     objs.prefetch_all(&burst);            // every miss in flight at once ...
    ///     for h in burst.iter_mut() {
    ///         objs.get_mut(h)[0] = 1;           // ... before the first write
    ///     }
    ///     pool.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        // The address only, without the identity check: a hint for another pool's handle
        // (run-time pools) touches nothing and the access after it rejects the handle.
        self.geometry.prefetch_write::<R>(h.entry());
    }

    /// [`Resolver::prefetch`] of every handle of `hs`, in order: the burst prefetch of VPP's
    /// dispatch loops (prefetch the headers of the whole frame, then process it) and DPDK's
    /// `rte_prefetch0` over an `rx_burst`. Prefetching more lines than the core can track
    /// (about 10-20 outstanding L1 misses, 32-48 on recent cores) drops the extra hints.
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[H<T, B, R>]) {
        for h in hs {
            self.prefetch(h);
        }
    }

    /// Converts handles to object pointers in bulk, as VPP's `vlib_get_buffers` turns a frame
    /// of buffer indices into `vlib_buffer_t *`s: writes `out[i] = as_ptr(&hs[i])` for `i` in
    /// `0..n`, `n = min(hs.len(), out.len())`, and returns `n` (the rest of `out` is left
    /// as it was). No check beyond the conversion's own (the brand).
    ///
    /// The pointers are raw, as [`Resolver::as_ptr`]'s: they stay valid while the pool lives,
    /// but dereferencing one is the caller's `unsafe` responsibility (its handle must still be
    /// held, and no other reference to the object may be alive). [`Resolver::get_mut_all`] is
    /// the safe form.
    ///
    /// # Panics
    /// Run-time pools: when one of the `n` handles is another pool's (checked for all of them
    /// before anything is written); [`Resolver::try_resolve_bulk`] returns the error instead.
    #[inline]
    #[track_caller]
    pub fn resolve_bulk(&self, hs: &[H<T, B, R>], out: &mut [NonNull<T>]) -> usize {
        let n = hs.len().min(out.len());
        check_owned_all::<B, R>(&self.geometry, entries_of(&hs[..n]));
        for (o, h) in out[..n].iter_mut().zip(&hs[..n]) {
            *o = self.as_ptr(h);
        }
        n
    }

    /// [`Resolver::resolve_bulk`] that returns [`PoolError::ForeignHandle`] (and writes
    /// nothing) when one of the handles is another pool's.
    ///
    /// # Errors
    /// As [`Pool::check`], for the first foreign handle.
    #[inline]
    pub fn try_resolve_bulk(
        &self,
        hs: &[H<T, B, R>],
        out: &mut [NonNull<T>],
    ) -> Result<usize, PoolError> {
        let n = hs.len().min(out.len());
        try_check_owned_all::<B, R>(&self.geometry, entries_of(&hs[..n]))?;
        Ok(self.resolve_bulk(hs, out))
    }

    /// Exclusive access to the objects of all handles of `hs`, in order: an iterator of
    /// `&'a mut T`, one per handle (`ExactSizeIterator`, `DoubleEndedIterator`). The safe form
    /// of [`Resolver::resolve_bulk`], e.g. to keep the objects of a burst in a `Vec<&mut T>`.
    ///
    /// Sound because distinct handles own distinct objects (a handle is unique ownership: not
    /// `Clone`, consumed by `put`; DESIGN.md, invariant 6), so `&mut` to distinct handles give
    /// `&mut` to distinct objects. The references borrow `hs` mutably for `'a` (no second
    /// `get_mut_all` or `put` of those handles while one is alive) and the pool for `'a`.
    ///
    /// ```
    /// idxpool::PoolBuilder::<u64>::with_default(64).scoped(|pool| {
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     pool.get_bulk(&mut burst, 4).unwrap();
    ///     let mut refs: Vec<&mut u64> = objs.get_mut_all(&mut burst).collect();
    ///     *refs[0] = 1;
    ///     *refs[3] = 4;
    ///     assert_eq!(*objs.get_ref(&burst[3]), 4);
    ///     pool.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    ///
    /// # Panics
    /// Run-time pools: when one of the handles is another pool's (checked for all of them
    /// before anything is yielded); [`Resolver::try_get_mut_all`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut_all<'a>(
        &self,
        hs: &'a mut [H<T, B, R>],
    ) -> impl DoubleEndedIterator<Item = &'a mut T> + ExactSizeIterator + std::iter::FusedIterator + 'a
    where
        'p: 'a,
    {
        check_owned_all::<B, R>(&self.geometry, entries_of(hs));
        ObjectsMut {
            objs: *self,
            hs: hs.iter_mut(),
        }
    }

    /// [`Resolver::get_mut_all`] that returns [`PoolError::ForeignHandle`] (and yields
    /// nothing) when one of the handles is another pool's.
    ///
    /// # Errors
    /// As [`Pool::check`], for the first foreign handle.
    #[inline]
    pub fn try_get_mut_all<'a>(
        &self,
        hs: &'a mut [H<T, B, R>],
    ) -> Result<
        impl DoubleEndedIterator<Item = &'a mut T> + ExactSizeIterator + std::iter::FusedIterator + 'a,
        PoolError,
    >
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, entries_of(hs))?;
        Ok(self.get_mut_all(hs))
    }
}

/// The objects of a slice of handles as `&'a mut T`, in order: what `get_mut_all` returns
/// (as an `impl Iterator`).
pub(crate) struct ObjectsMut<'a, T: ?Sized + Element, B, R: Repr> {
    objs: Resolver<'a, T, B, R>,
    hs: std::slice::IterMut<'a, H<T, B, R>>,
}

impl<'a, T: ?Sized + Element, B: Brand, R: Repr> Iterator for ObjectsMut<'a, T, B, R> {
    type Item = &'a mut T;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut T> {
        // Each handle is yielded once (IterMut), and distinct handles own distinct objects.
        self.hs.next().map(|h| self.objs.get_mut(h))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.hs.size_hint()
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> DoubleEndedIterator for ObjectsMut<'_, T, B, R> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.hs.next_back().map(|h| self.objs.get_mut(h))
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> ExactSizeIterator for ObjectsMut<'_, T, B, R> {}
impl<T: ?Sized + Element, B: Brand, R: Repr> std::iter::FusedIterator for ObjectsMut<'_, T, B, R> {}

impl<T: ?Sized + Element, B, R: Repr> fmt::Debug for ObjectsMut<'_, T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectsMut")
            .field("remaining", &self.hs.len())
            .finish()
    }
}

/// The entries of a slice of handles (`Handle` is `repr(transparent)` over the entry).
#[inline(always)]
pub(crate) fn entries_of<T: ?Sized, B, R: Repr>(hs: &[H<T, B, R>]) -> &[R::Entry] {
    // SAFETY: H is repr(transparent) over R::Entry: same size, alignment and validity.
    unsafe { &*(hs as *const [H<T, B, R>] as *const [R::Entry]) }
}

/// Where an adapter gets its cache token: an owned token made for one call (the implicit
/// thread cache) or the long-lived one of a [`crate::LocalCache`], borrowed.
pub(crate) trait Token<'c, E> {
    /// The token.
    fn cm(&mut self) -> &mut CacheMut<'c, E>;
}

impl<'c, E> Token<'c, E> for CacheMut<'c, E> {
    #[inline(always)]
    fn cm(&mut self) -> &mut CacheMut<'c, E> {
        self
    }
}

impl<'c, E> Token<'c, E> for &mut CacheMut<'c, E> {
    #[inline(always)]
    fn cm(&mut self) -> &mut CacheMut<'c, E> {
        self
    }
}

/// The memory of one object while the pool's initialiser makes it (at build and in
/// [`Pool::grow`]): `len` bytes (the element's size) at `p`, aligned for the element,
/// uninitialised (or already dropped) and seen by nobody else for `'s`. Made only by
/// [`init_objects`], under its contract; the typed initialisers of the builder turn it into
/// the `&mut MaybeUninit<T>` they write.
pub(crate) struct UninitObject<'s> {
    p: NonNull<u8>,
    len: usize,
    _exclusive: PhantomData<&'s mut [MaybeUninit<u8>]>,
}

impl<'s> UninitObject<'s> {
    /// The object as a `MaybeUninit<T>`, exclusive for `'s`.
    ///
    /// # Panics
    /// When `T` is larger than the element or the object is not aligned for it: never for
    /// the builder's initialisers, which are made for the pool's own `T` (two compares per
    /// object made, outside every get and put).
    #[inline]
    pub(crate) fn into_uninit<T>(self) -> &'s mut MaybeUninit<T> {
        let p = self.p.as_ptr().cast::<MaybeUninit<T>>();
        assert!(
            std::mem::size_of::<T>() <= self.len && p.is_aligned(),
            "object initialiser for another element type"
        );
        // SAFETY: `p` is valid for writes of `len >= size_of::<T>()` bytes, aligned for `T`
        // (checked), and nobody else sees the object for 's (made by `init_objects`);
        // `MaybeUninit<T>` accepts any content.
        unsafe { &mut *p }
    }
}

/// An object initialiser as [`init_objects`] calls it: `init(i, obj, written)` makes object
/// `i` in `obj` and sets `written` once a whole object is there (the builder's `InitFn`).
pub(crate) type ObjectInit<'f> =
    dyn FnMut(u32, UninitObject<'_>, &std::sync::atomic::AtomicBool) + 'f;

/// Initialises objects `from..to` of `g` with `init` (the builder's initialiser), in index
/// order: at build and in [`Pool::grow`]. If `init` panics, the objects it made are dropped
/// (those of earlier calls, and that of the panicking call if `InitSlot::write` ran: `init`
/// sets its flag argument once a whole object is there) and the panic goes on.
///
/// # Safety
/// Objects `from..to` lie in usable memory of the region `g` describes, are uninitialised (or
/// dropped) and seen by nobody else until this returns.
pub(crate) unsafe fn init_objects<T: ?Sized + Element>(
    g: &Geometry,
    from: u32,
    to: u32,
    init: &mut ObjectInit<'_>,
) {
    struct Guard<'g, T: ?Sized + Element> {
        g: &'g Geometry,
        from: u32,
        done: u32,
        written: &'g std::sync::atomic::AtomicBool,
        _t: PhantomData<T>,
    }
    impl<T: ?Sized + Element> Drop for Guard<'_, T> {
        fn drop(&mut self) {
            // Only this thread wrote the flag (or a thread it joined before `init` returned
            // or unwound): Relaxed is enough.
            let written = u32::from(self.written.load(std::sync::atomic::Ordering::Relaxed));
            // SAFETY: objects from..done were initialised by this call, `done` too when its
            // `write` ran; nobody else has seen them (the caller's contract).
            unsafe { drop_objects::<T>(self.g, self.from, self.done + written) };
        }
    }
    let written = std::sync::atomic::AtomicBool::new(false);
    let mut guard = Guard::<T> {
        g,
        from,
        done: from,
        written: &written,
        _t: PhantomData,
    };
    for i in from..to {
        written.store(false, std::sync::atomic::Ordering::Relaxed);
        let obj = UninitObject {
            // Inside usable memory (the caller's contract), hence non-null; aligned (base and
            // stride are); unshared (the caller's contract), for this call of `init` only.
            p: NonNull::new(g.ptr_of_index(i)).expect("object pointer is non-null"),
            len: g.elem_len,
            _exclusive: PhantomData,
        };
        init(i, obj, &written);
        guard.done = i + 1;
    }
    std::mem::forget(guard);
}

/// Drops objects `from..to` in place, and keeps dropping after a panicking `T::drop`, as `Vec`
/// does: the rest are dropped while the panic unwinds (a second panic then aborts, as for a
/// panic in any destructor during unwinding), and the panic goes on to the caller.
///
/// # Safety
/// Objects `from..to` of `g` are initialised, dropped by nobody else, and not used afterwards.
pub(crate) unsafe fn drop_objects<T: ?Sized + Element>(g: &Geometry, from: u32, to: u32) {
    struct Rest<'g, T: ?Sized + Element> {
        g: &'g Geometry,
        next: u32,
        to: u32,
        _t: PhantomData<T>,
    }
    impl<T: ?Sized + Element> Drop for Rest<'_, T> {
        fn drop(&mut self) {
            // Reached only while unwinding from the panicking drop of object `next - 1`.
            // SAFETY: objects next..to are still initialised and not yet dropped.
            unsafe { drop_objects::<T>(self.g, self.next, self.to) };
        }
    }
    let mut rest = Rest::<T> {
        g,
        next: from,
        to,
        _t: PhantomData,
    };
    while rest.next < rest.to {
        let i = rest.next;
        rest.next += 1;
        // SAFETY: forwarded from the caller: object i is initialised and dropped only here.
        unsafe { std::ptr::drop_in_place(T::from_addr(g.ptr_of_index(i), g.elem_len)) };
    }
    std::mem::forget(rest);
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
            crate::leaks::report(crate::AuditReport {
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

    /// The prefetch / bulk-resolve API on a full pool of `R` entries (issue 12).
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
            unsafe { init_objects::<D>(&g, 0, 4, &mut init) }
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
