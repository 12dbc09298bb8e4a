//! Growth to a reserved maximum: [`Pool::grow`].
//!
//! A pool built with [`crate::PoolBuilder::max_capacity`]`(max)` sizes everything that names an
//! object for `max` at build: the region's address space (`PROT_NONE` reservation, region/mod.rs),
//! the ring's slots, the run-time pool's handle-space block, the geometry and debug states.
//! `grow(n)` only maps more region, initialises the new objects as the build did and enqueues them,
//! so nothing handed out (handles, entries, addresses, the ring) moves. The live capacity is an
//! atomic published after the objects are in the ring (DESIGN.md, "Growth to a reserved maximum");
//! get and put never read it (their bulk check uses the constant maximum).

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::pool::Pool;
use crate::repr::Repr;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Adds `n` objects, up to the maximum reserved at build
    /// ([`crate::PoolBuilder::max_capacity`]), and returns the new capacity. They are made as the
    /// build made the first ones (same initialiser, indices `capacity .. capacity + n`; zeroed
    /// pools need no pass) in memory mapped now (the pool's backing, [`Pool::backing`]), then given
    /// to the common ring for any thread's next get. Nothing handed out moves. `grow(0)` returns
    /// the capacity.
    ///
    /// May run while other threads get and put; concurrent `grow` calls take turns (a lock: growth
    /// is rare). Counts read meanwhile are snapshots: [`Pool::capacity`] changes once the objects
    /// are in the ring. Cost: a page fault (hugetlb: a population) per page plus the initialiser
    /// per object (BENCHMARKS.md). Shared-region pools (`idxpool::shared`) do not grow.
    ///
    /// ```
    /// use idxpool::{PoolBuilder, PoolError};
    /// let pool = PoolBuilder::<[u8; 256]>::zeroed(64).max_capacity(1024).build()?;
    /// let mut hs = Vec::new();
    /// pool.get_bulk(&mut hs, 64)?; // every object out
    /// assert!(pool.get().is_err());
    /// assert_eq!(pool.grow(192)?, 256); // 192 more, mapped and in the ring
    /// hs.push(pool.get()?);
    /// assert_eq!((pool.capacity(), pool.in_use()), (256, 65));
    /// assert!(matches!(pool.grow(1000), Err(PoolError::GrowBeyondMax { requested: 1256, max: 1024 })));
    /// pool.put_bulk(&mut hs);
    /// # Ok::<(), PoolError>(())
    /// ```
    ///
    /// # Errors
    /// [`PoolError::GrowBeyondMax`] when `capacity + n` exceeds the maximum;
    /// [`PoolError::BackingUnavailable`] when the pages cannot be mapped (e.g. a short hugetlb
    /// reserve: here, never a SIGBUS later); [`PoolError::GrowReentered`] from the pool's own
    /// initialiser during a `grow`; [`PoolError::GrowInterrupted`] in a forked child when a parent
    /// thread was inside `grow` at the fork. Nothing is added on error.
    ///
    /// # Panics
    /// When the initialiser panics: the objects made in this call are dropped, none added, and the
    /// panic propagates (the pool stays usable at its old capacity).
    pub fn grow(&self, n: u32) -> Result<u32, PoolError> {
        let g = &self.growth;
        if g.state.raw().held_by_me() {
            return Err(PoolError::GrowReentered {
                pool: self.name().to_string(),
            });
        }
        // A panicking initialiser releases the lock (guard drop) after its own guard dropped what
        // it made: capacity, ring and region stay consistent.
        let mut init = {
            let backoff = crate::sync::Backoff::new();
            let mut tries = 0u32;
            loop {
                if let Some(guard) = g.state.try_lock() {
                    break guard;
                }
                if g.state.raw().holder_is_gone() {
                    return Err(PoolError::GrowInterrupted {
                        pool: self.name().to_string(),
                    });
                }
                // Another thread grows (maybe a long initialiser): spin, yield, then sleep between
                // looks.
                tries = tries.saturating_add(1);
                if tries < 64 {
                    backoff.snooze();
                } else {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            }
        };
        self.add_objects(&mut init, None, n)
    }
}
