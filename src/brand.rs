//! Brands: the type-level name that ties a handle to the one pool that can resolve it.
//!
//! A `Handle<T, B>` is only accepted by a pool of brand `B`, and at most one pool of a brand is
//! alive at a time, so no other pool can resolve a handle (it would alias an object given to
//! someone else). Compiler-checked, free at run time, handles stay 4 bytes. Four kinds of identity:
//!
//! * named brands, declared with [`brand!`](macro@crate::brand): a pool claims its brand at
//!   creation ([`PoolError::BrandInUse`] if a live pool holds it); its drop releases the brand if
//!   every object came home, else retires it for the process's life (the dead pool's handles are
//!   around);
//! * [`Scoped`] brands, fresh for each [`PoolBuilder::scoped`](crate::PoolBuilder::scoped) call by
//!   an invariant lifetime (GhostCell's "generativity"): any number of pools, no registry, but
//!   handles cannot leave the closure;
//! * [`Unchecked`]: an `unsafe` constructor whose caller promises never to mix two such pools'
//!   handles;
//! * [`Runtime`]: no brand. Any number of run-time pools, stored anywhere. Each owns a disjoint
//!   range of the process's 32-bit handle space (VPP's buffer-index space), so its handle is still
//!   the 4-byte entry and another (or a dropped) pool's handle fails **one range check** on every
//!   access, put and conversion (a panic naming both pools, or [`PoolError::ForeignHandle`] from
//!   `try_` forms). A range is reused only after its pool was dropped with every object home, else
//!   quarantined for good (DESIGN.md, "Handle soundness").

use std::marker::PhantomData;

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::PoolError;

/// How a handle proves it belongs to its pool: the pool's *identity*. Implemented by
/// [`brand!`](macro@crate::brand) types, [`Scoped`], [`Unchecked`] (compiler-checked, zero cost)
/// and [`Runtime`] (one range compare at run time).
///
/// # Safety
/// When `CHECKED` is false: at most one safely buildable pool carries the brand at a time, and only
/// it mints the brand's handles. When true, the pool claims its own range of the handle space at
/// build and checks every handle against it (the crate does so for every such identity).
///
/// ```
/// use idxpool::{Brand, Pool, PoolBuilder, PoolError, Runtime, Scoped};
/// // Code written once for every identity.
/// fn store<B: Brand>(pool: &Pool<u64, B>, v: u64) -> Result<u64, PoolError> {
///     let mut h = pool.get()?;
///     *pool.get_mut(&mut h) = v;
///     let got = *pool.get_ref(&h);
///     pool.put(h);
///     Ok(got)
/// }
/// assert!(<Runtime as Brand>::CHECKED && !<Scoped<'static> as Brand>::CHECKED);
/// assert_eq!(store(&PoolBuilder::with_default(8).build()?, 1)?, 1);
/// assert_eq!(PoolBuilder::with_default(8).scoped(|p| store(&p, 2))??, 2);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub unsafe trait Brand {
    /// True for identities checked at run time ([`Runtime`]): every access, put and conversion
    /// compares the handle's entry with the pool's range. False (default) for brands: the check
    /// compiles away.
    ///
    /// ```
    /// use idxpool::{Brand, Runtime, Scoped, Unchecked};
    /// idxpool::brand!(Frames);
    /// assert!(<Runtime as Brand>::CHECKED);
    /// assert!(!<Frames as Brand>::CHECKED && !<Unchecked as Brand>::CHECKED);
    /// assert!(!<Scoped<'static> as Brand>::CHECKED);
    /// ```
    const CHECKED: bool = false;
}

/// The identity of run-time pools: no brand to declare, any number at once, stored anywhere; each
/// owns a disjoint range of the handle space, checked with one compare per use ([module
/// docs](self)). Built by [`PoolBuilder::build`](crate::PoolBuilder::build):
///
/// ```
/// use idxpool::{Handle, PoolBuilder, Runtime};
///
/// struct Buffers {
///     pool: idxpool::Pool<[u8; 2048], Runtime>,
/// }
/// let a = Buffers { pool: PoolBuilder::zeroed(64).build()? };
/// let b = Buffers { pool: PoolBuilder::zeroed(64).build()? }; // any number at once
/// let mut h: Handle<[u8; 2048], Runtime> = a.pool.get()?;            // 4 bytes
/// a.pool.get_mut(&mut h)[0] = 1;
/// assert!(b.pool.try_get_ref(&h).is_err());                          // a's handle, not b's
/// a.pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
#[derive(Debug)]
pub enum Runtime {}

