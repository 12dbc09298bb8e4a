//! A pool's settings and the handle -> object forms (`get_ref`, `get_mut`, `as_ptr`, the
//! checks), each a call of its [`Resolver`]'s.

use super::*;

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    // ---- geometry and configuration -------------------------------------------------------

    /// Number of objects: as built, plus what [`Pool::grow`] added (at most the
    /// [`crate::PoolBuilder::max_capacity`]). While another thread grows the pool, a
    /// snapshot: it changes after the new objects are in the ring.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.growth.capacity()
    }

    /// Bytes of one object: `size_of::<T>()`, or the length a byte-buffer pool was built
    /// with ([`crate::PoolBuilder::bytes`]).
    pub fn object_size(&self) -> usize {
        T::fixed_layout().map_or(self.geometry.elem_len, |l| l.size())
    }

    /// Bytes between consecutive objects.
    #[inline]
    pub fn stride(&self) -> usize {
        self.geometry.stride
    }

    /// Address of object 0 (the region's base).
    pub fn base(&self) -> NonNull<u8> {
        self.geometry.base
    }

    /// The backing the region got, and why it fell back if it did.
    pub fn backing(&self) -> &BackingReport {
        self.region.report()
    }

    /// Per-cache size (0: no caching).
    pub fn cache_size(&self) -> u32 {
        self.core.cache_size
    }

    /// The caches' flush/refill policy.
    pub fn policy(&self) -> FlushPolicy {
        self.core.policy
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    // ---- handle access --------------------------------------------------------------------

    /// Pointer to the object of `h` (valid while the pool lives).
    ///
    /// # Panics
    /// Run-time pools ([`crate::Runtime`]): when `h` is another pool's (the message names both
    /// pools); [`Pool::check`] tests first. Never for brands.
    #[inline(always)]
    #[track_caller]
    pub fn as_ptr(&self, h: &H<T, B, R>) -> NonNull<T> {
        resolve::<T, B, R>(&self.geometry, h.entry())
    }

    /// Shared access to the object of `h`: the entry's address (one addressing mode for offset
    /// entries), no bounds check. Brands prove at compile time that the handle is this pool's;
    /// a run-time pool checks it with one range compare.
    ///
    /// # Panics
    /// As [`Pool::as_ptr`]; [`Pool::try_get_ref`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> &'a T {
        // SAFETY: h is this pool's (brand, or the range check in as_ptr) and owns its object;
        // the object is initialised; the borrow of h prevents a &mut through the same handle,
        // and no other handle names it.
        unsafe { self.as_ptr(h).as_ref() }
    }

    /// Exclusive access to the object of `h`: the one place where an entry becomes an address
    /// (`obase0 + entry x 8` for offsets: the store's addressing mode; no bounds check).
    ///
    /// # Panics
    /// As [`Pool::as_ptr`]; [`Pool::try_get_mut`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> &'a mut T {
        // SAFETY: as get_ref; &mut h makes this the only borrow of the object.
        unsafe { self.as_ptr(h).as_mut() }
    }

    /// True when `h` is this pool's: always for brands (the compiler proved it); for run-time
    /// pools, when its entry lies in this pool's range of the handle space.
    #[inline]
    pub fn owns(&self, h: &H<T, B, R>) -> bool {
        !B::CHECKED || R::owns(&self.geometry, h.entry())
    }

    /// `Ok` when `h` is this pool's ([`Pool::owns`]).
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] naming the pool that minted `h` (or that it was dropped)
    /// and this one.
    #[inline]
    pub fn check(&self, h: &H<T, B, R>) -> Result<(), PoolError> {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))
    }

    /// [`Pool::get_ref`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_ref<'a>(&'a self, h: &'a H<T, B, R>) -> Result<&'a T, PoolError> {
        self.check(h)?;
        Ok(self.get_ref(h))
    }

    /// [`Pool::get_mut`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_mut<'a>(&'a self, h: &'a mut H<T, B, R>) -> Result<&'a mut T, PoolError> {
        self.check(h)?;
        Ok(self.get_mut(h))
    }

    /// A copyable handle-to-object converter for hot loops: it holds the base and stride by
    /// value, so that after inlining they stay in registers across object writes (a write
    /// through `&mut T` would otherwise force a reload from the pool). Borrows the pool, not a
    /// cache, so it can live across `LocalCache` gets and puts.
    ///
    /// ```
    /// idxpool::PoolBuilder::<u64>::with_default(64).scoped(|pool| {
    ///     let mut cache = pool.local_cache();
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     cache.get_bulk(&mut burst, 32).unwrap();
    ///     for (k, h) in burst.iter_mut().enumerate() {
    ///         *objs.get_mut(h) = k as u64;
    ///     }
    ///     cache.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    #[inline(always)]
    pub fn resolver(&self) -> Resolver<'_, T, B, R> {
        Resolver {
            geometry: self.geometry,
            _pool: PhantomData,
        }
    }

    /// Prefetches the first cache line of the object of `h` for writing (as
    /// [`Resolver::prefetch`]: DPDK's `rte_prefetch0_write`, VPP's
    /// `vlib_prefetch_buffer_header`). A hint only: nothing is read or written.
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        self.resolver().prefetch(h)
    }

    /// 0-based index of the object of `h` (`0..capacity`).
    ///
    /// # Panics
    /// Run-time pools: when `h` is another pool's (as [`Pool::get_ref`]).
    #[inline]
    #[track_caller]
    pub fn index_of(&self, h: &H<T, B, R>) -> u32 {
        check_owned::<B, R>(&self.geometry, h.entry());
        R::index(&self.geometry, h.entry())
    }

    /// Visits every object with its index (DPDK's `rte_mempool_obj_iter`), e.g. to set up or
    /// inspect objects. Takes `&mut self`, so no handle can be resolved meanwhile.
    pub fn obj_iter(&mut self) -> impl Iterator<Item = (u32, &mut T)> + '_ {
        let g = self.geometry;
        (0..self.capacity()).map(move |i| {
            let p = T::from_addr(g.ptr_of_index(i), g.elem_len);
            // SAFETY: &mut self excludes every other access to the objects for the iterator's
            // life; distinct indices are distinct, initialised, aligned objects.
            (i, unsafe { &mut *p })
        })
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> fmt::Debug for Pool<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("repr", &R::NAME)
            .field("object_size", &self.object_size())
            .field("stride", &self.stride())
            .field("capacity", &self.capacity())
            .field("backing", &self.backing().backing)
            .field("cache_size", &self.cache_size())
            .field("policy", &self.policy())
            .field("ring_count", &self.core.ring.count())
            .field("available", &self.available())
            .finish()
    }
}
