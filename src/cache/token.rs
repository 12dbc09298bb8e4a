//! `CacheMut`: the owner token of one cache and the ring behind it, through which every get
//! and put of the core pool runs.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::repr::{copy_entries, Dyn, Shape};
use crate::ring::{Behavior, Ring};
use crate::stats::Counter;
use crate::sync::Ordering;

use super::{flush_all, get_miss, put_overflow, Cache, CacheOps, Put};

/// Exclusive access to one cache and the common ring behind it: the owner token through which
/// every get and put of the core pool runs (DPDK's `rte_mempool_do_generic_get` /
/// `rte_mempool_do_generic_put`, with the cache argument). It is neither `Send`, `Sync` nor
/// `Clone`, and only its `unsafe` constructor can make one, so holding one proves that nobody
/// else mutates the cache.
///
/// It keeps the cache's entry array and flush threshold by value, so that an owner that keeps
/// the token (a [`crate::LocalCache`]) may keep them in registers across a loop of gets and
/// puts. The length has one home, the cache's `len`: each operation reads it once and stores
/// it once (a relaxed store, for counts by other threads), as DPDK's `cache->len`; a second
/// copy in the token cost a store per operation.
pub(crate) struct CacheMut<'a, E> {
    cache: NonNull<Cache<E>>,
    /// The ring, as a raw pointer (valid for `'a`): a token kept inside a companion that owns
    /// its pool through an `Arc` must hold no reference into that pool, since a reference
    /// field of a value passed by value is protected for the whole call under Stacked and
    /// Tree Borrows (the companion may be the pool's last owner: `drop(cache)`).
    ring: NonNull<Ring<E>>,
    objs: *mut E,
    fill_limit: usize,
    /// Borrows the cache for 'a; `*mut ()` makes the token neither Send nor Sync.
    _owner: PhantomData<(&'a Cache<E>, *mut ())>,
}

