//! The reset hook ([`crate::PoolBuilder::on_put`]): user code run once on every
//! object given back to its pool, before the object reaches a cache.
//!
//! Every path that gives objects back funnels into two adapters, `put_via` /
//! `put_vec_tail_via` (pool.rs: `put`, `put_bulk`, `put_array`, the `LocalCache` puts, the
//! `Pooled` guard's drop, the handle rings' drops, the io_uring receiver's puts) and
//! `put_from_via` (table.rs: `put_from`). Each tests `geometry.put_hook` (one test of a byte the
//! adapter's geometry already holds) and, when it is set:
//!
//! 1. checks the identity of run-time pools and runs the debug hook (either may panic: nothing
//!    has moved, and the reset hook has run on no object, so it never sees another pool's
//!    object);
//! 2. calls [`Pool::run_on_put`], out of line: the hook on each object of the burst, in order
//!    (the hook is a type-erased `Fn(&mut T)`), with no cache token live (the re-entrancy rule,
//!    pool/adapters.rs): the hook may itself get and put objects of this pool. If the
//!    hook unwinds, a drop guard gives the whole burst back (objects whose hook ran and those
//!    whose hook did not) through the pool's zero-size cache into the ring, empties the
//!    caller's table (`put_from`; `put_bulk`'s `Vec` is truncated before the hook), and the
//!    panic goes on to the caller: nothing is lost, nothing is put twice;
//! 3. then takes its token and puts the burst, as without a hook.
//!
//! Objects already in a cache or in the ring were reset when they were put, so nothing that
//! moves free objects (flushes, thread exit, the pool's drop, `audit`) runs the hook.

use std::ptr::NonNull;

use crate::brand::Brand;
use crate::cache::CacheMut;
use crate::element::Element;
use crate::handle::Handle;
use crate::pool::{entries_of, Pool, ResetHook};
use crate::repr::Repr;
use crate::table::{clear, Slot};

/// The reset hook as the builder keeps it until the pool exists.
pub(crate) type PutHook<T> = Box<dyn Fn(&mut T) + Send + Sync>;

/// The burst of a hook that unwinds: its drop (reached only while the panic unwinds) gives the
/// whole burst back and empties the caller's table, if any.
struct GiveBack<'p, T: ?Sized + Element, B, R: Repr> {
    pool: &'p Pool<T, B, R>,
    hs: *const [Handle<T, B, R>],
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
            clear(unsafe { &mut *t });
        }
        // Waiters for objects (wait.rs): the burst is in the ring (the token above is gone).
        core.after_put();
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Installs `hook` (the builder's last step, before any handle or cache exists).
    pub(crate) fn with_on_put(mut self, hook: Option<PutHook<T>>) -> Self {
        self.geometry.set_put_hook(hook.is_some());
        self.on_put = hook.map(|hook| ResetHook {
            hook,
            run: run_on_put::<T, B, R>,
        });
        self
    }
}

/// The loop of the reset hook ([`ResetHook::run`]), reached through [`Pool::run_on_put`]:
/// the hook on each object of the burst, in order; if it unwinds, the whole burst goes back to
/// the pool (the ring, through the zero-size cache) and `table`, if given, is emptied.
///
/// # Safety
/// The contract of [`Pool::run_on_put`].
unsafe fn run_on_put<T: ?Sized + Element, B, R: Repr>(
    pool: &Pool<T, B, R>,
    hs: *const [Handle<T, B, R>],
    table: Option<*mut [Slot<T, B, R>]>,
) {
    let give_back = GiveBack { pool, hs, table };
    if let Some(r) = &pool.on_put {
        let (hook, g) = (&r.hook, &pool.geometry);
        // SAFETY: the contract; this view ends with the loop (no reference argument: the
        // table's clear on unwind writes the same memory).
        let hs = unsafe { &*hs };
        for h in hs {
            // SAFETY: `h` is this pool's and is being given back by its owner, so nothing
            // else borrows its object; distinct handles own distinct objects, and each
            // `&mut` ends with its call. Objects live from the build to the pool's drop.
            let obj = unsafe { &mut *T::from_addr(R::ptr(g, h.entry()), g.elem_len) };
            hook(obj);
        }
    }
    std::mem::forget(give_back);
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
