//! Debug checks: every object's state (free or allocated) and the range check of every handle
//! access, as DPDK's `RTE_LIBRTE_MEMPOOL_DEBUG` cookies. On in debug builds and with the
//! `debug-checks` feature ([`DEBUG_CHECKS`]); compiled away otherwise.
//!
//! There is one hook per direction, called by the pool's get and put adapters
//! ([`Pool::debug_got`], [`Pool::debug_put`]), and one access hook
//! ([`check_access`]) called by every handle-to-object conversion.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use crate::brand::Brand;
use crate::element::Element;
use crate::error::PoolError;
use crate::handle::Handle;
use crate::pool::Pool;
use crate::repr::{Geometry, Repr};

/// Whether per-object state checks run: always in debug builds, with the `debug-checks`
/// feature in release builds. When false the checks compile away.
pub const DEBUG_CHECKS: bool = cfg!(any(debug_assertions, feature = "debug-checks"));

const FREE: u8 = 0;
const ALLOCATED: u8 = 1;

/// One state byte per object, present only with debug checks on.
pub(crate) struct ObjectStates(Option<Box<[AtomicU8]>>);

impl ObjectStates {
    /// Every object free (they start in the ring); nothing when debug checks are off. The
    /// array is allocated fallibly: a pool of 4 G objects must not abort the process here.
    ///
    /// # Errors
    /// [`PoolError::SizeOverflow`] when the array cannot be allocated.
    pub(crate) fn alloc(capacity: u32) -> Result<Self, PoolError> {
        if !DEBUG_CHECKS {
            return Ok(ObjectStates(None));
        }
        let mut v: Vec<AtomicU8> = Vec::new();
        v.try_reserve_exact(capacity as usize).map_err(|e| {
            PoolError::overflow(format!(
                "debug-check states of {capacity} objects cannot be allocated: {e}"
            ))
        })?;
        v.extend((0..capacity).map(|_| AtomicU8::new(FREE)));
        Ok(ObjectStates(Some(v.into_boxed_slice())))
    }

    /// Whether object `i` is marked free; `None` without debug checks.
    pub(crate) fn is_free(&self, i: usize) -> Option<bool> {
        self.0.as_ref().map(|s| s[i].load(Relaxed) == FREE)
    }
}

/// The object index an entry names, or [`PoolError::IndexOutOfRange`] when it names no object
/// of the region described by `g` (beyond the capacity, or between two objects).
pub(crate) fn index_in_range<R: Repr>(g: &Geometry, e: R::Entry) -> Result<u32, PoolError> {
    let off = (R::ptr(g, e) as usize).wrapping_sub(g.base.as_ptr() as usize);
    let i = R::index(g, e);
    if !off.is_multiple_of(g.stride) || i >= g.capacity {
        return Err(PoolError::IndexOutOfRange {
            index: i,
            capacity: g.capacity,
        });
    }
    Ok(i)
}

/// The access hook: with debug checks on, panics naming the index when `e` names no object of
/// the region (a handle rebuilt by `Handle::from_raw` from a bad index), before any access.
/// Every conversion of a handle to a pointer or reference calls it.
#[inline(always)]
pub(crate) fn check_access<R: Repr>(g: &Geometry, e: R::Entry) {
    if DEBUG_CHECKS {
        if let Err(err) = index_in_range::<R>(g, e) {
            panic!("idxpool: {err}");
        }
    }
}

impl<T: ?Sized + Element, B: Brand, R: Repr> Pool<T, B, R> {
    /// The get hook: marks the objects of handles just handed out allocated, and panics if one
    /// of them was not free (a corrupted ring or cache).
    #[inline(always)]
    pub(crate) fn debug_got(&self, hs: &[Handle<T, B, R>]) {
        if let (true, Some(states)) = (DEBUG_CHECKS, &self.states.0) {
            for h in hs {
                let i = R::index(&self.geometry, h.entry());
                let prev = states[i as usize].swap(ALLOCATED, Relaxed);
                assert!(
                    prev == FREE,
                    "idxpool: object {i} of pool {} handed out while allocated (corrupted ring \
                     or cache)",
                    self.name()
                );
            }
        }
    }

    /// The put hook: checks and marks free a batch about to be put, all or nothing. On a bad
    /// handle (out of range, or its object already free: a broken `Handle::from_raw`
    /// contract) the batch's marks are undone before the panic, so a caught panic leaves every
    /// handle of the batch in use (tests/debug_checks.rs,
    /// a_bulk_put_with_one_bad_handle_moves_nothing).
    #[inline(always)]
    pub(crate) fn debug_put(&self, hs: &[Handle<T, B, R>]) {
        if let (true, Some(states)) = (DEBUG_CHECKS, &self.states.0) {
            for (k, h) in hs.iter().enumerate() {
                match self.check_entry(h.entry()) {
                    Ok(i) => states[i as usize].store(FREE, Relaxed),
                    Err(err) => {
                        for done in &hs[..k] {
                            let i = R::index(&self.geometry, done.entry()) as usize;
                            states[i].store(ALLOCATED, Relaxed);
                        }
                        panic!("idxpool: {err}");
                    }
                }
            }
        }
    }

    /// The index `e` names if it is an object of this pool in use.
    fn check_entry(&self, e: R::Entry) -> Result<u32, PoolError> {
        let i = index_in_range::<R>(&self.geometry, e)?;
        if self.states.is_free(i as usize) == Some(true) {
            return Err(PoolError::DoubleFree {
                index: i,
                pool: self.name().to_string(),
            });
        }
        Ok(i)
    }

    /// Checks that a raw value (from [`crate::Handle::into_raw`]: the index for index
    /// entries, the scaled offset for offset entries, the index for the pointer twin) names an
    /// object of this pool that is in use, before rebuilding a handle with `from_raw`. The
    /// in-use part is checked only with debug checks on ([`DEBUG_CHECKS`]).
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`] (run-time pools: the value lies in another pool's range of
    /// the handle space), [`PoolError::IndexOutOfRange`] (naming the index the value would
    /// have, or the value itself when it names no entry) or [`PoolError::DoubleFree`] (the
    /// object is free).
    pub fn check_raw(&self, raw: u32) -> Result<(), PoolError> {
        match R::entry_from_raw(&self.geometry, raw) {
            // Below the live capacity: objects beyond it (reserved for growth) are not made.
            // Another run-time pool's value: the error every other path gives it.
            Some(e) if B::CHECKED && !R::owns(&self.geometry, e) => {
                Err(super::foreign_error::<R>(&self.geometry, e))
            }
            Some(e) => {
                let i = index_in_range::<R>(&self.geometry, e)?;
                let capacity = self.capacity();
                if i >= capacity {
                    return Err(PoolError::IndexOutOfRange { index: i, capacity });
                }
                self.check_entry(e).map(|_| ())
            }
            None => Err(PoolError::IndexOutOfRange {
                index: raw,
                capacity: self.capacity(),
            }),
        }
    }
}
