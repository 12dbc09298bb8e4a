//! The reset hook ([`crate::PoolBuilder::on_put`], issue 27 part 2): user code run once on every
//! object given back to its pool, before the object reaches a cache.
//!
//! Every path that gives objects back funnels into two adapters, `put_via` (pool.rs: `put`,
//! `put_bulk`, `put_array`, the `LocalCache` puts, the `Pooled` guard's drop, the handle
//! rings' drops, the io_uring receiver's puts) and `put_from_via` (table.rs: `put_from`). Each
//! tests `geometry.put_hook` (one test of a byte the adapter's geometry already holds) and,
//! when it is set, calls the out-of-line functions below, which:
//!
//! 1. check the identity of run-time pools and run the debug hook (either may panic: nothing
//!    has moved, and the reset hook has run on no object, so it never sees another pool's
//!    object);
//! 2. run the hook on each object of the burst, in order, one call per object inside one
//!    out-of-line call per burst (the hook is a type-erased `Fn(&mut T)`), with no cache
//!    token live (the re-entrancy rule, "the adapters" in pool.rs): the hook may itself get
//!    and put objects of this pool;
//! 3. take the token and copy the entries into the cache, from a drop guard: if the hook
//!    unwinds, the guard puts the whole burst (objects whose hook ran and those whose hook did
//!    not) while the panic unwinds, then the panic goes on to the caller. Nothing is lost, and
//!    nothing is put twice: the burst goes into the cache once, on either path.
//!
//! Objects already in a cache or in the ring were reset when they were put, so nothing that
//! moves free objects (flushes, thread exit, the pool's drop, `audit`) runs the hook.

use crate::brand::Brand;
use crate::element::Element;
use crate::handle::Handle;
use crate::pool::{check_owned_all, entries_of, Pool, Token};
use crate::repr::{Geometry, Repr};
use crate::table::{clear, Slot};

/// The stored reset hook of a pool of `T`.
pub(crate) type PutHook<T> = Box<dyn Fn(&mut T) + Send + Sync>;

/// Runs its closure if dropped, which happens only while a panic unwinds through it: the
/// normal path takes the closure out with [`OnUnwind::disarm`] and calls it in line (a drop
/// on the normal path cost a call of an out-of-line `drop_in_place` per burst).
struct OnUnwind<F: FnOnce()>(std::mem::ManuallyDrop<F>);

impl<F: FnOnce()> OnUnwind<F> {
    /// The closure, without running it (the guard is gone).
    #[inline(always)]
    fn disarm(self) -> F {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the closure is taken out exactly once.
        unsafe { std::mem::ManuallyDrop::take(&mut me.0) }
    }
}

