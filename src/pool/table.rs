//! The pool's get into and put from a table of slots the caller owns (DPDK's `obj_table`):
//! `&mut [Option<Handle>]`, written and emptied in place, all or nothing. No `Vec`, no array
//! returned by value: for a table of constant length the copy between the cache and the table
//! is the cache's shape-sized copy alone (DESIGN.md, "The caller's table"). The public forms
//! (`Pool::get_into`, `LocalCache::put_from`, ...) are thin wrappers in table.rs.
//!
//! A slot is an `Option<Handle>`: a handle stays linear (a get never overwrites a slot that
//! holds one, a put empties every slot it takes from), and the table is plain safe memory the
//! caller may index, slice and inspect. `Option<Handle>` has the handle's layout (the entry is
//! a `NonZeroU32` or a `NonNull`, wrapped in `repr(transparent)` types: the null-pointer
//! optimisation Rust guarantees, checked below at compile time), so the cache copies entries
//! into and out of the slots as it does into its own array. The re-entrancy rule of
//! the adapters (pool/mod.rs) holds here too.

use std::mem::MaybeUninit;

use super::{entries_of, first_foreign, try_check_owned_all, Pool, Token};
use crate::brand::Brand;
use crate::cache::{CacheMut, Put};
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::repr::{by_shape, ByShape, Dyn, Geometry, Repr, Shape};
use crate::ring::Behavior;

type H<T, B, R> = Handle<T, B, R>;
use super::Slot;

/// True when some slot of `table` holds a handle, in the shape `S` (which covers its length).
#[inline(always)]
fn any_occupied<S: Shape, T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> bool {
    // SAFETY: the table's slots, initialised; S covers its length (caller).
    unsafe { S::any(table.as_ptr(), table.len(), Option::is_some) }
}

/// True when some slot of `table` is empty, in the shape `S` (which covers its length). (The
/// put checks its slots in the cache's fused check; this is the tests' reference.)
#[cfg(test)]
#[inline(always)]
fn any_empty<S: Shape, T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> bool {
    // SAFETY: as any_occupied.
    unsafe { S::any(table.as_ptr(), table.len(), Option::is_none) }
}

/// The error of an occupied slot: `index` is the slot's index in `table`, the very slice the
/// caller passed to `get_into` (no path passes a sub-slice here: the bulk-1 path and the
/// windows of the check see the whole table through one dispatch on its length;
/// `tests/table.rs` checks the index at every position, also of a table that is a window of
/// a larger one).
#[cold]
#[inline(never)]
fn occupied_error<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> PoolError {
    PoolError::SlotOccupied {
        index: table.iter().position(Option::is_some).unwrap_or(0),
        len: table.len(),
    }
}

/// The error of an empty slot, indexed in the slice the caller passed to `put_from` (as
/// [`occupied_error`]).
#[cold]
#[inline(never)]
fn empty_error<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> PoolError {
    PoolError::SlotEmpty {
        index: table.iter().position(Option::is_none).unwrap_or(0),
        len: table.len(),
    }
}

/// Why the put's fused check refused `table` (nothing moved): an empty slot (the first one),
/// else a foreign handle (the first one), as the checks made one by one said.
#[cold]
#[inline(never)]
fn put_refused<T: ?Sized, B, R: Repr>(g: &Geometry, table: &[Slot<T, B, R>]) -> PoolError {
    if table.iter().any(Option::is_none) {
        return empty_error(table);
    }
    // SAFETY: every slot is Some, and Some(h) has h's bits (assert_slot_is_entry): a read-only
    // view of the handles.
    let hs = unsafe { &*(table as *const [Slot<T, B, R>] as *const [H<T, B, R>]) };
    first_foreign::<R>(g, entries_of(hs))
}

/// Writes `None` into every slot without dropping what was there (callers: the handles were
/// moved into the cache, or are copies the cache kept). In the shape of its length ([`Dyn`]:
/// two overlapping fixed-size stores of `k` empty slots, so no call to `memset`, which a
/// plain loop of `None` stores became and which costs more than the stores at bulk 1).
#[inline(always)]
pub(crate) fn clear<T: ?Sized, B, R: Repr>(table: &mut [Slot<T, B, R>]) {
    // SAFETY: the table's slots; Dyn covers every length; the handles they held (if any) have
    // been moved away (the callers' contract), and handles have no destructor.
    unsafe { Dyn::none(table.as_mut_ptr(), table.len()) }
}

