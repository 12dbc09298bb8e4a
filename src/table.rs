//! Bulk gets and puts through the caller's table (DPDK's `obj_table`): `get_into` writes the
//! handles straight into `&mut [Option<Handle>]` slots the caller owns, `put_from` takes them
//! straight out of them. No `Vec`, no array returned by value: for a table slice of constant
//! length the copy between the cache and the table is the cache's `copy_entries` alone
//! (DESIGN.md, "The caller's table").
//!
//! A slot is an `Option<Handle>`: a handle stays linear (a get never overwrites a slot that
//! holds one, a put empties every slot it takes from), and the table is plain safe memory the
//! caller may index, slice and inspect. `Option<Handle>` has the handle's layout (the entry is
//! a `NonZeroU32` or a `NonNull`, wrapped in `repr(transparent)` types: the null-pointer
//! optimisation Rust guarantees, checked below at compile time), so the cache copies entries
//! into and out of the slots as it does into its own array.
//!
//! Kept apart from `pool.rs` and `local.rs` (their adapters are shared; see "the adapters"
//! in pool.rs for the re-entrancy rule, which these follow).

use std::mem::MaybeUninit;

use crate::brand::Brand;
use crate::cache::Put;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::pool::{entries_of, first_foreign, try_check_owned_all, Pool, Token};
use crate::repr::{by_halves, Halves, Repr};
use crate::ring::Behavior;

type H<T, B, R> = Handle<T, B, R>;
/// A slot of a caller's table.
pub(crate) type Slot<T, B, R> = Option<Handle<T, B, R>>;
/// A slot of a table for the pool behind `P`.
type LocalSlot<P> = Slot<<P as PoolRef>::T, <P as PoolRef>::B, <P as PoolRef>::R>;

/// True when some slot of `table` holds a handle (`SOME`) or is empty (`!SOME`).
///
/// The shape of `copy_entries` ([`by_halves`]): for `n <= 64`, two fixed-size windows of `k`
/// slots, the first `k` and the last `k` (overlapping ones re-test a few slots, which changes
/// nothing for "any"), each tested with one compare per slot and no branch (fixed-size vector
/// code), then one branch. A plain loop over a run-time length was a vectorised loop with a
/// scalar remainder: at bulks 1 to 4 the remainder ran, about 7 instructions per slot, twice
/// per get and put.
#[inline(always)]
fn any_slot<const SOME: bool, T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> bool {
    struct Any<'t, const SOME: bool, T: ?Sized, B, R: Repr>(&'t [Slot<T, B, R>]);
    impl<const SOME: bool, T: ?Sized, B, R: Repr> Halves for Any<'_, SOME, T, B, R> {
        type Out = bool;
        #[inline(always)]
        fn empty(self) -> bool {
            false
        }
        #[inline(always)]
        fn one(self) -> bool {
            self.0[0].is_some() == SOME
        }
        #[inline(always)]
        fn long(self, _n: usize) -> bool {
            let mut any = false;
            for s in self.0 {
                any |= s.is_some() == SOME;
            }
            any
        }
        #[inline(always)]
        fn halves<const K: usize>(self, n: usize) -> bool {
            let p = self.0.as_ptr();
            // SAFETY: K < n (by_halves), so [0, K) and [n - K, n) lie inside the table;
            // read-only views of initialised slots.
            let (a, b) = unsafe {
                (
                    &*p.cast::<[Slot<T, B, R>; K]>(),
                    &*p.add(n - K).cast::<[Slot<T, B, R>; K]>(),
                )
            };
            // Two plain loops over arrays (a `chain` of the two is not vectorised).
            let mut any = false;
            for s in a {
                any |= s.is_some() == SOME;
            }
            for s in b {
                any |= s.is_some() == SOME;
            }
            any
        }
    }
    by_halves(table.len(), Any::<SOME, T, B, R>(table))
}

/// True when some slot of `table` holds a handle.
#[inline(always)]
fn any_occupied<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> bool {
    any_slot::<true, T, B, R>(table)
}

/// True when some slot of `table` is empty.
#[inline(always)]
fn any_empty<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> bool {
    any_slot::<false, T, B, R>(table)
}

#[cold]
#[inline(never)]
fn occupied_error<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> PoolError {
    PoolError::SlotOccupied {
        index: table.iter().position(Option::is_some).unwrap_or(0),
        len: table.len(),
    }
}

