//! RAII guards: an object that goes back to its pool when the guard is dropped.

use std::fmt;

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::mempool::{Mempool, MempoolRef};
use crate::pool::Pool;
use crate::repr::Repr;

/// The handle type of the pool behind a pool reference `P` (`&Pool<T>` or `Arc<Pool<T>>`:
/// `Handle<T>`), as guards and channels name it.
///
/// ```
/// use idxpool::{Handle, HandleOf, Pool};
/// fn same(h: Handle<u64>) -> HandleOf<std::sync::Arc<Pool<u64>>> { h }
/// # let _ = same;
/// ```
pub type HandleOf<P> = <<P as MempoolRef>::Pool as Mempool>::Handle;
/// The object type of the pool behind a pool reference `P` (`&Pool<T>` or `Arc<Pool<T>>`: `T`).
///
/// ```
/// use idxpool::{ObjectOf, PacketBuf, Pool};
/// fn len(b: &ObjectOf<std::sync::Arc<Pool<PacketBuf>>>) -> usize { b.len() }
/// # let _ = len;
/// ```
pub type ObjectOf<P> = <<P as MempoolRef>::Pool as Mempool>::Object;

/// An object put back through the dropping thread's cache when the guard is dropped, also on
/// unwind. `Deref`/`DerefMut` to the object; [`Pooled::into_handle`] and [`Pooled::new`] convert to
/// and from a plain handle (the zero-overhead path).
///
/// `P` is how it holds its pool ([`MempoolRef`]): `&Pool` ([`Pool::get_pooled`]) or `Arc<Pool>`
/// (`Pooled::get(arc.clone())`: `'static`, moves into a spawned thread), for any [`Mempool`] (e.g.
/// a [`crate::shared::SharedPool`] attachment).
///
/// ```
/// use idxpool::{PoolBuilder, Pooled};
/// let pool = PoolBuilder::<[u8; 64]>::zeroed(8).build()?;
/// {
///     let mut buf = pool.get_pooled()?;
///     buf[0] = 42;                          // DerefMut
///     assert_eq!(pool.in_use(), 1);
/// }                                          // back in the pool here
/// assert_eq!(pool.in_use(), 0);
/// let h = Pooled::get(&pool)?.into_handle(); // a plain handle again
/// pool.put(h);
///
/// let pool = std::sync::Arc::new(pool);
/// let guard = Pooled::get(pool.clone())?;  // holds the Arc
/// std::thread::spawn(move || drop(guard)).join().unwrap();
/// assert_eq!(pool.in_use(), 0);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[must_use = "dropping the guard at once puts the object straight back"]
pub struct Pooled<P: MempoolRef> {
    /// Some for the guard's whole life; taken only by `into_handle` and `drop` (a niche:
    /// handle-sized).
    h: Option<HandleOf<P>>,
    pool: P,
}

impl<P: MempoolRef> Pooled<P> {
    /// Takes one object from the pool (through the calling thread's cache) in a guard.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`], as [`Pool::get`].
    pub fn get(pool: P) -> Result<Self, PoolError> {
        let h = pool.get()?;
        Ok(Pooled { h: Some(h), pool })
    }

    /// Wraps a handle of the pool.
    ///
    /// # Errors
    /// Run-time pools: `Err(h)`, untouched, when `h` is another pool's ([`Pool::check`] says
    /// which). Never for brands (compiler-checked).
    ///
    /// ```
    /// use idxpool::{PoolBuilder, Pooled};
    /// let a = PoolBuilder::<u64>::with_default(8).build()?;
    /// let b = PoolBuilder::<u64>::with_default(8).build()?;
    /// let guard = Pooled::new(&a, a.get()?).unwrap();
    /// drop(guard); // back in a
    /// let h = Pooled::new(&a, b.get()?).unwrap_err(); // b's handle is not consumed
    /// b.put(h);
    /// assert_eq!((a.in_use(), b.in_use()), (0, 0));
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    pub fn new(pool: P, h: HandleOf<P>) -> Result<Self, HandleOf<P>> {
        if !pool.owns(&h) {
            return Err(h);
        }
        Ok(Pooled { h: Some(h), pool })
    }

