//! Compile-fail tests of the handle and brand rules (tests/ui/*.rs, expected errors in
//! tests/ui/*.stderr): a handle is neither Clone nor Copy and is gone after put; a `&mut T`
//! from `get_mut` cannot outlive the handle's borrow or the pool, nor coexist with a second
//! borrow; a handle of one pool is rejected by a pool of another brand (named brands, nested
//! and sibling scoped pools, local caches); scoped handles and pools cannot escape their
//! closure; a `LocalCache` cannot outlive its pool and is not `Sync`; a channel's halves do not
//! cross threads when the pool's objects are not `Send`. Run-time pools:
//! a `DynHandle` is not `Clone`; a `DynLocalCache` is not `Sync`; references from its `&self`
//! `get_mut` cannot outlive the cache nor alias (twice, or across a `put` of the handle);
//! `DynResolver` references and `DynPooled` guards cannot outlive the pool.
//! `get_mut_all` borrows the slice of handles mutably (no second iterator, no put while a
//! reference lives) and the pool (no drop while a reference lives).
//!
//! Regenerate the expected output after a compiler upgrade with
//! `TRYBUILD=overwrite cargo test --test trybuild` and review the diff: each .stderr must
//! still show the intended error.

#[test]
#[cfg_attr(miri, ignore = "trybuild runs rustc, which Miri cannot")]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
