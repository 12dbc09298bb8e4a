//! The pool: region + common ring + caches, generic over the entry representation.

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, Weak};

use crate::brand::{Brand, BrandSlot};
use crate::cache::{Cache, FlushPolicy};
use crate::error::PoolError;
use crate::handle::GenericHandle;
use crate::region::{BackingReport, Region};
use crate::repr::{Geometry, Repr};
use crate::ring::{Behavior, Ring};
use crate::stats::{Counter, Counters, Stats};
use crate::sync::{AtomicBool, AtomicPtr, Backoff, Ordering};
use crate::thread::{self, ExitFlush};

/// Whether per-object state checks run: always in debug builds, with the `debug-checks`
/// feature in release builds. When false the checks compile away.
pub const DEBUG_CHECKS: bool = cfg!(any(debug_assertions, feature = "debug-checks"));

const STATE_FREE: u8 = 0;
const STATE_ALLOCATED: u8 = 1;

/// One implicit cache slot: the cache of the thread whose tid is this slot's index.
struct ThreadSlot<E> {
    /// Null until the thread's first use; freed (set null) at the thread's exit.
    cache: AtomicPtr<Cache<E>>,
    /// Taken by the exit flush, `available()`, `audit()` and drop: never by the owner's hot
    /// path (the owner is the only thread that frees the cache, and only at its exit).
    lock: AtomicBool,
}

impl<E> ThreadSlot<E> {
    fn lock(&self) -> SlotGuard<'_, E> {
        let b = Backoff::new();
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            b.snooze();
        }
        SlotGuard(self)
    }
}

struct SlotGuard<'a, E>(&'a ThreadSlot<E>);

impl<E> Drop for SlotGuard<'_, E> {
    fn drop(&mut self) {
        self.0.lock.store(false, Ordering::Release);
    }
}

/// A registered user-owned cache (raw pointer to its boxed `Cache`).
pub(crate) struct CachePtr<E>(pub(crate) NonNull<Cache<E>>);
// SAFETY: the pointee is a Cache<E> (Sync for E: Send) kept alive until unregistered.
unsafe impl<E: Send> Send for CachePtr<E> {}

/// The untyped part of a pool that thread-exit destructors may outlive the pool with.
pub(crate) struct Shared<E> {
    pub(crate) ring: Ring<E>,
    slots: Box<[ThreadSlot<E>]>,
    pub(crate) explicit: Mutex<Vec<CachePtr<E>>>,
    pub(crate) cache_size: u32,
    pub(crate) policy: FlushPolicy,
    /// Counters of operations that went to the ring without a cache.
    pub(crate) uncached: Counters,
}

impl<E: Copy + Send + 'static> Shared<E> {
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the slot array of `max_threads` slots cannot be
    /// allocated (fallible reserve: never an abort); the builder bounds `max_threads` first.
    pub(crate) fn new(
        ring: Ring<E>,
        max_threads: usize,
        cache_size: u32,
        policy: FlushPolicy,
    ) -> Result<Self, PoolError> {
        let mut slots: Vec<ThreadSlot<E>> = Vec::new();
        slots.try_reserve_exact(max_threads).map_err(|e| {
            PoolError::overflow(format!(
                "{max_threads} thread cache slots cannot be allocated: {e}"
            ))
        })?;
        slots.extend((0..max_threads).map(|_| ThreadSlot {
            cache: AtomicPtr::new(std::ptr::null_mut()),
            lock: AtomicBool::new(false),
        }));
        Ok(Shared {
            ring,
            slots: slots.into_boxed_slice(),
            explicit: Mutex::new(Vec::new()),
            cache_size,
            policy,
            uncached: Counters::default(),
        })
    }

    /// Takes every thread slot lock (in slot order, as the pool's drop does) and then the
    /// registry lock, and calls `f` with every live cache and the ring. While they are held no
    /// exit flush can move entries between a cache and the ring (an exit flush holds its slot's
    /// lock from taking the cache out until its entries are in the ring), so with `&mut` on the
    /// pool (no other user) `f` sees one consistent snapshot. Lock order: slot locks before the
    /// registry; an exit flush takes only its own slot lock, so no cycle.
    pub(crate) fn with_all_locked<X>(
        &self,
        f: impl FnOnce(&mut dyn FnMut(&mut dyn FnMut(String, &Cache<E>))) -> X,
    ) -> X {
        let guards: Vec<SlotGuard<'_, E>> = self.slots.iter().map(|s| s.lock()).collect();
        let reg = self.explicit.lock().unwrap_or_else(|e| e.into_inner());
        let mut visit = |g: &mut dyn FnMut(String, &Cache<E>)| {
            for (tid, guard) in guards.iter().enumerate() {
                let p = guard.0.cache.load(Ordering::Acquire);
                if !p.is_null() {
                    // SAFETY: non-null slot caches are live until freed under this (held) lock.
                    g(format!("thread {tid}"), unsafe { &*p });
                }
            }
            for (i, c) in reg.iter().enumerate() {
                // SAFETY: registered caches are live until unregistered under this (held) lock.
                g(format!("local {i}"), unsafe { c.0.as_ref() });
            }
        };
        f(&mut visit)
    }

    /// Calls `f` with every cache (implicit under its slot lock, explicit under the registry
    /// lock) and a label.
    fn for_each_cache(&self, mut f: impl FnMut(String, &Cache<E>)) {
        for (tid, slot) in self.slots.iter().enumerate() {
            if slot.cache.load(Ordering::Acquire).is_null() {
                continue;
            }
            let _g = slot.lock();
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: non-null slot caches are live until freed under this lock.
                f(format!("thread {tid}"), unsafe { &*p });
            }
        }
        let reg = self.explicit.lock().unwrap_or_else(|e| e.into_inner());
        for (i, c) in reg.iter().enumerate() {
            // SAFETY: registered caches are live until unregistered under this lock.
            f(format!("local {i}"), unsafe { c.0.as_ref() });
        }
    }
}