    /// Gives up the guard and returns the plain handle (to be put back by hand).
    pub fn into_handle(mut self) -> HandleOf<P> {
        // The drop that follows finds None and puts nothing back.
        self.h
            .take()
            .expect("a guard holds its handle until into_handle or drop")
    }

    /// The handle, by reference.
    pub fn handle(&self) -> &HandleOf<P> {
        self.h()
    }

    #[inline(always)]
    fn h(&self) -> &HandleOf<P> {
        self.h
            .as_ref()
            .expect("a guard holds its handle until into_handle or drop")
    }

    /// The object (`Deref`'s body, where the bounds name the object `ObjectOf<P>`).
    #[inline(always)]
    fn obj(&self) -> &ObjectOf<P> {
        Mempool::get_ref(&*self.pool, self.h())
    }

    /// `AsRef`'s body (bounds on `ObjectOf<P>`, where the lifetimes follow `P`'s).
    #[inline(always)]
    fn obj_as_ref<U: ?Sized>(&self) -> &U
    where
        ObjectOf<P>: AsRef<U>,
    {
        self.obj().as_ref()
    }

    /// `AsMut`'s body.
    #[inline(always)]
    fn obj_as_mut<U: ?Sized>(&mut self) -> &mut U
    where
        ObjectOf<P>: AsMut<U>,
    {
        self.obj_mut().as_mut()
    }

    /// The object, writable (`DerefMut`'s body).
    #[inline(always)]
    fn obj_mut(&mut self) -> &mut ObjectOf<P> {
        let h = self
            .h
            .as_mut()
            .expect("a guard holds its handle until into_handle or drop");
        Mempool::get_mut(&*self.pool, h)
    }

    /// The pool the object goes back to (as held).
    pub fn pool(&self) -> &P {
        &self.pool
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// Takes one object in a guard that puts it back when dropped (as [`Pooled::get`]).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`], as [`Pool::get`].
    pub fn get_pooled(&self) -> Result<Pooled<&Self>, PoolError> {
        Pooled::get(self)
    }
}

// The impls below name the object `T` through `P: MempoolRef<Pool = M>, M: Mempool<Object = T>`,
// not `ObjectOf<P>`: same bounds, but rustdoc would expand the alias to a projection.
impl<P, M, T> std::ops::Deref for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = T>,
    T: ?Sized,
{
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        self.obj()
    }
}

impl<P, M, T> std::ops::DerefMut for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = T>,
    T: ?Sized,
{
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        self.obj_mut()
    }
}

/// Forwards to the object: a `Pooled` packet or byte buffer is an `AsRef<[u8]>`
/// (`Bytes::from_owner(guard)` takes it).
impl<P, M, T, U> AsRef<U> for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = T>,
    T: ?Sized + AsRef<U>,
    U: ?Sized,
{
    #[inline(always)]
    fn as_ref(&self) -> &U {
        self.obj_as_ref()
    }
}

/// Forwards to the object, as `AsRef`.
impl<P, M, T, U> AsMut<U> for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = T>,
    T: ?Sized + AsMut<U>,
    U: ?Sized,
{
    #[inline(always)]
    fn as_mut(&mut self) -> &mut U {
        self.obj_as_mut()
    }
}

/// Runs `put` from a destructor. During an unwind, a panic of the reset hook (user code) would
/// abort (panic while panicking): it is contained and its payload leaked (its drop is user code
/// too), as the channel contains a waker's panic. Every put path gives the whole burst back before
/// a hook's panic goes on, so nothing is lost. Outside an unwind the panic goes on to the caller
/// (tests/hook_unwind.rs).
#[inline(always)]
pub(crate) fn put_in_drop(put: impl FnOnce()) {
    if std::thread::panicking() {
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(put)) {
            std::mem::forget(p);
        }
    } else {
        put()
    }
}

impl<P: MempoolRef> Drop for Pooled<P> {
    fn drop(&mut self) {
        if let Some(h) = self.h.take() {
            put_in_drop(|| Mempool::put(&*self.pool, h));
        }
    }
}

impl<P, M, T> fmt::Debug for Pooled<P>
where
    P: MempoolRef<Pool = M>,
    M: Mempool<Object = T>,
    T: ?Sized + fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Pooled").field(&&**self).finish()
    }
}
