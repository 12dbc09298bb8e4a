//! `Resolver`: a `Copy` view of a pool for hot loops, converting handles to objects.

use super::*;

/// Converts handles of one pool to references; see [`Pool::resolver`].
///
/// ```
/// let pool = idxpool::PoolBuilder::<[u32; 4]>::zeroed(64).build()?;
/// let mut hs = Vec::new();
/// pool.get_bulk(&mut hs, 8)?;
/// let objs = pool.resolver(); // `Copy`: the base stays in registers
/// for h in hs.iter_mut() {
///     objs.get_mut(h)[0] += 1;
/// }
/// assert!(hs.iter().all(|h| objs.get_ref(h)[0] == 1));
/// pool.put_bulk(&mut hs);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Resolver<'p, T: ?Sized + Element, B, R: Repr> {
    pub(super) geometry: Geometry,
    /// Borrows the pool for `'p`; invariant in `T` because `Pool` is.
    pub(super) _pool: PhantomData<&'p Pool<T, B, R>>,
}

impl<T: ?Sized + Element, B, R: Repr> Clone for Resolver<'_, T, B, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ?Sized + Element, B, R: Repr> Copy for Resolver<'_, T, B, R> {}

impl<'p, T: ?Sized + Element, B: Brand, R: Repr> Resolver<'p, T, B, R> {
    /// Shared access to the object of `h` (as [`Pool::get_ref`]; panics as it does
    /// on another pool's handle).
    #[inline(always)]
    #[track_caller]
    pub fn get_ref<'a>(&self, h: &'a H<T, B, R>) -> &'a T
    where
        'p: 'a,
    {
        // SAFETY: as Pool::get_ref: the geometry is the pool's, the brand proves the
        // handle is this pool's, and the result lives no longer than the pool borrow 'p.
        unsafe { resolve::<T, B, R>(&self.geometry, h.entry()).as_ref() }
    }

    /// Exclusive access to the object of `h` (as [`Pool::get_mut`]; panics as it does
    /// on another pool's handle).
    #[inline(always)]
    #[track_caller]
    pub fn get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> &'a mut T
    where
        'p: 'a,
    {
        // SAFETY: as Pool::get_mut; &mut h makes the borrow exclusive.
        unsafe { resolve::<T, B, R>(&self.geometry, h.entry()).as_mut() }
    }

    /// Raw pointer to the object of `h` (as [`Pool::as_ptr`]): `base + index x stride`,
    /// valid while the pool lives. Dereferencing it is the caller's `unsafe` responsibility.
    #[inline(always)]
    #[track_caller]
    pub fn as_ptr(&self, h: &H<T, B, R>) -> NonNull<T> {
        resolve::<T, B, R>(&self.geometry, h.entry())
    }

    /// [`Resolver::get_ref`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle (run-time pools) instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_ref<'a>(&self, h: &'a H<T, B, R>) -> Result<&'a T, PoolError>
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))?;
        Ok(self.get_ref(h))
    }

    /// [`Resolver::get_mut`] that returns [`PoolError::ForeignHandle`] for another pool's
    /// handle (run-time pools) instead of panicking.
    ///
    /// # Errors
    /// As [`Pool::check`].
    #[inline]
    pub fn try_get_mut<'a>(&self, h: &'a mut H<T, B, R>) -> Result<&'a mut T, PoolError>
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, std::slice::from_ref(&h.entry()))?;
        Ok(self.get_mut(h))
    }

    /// Hints the CPU to bring the first cache line of the object of `h` into L1, ready for
    /// writing (x86-64 `prefetchw` with the `prfchw` target feature, else `prefetcht0`; arm64
    /// `prfm pstl1keep`; nothing elsewhere and under Miri). Issue it a few objects ahead of the
    /// writes, so the misses overlap: DPDK's `rte_prefetch0` / `rte_prefetch0_write` on mbufs,
    /// VPP's `vlib_prefetch_buffer_header(b, STORE)`.
    ///
    /// Only the object's address is computed (the conversion of [`Resolver::get_mut`]); nothing
    /// is read or written, and a prefetch never faults. Objects larger than a cache line get
    /// their first line only (where a header usually is).
    ///
    /// ```
    /// idxpool::PoolBuilder::<[u64; 8]>::zeroed(64).scoped(|pool| {
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     pool.get_bulk(&mut burst, 32).unwrap();
    ///     objs.prefetch_all(&burst);            // every miss in flight at once ...
    ///     for h in burst.iter_mut() {
    ///         objs.get_mut(h)[0] = 1;           // ... before the first write
    ///     }
    ///     pool.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    #[inline(always)]
    pub fn prefetch(&self, h: &H<T, B, R>) {
        // The address only, without the identity check: a hint for another pool's handle
        // (run-time pools) touches nothing and the access after it rejects the handle.
        self.geometry.prefetch_write::<R>(h.entry());
    }

    /// [`Resolver::prefetch`] of every handle of `hs`, in order: the burst prefetch of VPP's
    /// dispatch loops (prefetch the headers of the whole frame, then process it) and DPDK's
    /// `rte_prefetch0` over an `rx_burst`. Prefetching more lines than the core can track
    /// (about 10-20 outstanding L1 misses, 32-48 on recent cores) drops the extra hints.
    #[inline(always)]
    pub fn prefetch_all(&self, hs: &[H<T, B, R>]) {
        for h in hs {
            self.prefetch(h);
        }
    }

    /// Converts handles to object pointers in bulk, as VPP's `vlib_get_buffers` turns a frame
    /// of buffer indices into `vlib_buffer_t *`s: writes `out[i] = as_ptr(&hs[i])` for `i` in
    /// `0..n`, `n = min(hs.len(), out.len())`, and returns `n` (the rest of `out` is left
    /// as it was). No check beyond the conversion's own (the brand).
    ///
    /// The pointers are raw, as [`Resolver::as_ptr`]'s: they stay valid while the pool lives,
    /// but dereferencing one is the caller's `unsafe` responsibility (its handle must still be
    /// held, and no other reference to the object may be alive). [`Resolver::get_mut_all`] is
    /// the safe form.
    ///
    /// # Panics
    /// Run-time pools: when one of the `n` handles is another pool's (checked for all of them
    /// before anything is written); [`Resolver::try_resolve_bulk`] returns the error instead.
    #[inline]
    #[track_caller]
    pub fn resolve_bulk(&self, hs: &[H<T, B, R>], out: &mut [NonNull<T>]) -> usize {
        let n = hs.len().min(out.len());
        check_owned_all::<B, R>(&self.geometry, entries_of(&hs[..n]));
        for (o, h) in out[..n].iter_mut().zip(&hs[..n]) {
            *o = self.as_ptr(h);
        }
        n
    }

    /// [`Resolver::resolve_bulk`] that returns [`PoolError::ForeignHandle`] (and writes
    /// nothing) when one of the handles is another pool's.
    ///
    /// # Errors
    /// As [`Pool::check`], for the first foreign handle.
    #[inline]
    pub fn try_resolve_bulk(
        &self,
        hs: &[H<T, B, R>],
        out: &mut [NonNull<T>],
    ) -> Result<usize, PoolError> {
        let n = hs.len().min(out.len());
        try_check_owned_all::<B, R>(&self.geometry, entries_of(&hs[..n]))?;
        Ok(self.resolve_bulk(hs, out))
    }

    /// Exclusive access to the objects of all handles of `hs`, in order: an iterator of
    /// `&'a mut T`, one per handle (`ExactSizeIterator`, `DoubleEndedIterator`). The safe form
    /// of [`Resolver::resolve_bulk`], e.g. to keep the objects of a burst in a `Vec<&mut T>`.
    ///
    /// Sound because distinct handles own distinct objects (a handle is unique ownership: not
    /// `Clone`, consumed by `put`; DESIGN.md, invariant 6), so `&mut` to distinct handles give
    /// `&mut` to distinct objects. The references borrow `hs` mutably for `'a` (no second
    /// `get_mut_all` or `put` of those handles while one is alive) and the pool for `'a`.
    ///
    /// ```
    /// idxpool::PoolBuilder::<u64>::with_default(64).scoped(|pool| {
    ///     let objs = pool.resolver();
    ///     let mut burst = Vec::new();
    ///     pool.get_bulk(&mut burst, 4).unwrap();
    ///     let mut refs: Vec<&mut u64> = objs.get_mut_all(&mut burst).collect();
    ///     *refs[0] = 1;
    ///     *refs[3] = 4;
    ///     assert_eq!(*objs.get_ref(&burst[3]), 4);
    ///     pool.put_bulk(&mut burst);
    /// }).unwrap();
    /// ```
    ///
    /// # Panics
    /// Run-time pools: when one of the handles is another pool's (checked for all of them
    /// before anything is yielded); [`Resolver::try_get_mut_all`] returns the error instead.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut_all<'a>(
        &self,
        hs: &'a mut [H<T, B, R>],
    ) -> impl DoubleEndedIterator<Item = &'a mut T> + ExactSizeIterator + std::iter::FusedIterator + 'a
    where
        'p: 'a,
    {
        check_owned_all::<B, R>(&self.geometry, entries_of(hs));
        ObjectsMut {
            objs: *self,
            hs: hs.iter_mut(),
        }
    }

    /// [`Resolver::get_mut_all`] that returns [`PoolError::ForeignHandle`] (and yields
    /// nothing) when one of the handles is another pool's.
    ///
    /// # Errors
    /// As [`Pool::check`], for the first foreign handle.
    #[inline]
    pub fn try_get_mut_all<'a>(
        &self,
        hs: &'a mut [H<T, B, R>],
    ) -> Result<
        impl DoubleEndedIterator<Item = &'a mut T> + ExactSizeIterator + std::iter::FusedIterator + 'a,
        PoolError,
    >
    where
        'p: 'a,
    {
        try_check_owned_all::<B, R>(&self.geometry, entries_of(hs))?;
        Ok(self.get_mut_all(hs))
    }
}

/// The objects of a slice of handles as `&'a mut T`, in order: what `get_mut_all` returns
/// (as an `impl Iterator`).
pub(crate) struct ObjectsMut<'a, T: ?Sized + Element, B, R: Repr> {
    objs: Resolver<'a, T, B, R>,
    hs: std::slice::IterMut<'a, H<T, B, R>>,
}

impl<'a, T: ?Sized + Element, B: Brand, R: Repr> Iterator for ObjectsMut<'a, T, B, R> {
    type Item = &'a mut T;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut T> {
        // Each handle is yielded once (IterMut), and distinct handles own distinct objects.
        self.hs.next().map(|h| self.objs.get_mut(h))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.hs.size_hint()
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> DoubleEndedIterator for ObjectsMut<'_, T, B, R> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.hs.next_back().map(|h| self.objs.get_mut(h))
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> ExactSizeIterator for ObjectsMut<'_, T, B, R> {}
impl<T: ?Sized + Element, B: Brand, R: Repr> std::iter::FusedIterator for ObjectsMut<'_, T, B, R> {}

impl<T: ?Sized + Element, B, R: Repr> fmt::Debug for ObjectsMut<'_, T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectsMut")
            .field("remaining", &self.hs.len())
            .finish()
    }
}