/// A `get_into` waiting for its shape: the pool's closure, the token's and the table
/// ([`by_shape`] calls `run` with the shape of the table's length).
struct GetOp<'t, T: ?Sized + Element, B, R: Repr, P, F>(P, F, &'t mut [Slot<T, B, R>]);

impl<'p, 'c, T, B, R, C, P, F> ByShape for GetOp<'_, T, B, R, P, F>
where
    T: ?Sized + Element + 'p,
    B: Brand + 'p,
    R: Repr,
    C: Token<'c, R::Entry>,
    P: Fn() -> &'p Pool<T, B, R>,
    F: FnOnce() -> C,
{
    type Out = Result<(), PoolError>;
    #[inline(always)]
    fn run<S: Shape>(self, _n: usize) -> Result<(), PoolError> {
        let GetOp(pool, token, table) = self;
        Pool::get_into_with::<S, C>(pool, token, table)
    }
}

/// Where a put takes its cache token, as often as it needs one (the table put takes a second
/// one after running a reset hook, which may itself use the pool: no token may be live while
/// it runs). `&mut CacheMut` (a `LocalCache`'s token: lent again each time) or [`Lazy`] (the
/// thread's cache: a new token each time).
pub(crate) trait Tokens<'c, E> {
    /// A token.
    type T<'s>: Token<'c, E>
    where
        Self: 's;
    /// Takes a token (used and dropped before the next is taken).
    fn take(&mut self) -> Self::T<'_>;
}

impl<'c, E> Tokens<'c, E> for &mut CacheMut<'c, E> {
    type T<'s>
        = &'s mut CacheMut<'c, E>
    where
        Self: 's;
    #[inline(always)]
    fn take(&mut self) -> &mut CacheMut<'c, E> {
        self
    }
}

/// Tokens made by a closure (the pool's thread cache: `|| pool.thread_cache_mut()`).
pub(crate) struct Lazy<F>(pub(crate) F);

impl<'c, E: 'c, F: FnMut() -> CacheMut<'c, E>> Tokens<'c, E> for Lazy<F> {
    type T<'s>
        = CacheMut<'c, E>
    where
        Self: 's;
    #[inline(always)]
    fn take(&mut self) -> CacheMut<'c, E> {
        (self.0)()
    }
}