impl<E: Copy + Send + 'static> ExitFlush for Shared<E> {
    fn flush_exiting(&self, tid: usize) {
        let Some(slot) = self.slots.get(tid) else {
            return;
        };
        let _g = slot.lock();
        let p = slot.cache.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: the slot's cache was Box-allocated by this (exiting) thread, its only user;
            // we took it out of the slot under the lock, so nobody else will read it.
            let cache = unsafe { Box::from_raw(p) };
            // SAFETY: we own the cache exclusively now.
            unsafe { cache.flush(&self.ring) };
        }
    }
}

impl<E> Drop for Shared<E> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: &mut self: no thread uses the slot; the pointer came from Box::into_raw.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// A fixed-size object pool, generic over the entry representation `R` that its caches and
/// ring store. Use the aliases: [`crate::Pool`] (4-byte indices) or [`crate::ptr::Pool`]
/// (8-byte pointers, the DPDK baseline).
///
/// All objects live in one region at `base + index x stride`; free ones are named by entries
/// in the common ring or in a cache. Objects are created once at pool creation and dropped
/// when the pool is dropped; `get`/`put` only move ownership (an object comes back in the state
/// it was put in, as with rte_mempool).
///
/// Thread safety: `&GenericPool` may be shared between threads (`Sync` when `T: Send`); the
/// implicit-cache API (`get`, `put`, ...) uses a per-thread cache; [`crate::LocalCache`] is an
/// explicit cache owned by one user.
pub struct GenericPool<T, B, R: Repr> {
    pub(crate) geometry: Geometry,
    pub(crate) shared: Arc<Shared<R::Entry>>,
    /// Process-unique, never reused: the key of the per-thread cache memo.
    id: u64,
    states: Option<Box<[std::sync::atomic::AtomicU8]>>,
    name: String,
    brand: Option<&'static BrandSlot>,
    region: Region,
    /// Owns `T`s (drop check), invariant in `T` and `B` (see [`Invariant`]).
    _marker: PhantomData<(T, Invariant<T>, Invariant<B>)>,
}

/// Invariant in its parameter, and `Send + Sync` whatever it is. The pool hands out `&mut T`
/// from `&self`, so `T` must be invariant (as in `Cell<T>`): were the pool covariant,
/// `&Pool<&'static str, B>` would coerce to `&Pool<&'a str, B>`, a short-lived `&str` could be
/// written into an object through it, and the original type would read it back as
/// `&'static str` after it was freed (tests/ui/variance_pool.rs).
pub(crate) type Invariant<X> = fn(X) -> X;

// SAFETY: the pool hands each object to one handle owner at a time; sharing &pool between
// threads moves objects (T) between threads, which needs T: Send only. Geometry and Region are
// address bookkeeping; Shared is Sync.
unsafe impl<T: Send, B, R: Repr> Sync for GenericPool<T, B, R> {}

/// Handle type of a pool.
pub(crate) type H<T, B, R> = GenericHandle<T, B, R>;

impl<T, B: Brand, R: Repr> GenericPool<T, B, R> {
    pub(crate) fn from_parts(
        geometry: Geometry,
        region: Region,
        shared: Arc<Shared<R::Entry>>,
        name: String,
        brand: Option<&'static BrandSlot>,
        states: Option<Box<[std::sync::atomic::AtomicU8]>>,
    ) -> Self {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        GenericPool {
            geometry,
            shared,
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            states,
            name,
            brand,
            region,
            _marker: PhantomData,
        }
    }