#[cold]
#[inline(never)]
fn empty_error<T: ?Sized, B, R: Repr>(table: &[Slot<T, B, R>]) -> PoolError {
    PoolError::SlotEmpty {
        index: table.iter().position(Option::is_none).unwrap_or(0),
        len: table.len(),
    }
}

/// Writes `None` into every slot without dropping what was there (callers: the handles were
/// moved into the cache, or are copies the cache kept). For a run-time length it is the shape
/// of `copy_entries` ([`by_halves`]): two overlapping fixed-size stores of `k` empty slots, so
/// no call to `memset` (a plain loop of `None` stores became one, which costs more than the
/// stores at bulk 1). With a constant length it is `n` slots' worth of vector stores.
#[inline(always)]
pub(crate) fn clear<T: ?Sized, B, R: Repr>(table: &mut [Slot<T, B, R>]) {
    struct Clear<'t, T: ?Sized, B, R: Repr>(&'t mut [Slot<T, B, R>]);
    impl<T: ?Sized, B, R: Repr> Halves for Clear<'_, T, B, R> {
        type Out = ();
        #[inline(always)]
        fn empty(self) {}
        #[inline(always)]
        fn one(self) {
            // The old value's drop is nothing (handles have no destructor).
            self.0[0] = None;
        }
        #[inline(always)]
        fn long(self, _n: usize) {
            for s in self.0.iter_mut() {
                *s = None;
            }
        }
        #[inline(always)]
        fn halves<const K: usize>(self, n: usize) {
            let p = self.0.as_mut_ptr();
            // SAFETY: K < n (by_halves), so [0, K) and [n - K, n) lie inside the table; the
            // stores overwrite slots whose handles (if any) have been moved away (handles have
            // no destructor: nothing is skipped by not dropping).
            unsafe {
                p.cast::<[Slot<T, B, R>; K]>().write([const { None }; K]);
                p.add(n - K)
                    .cast::<[Slot<T, B, R>; K]>()
                    .write([const { None }; K]);
            }
        }
    }
    by_halves(table.len(), Clear(table));
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
    /// Before the token exists: the slot check (it only reads the table; its error is built
    /// in a cold function). After it: the copy from the cache (or the
    /// cache's slow path, which copies from the ring), then the debug hook, as `get_vec_via`.
    #[inline(always)]
    pub(crate) fn get_into_via<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        if table.len() == 1 {
            // The bulk-1 path on its own: the length is a constant there, so the slot check,
            // the copy and the clear each lose their dispatch on it (three compares of a
            // run-time `n` became one; BENCHMARKS.md 14).
            return self.get_into_n(token, &mut table[..1]);
        }
        self.get_into_n(token, table)
    }

    /// [`Pool::get_into_via`] for any length (its body; inlined, so a constant length folds).
    #[inline(always)]
    fn get_into_n<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        assert_slot_is_entry::<T, B, R>();
        let n = table.len();
        if any_occupied(table) {
            return Err(occupied_error(table));
        }
        // No size check here: a table larger than the pool fails in the cache's slow path
        // (the ring saturates the count at 2^32 - 1, more than any ring holds), counted as a
        // failed get, with nothing handed out; the hit path (the cache holds `n`) pays
        // nothing for it (issue 24: the capacity load and compare were 3 of the bulk-1
        // path's instructions).
        // SAFETY: a slot is an entry (assert_slot_is_entry: same size and alignment, and an
        // entry's bits are the bits of `Some(handle)`); every slot is None, so writing entries
        // into them loses no handle, and what the cache writes is only valid entries (of free
        // objects, now the table's). The view lives only inside this function.
        let dst = unsafe { &mut *(table as *mut [Slot<T, B, R>] as *mut [MaybeUninit<R::Entry>]) };
        let mut t = token();
        let cm = t.cm();
        if n <= cm.len() {
            cm.take_top(dst);
            self.got_into(table);
            return Ok(());
        }
        match cm.get(dst, Behavior::Bulk) {
            Ok(_) => {
                self.got_into(table);
                Ok(())
            }
            Err(available) => {
                // After the token (wait.rs): a failed get gives its refill back to the ring.
                drop(t);
                self.core.waiters.after_put(&self.core.ring);
                // A failed bulk get hands out nothing: make sure no slot shows an entry (the
                // cache kept every entry it may have copied here, so these bits name no
                // handle).
                clear(table);
                Err(PoolError::Exhausted {
                    requested: n,
                    available,
                })
            }
        }
    }

    /// The debug hook over a table just filled.
    #[inline(always)]
    fn got_into(&self, table: &[Slot<T, B, R>]) {
        if crate::DEBUG_CHECKS {
            // SAFETY: every slot was just filled (Some), and Some(h) has h's bits.
            let hs = unsafe { &*(table as *const [Slot<T, B, R>] as *const [H<T, B, R>]) };
            self.debug_got(hs);
        }
    }

    /// Puts the handle of every slot of `table` (all full) through the token `token` returns
    /// and empties the slots, all or nothing.
    ///
    /// Before the token exists: the slot check, the identity check of run-time pools (a typed
    /// error here, not a panic: nothing moved) and the debug hook (which may panic). After it:
    /// the copy into the cache.
    #[inline(always)]
    pub(crate) fn put_from_via<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        if table.len() == 1 {
            // As in get_into_via: the bulk-1 path with a constant length.
            return self.put_from_n(token, &mut table[..1]);
        }
        self.put_from_n(token, table)
    }

    /// [`Pool::put_from_via`] for any length (its body; inlined, so a constant length folds).
    #[inline(always)]
    fn put_from_n<'c, C: Token<'c, R::Entry>>(
        &self,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) -> Result<(), PoolError> {
        assert_slot_is_entry::<T, B, R>();
        if any_empty(table) {
            return Err(empty_error(table));
        }
        let g = &self.geometry;
        let hooked = g.put_hook;
        if hooked || !B::CHECKED || crate::DEBUG_CHECKS {
            // The checks that must come first (the identity check before the reset hook or the
            // debug hook; both no-ops for a branded release build), then the hook (user code,
            // on_put.rs) before the token. Raw pointers: the hook's call must hold no
            // reference to the table, whose slots its guard empties if it unwinds.
            let t: *mut [Slot<T, B, R>] = table;
            // SAFETY: every slot is Some (checked above), and Some(h) has h's bits
            // (assert_slot_is_entry); read-only, and it ends before the hook's call.
            let hs = unsafe { &*(t as *const [H<T, B, R>]) };
            try_check_owned_all::<B, R>(g, entries_of(hs))?;
            self.debug_put(hs);
            if hooked {
                // SAFETY: checked above; the table's handles are put right below.
                unsafe { self.run_on_put(t as *const [H<T, B, R>], Some(t)) };
            }
        }
        // SAFETY: every slot is Some (checked above; the hook's guard empties them only if it
        // unwinds, and then this is not reached), and Some(h) has h's bits; the view is
        // read-only and ends before the slots are cleared.
        let hs = unsafe { &*(table as *const [Slot<T, B, R>] as *const [H<T, B, R>]) };
        let src = entries_of(hs);
        if B::CHECKED {
            // The identity check fused into the cache's copy (as `put_via`; it passes when the
            // checks above ran): a failure changes nothing and is reported here, after the
            // token is gone, as the typed error.
            match token().cm().put_checked(src, |e| R::rank(g, e), g.span) {
                Put::Cached => {}
                // After the token (wait.rs): entries may have reached the ring.
                Put::Ring => self.core.waiters.after_put(&self.core.ring),
                // Straight to the cold function that names the entry: a `?` on the plain
                // check merged this arm's `Result` with the hit's, and the hit then wrote its
                // `Ok` to the stack and read it back (3 instructions, a store-to-load round
                // trip on every run-time put).
                Put::Foreign => return Err(first_foreign::<R>(g, src)),
            }
        } else if token().cm().put(src) {
            self.core.waiters.after_put(&self.core.ring); // after the token (wait.rs)
        }
        // The cache owns those objects now: empty the slots (the handles moved).
        clear(table);
        Ok(())
    }

    /// Fills every slot of `table` with a handle, through the calling thread's cache, all or
    /// nothing (DPDK's `rte_mempool_get_bulk(mp, obj_table, n)` with the table the caller's
    /// memory): no `Vec`, no array moved by value.
    ///
    /// # Errors
    /// * [`PoolError::SlotOccupied`] when a slot already holds a handle (nothing is taken, the
    ///   table is unchanged: a get never overwrites a handle);
    /// * [`PoolError::Exhausted`] with `requested = table.len()` when this thread's cache plus
    ///   the ring hold fewer (every slot stays empty).
    ///
    /// ```
    /// use idxpool::{Handle, PoolBuilder};
    /// let pool = PoolBuilder::<u64>::with_default(64).cache_size(16).build()?;
    /// let mut table: [Option<Handle<u64>>; 8] = Default::default();
    /// pool.get_into(&mut table[2..6])?; // four handles, written into slots 2..6
    /// assert!(table[2..6].iter().all(Option::is_some) && table[0].is_none());
    /// assert_eq!(pool.in_use(), 4);
    /// assert!(pool.get_into(&mut table[..4]).is_err()); // slots 2, 3 are full: nothing taken
    /// pool.put_from(&mut table[2..6])?; // back, and the slots are empty again
    /// assert!(table.iter().all(Option::is_none));
    /// assert_eq!(pool.in_use(), 0);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline]
    pub fn get_into(&self, table: &mut [Option<H<T, B, R>>]) -> Result<(), PoolError> {
        self.get_into_via(|| self.thread_cache_mut(), table)
    }

    /// Returns the handle of every slot of `table` through the calling thread's cache and
    /// empties the slots, all or nothing (DPDK's `rte_mempool_put_bulk(mp, obj_table, n)`).
    ///
    /// # Errors
    /// Nothing is moved and the table is unchanged on:
    /// * [`PoolError::SlotEmpty`] when a slot holds no handle;
    /// * [`PoolError::ForeignHandle`] (run-time pools) when a handle is another pool's.
    ///
    /// ```
    /// use idxpool::{Handle, PoolBuilder};
    /// let pool = PoolBuilder::<u64>::with_default(64).build()?;
    /// let mut table: Vec<Option<Handle<u64>>> = (0..32).map(|_| None).collect();
    /// pool.get_into(&mut table)?;
    /// assert!(pool.put_from(&mut table[..]).is_ok());
    /// // Every slot is empty now: a second put moves nothing and says which slot.
    /// assert!(matches!(
    ///     pool.put_from(&mut table[..]),
    ///     Err(idxpool::PoolError::SlotEmpty { index: 0, len: 32 })
    /// ));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline]
    pub fn put_from(&self, table: &mut [Option<H<T, B, R>>]) -> Result<(), PoolError> {
        self.put_from_via(|| self.thread_cache_mut(), table)
    }
}

