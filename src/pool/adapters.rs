//! The adapters between the one cache algorithm and handles, shared by the pool's implicit
//! per-thread caches and `LocalCache`: take a cache token after everything that may run user
//! code, move entries, convert them to handles.

use super::*;

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
        if n <= cm.len() {
            return self.get_into_vec(out, n, reset, |dst| {
                cm.take_top(dst);
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
        if N <= cm.len() {
            return self.get_into_array(|dst| {
                cm.take_top(dst);
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
    /// the hooked path raised the register pressure of the callers' loops). `prechecked`: the identity and debug checks already ran (the hooked path).
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
            foreign_panic_any::<R>(g, entries_of(tail))
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
