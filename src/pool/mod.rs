//! The pool: region + common ring + caches, generic over the entry representation, and the
//! corridor every get and put runs: find the calling thread's cache (the memo, then the
//! registry), run the one cache algorithm through its owner token (cache/mod.rs), convert
//! entries to handles, and call the debug hook of that direction (compiled out unless
//! `DEBUG_CHECKS`). The adapters below are shared with `LocalCache` (which brings its own
//! token) and the caller's-table forms (pool/table.rs). The rest of the pool lives beside:
//! its parts and their drops (parts.rs), settings and handle access (access.rs, resolver.rs),
//! the registry of caches (registry.rs), counts, the identity check, the objects' making.

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

mod access;
mod counts;
pub(crate) mod debug;
mod identity;
mod objects;
mod parts;
mod registry;
mod resolver;
mod table;

use debug::ObjectStates;
pub use debug::DEBUG_CHECKS;
pub(crate) use identity::*;
pub(crate) use objects::{drop_objects, Growth, InitFn, ObjectInit, UninitObject};
pub(crate) use parts::{PoolCore, Waiters};
use registry::{ExitFlush, Registry};
pub use resolver::Resolver;
pub(crate) use table::Lazy;

thread_local! {
    /// (pool id, that pool's cache of this thread): the last pool this thread used, for a
    /// one-compare hot path. Pool ids are never reused; written by the registry when it finds
    /// or installs a cache, cleared at thread exit before the caches are freed.
    static MEMO: std::cell::Cell<(u64, *const ())> =
        const { std::cell::Cell::new((0, std::ptr::null())) };
}

/// The seam of waiting (the core's side): see [`Waiters`].
impl<E: Copy + Send + 'static> PoolCore<E> {
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
        unsafe { CacheMut::new(NonNull::from(&*core.uncached), &core.ring) }.put(src);
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

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    // ---- get and put through the calling thread's cache ------------------------------------

    /// The calling thread's cache, allocating it on first use, or the pool's zero-size cache
    /// when the thread may not have one.
    #[inline(always)]
    fn thread_cache(&self) -> &Cache<R::Entry> {
        match self.current_cache() {
            Some(c) => c,
            None => self.thread_cache_slow(),
        }
    }

    /// The calling thread's cache of this pool, if it has one: first the one-compare memo of
    /// the last pool this thread used, then the registry's slot of the thread's tid.
    #[inline(always)]
    fn current_cache(&self) -> Option<&Cache<R::Entry>> {
        if let Ok((id, p)) = MEMO.try_with(|m| m.get()) {
            if id == self.id {
                // SAFETY: the memo holds this thread's cache of the pool with this (never
                // reused) id; the registry clears it at thread exit before the cache is freed,
                // and the pool (hence the cache) lives for &self.
                return Some(unsafe { &*p.cast::<Cache<R::Entry>>() });
            }
        }
        self.core.registry.current(self.id)
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
        if let Some(c) = self.current_cache() {
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
        let c = self.current_cache().unwrap_or(&self.core.uncached);
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

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    // ---- the adapters: cache algorithm <-> handles (shared with LocalCache) ----------------
    //
    // No user code may run while a cache token is live: a global allocator, a panic
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
    /// state in registers. `reset` (a constant at every call site): run the object type's
    /// reset (`reset_got`); false only for objects lent straight to the kernel, whose
    /// receive writes what the reset writes (see `LocalCache::get_burst_for_kernel`).
    #[inline(always)]
    pub(crate) fn get_vec_via<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
        behavior: Behavior,
        reset: bool,
    ) -> Result<usize, PoolError> {
        let cap = self.geometry.capacity as usize;
        let n = match behavior {
            Behavior::Bulk if n > cap => {
                let mut t = token();
                let cm = t.cm();
                // Counted as every failed get is (it was missed before).
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
        let len = cm.len();
        if n <= len {
            return self.get_into_vec(out, n, reset, |dst| {
                cm.take_top_of(dst, len);
                Ok(n)
            });
        }
        let r = self.get_into_vec(out, n, reset, |dst| cm.get(dst, behavior));
        if r.is_err() {
            // A failed get may have given its refill back to the ring: after the token, the
            // check for waiters (wait.rs). A burst that came back short took the ring's
            // entries (its own given-back refill included) down to none.
            drop(t);
            self.core.after_put();
        }
        r
    }

    /// Appends the handles of the entries `get` writes into `n` spare slots of `out` (which
    /// has room: the caller reserved it before taking its token): `get` returns how many it
    /// wrote, or `Err(reachable)`. `reset`: as [`Pool::get_vec_via`]'s.
    #[inline(always)]
    pub(crate) fn get_into_vec(
        &self,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
        reset: bool,
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
                if reset {
                    self.reset_got(&out[len..]);
                }
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
        let len = cm.len();
        if N <= len {
            return self.get_into_array(|dst| {
                cm.take_top_of(dst, len);
                Ok(N)
            });
        }
        let r = self.get_into_array(|dst| cm.get(dst, Behavior::Bulk));
        if r.is_err() {
            drop(t); // as get_vec_via
            self.core.after_put();
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
                self.reset_got(&hs);
                Ok(hs)
            }
            Err(available) => Err(PoolError::Exhausted {
                requested: N,
                available,
            }),
        }
    }

    /// The object type's reset of the objects of `hs`, just handed out ([`Element::RESET_ON_GET`]:
    /// packet buffers, whose put then runs no hook). For every other type the constant is false
    /// and this compiles to nothing. Called by the three places where entries become handles
    /// (here twice and `got_into` in table.rs), after the debug hook; it may run while the
    /// token is live: the reset is crate code that neither panics nor re-enters the pool.
    #[inline(always)]
    pub(crate) fn reset_got(&self, hs: &[H<T, B, R>]) {
        if T::RESET_ON_GET {
            let g = &self.geometry;
            for h in hs {
                // SAFETY: `h` was just made from an entry the cache or the ring gave out, so it
                // names an initialised object of this pool, now owned by `h` alone: no
                // reference to it exists, and this `&mut` ends with the call.
                T::reset_on_get(unsafe { &mut *T::from_addr(R::ptr(g, h.entry()), g.elem_len) });
            }
        }
    }

    /// Puts the handles of `hs` through the token `token` returns, after the identity check
    /// of run-time pools (against `g`: the pool's geometry, or a cache's copy of it, which the
    /// compiler keeps in registers across a loop) and the debug hook (which may panic: before
    /// the token exists).
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
            // The pool's geometry, not `g` (which may point into a `LocalCache`: pool/table.rs,
            // `put_from_with`, says why no call may take its address).
            foreign_panic_any::<R>(&self.geometry, entries_of(hs))
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
    /// the hooked path raised the register pressure of the callers' loops). `prechecked`: the
    /// identity and debug checks already ran (the hooked path).
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
                    self.core.after_put();
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
            self.core.after_put();
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
        // `&v[start..]` plus `truncate`: their bounds checks are redundant here (n <= len).
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
            // The pool's geometry, not `g` (see `put_via`).
            foreign_panic_any::<R>(&self.geometry, entries_of(tail))
        }
        if !hooked {
            // SAFETY: the tail's handles were moved into the cache above (handles have no
            // drop).
            unsafe { v.set_len(len - n) };
        }
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

#[cfg(test)]
mod tests;
