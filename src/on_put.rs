//! The reset hook ([`crate::PoolBuilder::on_put`]): user code run once on every object given
//! back to its pool, before the object reaches a cache.
//!
//! Every put path tests one byte its geometry already holds (`put_hook`); when it is set, the
//! put checks the handles' identity and runs the debug hook first (a panic there moves nothing
//! and runs no hook), then calls `Pool::run_on_put` out of line: the hook on each object of
//! the burst, in order, with no cache token live (the hook may get and put objects of this
//! pool). If the hook unwinds, the whole burst goes back through the pool's zero-size cache
//! into the ring and the panic goes on: nothing is lost, nothing is put twice. Free objects
//! (in a cache or the ring) were reset when they were put, so flushes, thread exit, the pool's
//! drop and `audit` never run the hook. DESIGN.md, "The reset hook", has the paths and costs.

use crate::brand::Brand;
use crate::element::Element;
use crate::pool::{Pool, ResetHook};
use crate::repr::Repr;

/// The reset hook as the builder keeps it until the pool exists.
pub(crate) type PutHook<T> = Box<dyn Fn(&mut T) + Send + Sync>;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Installs `hook` (the builder's last step, before any handle or cache exists); the core
    /// runs it ([`Pool::run_on_put`]).
    pub(crate) fn with_on_put(mut self, hook: Option<PutHook<T>>) -> Self {
        self.geometry.set_put_hook(hook.is_some());
        self.on_put = hook.map(|hook| ResetHook { hook });
        self
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