impl Runtime {
    /// How the process's handle space (`u32::MAX` entries) is used: entries free for new run-time
    /// pools and those quarantined by pools dropped with objects out; live pools hold the rest. See
    /// [`crate::SpaceUsage`].
    pub fn space_usage() -> crate::SpaceUsage {
        crate::space::usage()
    }
}

// SAFETY: CHECKED: every pool of this identity claims a disjoint range of the handle space at build
// (space.rs) and checks each handle against it before any use.
unsafe impl Brand for Runtime {
    const CHECKED: bool = true;
}

/// A brand declared with [`brand!`](macro@crate::brand): a type with a process-wide claim slot.
///
/// # Safety
/// `slot` must return the same `'static` slot on every call, and no other type may share it.
///
/// ```
/// use idxpool::{NamedBrand, PoolBuilder};
/// idxpool::brand!(Orders);
/// assert!(!Orders::slot().is_live());
/// let pool = PoolBuilder::<u64>::with_default(8).build_named::<Orders>()?;
/// assert!(Orders::slot().is_live());
/// drop(pool); // every object home: the brand is free again
/// assert!(!Orders::slot().is_live() && !Orders::slot().is_retired());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub unsafe trait NamedBrand: Brand + 'static {
    /// The claim slot of this brand: the same `'static` slot on every call.
    ///
    /// ```
    /// use idxpool::NamedBrand;
    /// idxpool::brand!(Ticks);
    /// assert!(std::ptr::eq(Ticks::slot(), Ticks::slot()));
    /// let pool = idxpool::PoolBuilder::<u64>::with_default(4).build_named::<Ticks>()?;
    /// assert!(Ticks::slot().is_live());
    /// drop(pool);
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    fn slot() -> &'static BrandSlot;
}

/// Claim state of a named brand (a process-wide static; std atomics even under loom:
/// `const`-initialised).
///
/// ```
/// use idxpool::{NamedBrand, PoolBuilder};
/// idxpool::brand!(Jobs);
/// let pool = PoolBuilder::<u64>::with_default(8).build_named::<Jobs>()?;
/// let _kept = pool.get()?; // still out when the pool is dropped
/// drop(pool);
/// assert!(Jobs::slot().is_retired()); // for good: `_kept` must never reach a new pool
/// assert!(PoolBuilder::<u64>::with_default(8).build_named::<Jobs>().is_err());
/// # Ok::<(), idxpool::PoolError>(())
/// ```
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

/// The brand of a [`PoolBuilder::scoped`](crate::PoolBuilder::scoped) pool: unique per call through
/// the invariant lifetime `'id`, shared by no other pool or `'static` context.
///
/// ```
/// use idxpool::{Handle, Pool, PoolBuilder, Scoped};
/// // Code over a scoped pool names its brand with a lifetime parameter.
/// fn take<'id>(pool: &Pool<u64, Scoped<'id>>) -> Handle<u64, Scoped<'id>> {
///     pool.get().unwrap()
/// }
/// let v = PoolBuilder::<u64>::with_default(8).scoped(|pool| {
///     let mut h = take(&pool);
///     *pool.get_mut(&mut h) = 42;
///     let v = *pool.get_ref(&h);
///     pool.put(h);
///     v
/// })?;
/// assert_eq!(v, 42);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct Scoped<'id>(PhantomData<fn(&'id ()) -> &'id ()>);

// SAFETY: each scoped() call introduces a fresh universally quantified 'id, so two scoped pools
// never share a brand, and handles cannot escape the closure (their type names 'id).
unsafe impl Brand for Scoped<'_> {}

/// The brand of pools built with the `unsafe`
/// [`PoolBuilder::build_unchecked`](crate::PoolBuilder::build_unchecked): the caller, not the
/// compiler, keeps their handles apart.
///
/// ```
/// use idxpool::{Pool, PoolBuilder, Unchecked};
/// // SAFETY: this is the only `Unchecked` pool of `u32`, and no handle outlives it.
/// let pool: Pool<u32, Unchecked> = unsafe { PoolBuilder::with_default(16).build_unchecked()? };
/// let mut h = pool.get()?;
/// *pool.get_mut(&mut h) = 5;
/// assert_eq!(*pool.get_ref(&h), 5);
/// pool.put(h);
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub enum Unchecked {}

// SAFETY: only reachable through an unsafe constructor whose contract forbids mixing handles.
unsafe impl Brand for Unchecked {}

/// Declares a named brand: a zero-sized type that at most one live pool may carry.
///
/// ```
/// idxpool::brand!(pub Packets);
/// let pool = idxpool::PoolBuilder::<u64>::with_default(64).build_named::<Packets>().unwrap();
/// // A second live pool of the same brand is refused:
/// assert!(idxpool::PoolBuilder::<u64>::with_default(64).build_named::<Packets>().is_err());
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