    /// The per-object state bytes of the debug checks (`None` when they are off), allocated
    /// fallibly: a pool of 4 G objects must not abort the process here.
    ///
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the array cannot be allocated.
    pub(crate) fn alloc_states(
        capacity: u32,
    ) -> Result<Option<Box<[std::sync::atomic::AtomicU8]>>, PoolError> {
        if !DEBUG_CHECKS {
            return Ok(None);
        }
        let mut v: Vec<std::sync::atomic::AtomicU8> = Vec::new();
        v.try_reserve_exact(capacity as usize).map_err(|e| {
            PoolError::overflow(format!(
                "debug-check states of {capacity} objects cannot be allocated: {e}"
            ))
        })?;
        v.extend((0..capacity).map(|_| std::sync::atomic::AtomicU8::new(STATE_FREE)));
        Ok(Some(v.into_boxed_slice()))
    }

    // ---- geometry and configuration -------------------------------------------------------

    /// Number of objects.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.geometry.capacity
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
        self.shared.cache_size
    }

    /// The caches' flush/refill policy.
    pub fn policy(&self) -> FlushPolicy {
        self.shared.policy
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The entry representation: `"offset"`, `"index"` or `"pointer"`.
    pub fn repr_name(&self) -> &'static str {
        R::NAME
    }

    // ---- handle access --------------------------------------------------------------------

    /// Pointer to the object of `h` (valid while the pool lives).
    #[inline(always)]
    pub fn as_ptr(&self, h: &H<T, B, R>) -> NonNull<T> {
        let p = R::ptr(&self.geometry, h.entry()).cast::<T>();
        debug_assert!(
            (p as usize).wrapping_sub(self.geometry.base.as_ptr() as usize)
                < self.geometry.stride * self.geometry.capacity as usize
        );
        // SAFETY: handles of brand B are only minted by this pool, so the entry names one of
        // its objects, inside the region: never null.
        unsafe { NonNull::new_unchecked(p) }
    }

    /// Shared access to the object of `h` (no bounds check: the brand proves the handle is
    /// this pool's).
    #[inline(always)]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        // SAFETY: h is this pool's (brand) and owns its object; the object is initialised; the
        // borrow of h prevents a &mut through the same handle, and no other handle names it.
        unsafe { self.as_ptr(h).as_ref() }
    }

    /// Exclusive access to the object of `h`: the one place where an index becomes an address
    /// (`base - stride + entry x stride`: one multiply-add, no bounds check).
    #[inline(always)]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        // SAFETY: as get_ref; &mut h makes this the only borrow of the object.
        unsafe { self.as_ptr(h).as_mut() }
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

    /// 0-based index of the object of `h`.
    #[inline]
    pub fn index_of(&self, h: &H<T, B, R>) -> u32 {
        R::index(&self.geometry, h.entry())
    }

    /// Visits every object with its index (DPDK's `rte_mempool_obj_iter`), e.g. to set up or
    /// inspect objects. Takes `&mut self`, so no handle can be resolved meanwhile.
    pub fn obj_iter(&mut self) -> impl Iterator<Item = (u32, &mut T)> + '_ {
        let g = self.geometry;
        // SAFETY: &mut self excludes every other access to the objects for the iterator's
        // life; distinct indices are distinct, initialised, aligned objects.
        (0..g.capacity).map(move |i| (i, unsafe { &mut *g.ptr_of_index(i).cast::<T>() }))
    }

    // ---- implicit per-thread cache --------------------------------------------------------

    /// The calling thread's cache, allocating it on first use; None for uncached operation.
    #[inline(always)]
    fn thread_cache(&self) -> Option<&Cache<R::Entry>> {
        // One-entry memo (pool id, cache) of the last pool this thread used: one TLS read and
        // a compare, instead of tid -> Arc -> slot array -> slot.
        let p = thread::memo_lookup(self.id);
        if !p.is_null() {
            // SAFETY: the memo holds this thread's cache of the pool with this (never reused)
            // id; it is cleared at thread exit before the cache is freed, and the pool (hence
            // the cache) lives for &self.
            return Some(unsafe { &*p.cast::<Cache<R::Entry>>() });
        }
        let tid = thread::current_tid();
        if let Some(slot) = self.shared.slots.get(tid) {
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                thread::memo_store(self.id, p.cast());
                // SAFETY: the slot's cache lives until this very thread exits.
                return Some(unsafe { &*p });
            }
        }
        self.thread_cache_slow()
    }

    #[cold]
    fn thread_cache_slow(&self) -> Option<&Cache<R::Entry>> {
        if self.shared.cache_size == 0 {
            return None;
        }
        let tid = thread::ensure_tid()?;
        let slot = self.shared.slots.get(tid)?;
        let p = slot.cache.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: as in thread_cache.
            return Some(unsafe { &*p });
        }
        let weak: Weak<Shared<R::Entry>> = Arc::downgrade(&self.shared);
        if !thread::register(weak) {
            return None;
        }
        let c = Box::into_raw(Box::new(Cache::new(
            self.shared.cache_size,
            self.shared.policy,
        )));
        let _g = slot.lock();
        slot.cache.store(c, Ordering::Release);
        thread::memo_store(self.id, c.cast());
        // SAFETY: just allocated; freed only at this thread's exit or with the pool.
        Some(unsafe { &*c })
    }

    /// Takes one object using the calling thread's cache (rte_mempool_get).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when this thread's cache and the ring are empty. Objects
    /// held in other threads' caches are not reachable (up to `threads x flush threshold`);
    /// size the pool for them, or have those threads call [`GenericPool::flush`].
    #[inline]
    pub fn get(&self) -> Result<H<T, B, R>, PoolError> {
        let c = self.thread_cache();
        // SAFETY: the calling thread owns its cache.
        unsafe { self.op_get_one(c) }
    }

    /// Returns one object through the calling thread's cache (rte_mempool_put).
    #[inline]
    pub fn put(&self, h: H<T, B, R>) {
        let c = self.thread_cache();
        // SAFETY: as get.
        unsafe { self.op_put_one(c, h) }
    }

    /// Appends exactly `n` handles to `out`, or none (rte_mempool_get_bulk).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] with `requested = n` and what was reachable; `out` unchanged.
    pub fn get_bulk(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> Result<(), PoolError> {
        let c = self.thread_cache();
        // SAFETY: as get.
        unsafe { self.op_get_bulk(c, out, n) }
    }

    /// Appends up to `n` handles to `out`; returns how many.
    pub fn get_burst(&self, out: &mut Vec<H<T, B, R>>, n: usize) -> usize {
        let c = self.thread_cache();
        // SAFETY: as get.
        unsafe { self.op_get_burst(c, out, n) }
    }

    /// Returns every handle of `handles` (left empty); always succeeds (rte_mempool_put_bulk).
    pub fn put_bulk(&self, handles: &mut Vec<H<T, B, R>>) {
        let c = self.thread_cache();
        // SAFETY: as get.
        unsafe { self.op_put_vec_tail(c, handles, handles.len()) }
    }

    /// Flushes the calling thread's cache into the ring (rte_mempool_cache_flush). Other
    /// threads' caches are theirs to flush.
    pub fn flush(&self) {
        let tid = thread::current_tid();
        if let Some(slot) = self.shared.slots.get(tid) {
            let p = slot.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: the calling thread owns its slot's cache.
                unsafe { (*p).flush(&self.shared.ring) };
            }
        }
    }

    /// A user-owned cache: get/put through it touch no thread-local state
    /// (rte_mempool_cache_create + rte_mempool_generic_get/put). Its objects go back to the
    /// ring when it is dropped.
    pub fn local_cache(&self) -> crate::LocalCache<'_, T, B, R> {
        crate::LocalCache::new(self)
    }

    // ---- operations over an optional cache (shared by implicit and explicit caches) -------

    #[inline(always)]
    pub(crate) unsafe fn op_get_one(
        &self,
        c: Option<&Cache<R::Entry>>,
    ) -> Result<H<T, B, R>, PoolError> {
        let ring = &self.shared.ring;
        let e = match c {
            // SAFETY: caller owns c.
            Some(c) => unsafe { c.get_one(ring) },
            None => {
                let mut e = MaybeUninit::uninit();
                // SAFETY: e is valid for one write.
                let t = unsafe { ring.dequeue_raw(e.as_mut_ptr(), 1, Behavior::Bulk) };
                self.count_uncached_get(1, t.n == 1);
                // SAFETY: written when t.n == 1.
                (t.n == 1).then(|| unsafe { e.assume_init() })
            }
        };
        match e {
            Some(e) => {
                self.check_get(e);
                Ok(GenericHandle::from_entry(e))
            }
            None => Err(PoolError::Exhausted {
                requested: 1,
                available: c.map_or(0, |c| c.len()) + ring.count(),
            }),
        }
    }

    #[inline(always)]
    pub(crate) unsafe fn op_put_one(&self, c: Option<&Cache<R::Entry>>, h: H<T, B, R>) {
        let e = h.into_entry();
        self.check_put(e);
        match c {
            // SAFETY: caller owns c.
            Some(c) => unsafe { c.put_one(&self.shared.ring, e) },
            None => {
                // SAFETY: &e valid for one read.
                unsafe { self.ring_put(&e, 1) };
            }
        }
    }

    pub(crate) unsafe fn op_get_bulk(
        &self,
        c: Option<&Cache<R::Entry>>,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
    ) -> Result<(), PoolError> {
        if n == 0 {
            return Ok(());
        }
        out.reserve(n);
        let len = out.len();
        // SAFETY: reserve made room for n more; H is repr(transparent) over R::Entry.
        let dst = unsafe { out.as_mut_ptr().add(len).cast::<R::Entry>() };
        let ring = &self.shared.ring;
        let res = match c {
            // SAFETY: caller owns c; dst valid for n writes.
            Some(c) => unsafe { c.get_bulk(ring, dst, n) },
            None => {
                // SAFETY: dst valid for n writes.
                let t = unsafe { ring.dequeue_raw(dst, n, Behavior::Bulk) };
                self.count_uncached_get(n, t.n == n);
                if t.n == n {
                    Ok(())
                } else {
                    Err(t.remaining)
                }
            }
        };
        match res {
            Ok(()) => {
                // SAFETY: n entries were written after len.
                unsafe { out.set_len(len + n) };
                if DEBUG_CHECKS {
                    for h in &out[len..] {
                        self.check_get(h.entry());
                    }
                }
                Ok(())
            }
            Err(available) => Err(PoolError::Exhausted {
                requested: n,
                available,
            }),
        }
    }

    pub(crate) unsafe fn op_get_burst(
        &self,
        c: Option<&Cache<R::Entry>>,
        out: &mut Vec<H<T, B, R>>,
        n: usize,
    ) -> usize {
        if n == 0 {
            return 0;
        }
        out.reserve(n);
        let len = out.len();
        // SAFETY: as op_get_bulk.
        let dst = unsafe { out.as_mut_ptr().add(len).cast::<R::Entry>() };
        let ring = &self.shared.ring;
        let got = match c {
            // SAFETY: caller owns c; dst valid for n writes.
            Some(c) => unsafe { c.get_burst(ring, dst, n) },
            None => {
                // SAFETY: dst valid for n writes.
                let got = unsafe { ring.dequeue_raw(dst, n, Behavior::Burst).n };
                self.count_uncached_get(got, got > 0);
                got
            }
        };
        // SAFETY: `got` entries were written after len.
        unsafe { out.set_len(len + got) };
        if DEBUG_CHECKS {
            for h in &out[len..] {
                self.check_get(h.entry());
            }
        }
        got
    }

    /// Puts the last `n` handles of `v` (clamped to its length) and truncates it.
    pub(crate) unsafe fn op_put_vec_tail(
        &self,
        c: Option<&Cache<R::Entry>>,
        v: &mut Vec<H<T, B, R>>,
        n: usize,
    ) {
        let n = n.min(v.len());
        if n == 0 {
            return;
        }
        let start = v.len() - n;
        if DEBUG_CHECKS {
            self.debug_mark_put(&v[start..]);
        }
        // SAFETY: v[start..] are n initialised handles, repr(transparent) over entries.
        let src = unsafe { v.as_ptr().add(start).cast::<R::Entry>() };
        // SAFETY: caller owns c; src valid for n reads; the handles are forgotten by set_len
        // right after (handles have no destructor), so ownership passes to the pool.
        unsafe {
            self.put_entries(c, src, n);
            v.set_len(start);
        }
    }

    /// Puts `n` entries (already checked) through `c` or straight into the ring.
    #[inline(always)]
    pub(crate) unsafe fn put_entries(
        &self,
        c: Option<&Cache<R::Entry>>,
        src: *const R::Entry,
        n: usize,
    ) {
        match c {
            // SAFETY: forwarded from the caller.
            Some(c) => unsafe { c.put_bulk(&self.shared.ring, src, n) },
            // SAFETY: forwarded.
            None => unsafe { self.ring_put(src, n) },
        }
    }

    unsafe fn ring_put(&self, src: *const R::Entry, n: usize) {
        // SAFETY: forwarded.
        let t = unsafe { self.shared.ring.enqueue_raw(src, n, Behavior::Bulk) };
        assert!(
            t.n == n,
            "idxpool: common ring of pool {} overflowed: an object was put twice (broken \
             Handle::from_raw contract)",
            self.name
        );
        self.shared.uncached.add_shared(Counter::PutBulk, 1);
        self.shared.uncached.add_shared(Counter::PutObjs, n);
        self.shared.uncached.add_shared(Counter::PutCommonBulk, 1);
        self.shared.uncached.add_shared(Counter::PutCommonObjs, n);
    }

    fn count_uncached_get(&self, n: usize, ok: bool) {
        let s = &self.shared.uncached;
        if ok {
            s.add_shared(Counter::GetCommonBulk, 1);
            s.add_shared(Counter::GetCommonObjs, n);
            s.add_shared(Counter::GetSuccessBulk, 1);
            s.add_shared(Counter::GetSuccessObjs, n);
        } else {
            s.add_shared(Counter::GetFailBulk, 1);
            s.add_shared(Counter::GetFailObjs, n);
        }
    }

    // ---- debug checks ---------------------------------------------------------------------

    #[inline(always)]
    fn check_get(&self, e: R::Entry) {
        if let (true, Some(states)) = (DEBUG_CHECKS, &self.states) {
            let i = R::index(&self.geometry, e);
            let prev =
                states[i as usize].swap(STATE_ALLOCATED, std::sync::atomic::Ordering::Relaxed);
            assert!(
                prev == STATE_FREE,
                "idxpool: object {i} of pool {} handed out while allocated (corrupted ring or cache)",
                self.name
            );
        }
    }

    #[inline(always)]
    fn check_put(&self, e: R::Entry) {
        if let (true, Some(states)) = (DEBUG_CHECKS, &self.states) {
            if let Err(err) = self.check_entry(e) {
                panic!("idxpool: {err}");
            }
            let i = R::index(&self.geometry, e);
            states[i as usize].store(STATE_FREE, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub(crate) fn debug_mark_got(&self, hs: &[H<T, B, R>]) {
        for h in hs {
            self.check_get(h.entry());
        }
    }

    /// Checks and marks free a batch about to be put, all or nothing: on a bad handle the
    /// batch's marks are undone before the panic, so a caught panic leaves every handle of the
    /// batch in use (tests/debug_checks.rs, a_bulk_put_with_one_bad_handle_moves_nothing).
    pub(crate) fn debug_mark_put(&self, hs: &[H<T, B, R>]) {
        if let (true, Some(states)) = (DEBUG_CHECKS, &self.states) {
            for (k, h) in hs.iter().enumerate() {
                if let Err(err) = self.check_entry(h.entry()) {
                    for done in &hs[..k] {
                        let i = R::index(&self.geometry, done.entry()) as usize;
                        states[i].store(STATE_ALLOCATED, std::sync::atomic::Ordering::Relaxed);
                    }
                    panic!("idxpool: {err}");
                }
                let i = R::index(&self.geometry, h.entry()) as usize;
                states[i].store(STATE_FREE, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    fn check_entry(&self, e: R::Entry) -> Result<(), PoolError> {
        let p = R::ptr(&self.geometry, e) as usize;
        let off = p.wrapping_sub(self.geometry.base.as_ptr() as usize);
        let i = R::index(&self.geometry, e);
        if off % self.geometry.stride != 0 || i >= self.capacity() {
            return Err(PoolError::IndexOutOfRange {
                index: i,
                capacity: self.capacity(),
            });
        }
        if let Some(states) = &self.states {
            if states[i as usize].load(std::sync::atomic::Ordering::Relaxed) == STATE_FREE {
                return Err(PoolError::DoubleFree {
                    index: i,
                    pool: self.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Checks that a raw value (from [`crate::GenericHandle::into_raw`]: the index for index
    /// entries, the scaled offset for offset entries, the index for the pointer twin) names an
    /// object of this pool that is in use, before rebuilding a handle with `from_raw`. The
    /// in-use part is checked only with debug checks on ([`DEBUG_CHECKS`]).
    ///
    /// # Errors
    /// [`PoolError::IndexOutOfRange`] (naming the index the value would have, or the value
    /// itself when it names no entry) or [`PoolError::DoubleFree`] (the object is free).
    pub fn check_raw(&self, raw: u32) -> Result<(), PoolError> {
        match R::entry_from_raw(&self.geometry, raw) {
            Some(e) => self.check_entry(e),
            None => Err(PoolError::IndexOutOfRange {
                index: raw,
                capacity: self.capacity(),
            }),
        }
    }

    // ---- counts ---------------------------------------------------------------------------

    /// Free objects: the ring plus every cache (rte_mempool_avail_count). A snapshot while
    /// other threads work; exact when quiescent.
    pub fn available(&self) -> usize {
        let mut n = self.shared.ring.count();
        self.shared.for_each_cache(|_, c| n += c.len());
        n.min(self.capacity() as usize)
    }

    /// Objects held by handles (rte_mempool_in_use_count).
    pub fn in_use(&self) -> usize {
        self.capacity() as usize - self.available()
    }

    /// True when every object is free (rte_mempool_full).
    pub fn is_full(&self) -> bool {
        self.available() == self.capacity() as usize
    }

    /// True when no object is free (rte_mempool_empty).
    pub fn is_empty(&self) -> bool {
        self.available() == 0
    }

    /// Objects in the common ring now.
    pub fn ring_count(&self) -> usize {
        self.shared.ring.count()
    }

    /// Sum of every cache's counters, plus uncached operations. All zero without the `stats`
    /// feature. Caches of exited threads and dropped local caches are not included.
    pub fn stats(&self) -> Stats {
        let mut s = self.shared.uncached.snapshot();
        self.shared
            .for_each_cache(|_, c| s += c.counters.snapshot());
        s
    }

    /// `(label, objects held)` of every live cache.
    pub fn cache_counts(&self) -> Vec<(String, usize)> {
        let mut v = Vec::new();
        self.shared.for_each_cache(|l, c| v.push((l, c.len())));
        v
    }

    /// Checks the invariants: every free object is named exactly once across the ring and the
    /// caches, every entry is in range, every cache is within its flush threshold, and (with
    /// debug checks) every free object is marked free and every other one allocated.
    /// `&mut self`: the pool must be quiescent.
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] describing the first broken invariant.
    pub fn audit(&mut self) -> Result<crate::AuditReport, PoolError> {
        let cap = self.capacity() as usize;
        let mut seen = vec![false; cap];
        let mut in_caches = 0usize;
        let mut cache_lens = Vec::new();
        let mut problem: Option<String> = None;
        let geometry = self.geometry;
        let mark = |e: R::Entry, seen: &mut Vec<bool>, where_: &str| -> Option<String> {
            let i = R::index(&geometry, e) as usize;
            if i >= cap {
                Some(format!("{where_}: entry {e:?} out of range"))
            } else if std::mem::replace(&mut seen[i], true) {
                Some(format!("{where_}: object {i} named twice"))
            } else {
                None
            }
        };
        // One consistent snapshot: every slot lock and the registry lock stay held while the
        // caches are read and the ring is drained and refilled. Thread-exit flushes run in TLS
        // destructors (possibly after a `thread::scope` ended, so concurrently with this
        // `&mut self`); one of them moving a cache already read into the ring not yet read
        // made the audit report "object named twice" that was not (tests/soundness.rs).
        let ring = &self.shared.ring;
        let buf = self.shared.with_all_locked(|visit| {
            visit(&mut |label, c| {
                if c.len() > c.fill_limit() as usize {
                    problem.get_or_insert(format!(
                        "{label}: holds {} above its threshold {}",
                        c.len(),
                        c.fill_limit()
                    ));
                }
                for &e in c.entries() {
                    if let Some(p) = mark(e, &mut seen, &label) {
                        problem.get_or_insert(p);
                    }
                }
                in_caches += c.len();
                cache_lens.push((label, c.len()));
            });
            // Drain the ring and put everything back in order (nobody else can reach it now).
            let n = ring.count();
            let mut buf: Vec<R::Entry> = Vec::with_capacity(n);
            // SAFETY: buf has capacity n.
            let got = unsafe { ring.dequeue_raw(buf.as_mut_ptr(), n, Behavior::Bulk).n };
            // SAFETY: `got` entries were written.
            unsafe { buf.set_len(got) };
            let back = ring.enqueue(&buf, Behavior::Bulk).n;
            if back != got {
                problem.get_or_insert(format!("ring: could not restore {got} entries"));
            }
            buf
        });
        for &e in &buf {
            if let Some(p) = mark(e, &mut seen, "ring") {
                problem.get_or_insert(p);
            }
        }
        let in_ring = buf.len();
        let free = in_ring + in_caches;
        if let Some(states) = &self.states {
            for (i, s) in states.iter().enumerate() {
                let free_state = s.load(std::sync::atomic::Ordering::Relaxed) == STATE_FREE;
                if free_state != seen[i] {
                    problem.get_or_insert(format!(
                        "object {i}: marked {} but {}",
                        if free_state { "free" } else { "allocated" },
                        if seen[i] {
                            "found free"
                        } else {
                            "not found free"
                        }
                    ));
                }
            }
        }
        if let Some(p) = problem {
            return Err(PoolError::AuditFailed(format!("pool {}: {p}", self.name)));
        }
        Ok(crate::AuditReport {
            capacity: cap,
            in_ring,
            in_caches,
            in_use: cap - free,
            caches: cache_lens,
        })
    }

    /// A multi-line description for a person (rte_mempool_dump): sizes, backing, counts.
    pub fn dump(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "mempool <{}>@{:p}", self.name, self.geometry.base);
        let _ = writeln!(s, "  object type={}", std::any::type_name::<T>());
        let _ = writeln!(
            s,
            "  repr={} entry_size={} object_size={} stride={} capacity={}",
            R::NAME,
            std::mem::size_of::<R::Entry>(),
            std::mem::size_of::<T>(),
            self.stride(),
            self.capacity()
        );
        let _ = writeln!(s, "  backing: {}", self.backing());
        let _ = writeln!(
            s,
            "  cache_size={} policy={} flush_threshold={}",
            self.cache_size(),
            self.policy(),
            self.policy().fill_limit(self.cache_size())
        );
        let _ = writeln!(
            s,
            "  ring: count={} capacity={} size={}",
            self.shared.ring.count(),
            self.shared.ring.capacity(),
            self.shared.ring.size()
        );
        let counts = self.cache_counts();
        let total: usize = counts.iter().map(|c| c.1).sum();
        let _ = writeln!(s, "  caches: {} live, {} objects", counts.len(), total);
        for (l, n) in &counts {
            let _ = writeln!(s, "    {l}: {n}");
        }
        let _ = writeln!(
            s,
            "  available={} in_use={}",
            self.available(),
            self.in_use()
        );
        if cfg!(feature = "stats") {
            let _ = writeln!(s, "  stats: {}", self.stats());
        }
        s
    }
}

/// Converts handles of one pool to references; see [`GenericPool::resolver`].
pub struct Resolver<'p, T, B, R: Repr> {
    geometry: Geometry,
    _pool: PhantomData<&'p GenericPool<T, B, R>>,
}

impl<T, B, R: Repr> Clone for Resolver<'_, T, B, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, B, R: Repr> Copy for Resolver<'_, T, B, R> {}

impl<'p, T, B: Brand, R: Repr> Resolver<'p, T, B, R> {
    /// Shared access to the object of `h` (as [`GenericPool::get_ref`]).
    #[inline(always)]
    pub fn get_ref<'a>(&self, h: &'a H<T, B, R>) -> &'a T
    where
        'p: 'a,
    {
        // SAFETY: as GenericPool::get_ref: the geometry is the pool's, the brand proves the
        // handle is this pool's, and the result lives no longer than the pool borrow 'p.
        unsafe { &*R::ptr(&self.geometry, h.entry()).cast::<T>() }
    }

    /// Exclusive access to the object of `h` (as [`GenericPool::get_mut`]).
    #[inline(always)]
    pub fn get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> &'a mut T
    where
        'p: 'a,
    {
        // SAFETY: as GenericPool::get_mut; &mut h makes the borrow exclusive.
        unsafe { &mut *R::ptr(&self.geometry, h.entry()).cast::<T>() }
    }
}

/// Drops objects `from..to` in place, and keeps dropping after a panicking `T::drop`, as `Vec`
/// does: the rest are dropped while the panic unwinds (a second panic then aborts, as for a
/// panic in any destructor during unwinding), and the panic goes on to the caller.
///
/// # Safety
/// Objects `from..to` of `g` are initialised, dropped by nobody else, and not used afterwards.
pub(crate) unsafe fn drop_objects<T>(g: &Geometry, from: u32, to: u32) {
    struct Rest<'g, T> {
        g: &'g Geometry,
        next: u32,
        to: u32,
        _t: PhantomData<T>,
    }
    impl<T> Drop for Rest<'_, T> {
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
        unsafe { std::ptr::drop_in_place(g.ptr_of_index(i).cast::<T>()) };
    }
    std::mem::forget(rest);
}

impl<T, B, R: Repr> Drop for GenericPool<T, B, R> {
    fn drop(&mut self) {
        // Quiescent (we own the pool); exiting threads may still flush, under the slot locks.
        let guards: Vec<_> = self.shared.slots.iter().map(|s| s.lock()).collect();
        let mut free = self.shared.ring.count();
        for s in self.shared.slots.iter() {
            let p = s.cache.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: slot locked, cache live.
                free += unsafe { (*p).len() };
            }
        }
        drop(guards);
        let cap = self.geometry.capacity as usize;
        if free < cap {
            crate::leaks::report(&self.name, cap - free, self.geometry.capacity);
        }
        if let Some(slot) = self.brand {
            slot.release(free == self.geometry.capacity as usize);
        }
        if std::mem::needs_drop::<T>() {
            // SAFETY: every object was initialised at creation and is dropped once here; no
            // reference to it can outlive the pool (all borrow &self).
            unsafe { drop_objects::<T>(&self.geometry, 0, self.geometry.capacity) };
        }
        // The region unmaps after this (field drop order).
    }
}

impl<T, B: Brand, R: Repr> fmt::Debug for GenericPool<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("repr", &R::NAME)
            .field("object_size", &std::mem::size_of::<T>())
            .field("stride", &self.stride())
            .field("capacity", &self.capacity())
            .field("backing", &self.backing().backing)
            .field("cache_size", &self.cache_size())
            .field("policy", &self.policy())
            .field("ring_count", &self.shared.ring.count())
            .field("available", &self.available())
            .finish()
    }
}