/// Proof, at compile time, that a slot is exactly an entry: `Option<Handle>` has the size of
/// the entry (the null-pointer optimisation, guaranteed for `NonZeroU32`, `NonNull` and
/// `repr(transparent)` wrappers of them, which the `Repr` contract requires of `Entry`).
#[inline(always)]
const fn assert_slot_is_entry<T: ?Sized, B, R: Repr>() {
    const {
        assert!(std::mem::size_of::<Slot<T, B, R>>() == std::mem::size_of::<R::Entry>());
        assert!(std::mem::align_of::<Slot<T, B, R>>() == std::mem::align_of::<R::Entry>());
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Fills every slot of `table` (all empty) with a handle through the token `token`
    /// returns, all or nothing.
    ///
    /// One dispatch on the length ([`by_shape`]), then the whole hit in that shape: before the
    /// token exists, the slot check (it only reads the table; its error is built in a cold
    /// function); after it, the copy from the cache (or the cache's slow path, which copies
    /// from the ring), then the debug hook, as `get_vec_via`. With a constant length the
    /// dispatch folds away.
    ///
    /// `pool` gives the pool, called only off the hit (a cold path, or the debug and reset
    /// hooks of the got handles): a `LocalCache` passes a closure over its field, so that a
    /// get that hits loads no pool pointer.
    #[inline(always)]
    pub(crate) fn get_into_via<'p, 'c, C: Token<'c, R::Entry>>(
        pool: impl Fn() -> &'p Self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError>
    where
        Self: 'p,
    {
        by_shape(table.len(), GetOp(pool, token, table))
    }

    /// [`Pool::get_into_via`] in the shape `S` (which covers `table.len()`).
    #[inline(always)]
    fn get_into_with<'p, 'c, S: Shape, C: Token<'c, R::Entry>>(
        pool: impl Fn() -> &'p Self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError>
    where
        Self: 'p,
    {
        assert_slot_is_entry::<T, B, R>();
        if any_occupied::<S, T, B, R>(table) {
            return Err(occupied_error(table));
        }
        // No size check here: a table larger than the pool fails in the cache's slow path
        // (the ring saturates the count at 2^32 - 1, more than any ring holds), counted as a
        // failed get, with nothing handed out; the hit path (the cache holds `n`) pays
        // nothing for it (the capacity load and compare were 3 of the bulk-1 path's
        // instructions).
        // SAFETY: a slot is an entry (assert_slot_is_entry: same size and alignment, and an
        // entry's bits are the bits of `Some(handle)`); every slot is None, so writing entries
        // into them loses no handle, and what the cache writes is only valid entries (of free
        // objects, now the table's). The view lives only inside this function.
        let dst = unsafe { &mut *(table as *mut [Slot<T, B, R>] as *mut [MaybeUninit<R::Entry>]) };
        let mut t = token();
        let cm = t.cm();
        if cm.take_top_with::<S>(dst) {
            pool().got_into(table);
            return Ok(());
        }
        match cm.get_miss(dst, Behavior::Bulk) {
            Ok(_) => {
                pool().got_into(table);
                Ok(())
            }
            Err(available) => {
                // After the token (wait.rs): a failed get gives its refill back to the ring.
                drop(t);
                Err(pool().get_into_failed(table, available))
            }
        }
    }

    /// A failed bulk get into `table` (the token is gone): wakes waiters for the refill it
    /// gave back, and makes sure no slot shows an entry (the cache kept every entry it may
    /// have copied there, so those bits name no handle).
    #[cold]
    #[inline(never)]
    fn get_into_failed(&self, table: &mut [Slot<T, B, R>], available: usize) -> PoolError {
        self.core.after_put();
        clear(table);
        PoolError::Exhausted {
            requested: table.len(),
            available,
        }
    }

    /// The debug hook and the object type's reset (`reset_got`) over a table just filled.
    #[inline(always)]
    fn got_into(&self, table: &[Slot<T, B, R>]) {
        if crate::DEBUG_CHECKS || T::RESET_ON_GET {
            // SAFETY: every slot was just filled (Some), and Some(h) has h's bits.
            let hs = unsafe { &*(table as *const [Slot<T, B, R>] as *const [H<T, B, R>]) };
            self.debug_got(hs);
            self.reset_got(hs);
        }
    }

    /// Puts the handle of every slot of `table` (all full) through the token `token` returns
    /// and empties the slots, all or nothing.
    ///
    /// One dispatch on the length ([`by_shape`]), then the whole hit in that shape. Without a
    /// reset hook (and without debug checks) nothing runs before the token: the slot check
    /// and the identity check of run-time pools are one OR over the slots, made by the cache
    /// before it moves anything (`CacheMut::put_checked_with`); a refusal changes nothing and
    /// is reported after the token is gone. With a hook: the slot check, the identity check
    /// and the debug hook first, then the hook (user code), then the token.
    #[inline(always)]
    pub(crate) fn put_from_via<'c, X: Tokens<'c, R::Entry>>(
        &self,
        g: &Geometry,
        tokens: X,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        struct Op<'p, 'g, 't, T: ?Sized + Element, B, R: Repr, X>(
            &'p Pool<T, B, R>,
            &'g Geometry,
            X,
            &'t mut [Slot<T, B, R>],
        );
        impl<'c, T, B, R, X> ByShape for Op<'_, '_, '_, T, B, R, X>
        where
            T: ?Sized + Element,
            B: Brand,
            R: Repr,
            X: Tokens<'c, R::Entry>,
        {
            type Out = Result<(), PoolError>;
            #[inline(always)]
            fn run<S: Shape>(self, _n: usize) -> Result<(), PoolError> {
                let Op(pool, g, tokens, table) = self;
                pool.put_from_with::<S, X>(g, tokens, table)
            }
        }
        by_shape(table.len(), Op(self, g, tokens, table))
    }

    /// [`Pool::put_from_via`] in the shape `S` (which covers `table.len()`).
    #[inline(always)]
    fn put_from_with<'c, S: Shape, X: Tokens<'c, R::Entry>>(
        &self,
        g: &Geometry,
        mut tokens: X,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        assert_slot_is_entry::<T, B, R>();
        // What runs before the token. With debug checks: everything the hooked path does
        // (the debug hook may panic: before the token). A branded pool with a reset hook: the
        // checks and the hook (one test of the flag, in the geometry the caller holds: a
        // `LocalCache`'s copy). A run-time pool tests nothing here: its reset hook is folded
        // into the limit of the fused check below (`put_span`, 0 with a hook: every put of a
        // hooked pool is refused there, and the refusal runs the hooked path), so a pool
        // without one tests nothing for hooks on the hit.
        // The out-of-line calls below read the pool's own geometry, never `g`: `g` may point
        // into the caller's `LocalCache`, and an address of it passed to a call lets the
        // compiler assume that any store of the caller's loop may change the cache's token,
        // which it then reloads after every store (+3 instructions an object at a bulk of 1).
        let prepared = crate::DEBUG_CHECKS || (!B::CHECKED && g.put_hook);
        if prepared && !self.put_from_prepare(table) {
            return Err(put_refused(&self.geometry, table));
        }
        let span = if prepared { g.span } else { g.put_span };
        let (p, n) = (table.as_ptr(), table.len());
        // The slot check (and, for run-time pools, the identity check) as one OR over the
        // slots, by the cache before anything moves: a branded pool ORs `is_none`, a run-time
        // pool the ranks (an empty slot ranks e0 >= span: `ReprImpl::slot_rank`). The token
        // ends with this block; a refusal is handled after it.
        let put = {
            let mut t = tokens.take();
            let cm = t.cm();
            // SAFETY: the table's n slots; a slot has an entry's layout (assert_slot_is_entry);
            // when the OR is below the limit every slot is Some (an empty slot ORs 1, or ranks
            // e0 >= span) and, for run-time pools, holds an entry of this pool's range; the
            // handles' objects pass to the cache, and the slots are cleared below.
            unsafe {
                if B::CHECKED {
                    cm.put_checked_with::<S, _>(
                        p,
                        n,
                        |s: &Slot<T, B, R>| R::slot_rank(g, s.as_ref().map(H::entry)),
                        span,
                    )
                } else {
                    cm.put_checked_with::<S, _>(p, n, |s: &Slot<T, B, R>| s.is_none() as u32, 1)
                }
            }
        };
        match put {
            Put::Cached => {}
            // After the token (wait.rs): entries may have reached the ring.
            Put::Ring => self.core.after_put(),
            // Out of line, and no `Result` comes back from a call: a `Result` of unknown variant
            // merged with the hit's `Ok` made every hit store its `Ok` and test it (the errors
            // are built by `put_refused`, whose value is the payload of a known `Err`).
            Put::Foreign => {
                if !self.put_from_hooked(tokens, table) {
                    return Err(put_refused(&self.geometry, table));
                }
            }
        }
        // The cache owns those objects now: empty the slots (the handles moved).
        // SAFETY: the table's n slots; S covers n; their handles moved to the cache (handles
        // have no destructor).
        unsafe { S::none(table.as_mut_ptr(), n) };
        Ok(())
    }

    /// A table put the fused check refused (nothing moved, no token live). For a run-time pool
    /// with a reset hook (its fused check refuses every put) it is the hooked path: the checks
    /// and the hook with no token live (user code), then a new token and the put (the caller
    /// then empties the slots); true when it put the table. False when the refusal stands (no
    /// hook, or a branded pool or a debug build, whose hooked path ran before the token; or
    /// the checks refused): the caller reports it.
    #[cold]
    #[inline(never)]
    fn put_from_hooked<'c, X: Tokens<'c, R::Entry>>(
        &self,
        mut tokens: X,
        table: &mut [Slot<T, B, R>],
    ) -> bool {
        if crate::DEBUG_CHECKS
            || !B::CHECKED
            || !self.geometry.put_hook
            || !self.put_from_prepare(table)
        {
            return false;
        }
        // SAFETY: every slot is Some (checked by put_from_prepare; its hook's guard empties
        // them only if it unwinds, and then this is not reached), and Some(h) has h's bits;
        // read-only, it ends before the slots are cleared.
        let hs = unsafe { &*(table as *const [Slot<T, B, R>] as *const [H<T, B, R>]) };
        if tokens.take().cm().put(entries_of(hs)) {
            self.core.after_put(); // after the token (wait.rs)
        }
        true
    }

    /// What a put from `table` does before its token when the pool has a reset hook (or debug
    /// checks): the slot check, then the identity check before the reset hook or the debug
    /// hook, then the hook (user code, on_put.rs). False, with nothing run, when a slot is
    /// empty or a handle foreign (the caller reports it: [`put_refused`]). Raw pointers: the
    /// hook's call must hold no reference to the table, whose slots its guard empties if it
    /// unwinds. Out of line and cold (one copy for every shape of the caller), with no pointer
    /// into a `LocalCache` among its arguments (on_put.rs, `run_on_put`).
    #[cold]
    #[inline(never)]
    fn put_from_prepare(&self, table: &mut [Slot<T, B, R>]) -> bool {
        let g = &self.geometry;
        if table.iter().any(Option::is_none) {
            return false;
        }
        let t: *mut [Slot<T, B, R>] = table;
        // SAFETY: every slot is Some (checked above), and Some(h) has h's bits
        // (assert_slot_is_entry); read-only, and it ends before the hook's call.
        let hs = unsafe { &*(t as *const [H<T, B, R>]) };
        if try_check_owned_all::<B, R>(g, entries_of(hs)).is_err() {
            return false;
        }
        self.debug_put(hs);
        if g.put_hook {
            // SAFETY: checked above; the caller puts the table's handles right after.
            unsafe { self.run_on_put(t as *const [H<T, B, R>], Some(t)) };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{clear, Slot};
    use crate::repr::Dyn;
    use crate::{PoolBuilder, Unchecked};

    fn any_occupied(t: &[Slot<u8, Unchecked, crate::Offset>]) -> bool {
        super::any_occupied::<Dyn, _, _, _>(t)
    }
    fn any_empty(t: &[Slot<u8, Unchecked, crate::Offset>]) -> bool {
        super::any_empty::<Dyn, _, _, _>(t)
    }

    /// The window checks and the clear against plain loops, at every length and position.
    #[test]
    fn windows_see_every_slot_and_clear_writes_only_the_table() {
        // SAFETY: one pool, its handles never mixed with another's.
        let pool = unsafe { PoolBuilder::<u8>::zeroed(4).build_unchecked() }.unwrap();
        let max = if cfg!(miri) { 70 } else { 140 };
        for n in 0..max {
            for at in (0..n).step_by(if cfg!(miri) { 7 } else { 1 }) {
                let mut t: Vec<Slot<u8, Unchecked, crate::Offset>> = (0..n).map(|_| None).collect();
                assert!(!any_occupied(&t) && (n == 0 || any_empty(&t)), "n={n}");
                t[at] = Some(pool.get().unwrap());
                assert!(any_occupied(&t), "n={n}: slot {at} full");
                pool.put(t[at].take().unwrap());
                let mut full: Vec<Slot<u8, Unchecked, crate::Offset>> =
                    (0..n + 1).map(|_| None).collect();
                for s in &mut full[..n] {
                    *s = Some(pool.get().unwrap());
                    // A pool of 4: give it back at once and keep a copy of the entry only.
                    let h = s.take().unwrap();
                    let e = h.entry();
                    pool.put(h);
                    *s = Some(crate::Handle::from_entry(e));
                }
                full[n] = Some(crate::Handle::from_entry(
                    full.first()
                        .and_then(|s| s.as_ref())
                        .map_or_else(|| std::num::NonZeroU32::new(1).unwrap(), |h| h.entry()),
                ));
                assert!(!any_empty(&full[..n]), "n={n}: all full");
                let h = full[at].take();
                assert!(any_empty(&full[..n]), "n={n}: slot {at} empty");
                full[at] = h;
                clear(&mut full[..n]);
                assert!(full[..n].iter().all(Option::is_none), "n={n}: cleared");
                assert!(full[n].is_some(), "n={n}: nothing past the table written");
                // The copy past the table names no object: dropped with the vector (a
                // handle has no destructor, so nothing is given back twice).
            }
        }
    }
    /// The fused put check's premise: an empty slot fails a run-time pool's range check (its
    /// rank is `e0`, at least the span: blocks start at nonzero multiples of their span), for
    /// pools of every block size the space hands out, with other pools alive around them.
    #[test]
    fn an_empty_slot_ranks_outside_every_run_time_pool() {
        use crate::repr::ReprImpl;
        let mut pools = Vec::new();
        for cap in [1u32, 2, 3, 7, 64, 100, 1000, 4096] {
            let p = PoolBuilder::<u8>::zeroed(cap)
                .repr::<crate::Index>()
                .build()
                .unwrap();
            let g = &p.geometry;
            assert!(crate::Index::slot_rank(g, None) >= g.span, "cap {cap}");
            let h = p.get().unwrap();
            assert!(crate::Index::slot_rank(g, Some(h.entry())) < g.span);
            p.put(h);
            pools.push(p);
            let q = PoolBuilder::<u64>::zeroed(cap).build().unwrap();
            let g = &q.geometry;
            assert!(crate::Offset::slot_rank(g, None) >= g.span, "cap {cap}");
            drop(q);
        }
    }

    /// The table paths at every length and refusal position, on a cache big enough for the
    /// hit and on one too small (the slow path): a refusal (occupied slot, empty slot,
    /// foreign handle) moves nothing and leaves the table as it was; a success moves
    /// everything.
    #[test]
    fn table_paths_refuse_whole_at_every_length() {
        use crate::{Handle, PoolError};
        let max = if cfg!(miri) { 40 } else { 140 };
        let step = if cfg!(miri) { 9 } else { 1 };
        for cache in [512u32, 4] {
            let pool = PoolBuilder::<u8>::zeroed(1024)
                .cache_size(cache)
                .build()
                .unwrap();
            let other = PoolBuilder::<u8>::zeroed(8).build().unwrap();
            let mut c = pool.local_cache();
            for n in (1..max).step_by(if cfg!(miri) { 5 } else { 1 }) {
                let mut t: Vec<Option<Handle<u8>>> = (0..n).map(|_| None).collect();
                c.get_into(&mut t).unwrap();
                assert!(t.iter().all(Option::is_some), "n={n}: filled");
                let held = c.len();
                for at in (0..n).step_by(step) {
                    // Occupied slot on a get: nothing taken, the table unchanged.
                    let h = t[at].take().unwrap();
                    let mut u: Vec<Option<Handle<u8>>> = (0..n).map(|_| None).collect();
                    u[at] = Some(h);
                    let r = c.get_into(&mut u);
                    assert!(
                        matches!(r, Err(PoolError::SlotOccupied { index, len }) if index == at && len == n),
                        "n={n} at={at}: {r:?}"
                    );
                    assert_eq!(c.len(), held, "n={n} at={at}: nothing taken");
                    assert_eq!(u.iter().flatten().count(), 1, "n={n} at={at}: unchanged");
                    // Empty slot on a put: nothing moved.
                    let r = c.put_from(&mut t);
                    assert!(
                        matches!(r, Err(PoolError::SlotEmpty { index, len }) if index == at && len == n),
                        "n={n} at={at}: {r:?}"
                    );
                    assert_eq!(
                        t.iter().flatten().count(),
                        n - 1,
                        "n={n} at={at}: unchanged"
                    );
                    // A foreign handle in that slot: nothing moved.
                    t[at] = Some(other.get().unwrap());
                    let r = c.put_from(&mut t);
                    assert!(
                        matches!(r, Err(PoolError::ForeignHandle { .. })),
                        "n={n} at={at}: {r:?}"
                    );
                    assert_eq!(t.iter().flatten().count(), n, "n={n} at={at}: unchanged");
                    other.put(t[at].take().unwrap());
                    t[at] = u[at].take();
                    assert_eq!(c.len(), held, "n={n} at={at}: nothing moved");
                }
                c.put_from(&mut t).unwrap();
                assert!(t.iter().all(Option::is_none), "n={n}: emptied");
            }
            drop(c);
            assert_eq!(pool.in_use(), 0, "cache {cache}: every object back");
        }
    }
}
