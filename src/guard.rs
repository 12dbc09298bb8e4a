//! RAII guards: an object that goes back to its pool when the guard is dropped.

use std::fmt;
use std::mem::ManuallyDrop;

use crate::brand::Brand;
use crate::error::PoolError;
use crate::handle::GenericHandle;
use crate::pool::GenericPool;
use crate::repr::Repr;

/// An object of a branded pool ([`crate::Pool`], [`crate::ptr::Pool`]) that is put back
/// through the dropping thread's cache when the guard is dropped, also when a panic unwinds
/// through it. `Deref`/`DerefMut` to the object; [`Pooled::into_handle`] and
/// [`Pooled::new`] convert from and to a plain handle. For code that prefers safety to a
/// manual `put`; the plain handle stays the zero-overhead path. For run-time pools see
/// [`crate::DynPooled`].
///
/// ```
/// use idxpool::{PoolBuilder, Pooled};
/// PoolBuilder::<[u8; 64]>::zeroed(8).scoped(|pool| {
///     {
///         let mut buf = Pooled::get(&pool).unwrap();
///         buf[0] = 42;                          // DerefMut
///         assert_eq!(pool.in_use(), 1);
///     }                                          // back in the pool here
///     assert_eq!(pool.in_use(), 0);
///     let h = Pooled::get(&pool).unwrap().into_handle(); // a plain handle again
///     pool.put(h);
/// }).unwrap();
/// ```
#[must_use = "dropping the guard at once puts the object straight back"]
pub struct Pooled<'p, T, B: Brand, R: Repr = crate::repr::DefaultRepr> {
    pool: &'p GenericPool<T, B, R>,
    h: ManuallyDrop<GenericHandle<T, B, R>>,
}

impl<'p, T, B: Brand, R: Repr> Pooled<'p, T, B, R> {
    /// Takes one object from `pool` (through the calling thread's cache) in a guard.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`], as [`GenericPool::get`].
    pub fn get(pool: &'p GenericPool<T, B, R>) -> Result<Self, PoolError> {
        Ok(Self::new(pool, pool.get()?))
    }

    /// Wraps a handle of `pool` (the brand proves it is this pool's).
    pub fn new(pool: &'p GenericPool<T, B, R>, h: GenericHandle<T, B, R>) -> Self {
        Pooled {
            pool,
            h: ManuallyDrop::new(h),
        }
    }

    /// Gives up the guard and returns the plain handle (to be put back by hand).
    pub fn into_handle(self) -> GenericHandle<T, B, R> {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the handle is taken out exactly once.
        unsafe { ManuallyDrop::take(&mut me.h) }
    }

    /// The handle, by reference.
    pub fn handle(&self) -> &GenericHandle<T, B, R> {
        &self.h
    }

    /// The pool the object goes back to.
    pub fn pool(&self) -> &'p GenericPool<T, B, R> {
        self.pool
    }
}

impl<T, B: Brand, R: Repr> GenericPool<T, B, R> {
    /// Takes one object in a guard that puts it back when dropped (as [`Pooled::get`]).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`], as [`GenericPool::get`].
    pub fn get_pooled(&self) -> Result<Pooled<'_, T, B, R>, PoolError> {
        Pooled::get(self)
    }

    /// Wraps a handle of this pool in a guard that puts it back when dropped (as
    /// [`Pooled::new`]).
    pub fn pooled(&self, h: GenericHandle<T, B, R>) -> Pooled<'_, T, B, R> {
        Pooled::new(self, h)
    }
}

impl<T, B: Brand, R: Repr> std::ops::Deref for Pooled<'_, T, B, R> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        self.pool.get_ref(&self.h)
    }
}

impl<T, B: Brand, R: Repr> std::ops::DerefMut for Pooled<'_, T, B, R> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        self.pool.get_mut(&mut self.h)
    }
}

impl<T, B: Brand, R: Repr> Drop for Pooled<'_, T, B, R> {
    fn drop(&mut self) {
        // SAFETY: drop runs once; the handle is not used afterwards.
        let h = unsafe { ManuallyDrop::take(&mut self.h) };
        self.pool.put(h);
    }
}

impl<T: fmt::Debug, B: Brand, R: Repr> fmt::Debug for Pooled<'_, T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pooled").field(&**self).finish()
    }
}
