//! The caller's-table forms of the bulk get and put (DPDK's `rte_mempool_get_bulk(mp, obj_table,
//! n)` into the caller's memory): thin wrappers over pool/table.rs, through the thread's cache or a
//! `LocalCache`.

use crate::error::PoolError;
use crate::handle::Handle;
use crate::owned::PoolRef;
use crate::pool::{Lazy, Pool, Slot};
use crate::repr::Repr;
use crate::{brand::Brand, element::Element};

type H<T, B, R> = Handle<T, B, R>;
/// A slot of a table for the pool behind `P`.
type LocalSlot<P> = Slot<<P as PoolRef>::T, <P as PoolRef>::B, <P as PoolRef>::R>;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Fills every slot of `table` with a handle through the calling thread's cache, all or nothing
    /// (DPDK's `rte_mempool_get_bulk(mp, obj_table, n)`): no `Vec`, no array moved by value.
    ///
    /// # Errors
    /// * [`PoolError::SlotOccupied`] when a slot holds a handle (nothing taken, table unchanged: a
    ///   get never overwrites a handle);
    /// * [`PoolError::Exhausted`] with `requested = table.len()` when this thread's cache plus the
    ///   ring hold fewer (every slot stays empty).
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
        Self::get_into_via(|| self, || self.thread_cache_mut(), table)
    }

    /// Returns and empties every slot of `table` through the calling thread's cache, all or nothing
    /// (DPDK's `rte_mempool_put_bulk(mp, obj_table, n)`).
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
        self.put_from_via(&self.geometry, Lazy(|| self.thread_cache_mut()), table)
    }
}

impl<P: PoolRef> crate::LocalCache<P> {
    /// Fills every slot of `table` through this cache, all or nothing (DPDK's
    /// `rte_mempool_generic_get(mp, obj_table, n, cache)`). With a constant-length slice (`&mut
    /// table[i..i + 32]`) the hit is DPDK's inlined constant-n copy.
    ///
    /// # Errors
    /// As [`crate::Pool::get_into`] (reaching this cache's objects plus the ring).
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
        let (pool, cm) = (&self.pool, &mut self.cm);
        Pool::get_into_via(|| pool.pool(), || cm, table)
    }

    /// Returns and empties every slot of `table` through this cache, all or nothing (DPDK's
    /// `rte_mempool_generic_put(mp, obj_table, n, cache)`).
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
        self.pool
            .pool()
            .put_from_via(&self.geometry, &mut self.cm, table)
    }
}
