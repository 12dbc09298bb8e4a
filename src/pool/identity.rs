//! The identity check of a run-time pool's handles and the one conversion of an entry to its
//! object (`resolve`), with the errors and panics that name both pools.

use super::*;

/// The object an entry names: the one conversion of a handle to an address (`obase0 + entry x
/// 8` for offsets: the store's addressing mode), after the identity check of run-time pools
/// (one range compare; compiled away for brands) and the debug access hook.
#[inline(always)]
#[track_caller]
pub(crate) fn resolve<T: ?Sized + Element, B: Brand, R: Repr>(
    g: &Geometry,
    e: R::Entry,
) -> NonNull<T> {
    let addr = if B::CHECKED {
        // The check's rank is also the address's index (`ReprImpl::ptr_ranked`).
        let r = R::rank_wide(g, e);
        if r >= g.span as usize {
            foreign_panic_rank(g, r)
        }
        R::ptr_ranked(g, e, r)
    } else {
        R::ptr(g, e)
    };
    debug::check_access::<R>(g, e);
    // SAFETY: the entry is this pool's: for brands, handles of brand B are only minted by this
    // pool (or rebuilt under from_raw's contract); for run-time pools, the rank just checked
    // proves it lies in this pool's range of the handle space, whose entries only this pool
    // mints. So it names one of the pool's objects, inside the region: never null.
    unsafe { NonNull::new_unchecked(T::from_addr(addr, g.elem_len)) }
}

/// The identity check of a run-time pool ([`Brand::CHECKED`]): panics, naming both pools, when
/// `e` lies outside the pool's range of the handle space. One compare and a branch that is
/// never taken; nothing at all for brands.
#[inline(always)]
#[track_caller]
pub(crate) fn check_owned<B: Brand, R: Repr>(g: &Geometry, e: R::Entry) {
    if B::CHECKED && !R::owns(g, e) {
        foreign_panic::<R>(g, e)
    }
}

/// [`check_owned`] for every entry of `es`: the OR of the ranks of the burst against the span
/// (an OR reduction with no branch, which the compiler vectorises: the span is a power of two),
/// then one branch for the batch; nothing is moved before it passes. The failure is out of
/// line.
#[inline(always)]
#[track_caller]
pub(crate) fn check_owned_all<B: Brand, R: Repr>(g: &Geometry, es: &[R::Entry]) {
    if B::CHECKED && !all_owned::<R>(g, es) {
        foreign_panic_any::<R>(g, es)
    }
}

/// True when every entry of `es` lies in the pool's range (the reduction of
/// [`check_owned_all`]).
#[inline(always)]
pub(super) fn all_owned<R: Repr>(g: &Geometry, es: &[R::Entry]) -> bool {
    // The OR of the ranks of `es`, with no loop for bursts up to 64: the first k and the last
    // k entries with k < n <= 2k (overlapping halves, as `copy_entries` copies them), so a
    // short burst costs a few ORs and no loop control (a plain loop's control cost more than the
    // check at bulk 1: BENCHMARKS.md "Run-time pools").
    #[inline(always)]
    fn or_of<R: Repr, const K: usize>(g: &Geometry, es: &[R::Entry]) -> u32 {
        let n = es.len();
        let mut acc = 0u32;
        for i in 0..K {
            acc |= R::rank(g, es[i]) | R::rank(g, es[n - K + i]);
        }
        acc
    }
    let n = es.len();
    let acc = match n {
        0 => 0,
        1..=2 => or_of::<R, 1>(g, es),
        3..=4 => or_of::<R, 2>(g, es),
        5..=8 => or_of::<R, 4>(g, es),
        9..=16 => or_of::<R, 8>(g, es),
        17..=32 => or_of::<R, 16>(g, es),
        33..=64 => or_of::<R, 32>(g, es),
        _ => es.iter().fold(0u32, |m, &e| m | R::rank(g, e)),
    };
    acc < g.span
}

/// `Ok` when every entry of `es` lies in the pool's range (always, for brands); else the
/// typed error for the first that does not.
#[inline(always)]
pub(crate) fn try_check_owned_all<B: Brand, R: Repr>(
    g: &Geometry,
    es: &[R::Entry],
) -> Result<(), PoolError> {
    if B::CHECKED && !all_owned::<R>(g, es) {
        return Err(first_foreign::<R>(g, es));
    }
    Ok(())
}

/// The error for the first entry of `es` outside the pool's range (cold).
#[cold]
#[inline(never)]
pub(crate) fn first_foreign<R: Repr>(g: &Geometry, es: &[R::Entry]) -> PoolError {
    let e = es
        .iter()
        .find(|&&e| !R::owns(g, e))
        .expect("a foreign entry");
    foreign_error::<R>(g, *e)
}

#[cold]
#[inline(never)]
#[track_caller]
pub(super) fn foreign_panic_any<R: Repr>(g: &Geometry, es: &[R::Entry]) -> ! {
    panic!("idxpool: {}", first_foreign::<R>(g, es))
}

/// The error for entry `e`, which lies outside the range of the pool of `g`: names the pool
/// that minted it (or says it was dropped) and this pool (cold path: reads the handle space's
/// table).
#[cold]
#[inline(never)]
pub(crate) fn foreign_error<R: Repr>(g: &Geometry, e: R::Entry) -> PoolError {
    foreign_error_raw(g, R::raw(e))
}

/// [`foreign_error`] of the handle whose raw value (`entry - 1`) is `raw`.
#[cold]
#[inline(never)]
fn foreign_error_raw(g: &Geometry, raw: u32) -> PoolError {
    PoolError::ForeignHandle {
        handle_pool: crate::space::describe(raw),
        pool: crate::space::name_of(crate::space::Range {
            lo: g.lo,
            span: g.span,
        }),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
pub(super) fn foreign_panic<R: Repr>(g: &Geometry, e: R::Entry) -> ! {
    panic!("idxpool: {}", foreign_error::<R>(g, e))
}

/// [`foreign_panic`] of the 4-byte entry of rank `r` (`entry = r ^ e0`): the access's check
/// passes the rank, so that the entry is dead once the rank is computed.
#[cold]
#[inline(never)]
#[track_caller]
fn foreign_panic_rank(g: &Geometry, r: usize) -> ! {
    let raw = (r as u32 ^ g.e0).wrapping_sub(1);
    panic!("idxpool: {}", foreign_error_raw(g, raw))
}
