//! Brands: the type-level name that ties a handle to the one pool that can resolve it.
//!
//! A `Handle<T, B>` is only accepted by a pool of brand `B`, and at most one pool of a brand is
//! alive at any time, so a handle can never be resolved by another pool (that would alias an
//! object the other pool gave to someone else). This is checked by the compiler, costs nothing
//! at run time and keeps handles at 4 bytes. Three kinds of brand:
//!
//! * named brands, declared with [`brand!`](macro@crate::brand): a pool claims its brand at creation
//!   ([`PoolError::BrandInUse`] if a live pool holds it); dropping the pool releases the brand if
//!   every object came home, else retires it for the life of the process, since handles of the
//!   dead pool are still around;
//! * [`Scoped`] brands, made fresh for each [`PoolBuilder::scoped`](crate::PoolBuilder::scoped)
//!   call by an invariant lifetime (the "generativity" technique of GhostCell): any number of
//!   pools of the same `T`, no registry, but handles cannot leave the closure;
//! * [`Unchecked`]: created by an `unsafe` constructor whose caller promises never to mix the
//!   handles of two such pools.

use std::marker::PhantomData;

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::PoolError;

/// Marker for brand types. Implemented by [`brand!`](macro@crate::brand) types, [`Scoped`] and
/// [`Unchecked`].
///
/// # Safety
/// At most one pool that can be built safely may carry a given brand at any time; handles of a
/// brand are only ever minted by that pool.
pub unsafe trait Brand {}

/// A brand declared with [`brand!`](macro@crate::brand): a type with a process-wide claim slot.
///
/// # Safety
/// `slot` must return the same `'static` slot on every call, and no other type may share it.
pub unsafe trait NamedBrand: Brand + 'static {
    /// The claim slot of this brand.
    fn slot() -> &'static BrandSlot;
}

/// Claim state of a named brand (a process-wide static; std atomics even under loom, since
/// it is `const`-initialised).
#[derive(Debug)]
pub struct BrandSlot(AtomicUsize);

const FREE: usize = 0;
const LIVE: usize = 1;
const RETIRED: usize = 2;

impl BrandSlot {
    /// An unclaimed slot (for the [`brand!`](macro@crate::brand) macro).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        BrandSlot(AtomicUsize::new(FREE))
    }

    pub(crate) fn claim(&self, name: &'static str) -> Result<(), PoolError> {
        match self
            .0
            .compare_exchange(FREE, LIVE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(state) => Err(PoolError::BrandInUse {
                brand: name,
                state: if state == LIVE {
                    "a live pool"
                } else {
                    "a dropped pool whose handles are still outstanding"
                },
            }),
        }
    }

    pub(crate) fn release(&self, all_home: bool) {
        self.0
            .store(if all_home { FREE } else { RETIRED }, Ordering::Release);
    }

    /// True while a live pool holds the brand.
    pub fn is_live(&self) -> bool {
        self.0.load(Ordering::Acquire) == LIVE
    }

    /// True once a pool of this brand was dropped with handles outstanding.
    pub fn is_retired(&self) -> bool {
        self.0.load(Ordering::Acquire) == RETIRED
    }
}

/// The brand of a pool made by [`PoolBuilder::scoped`](crate::PoolBuilder::scoped): unique per
/// call through the invariant lifetime `'id`, which no other pool and no `'static` context
/// shares.
pub struct Scoped<'id>(PhantomData<fn(&'id ()) -> &'id ()>);

// SAFETY: each scoped() call introduces a fresh universally quantified 'id, so two scoped pools
// never share a brand, and handles cannot escape the closure (their type names 'id).
unsafe impl Brand for Scoped<'_> {}

/// The brand of pools built with the `unsafe`
/// [`PoolBuilder::build_unchecked`](crate::PoolBuilder::build_unchecked): the compiler does not
/// keep their handles apart; the caller does.
pub enum Unchecked {}

// SAFETY: only reachable through an unsafe constructor whose contract forbids mixing handles.
unsafe impl Brand for Unchecked {}

/// Declares a named brand: a zero-sized type that at most one live pool may carry.
///
/// ```
/// idxpool::brand!(pub Packets);
/// let pool = idxpool::PoolBuilder::<u64>::with_default(64).build::<Packets>().unwrap();
/// // A second live pool of the same brand is refused:
/// assert!(idxpool::PoolBuilder::<u64>::with_default(64).build::<Packets>().is_err());
/// drop(pool);
/// ```
#[macro_export]
macro_rules! brand {
    ($(#[$meta:meta])* $vis:vis $name:ident) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis enum $name {}
        // SAFETY: the brand's slot below is unique to this type and claimed per pool.
        unsafe impl $crate::Brand for $name {}
        // SAFETY: `slot` returns this type's own static.
        unsafe impl $crate::NamedBrand for $name {
            fn slot() -> &'static $crate::BrandSlot {
                static SLOT: $crate::BrandSlot = $crate::BrandSlot::new();
                &SLOT
            }
        }
    };
}