impl<P: PoolRef> crate::LocalCache<P> {
    /// Fills every slot of `table` with a handle, through this cache, all or nothing (DPDK's
    /// `rte_mempool_generic_get(mp, obj_table, n, cache)`). With a table slice of constant
    /// length (`&mut table[i..i + 32]`) the hit is DPDK's inlined constant-n copy.
    ///
    /// # Errors
    /// As [`crate::Pool::get_into`] (the cache's objects plus the ring are what it reaches).
    ///
    /// ```
    /// use idxpool::{Handle, PoolBuilder};
    /// let pool = PoolBuilder::<[u8; 64]>::zeroed(1024).cache_size(64).build()?;
    /// let mut cache = pool.local_cache();
    /// let mut table: Vec<Option<Handle<[u8; 64]>>> = (0..128).map(|_| None).collect();
    /// for i in (0..128).step_by(32) {
    ///     cache.get_into(&mut table[i..i + 32])?;
    /// }
    /// for i in (0..128).step_by(32) {
    ///     cache.put_from(&mut table[i..i + 32])?;
    /// }
    /// assert!(table.iter().all(Option::is_none));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline(always)]
    pub fn get_into(&mut self, table: &mut [LocalSlot<P>]) -> Result<(), PoolError> {
        self.pool.pool().get_into_via(|| &mut self.cm, table)
    }

    /// Returns the handle of every slot of `table` through this cache and empties the slots,
    /// all or nothing (DPDK's `rte_mempool_generic_put(mp, obj_table, n, cache)`).
    ///
    /// # Errors
    /// As [`crate::Pool::put_from`].
    ///
    /// ```
    /// use idxpool::{Handle, PoolBuilder};
    /// let pool = PoolBuilder::<u32>::with_default(16).cache_size(4).build()?;
    /// let mut cache = pool.local_cache();
    /// let mut table: [Option<Handle<u32>>; 4] = Default::default();
    /// cache.get_into(&mut table)?;
    /// cache.put_from(&mut table)?;
    /// assert!(table.iter().all(Option::is_none));
    /// assert_eq!(cache.len(), 4);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    #[inline(always)]
    pub fn put_from(&mut self, table: &mut [LocalSlot<P>]) -> Result<(), PoolError> {
        self.pool.pool().put_from_via(|| &mut self.cm, table)
    }
}

#[cfg(test)]
mod tests {
    use super::{any_empty, any_occupied, clear, Slot};
    use crate::{PoolBuilder, Unchecked};

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
