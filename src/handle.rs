//! Typed handles: the owned name of one object of a pool.

use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU32;

use crate::repr::{CompactRepr, DefaultRepr, Repr};

/// Ownership of one object of a pool of identity `B`, stored as the pool's entry type
/// `R::Entry`: `Handle<T>` is a handle of a run-time pool ([`crate::Runtime`], offset entries),
/// `Handle<T, MyBrand>` one of a branded pool.
///
/// Like a `Box`, a handle owns its object: it is neither `Clone` nor `Copy`, and the object is
/// reached only through the pool that minted it (`pool.get_mut(&mut h)`), so no safe code can
/// hold two `&mut T` to one object. It is `Send` when `T: Send` and `Sync` when `T: Sync`. The
/// identity `B` makes the compiler reject a handle of another branded pool, and a run-time pool
/// reject, with one range compare, a handle of another run-time pool (see
/// [`mod@crate::brand`]).
///
/// ```
/// use idxpool::{Handle, PoolBuilder};
/// let pool = PoolBuilder::<u64>::with_default(8).build()?;
/// let mut h: Handle<u64> = pool.get()?;
/// *pool.get_mut(&mut h) = 7;
/// assert_eq!(std::mem::size_of::<Option<Handle<u64>>>(), 4);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
///
/// Dropping a handle instead of putting it back leaks its object: the pool keeps counting it
/// in [`crate::Pool::in_use`], and `audit()` reports it, but it cannot come back.
///
/// For the default pool ([`Handle`], offset entries) and the index pool the handle is 4 bytes
/// (a `NonZeroU32`), and `Option<Handle<T, B>>` is 4 bytes too.
#[repr(transparent)]
#[must_use = "a handle owns a pool object: give it back with pool.put(h) or cache.put(h), or hold it in \
              a guard that does (idxpool::Pooled::new(&pool, h)); dropping it leaks the object"]
pub struct Handle<T: ?Sized, B = crate::brand::Runtime, R: Repr = DefaultRepr> {
    entry: R::Entry,
    /// Invariant in `T` (a handle of `Pool<&'static str>` must not pass for one of
    /// `Pool<&'a str>`), with `T`'s auto traits: `Send`/`Sync` exactly when `T` is.
    _object: PhantomData<(Invariant<T>, T)>,
    /// Invariant in `B`, `Send + Sync` whatever `B` is.
    _brand: PhantomData<Invariant<B>>,
}

impl<T: ?Sized, B, R: Repr> Handle<T, B, R> {
    /// Wraps an entry the pool just took out of a cache or the ring.
    #[inline(always)]
    pub(crate) fn from_entry(entry: R::Entry) -> Self {
        Handle {
            entry,
            _object: PhantomData,
            _brand: PhantomData,
        }
    }

    /// The stored entry (consumes the handle: ownership goes back to the pool).
    #[inline(always)]
    pub(crate) fn into_entry(self) -> R::Entry {
        self.entry
    }

    /// The stored entry, by reference.
    #[inline(always)]
    pub(crate) fn entry(&self) -> R::Entry {
        self.entry
    }
}

impl<T: ?Sized, B, R: CompactRepr> Handle<T, B, R> {
    /// Gives up the handle and returns its raw 32-bit form (`entry - 1`), e.g. to store it in
    /// a foreign structure or send it to another process mapping the same region: the object's
    /// index for [`crate::Index`] entries, its byte offset / 8 for offset entries (the default;
    /// `pool.index_of(&h)` gives the index). The object stays in use until a handle made by
    /// [`Handle::from_raw`] is put back.
    #[inline]
    pub fn into_raw(self) -> u32 {
        self.entry.get() - 1
    }

    /// Rebuilds a handle from [`Handle::into_raw`].
    ///
    /// # Safety
    /// `raw` must come from `into_raw` of a handle of the live pool of brand `B`, and this
    /// must be the only handle rebuilt from that call (a handle is unique ownership). Violating
    /// this can alias objects; with debug checks on (debug builds or the `debug-checks`
    /// feature), a value naming no object panics naming it, and a put of an object that is
    /// already free panics naming the index and the pool. `pool.check_raw(raw)` checks first.
    #[inline]
    pub unsafe fn from_raw(raw: u32) -> Self {
        debug_assert_ne!(raw, u32::MAX, "idxpool: raw value u32::MAX is never valid");
        Self::from_raw_entry(raw)
    }

    /// The handle whose raw value is `raw` (entry `raw + 1`; `u32::MAX`, which names no
    /// object, becomes the largest entry). Making a handle is harmless; what needs care is a
    /// pool accepting it: [`Handle::from_raw`] for users, the shared pool's owner-word
    /// checks for [`crate::shared::SharedHandle`].
    #[inline(always)]
    pub(crate) fn from_raw_entry(raw: u32) -> Self {
        Self::from_entry(NonZeroU32::new(raw.wrapping_add(1)).unwrap_or(NonZeroU32::MAX))
    }
}

impl<T: ?Sized, B, R: Repr> fmt::Debug for Handle<T, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({}:{:?})", R::NAME, self.entry)
    }
}

impl<T: ?Sized, B, R: Repr> PartialEq for Handle<T, B, R> {
    fn eq(&self, other: &Self) -> bool {
        self.entry == other.entry
    }
}
impl<T: ?Sized, B, R: Repr> Eq for Handle<T, B, R> {}

/// Invariant in its parameter, and `Send + Sync` whatever it is. The pool hands out `&mut T`
/// from `&self`, so `T` must be invariant (as in `Cell<T>`): were the pool covariant,
/// `&Pool<&'static str, B>` would coerce to `&Pool<&'a str, B>`, a short-lived `&str` could be
/// written into an object through it, and the original type would read it back as
/// `&'static str` after it was freed (tests/ui/variance_pool.rs).
pub(crate) type Invariant<X> = fn(&X) -> &X;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brand::Unchecked;

    #[test]
    fn handle_is_four_bytes_and_option_too() {
        assert_eq!(std::mem::size_of::<Handle<[u8; 2048], Unchecked>>(), 4);
        assert_eq!(
            std::mem::size_of::<Option<Handle<[u8; 2048], Unchecked>>>(),
            4
        );
        assert_eq!(
            std::mem::size_of::<crate::Handle<u64, Unchecked, crate::Pointer>>(),
            std::mem::size_of::<usize>()
        );
    }
}
