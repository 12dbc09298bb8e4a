//! Reports of objects still out when a pool is dropped.
//!
//! Dropping a pool while handles of it are held (or were dropped without `put`) is not unsafe: the
//! objects are dropped with the pool and the handles can never reach them (a named brand is
//! retired, a run-time pool's range quarantined). But it is almost always a bug (a forgotten `put`,
//! a `let _ = pool.get()`, a handle outliving the pool), so the pool's drop reports it:
//!
//! * with a hook installed by [`set_leak_hook`], the hook is called (every build);
//! * otherwise, in debug builds and with `debug-checks`, one line goes to stderr: `idxpool: pool
//!   bufs dropped with 3 of 1024 objects still out (...)`;
//! * otherwise nothing.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let s = seen.clone();
//! idxpool::leaks::set_leak_hook(move |r| {
//!     if r.pool == "doc-leaky" {
//!         s.lock().unwrap().push(r.in_use);
//!     }
//! });
//! let pool = idxpool::PoolBuilder::<u64>::with_default(8).name("doc-leaky").build()?;
//! let h = pool.get()?;
//! drop(h); // leaked: never put back
//! drop(pool);
//! assert_eq!(*seen.lock().unwrap(), vec![1]);
//! idxpool::leaks::clear_leak_hook();
//! # Ok::<(), idxpool::PoolError>(())
//! ```

use std::fmt;

use crate::fork::GlobalLock;

type Hook = std::sync::Arc<dyn Fn(&AuditReport) + Send + Sync>;

/// Where every object of a quiescent pool is, as found by [`Pool::audit`](crate::Pool::audit); also
/// what a pool dropped with objects out reports to the leak hook ([`crate::leaks::set_leak_hook`]:
/// `in_use` is the objects out, `caches` empty).
///
/// ```
/// use idxpool::{AuditReport, PoolBuilder};
/// let mut pool = PoolBuilder::<u64>::with_default(64).cache_size(8).build()?;
/// let h = pool.get()?;
/// let r: AuditReport = pool.audit()?; // `&mut`: the pool is quiescent
/// assert_eq!((r.capacity, r.in_use), (64, 1));
/// assert_eq!(r.in_ring + r.in_caches, 63);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditReport {
    /// The pool's name ([`PoolBuilder::name`](crate::PoolBuilder::name)).
    pub pool: String,
    /// Objects in the pool.
    pub capacity: usize,
    /// Free objects in the common ring.
    pub in_ring: usize,
    /// Free objects in caches.
    pub in_caches: usize,
    /// Objects held by handles (`capacity - in_ring - in_caches - lent_to_kernel`).
    pub in_use: usize,
    /// Objects lent to the kernel (in an io_uring provided-buffer ring, `idxpool::uring`): owned by
    /// neither a handle nor the pool.
    pub lent_to_kernel: usize,
    /// `(label, objects)` per live cache.
    pub caches: Vec<(String, usize)>,
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "capacity={} in_ring={} in_caches={} in_use={} lent_to_kernel={} caches={}",
            self.capacity,
            self.in_ring,
            self.in_caches,
            self.in_use,
            self.lent_to_kernel,
            self.caches.len()
        )
    }
}

/// The hook (a global lock of crate::fork's order, held only to clone, set or swap the `Arc`: the
/// hook is called, and a replaced one dropped, after release).
static HOOK: GlobalLock<Option<Hook>> = GlobalLock::new(None);

/// Sets the hook; the old one is dropped after the lock (its drop is user code).
fn replace(new: Option<Hook>) {
    let old = std::mem::replace(&mut *HOOK.lock(), new);
    drop(old);
}

/// Installs the process-wide leak hook, called on the dropping thread for every pool dropped with
/// objects out, in every build; replaces any previous one. Without a hook, debug builds print to
/// stderr. The hook may set or clear the hook; it must not create or drop pools.
///
/// A panicking hook does not stop the drop: the objects are dropped and the brand retired, then the
/// panic propagates out of the drop, unless the thread is already unwinding, where it is contained
/// (a second panic escaping a destructor aborts).
pub fn set_leak_hook(hook: impl Fn(&AuditReport) + Send + Sync + 'static) {
    replace(Some(std::sync::Arc::new(hook)));
}

/// Removes the leak hook (back to the default: stderr in debug builds).
pub fn clear_leak_hook() {
    replace(None);
}

/// A panic of the leak hook, caught so that the pool's drop completes; see [`rethrow`].
pub(crate) type HookPanic = Box<dyn std::any::Any + Send + 'static>;

/// Called by a pool's drop when `outstanding > 0`. Never unwinds: a hook's panic is returned, for
/// the drop to [`rethrow`] after dropping the objects and releasing or retiring the brand
/// (unwinding here would skip both, leaving the brand claimed for ever).
#[must_use = "give a hook's panic to leaks::rethrow once the drop is done"]
pub(crate) fn report(r: AuditReport) -> Option<HookPanic> {
    let (pool, outstanding, capacity) = (&r.pool, r.in_use + r.lent_to_kernel, r.capacity);
    // Cloned out and the lock released before the call, so a hook may set or clear the hook (a
    // one-shot hook would deadlock on its own lock).
    let hook = HOOK.lock().clone();
    if let Some(h) = hook {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h(&r))).err();
    } else if cfg!(any(debug_assertions, feature = "debug-checks")) {
        eprintln!(
            "idxpool: pool {pool} dropped with {outstanding} of {capacity} objects still out \
             (handles dropped without put, or held past the pool); their objects are dropped \
             with the pool and those handles can no longer reach them"
        );
    }
    None
}

/// Resumes a leak hook's panic caught by [`report`] at the end of the pool's drop, unless the
/// thread is already unwinding: a second panic escaping a destructor would abort, so the hook's
/// panic is then dropped and the first goes on.
pub(crate) fn rethrow(p: Option<HookPanic>) {
    if let Some(p) = p {
        if !std::thread::panicking() {
            std::panic::resume_unwind(p);
        }
    }
}