impl<'a, E: Copy> CacheMut<'a, E> {
    /// The owner token of `cache` in front of `ring`.
    ///
    /// # Safety
    /// For `'a`, no other `CacheMut` of `cache` may be in use (the caller is its owner thread
    /// or holds it exclusively) — unless `cache` has size 0: a zero-size cache holds no entry,
    /// every operation on it goes to the ring, and what it writes of the cache (`len`, always
    /// 0, and its shared counters) is atomic, so any number of tokens may use it at once.
    /// `cache` must stay valid for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn new(cache: NonNull<Cache<E>>, ring: &'a Ring<E>) -> Self {
        let ring = NonNull::from(ring);
        // SAFETY: valid for 'a (the caller's contract).
        let c = unsafe { cache.as_ref() };
        CacheMut {
            cache,
            ring,
            objs: c.objs(),
            fill_limit: c.fill_limit() as usize,
            _owner: PhantomData,
        }
    }

    /// The cache this token owns (for its owner's drop).
    pub(crate) fn cache_ptr(&self) -> NonNull<Cache<E>> {
        self.cache
    }

    /// The ring behind the cache.
    #[inline(always)]
    fn ring(&self) -> &'a Ring<E> {
        // SAFETY: valid for 'a (constructor contract: made from a `&'a Ring`).
        unsafe { self.ring.as_ref() }
    }

    #[inline(always)]
    fn cache(&self) -> &'a Cache<E> {
        // SAFETY: valid for 'a (constructor contract).
        unsafe { self.cache.as_ref() }
    }

    /// Entries held now.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.cache().len()
    }

    /// Sets the length (the owner's relaxed store: other threads only count it).
    #[inline(always)]
    fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.cache().capacity());
        self.cache().len.store(len, Ordering::Relaxed);
    }

    /// Counts a get of `n` objects that failed before the cache algorithm ran (a bulk larger
    /// than the pool, refused by the pool's adapter), as [`get_miss`] counts its own failures.
    #[cold]
    pub(crate) fn count_failed_get(&self, n: usize) {
        self.count(Counter::GetFailBulk, 1);
        self.count(Counter::GetFailObjs, n);
    }

    /// What a get could reach now: this cache plus the ring (a snapshot).
    pub(crate) fn reachable(&self) -> usize {
        self.len() + self.ring().count()
    }

    /// The one get ([`get`] with this token's mechanics): fills `dst` with entries of free
    /// objects, the hottest first; `Ok(n)` or `Err(reachable)` as [`get`] says.
    ///
    /// Fast path: the cache holds `dst.len()`: copy from its top. Else (cold) [`get_miss`].
    #[inline(always)]
    pub(crate) fn get(
        &mut self,
        dst: &mut [MaybeUninit<E>],
        behavior: Behavior,
    ) -> Result<usize, usize> {
        if self.take_top(dst) {
            return Ok(dst.len());
        }
        self.get_miss(dst, behavior)
    }

    /// The get's slow path alone (out of line, see [`CacheMut::cold`]), for adapters that
    /// tried [`CacheMut::take_top_with`] first.
    #[inline(always)]
    pub(crate) fn get_miss(
        &mut self,
        dst: &mut [MaybeUninit<E>],
        behavior: Behavior,
    ) -> Result<usize, usize> {
        self.cold(|c| c.get_slow(dst, behavior))
    }

    /// Runs a slow path on a copy of this token held in a local. The token's own memory
    /// (inside a `LocalCache`, the caller's loop state) then never escapes to the out-of-line
    /// call, so the caller's loop may keep the token's fields in registers instead of
    /// reloading them after every operation.
    /// The copy is the only token used until it is dropped: `self` stays mutably borrowed.
    #[inline(always)]
    fn cold<X>(&mut self, f: impl FnOnce(&mut CacheMut<'a, E>) -> X) -> X {
        let mut local = CacheMut {
            cache: self.cache,
            ring: self.ring,
            objs: self.objs,
            fill_limit: self.fill_limit,
            _owner: PhantomData,
        };
        f(&mut local)
    }

    /// The get's fast path alone: fills `dst` from the top of the cache if it holds that many
    /// (then true), else changes nothing (false). Adapters call it first, apart from
    /// [`CacheMut::get`], so that a loop of hits keeps the cache state in registers.
    ///
    /// It does what the generic [`take_top`] does with this token's `pop_top`, written out:
    /// routed through the generic function, LLVM allocated registers differently in 13 of
    /// mempool_perf's 36 `worker_const` loops (an extra reload of the cache pointer per put in
    /// some), while written out the workers compile to the instructions they had before the
    /// algorithm was shared (BENCHMARKS.md, section 11).
    #[inline(always)]
    pub(crate) fn take_top(&mut self, dst: &mut [MaybeUninit<E>]) -> bool {
        self.take_top_with::<Dyn>(dst)
    }

    /// [`CacheMut::take_top`] when the caller read the length (`len`, [`CacheMut::len`]) and
    /// saw that it holds `dst.len()`: the length is read once per operation (an atomic read
    /// is not merged with another by the compiler).
    #[inline(always)]
    pub(crate) fn take_top_of(&mut self, dst: &mut [MaybeUninit<E>], len: usize) {
        let n = dst.len();
        debug_assert!(len == self.len() && n <= len);
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant, n <= len:
        // the caller's check of the length it read, which only this token's owner writes);
        // dst has room for n and does not overlap the cache's array (it is a &mut).
        unsafe { copy_entries(self.objs.add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
        self.count(Counter::GetSuccessBulk, 1);
        self.count(Counter::GetSuccessObjs, n);
    }

    /// [`CacheMut::take_top`] with the copy in the shape `S` (which covers `dst.len()`; the
    /// caller dispatched on the length once for all its steps, `repr::by_shape`).
    #[inline(always)]
    pub(crate) fn take_top_with<S: Shape>(&mut self, dst: &mut [MaybeUninit<E>]) -> bool {
        let n = dst.len();
        let len = self.len();
        if n > len {
            return false;
        }
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant); dst has room
        // for n and does not overlap the cache's array (it is a &mut); S covers n (contract).
        unsafe { S::copy(self.objs.add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
        self.count(Counter::GetSuccessBulk, 1);
        self.count(Counter::GetSuccessObjs, n);
        true
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self, dst: &mut [MaybeUninit<E>], behavior: Behavior) -> Result<usize, usize> {
        let plan = self.cache().plan();
        let r = get_miss(self, &plan, dst, behavior);
        self.cache().unpin_if_idle(self.ring().waiting());
        r
    }

    /// The one put ([`put`] with this token's mechanics): returns the entries of `src` (free
    /// objects of this pool, now owned by the cache); always succeeds.
    ///
    /// Fast path: they fit under the flush threshold: append them. Else (cold)
    /// [`put_overflow`]. Returns true when the cold path ran (entries may have reached the
    /// ring: the adapter then checks for waiters once the token is gone, wait.rs).
    #[inline(always)]
    pub(crate) fn put(&mut self, src: &[E]) -> bool {
        self.put_with::<Dyn>(src)
    }

    /// [`CacheMut::put`] with the copy in the shape `S` (which covers `src.len()`).
    #[inline(always)]
    pub(crate) fn put_with<S: Shape>(&mut self, src: &[E]) -> bool {
        if !self.append_with::<S>(src) {
            self.cold(|c| c.put_slow(src));
            return true;
        }
        false
    }

    /// The put's fast path alone: appends `src` if it fits under the flush threshold (then
    /// true), else changes nothing (false). The generic [`append`] written out, as
    /// [`CacheMut::take_top`] says why.
    ///
    /// The copy is in the shape `S` (which covers `src.len()`; [`Dyn`] dispatches on it).
    #[inline(always)]
    pub(crate) fn append_with<S: Shape>(&mut self, src: &[E]) -> bool {
        let n = src.len();
        let len = self.len();
        // `len + n` cannot wrap: len <= 2 x CACHE_MAX_SIZE and a slice holds at most
        // isize::MAX entries. The sum is the new length too (one add, one compare); for one
        // entry the room's form (`fill_limit - len`, a compare of the two) compiles shorter.
        let new_len = len + n;
        let over = if S::ONE {
            n > self.fill_limit - len
        } else {
            new_len > self.fill_limit
        };
        if over {
            return false;
        }
        // SAFETY: len + n <= fill_limit <= capacity(); src does not overlap the cache; S
        // covers n (contract).
        unsafe { S::copy(src.as_ptr(), self.objs.add(len), n) };
        self.set_len(new_len);
        self.count(Counter::PutBulk, 1);
        self.count(Counter::PutObjs, n);
        true
    }

    /// The put of a run-time pool: as [`CacheMut::put`], after the identity check of every
    /// entry (`rank(e) < span`: the OR of the ranks, one vector OR per few entries and one
    /// compare). Returns [`Put::Foreign`], with nothing changed, when an entry fails the check;
    /// the caller reports it after the token is gone.
    #[inline(always)]
    pub(crate) fn put_checked(&mut self, src: &[E], rank: impl Fn(E) -> u32, span: u32) -> Put {
        // SAFETY: src is n valid entries (a slice of E), whatever the check says.
        unsafe { self.put_checked_with::<Dyn, E>(src.as_ptr(), src.len(), |e| rank(*e), span) }
    }

    /// The checked put over a run of `n` values `X` that have an entry's layout (the caller's
    /// table slots, `Option<Handle>`): the OR of `bad(x)` over the run is computed first (in
    /// the shape `S`, which covers `n`); when it is `>= limit` nothing changes and the result
    /// is [`Put::Foreign`] (the caller says why: an empty slot or a foreign handle); else the
    /// run is put as entries ([`CacheMut::put_with`]).
    ///
    /// # Safety
    /// `src` valid for `n` reads of `X`; `X` has `E`'s size and alignment; and when the OR of
    /// `bad` over the run is below `limit`, the run's bits are `n` entries of free objects of
    /// this pool whose ownership passes to the cache (the caller forgets them).
    #[inline(always)]
    pub(crate) unsafe fn put_checked_with<S: Shape, X>(
        &mut self,
        src: *const X,
        n: usize,
        bad: impl Fn(&X) -> u32,
        limit: u32,
    ) -> Put {
        // SAFETY: src valid for n reads (contract); S covers n.
        if unsafe { S::or(src, n, bad) } >= limit {
            return Put::Foreign;
        }
        // SAFETY: the check passed: the run is n entries (contract).
        let src = unsafe { std::slice::from_raw_parts(src.cast::<E>(), n) };
        if self.put_with::<S>(src) {
            Put::Ring
        } else {
            Put::Cached
        }
    }

    #[cold]
    #[inline(never)]
    fn put_slow(&mut self, src: &[E]) {
        let plan = self.cache().plan();
        put_overflow(self, &plan, src);
        self.cache().unpin_if_idle(self.ring().waiting());
    }

    /// Returns every held entry to the ring (rte_mempool_cache_flush).
    pub(crate) fn flush(&mut self) {
        flush_all(self)
    }
}

/// The core's mechanics: the cache's array in plain memory (this token owns it) and the
/// lock-free [`Ring`].
impl<E: Copy> CacheOps<E> for CacheMut<'_, E> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.cache().len()
    }

    #[inline(always)]
    fn fill_limit(&self) -> usize {
        self.fill_limit
    }

    #[inline(always)]
    fn pop_top(&mut self, dst: &mut [MaybeUninit<E>]) {
        let n = dst.len();
        let len = self.len();
        debug_assert!(n <= len);
        // SAFETY: objs[len - n .. len] are initialised entries (cache invariant, n <= len);
        // dst has room for n and does not overlap the cache's array (it is a &mut).
        unsafe { copy_entries(self.objs.add(len - n), dst.as_mut_ptr().cast(), n) };
        self.set_len(len - n);
    }

    #[inline(always)]
    fn push(&mut self, src: &[E]) {
        let n = src.len();
        let len = self.len();
        // SAFETY: len + n fits the array (contract: the fast path checked the fill limit, the
        // flush path flushed first); src does not overlap the cache.
        unsafe { copy_entries(src.as_ptr(), self.objs.add(len), n) };
        self.set_len(len + n);
    }

    #[inline]
    fn refill(&mut self, want: usize, how: Behavior) -> usize {
        let len = self.len();
        debug_assert!(len + want <= self.cache().capacity());
        // SAFETY: objs[len .. len + want] is inside the array (CachePlan::on_get_miss).
        let got = unsafe { self.ring().dequeue_raw(self.objs.add(len), want, how).n };
        self.set_len(len + got);
        got
    }

    #[inline]
    fn unrefill(&mut self, k: usize) {
        let len = self.len() - k;
        self.set_len(len);
        // SAFETY: objs[len .. len + k] are the entries the refill brought (initialised).
        unsafe { enqueue_all(self.ring(), self.objs.add(len), k) };
    }

    #[inline]
    fn flush_bottom(&mut self, k: usize) {
        let (objs, len) = (self.objs, self.len());
        debug_assert!(k <= len);
        // SAFETY: k <= len, objs[..len] initialised; the moved tail stays inside objs.
        unsafe {
            enqueue_all(self.ring(), objs, k);
            std::ptr::copy(objs.add(k), objs, len - k);
        }
        self.set_len(len - k);
    }

    #[inline]
    fn ring_get(&mut self, dst: &mut [MaybeUninit<E>], how: Behavior) -> usize {
        // SAFETY: dst is valid for dst.len() writes.
        unsafe {
            self.ring()
                .dequeue_raw(dst.as_mut_ptr().cast(), dst.len(), how)
                .n
        }
    }

    #[inline]
    fn ring_put(&mut self, src: &[E]) {
        // SAFETY: src is valid for src.len() reads.
        unsafe { enqueue_all(self.ring(), src.as_ptr(), src.len()) };
    }

    fn ring_count(&self) -> usize {
        self.ring().count()
    }

    /// Nothing: every step stores the length in the cache ([`CacheMut::set_len`]).
    #[inline(always)]
    fn publish(&self) {
        debug_assert!(self.len() <= self.fill_limit);
    }

    #[inline(always)]
    fn count(&self, which: Counter, n: usize) {
        self.cache().counters.add(which, n);
    }
}

/// Enqueues `n` entries that the ring must have room for.
///
/// # Safety
/// `src` valid for `n` reads.
#[inline]
unsafe fn enqueue_all<E: Copy>(ring: &Ring<E>, src: *const E, n: usize) {
    // SAFETY: the caller's contract.
    let t = unsafe { ring.enqueue_raw(src, n, Behavior::Bulk) };
    // The ring is sized for every object of the pool and each object is in one place only, so
    // this cannot fail unless an `unsafe` contract (Handle::from_raw) was broken. Panicking is
    // the only way not to lose objects silently then.
    assert!(
        t.n == n,
        "idxpool: common ring overflow putting {n} entries (free {}): an entry was put twice \
         (broken Handle::from_raw contract)",
        t.remaining
    );
}
