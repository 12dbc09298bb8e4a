//! Typed handles: the owned name of one object of a pool.

use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU32;

use crate::repr::{CompactRepr, DefaultRepr, Repr};

/// Ownership of one object of a pool of identity `B`, stored as the pool's entry `R::Entry`:
/// `Handle<T>` is a run-time pool's ([`crate::Runtime`], offset entries), `Handle<T, MyBrand>` a
/// branded pool's.
///
/// Like a `Box`, a handle owns its object: neither `Clone` nor `Copy`, the object reached only
/// through the pool that minted it (`pool.get_mut(&mut h)`), so no safe code holds two `&mut T` to
/// one object. `Send`/`Sync` when `T` is. `B` makes the compiler reject another branded pool's
/// handle, and a run-time pool reject another's with one range compare ([`mod@crate::brand`]).
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
/// Dropping a handle instead of putting it back leaks its object: counted in
/// [`crate::Pool::in_use`] and reported by `audit()`, but it cannot come back.
///
/// With offset (default) and index entries the handle is 4 bytes (a `NonZeroU32`), as is
/// `Option<Handle<T, B>>`.
#[repr(transparent)]
#[must_use = "a handle owns a pool object: give it back with pool.put(h) or cache.put(h), or hold it in \
              a guard that does (idxpool::Pooled::new(&pool, h)); dropping it leaks the object"]
pub struct Handle<T: ?Sized, B = crate::brand::Runtime, R: Repr = DefaultRepr> {
    entry: R::Entry,
    /// Invariant in `T` (a `Pool<&'static str>` handle must not pass for a `Pool<&'a str>` one),
    /// with `T`'s auto traits.
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
    /// Gives up the handle and returns its raw 32-bit form (`entry - 1`), e.g. for a foreign
    /// structure or another process mapping the same region: the index for [`crate::Index`]
    /// entries, byte offset / 8 for offset entries (`pool.index_of(&h)` gives the index). The
    /// object stays in use until a handle from [`Handle::from_raw`] is put back.
    #[inline]
    pub fn into_raw(self) -> u32 {
        self.entry.get() - 1
    }

    /// Rebuilds a handle from [`Handle::into_raw`].
    ///
    /// # Safety
    /// `raw` must come from `into_raw` of a handle of the live pool of brand `B`, and this must be
    /// the only handle rebuilt from it (unique ownership); otherwise objects may alias. With debug
    /// checks (debug builds or `debug-checks`), a value naming no object panics naming it, and a
    /// put of a free object panics naming index and pool. `pool.check_raw(raw)` checks first.
    #[inline]
    pub unsafe fn from_raw(raw: u32) -> Self {
        debug_assert_ne!(raw, u32::MAX, "idxpool: raw value u32::MAX is never valid");
        Self::from_raw_entry(raw)
    }

    /// The handle whose raw value is `raw` (entry `raw + 1`; `u32::MAX`, naming no object, becomes
    /// the largest entry). Harmless by itself; what needs care is a pool accepting it:
    /// [`Handle::from_raw`] for users, the shared pool's owner-word checks for
    /// [`crate::shared::SharedHandle`].
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

/// Invariant in its parameter, `Send + Sync` whatever it is. The pool hands out `&mut T` from
/// `&self`, so `T` must be invariant (as in `Cell<T>`): a covariant `&Pool<&'static str, B>` would
/// coerce to `&Pool<&'a str, B>`, a short-lived `&str` written through it would be read back as
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