impl<F: FnOnce()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        // SAFETY: drop runs at most once, and `disarm` (the only other taker) forgets the
        // guard: the closure is still here.
        let f = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        f()
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Installs `hook` (the builder's last step, before any handle or cache exists).
    pub(crate) fn with_on_put(mut self, hook: Option<PutHook<T>>) -> Self {
        self.geometry.put_hook = hook.is_some();
        self.on_put = hook;
        self
    }

    /// `put_via` of a pool with a reset hook: the identity and debug checks, the hook on each
    /// object, then the put (see the module's comment).
    #[inline(never)]
    #[track_caller]
    pub(crate) fn put_hooked<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        hs: &[Handle<T, B, R>],
    ) {
        let src = entries_of(hs);
        // Before the hook: it must never run on another pool's object.
        check_owned_all::<B, R>(g, src);
        self.debug_put(hs);
        // The identity is checked: the plain put (no fused check) once the hook is done.
        self.reset_then(g, hs, || token().cm().put(src));
    }

    /// `put_vec_tail_via` of a pool with a reset hook: puts the last `n` handles of `v`
    /// (clamped to its length) as `put_hooked`, and truncates `v` before the hook runs, so
    /// that a hook that unwinds leaves no handle in `v` whose object went back (a failed
    /// check still leaves them all there: nothing moved).
    #[inline(never)]
    #[track_caller]
    pub(crate) fn put_vec_tail_hooked<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        v: &mut Vec<Handle<T, B, R>>,
        n: usize,
    ) {
        let len = v.len();
        let n = n.min(len);
        let p = v.as_ptr();
        // SAFETY: v[len - n .. len] are n initialised handles (n <= len).
        let hs = unsafe { std::slice::from_raw_parts(p.add(len - n), n) };
        let src = entries_of(hs);
        check_owned_all::<B, R>(g, src);
        self.debug_put(hs);
        // SAFETY: the tail's handles move into the cache below (on either path of the hook;
        // handles have no drop). Shortening `v` leaves its buffer in place and its spare
        // capacity unread and unwritten by `Vec`; `v` stays borrowed by this call, so nothing
        // else reaches it while `hs` is used.
        unsafe { v.set_len(len - n) };
        self.reset_then(g, hs, || token().cm().put(src));
    }

    /// `put_from_via` of a pool with a reset hook, after its checks (every slot full, every
    /// handle this pool's, the debug hook): the hook on each object, then the put and the
    /// clear of the table (both also when the hook unwinds).
    #[inline(never)]
    pub(crate) fn put_from_hooked<'c, C: Token<'c, R::Entry>>(
        &self,
        g: &Geometry,
        token: impl FnOnce() -> C,
        table: &mut [Slot<T, B, R>],
    ) {
        // Raw pointers only, no reference to the table held across the hook (the put below
        // writes the table while `reset_then`'s view of it must not be live: Miri).
        let p: *mut [Slot<T, B, R>] = table;
        // Every slot is Some (the caller checked), and Some(h) has h's bits (table.rs,
        // assert_slot_is_entry): the table read as handles.
        let hs = p as *const [Handle<T, B, R>];
        self.reset_then(g, hs, move || {
            // SAFETY: as above; a read-only view whose last use is the put, before the table
            // is cleared through `p`.
            token().cm().put(entries_of(unsafe { &*hs }));
            // SAFETY: `p` is the caller's table, borrowed mutably for this call. The cache
            // owns those objects now: empty the slots.
            clear(unsafe { &mut *p });
        });
    }

    /// Runs the hook on the object of each handle of `hs` (this pool's, checked), then `put`;
    /// `put` also runs if the hook unwinds, and the panic then goes on. `hs` is a raw pointer
    /// to initialised handles that stay readable until `put` runs, which may write their
    /// memory (`put_from` clears its table): a reference argument would be protected for the
    /// whole call and forbid that write.
    #[inline(always)]
    fn reset_then(&self, g: &Geometry, hs: *const [Handle<T, B, R>], put: impl FnOnce()) {
        let guard = OnUnwind(std::mem::ManuallyDrop::new(put));
        if let Some(hook) = self.on_put.as_deref() {
            // SAFETY: the caller's contract; this view ends with the loop, before `put`.
            let hs = unsafe { &*hs };
            for h in hs {
                // SAFETY: `h` is this pool's (brand, or the identity check the caller made)
                // and is being given back by its owner, so nothing else borrows its object;
                // distinct handles own distinct objects, and each `&mut` ends with its call.
                // The object is initialised (objects live from the build to the pool's drop).
                let obj = unsafe { &mut *T::from_addr(R::ptr(g, h.entry()), g.elem_len) };
                hook(obj);
            }
        }
        guard.disarm()()
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    use crate::{Handle, PoolBuilder};

    /// The unsafe parts of the hooked paths (the hook's `&mut` to each object, the truncated
    /// `Vec`, the table cleared through a raw pointer) on every adapter, with a hook that
    /// panics on every third call: small enough for Miri (scripts/miri.sh runs the lib tests).
    #[test]
    fn hooked_paths_with_panics_keep_every_object() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let pool = PoolBuilder::<[u64; 2]>::zeroed(24)
            .cache_size(4)
            .on_put(move |o: &mut [u64; 2]| {
                o[0] = 0;
                if c.fetch_add(1, SeqCst) % 3 == 2 {
                    panic!("every third call");
                }
            })
            .build()
            .unwrap();
        fn quiet(f: impl FnOnce()) {
            let _ = catch_unwind(AssertUnwindSafe(f));
        }
        for round in 0..3 {
            let mut hs = Vec::new();
            pool.get_bulk(&mut hs, 7).unwrap();
            for h in hs.iter_mut() {
                pool.get_mut(h)[0] = 1;
            }
            quiet(|| pool.put_bulk(&mut hs));
            assert!(hs.is_empty(), "round {round}");
            let mut table: Vec<Option<Handle<[u64; 2]>>> = (0..5).map(|_| None).collect();
            pool.get_into(&mut table).unwrap();
            quiet(|| {
                let _ = pool.put_from(&mut table);
            });
            assert!(table.iter().all(Option::is_none));
            let mut lc = pool.local_cache();
            let arr = lc.get_array::<3>().unwrap();
            quiet(|| lc.put_array(arr));
            lc.get_bulk(&mut hs, 6).unwrap();
            quiet(|| lc.put_bulk_tail(&mut hs, 4));
            assert_eq!(hs.len(), 2);
            quiet(|| lc.put_bulk(&mut hs));
            assert!(hs.is_empty());
            let h = pool.get().unwrap();
            quiet(|| pool.put(h));
            quiet(|| drop(pool.get_pooled().unwrap()));
        }
        pool.flush();
        assert_eq!(pool.available(), 24);
        let mut hs = Vec::new();
        pool.get_bulk(&mut hs, 24).unwrap();
        let mut idx: Vec<u32> = hs.iter().map(|h| pool.index_of(h)).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), 24);
        quiet(|| pool.put_bulk(&mut hs));
        assert!(hs.is_empty());
        pool.flush();
        assert_eq!(pool.available(), 24);
        assert!(calls.load(SeqCst) > 0);
    }
}
