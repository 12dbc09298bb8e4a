//! The pool's self-checks for people and tests: [`Pool::audit`] (where every object
//! is, and whether the invariants hold) with its [`AuditReport`], and [`Pool::dump`]
//! (rte_mempool_dump).

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::pool::Pool;
use crate::repr::Repr;

// The report is defined with the leak report (leaks.rs), which the pool's drop fills in.
pub use crate::leaks::AuditReport;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Checks the invariants: every free object is named exactly once across the ring and the
    /// caches, every entry is in range, every cache is within its flush threshold, and (with
    /// debug checks) every free object is marked free and every other one allocated.
    /// `&mut self`: the pool must be quiescent. That also proves no [`crate::LocalCache`] of
    /// the pool is alive, so the objects of any that was passed to `mem::forget` (stranded
    /// until now, counted as in use) are given back to the ring first, and counted there.
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] describing the first broken invariant.
    pub fn audit(&mut self) -> Result<crate::AuditReport, PoolError> {
        self.audit_with_lent(None)
    }

    /// [`Pool::audit`], where `lent` (when given) lists the indices of every object lent to
    /// the kernel: each must be named once, by the lender alone (not free, not twice), and
    /// their number must be the pool's `kernel_lent` count.
    #[cfg_attr(not(any(feature = "uring", feature = "xdp")), allow(dead_code))]
    pub(crate) fn audit_with_lent(
        &mut self,
        lent: Option<&[u32]>,
    ) -> Result<crate::AuditReport, PoolError> {
        // Forgotten LocalCaches' objects go back to the ring first.
        self.reclaim_forgotten_caches();
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
        // `&mut self`); without the locks, one of them moving a cache already read into the
        // ring not yet read would name an object twice (tests/soundness.rs).
        let ring = &self.core.ring;
        let buf = self.core.registry.with_all_locked(|visit| {
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
            let (buf, restored) = ring.drain_and_restore();
            if !restored {
                problem.get_or_insert(format!("ring: could not restore {} entries", buf.len()));
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
        for (i, &found_free) in seen.iter().enumerate() {
            if let Some(marked_free) = self.states.is_free(i) {
                if marked_free != found_free {
                    problem.get_or_insert(format!(
                        "object {i}: marked {} but {}",
                        if marked_free { "free" } else { "allocated" },
                        if found_free {
                            "found free"
                        } else {
                            "not found free"
                        }
                    ));
                }
            }
        }
        let lent_to_kernel = self.lent_to_kernel();
        if let Some(lent) = lent {
            for &i in lent {
                let i = i as usize;
                if i >= cap {
                    problem.get_or_insert(format!("kernel: index {i} out of range"));
                } else if std::mem::replace(&mut seen[i], true) {
                    problem.get_or_insert(format!("kernel: object {i} named twice"));
                } else if self.states.is_free(i) == Some(true) {
                    problem.get_or_insert(format!("kernel: object {i} marked free"));
                }
            }
            if lent.len() != lent_to_kernel {
                problem.get_or_insert(format!(
                    "kernel: {} objects lent, counted {lent_to_kernel}",
                    lent.len()
                ));
            }
        }
        if free + lent_to_kernel > cap {
            problem.get_or_insert(format!(
                "{free} free and {lent_to_kernel} lent to the kernel exceed the capacity {cap}"
            ));
        }
        if let Some(p) = problem {
            return Err(PoolError::AuditFailed(format!("pool {}: {p}", self.name())));
        }
        Ok(crate::AuditReport {
            pool: self.name().to_string(),
            capacity: cap,
            in_ring,
            in_caches,
            in_use: cap.saturating_sub(free + lent_to_kernel),
            lent_to_kernel,
            caches: cache_lens,
        })
    }

    /// A multi-line description for a person (rte_mempool_dump): sizes, backing, counts.
    pub fn dump(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "mempool <{}>@{:p}", self.name(), self.geometry.base);
        let _ = writeln!(s, "  object type={}", std::any::type_name::<T>());
        let _ = writeln!(
            s,
            "  repr={} entry_size={} object_size={} stride={} capacity={} max_capacity={}",
            R::NAME,
            std::mem::size_of::<R::Entry>(),
            self.object_size(),
            self.stride(),
            self.capacity(),
            self.geometry.capacity
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
            self.core.ring.count(),
            self.core.ring.capacity(),
            self.core.ring.size()
        );
        let counts = self.cache_counts();
        let total: usize = counts.iter().map(|c| c.1).sum();
        let _ = writeln!(s, "  caches: {} live, {} objects", counts.len(), total);
        for (l, n) in &counts {
            let _ = writeln!(s, "    {l}: {n}");
        }
        let _ = writeln!(
            s,
            "  available={} in_use={} lent_to_kernel={}",
            self.available(),
            self.in_use(),
            self.lent_to_kernel()
        );
        if cfg!(feature = "stats") {
            let _ = writeln!(s, "  stats: {}", self.stats());
        }
        s
    }
}
