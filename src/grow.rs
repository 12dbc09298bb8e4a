//! Growth to a reserved maximum: [`Pool::grow`].
//!
//! A pool built with [`crate::PoolBuilder::max_capacity`]`(max)` reserves everything that
//! names an object for `max` objects at build: the region's address space (a `PROT_NONE`
//! reservation, region/mod.rs), the common ring's slots, the run-time pool's block of the handle
//! space, the geometry and the debug states. `grow(n)` then only maps more of the region,
//! initialises the new objects as the build did and enqueues them in the ring, so nothing
//! already handed out (handles, entries, addresses, the ring) moves. The live capacity is an
//! atomic published after the objects are in the ring (DESIGN.md, "Growth to a reserved maximum"); the get and put
//! paths never read it (their bulk check compares with the constant maximum).

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::pool::Pool;
use crate::repr::Repr;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Adds `n` objects to the pool, up to the maximum reserved at build
    /// ([`crate::PoolBuilder::max_capacity`]), and returns the new capacity. The new objects
    /// are made as the build made the first ones (the same initialiser, called with their
    /// indices `capacity .. capacity + n`; zeroed pools need no pass) in memory mapped now
    /// (hugetlb pages when the pool got hugetlb, else THP or 4 KiB pages, as
    /// [`Pool::backing`] says), then given to the common ring, where any thread's next get
    /// can take them. Nothing already handed out moves: handles, addresses and the ring were
    /// sized for the maximum at build. `grow(0)` returns the capacity.
    ///
    /// May run while other threads get and put; concurrent `grow` calls take turns (a lock:
    /// growth is rare). Counts read meanwhile are snapshots: [`Pool::capacity`] changes once
    /// the new objects are in the ring. Cost: one page fault (or, for hugetlb, one
    /// population) per page mapped plus the initialiser per object (BENCHMARKS.md section 15).
    ///
    /// Pools of the shared region (`idxpool::shared`) do not grow: their builder has no
    /// maximum.
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
    /// [`PoolError::GrowBeyondMax`] when `capacity + n` exceeds the maximum (nothing done);
    /// [`PoolError::BackingUnavailable`] when the pages cannot be mapped (e.g. the hugetlb
    /// reserve is short: the error comes here, never as a SIGBUS later); nothing is added;
    /// [`PoolError::GrowReentered`] when called from the pool's own initialiser during a
    /// `grow`; [`PoolError::GrowInterrupted`] in a forked child when another thread of the
    /// parent was inside `grow` at the fork (it never finishes there).
    ///
    /// # Panics
    /// When the initialiser panics: the objects it made in this call are dropped, none is
    /// added, and the panic propagates (the pool stays usable at its old capacity).
    pub fn grow(&self, n: u32) -> Result<u32, PoolError> {
        let g = &self.growth;
        if g.state.raw().held_by_me() {
            return Err(PoolError::GrowReentered {
                pool: self.name().to_string(),
            });
        }
        // A panicking initialiser releases the lock (the guard's drop) after its own guard
        // dropped what it made: the state (capacity, ring, region) is consistent.
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
                // Another thread grows (it may run a long initialiser): spin, yield, then
                // sleep between looks.
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
