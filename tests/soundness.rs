//! Soundness and robustness regressions, each the attack or bad input that broke the
//! core pool, now rejected (run under Miri by scripts/miri.sh).
//!
//! The cases that must not compile are trybuild cases in tests/ui/ (run by tests/trybuild.rs):
//! * variance (case 1): `variance_pool.rs` is the exact attack (`&Pool<&'static str>`
//!   coerced to `&Pool<&'s str>`, a short-lived `&str` written through it, read back through
//!   the original as a dangling `&'static str`); `variance_pool_fn.rs`,
//!   `variance_local_cache.rs`, `variance_resolver.rs`, `variance_handle_ring.rs`,
//!   `variance_handle.rs`, `variance_ring.rs` show the coercion refused for every generic type
//!   that holds or hands out `T` (or entries);
//! * uninitialised objects (case 2): `init_without_write.rs` is the attack's
//!   `PoolBuilder::<&'static u64>::with_init(1, |_, _slot| {})`, `init_token_reuse.rs` and
//!   `init_token_forged.rs` try to return a proof that is not this object's.
//!
//! Here, at run time: the same operations used legally stay Miri-clean, and the bad inputs of
//! cases 5 (max_threads), 8 (defaults vs policy), 9 (panicking drop) and 10 (audit during
//! thread exits) get their typed error or correct result.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use idxpool::{
    Backing, BackingPolicy, FlushPolicy, HandleRing, LocalCache, PoolBuilder, PoolError,
    CACHE_MAX_SIZE, MAX_THREADS_LIMIT,
};

fn heap<T>(b: PoolBuilder<'_, T>) -> PoolBuilder<'_, T> {
    b.backing(BackingPolicy::Require(Backing::Heap))
        .max_threads(4)
}

// ---- case 1: variance (the legal form of the attack stays fine) ------------------------------

/// The attack's operations with the one lifetime the pool's type allows: a `&'static str`
/// written and read back through every access path (pool, local cache, resolver, handle ring).
#[test]
fn references_in_objects_keep_their_lifetime() {
    static WORDS: [&str; 3] = ["alpha", "beta", "gamma"];
    idxpool::brand!(Strs);
    let pool = heap(PoolBuilder::<&'static str>::with_default(4))
        .build_named::<Strs>()
        .unwrap();
    let mut h = pool.get().unwrap();
    *pool.get_mut(&mut h) = WORDS[0];
    pool.put(h);
    {
        let mut c = pool.local_cache();
        let mut h = c.get().unwrap();
        let r = pool.resolver();
        *r.get_mut(&mut h) = WORDS[1];
        assert_eq!(*pool.get_ref(&h), "beta");
        let (mut tx, mut rx) =
            HandleRing::new(&pool, 2, idxpool::handle_ring::Zeroing::Immediate).unwrap();
        tx.produce(h).unwrap();
        let mut h = rx.consume().unwrap();
        *pool.get_mut(&mut h) = WORDS[2];
        c.put(h);
    }
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 4).unwrap();
    let mut words: Vec<&'static str> = all.iter().map(|h| *pool.get_ref(h)).collect();
    words.sort_unstable();
    assert_eq!(words, ["", "", "alpha", "gamma"]); // "beta" was overwritten via the ring
    pool.put_bulk(&mut all);
}

// ---- case 2: initialisation guaranteed by the types ------------------------------------------

/// The issue's `&'static u64` pool, built with the two safe initialisers: every object is a
/// valid reference (the empty in-place initialiser does not compile: tests/ui).
#[test]
fn safe_initialisers_initialise_every_object() {
    static N: [u64; 3] = [7, 8, 9];
    let by_value = heap(PoolBuilder::<&'static u64>::with_fn(3, |i| &N[i as usize]));
    let in_place = heap(PoolBuilder::<&'static u64>::with_init(3, |i, slot| {
        slot.write(&N[i as usize])
    }));
    for b in [by_value, in_place] {
        b.scoped(|pool| {
            let mut v = Vec::new();
            pool.get_bulk(&mut v, 3).unwrap();
            let mut got: Vec<u64> = v.iter().map(|h| **pool.get_ref(h)).collect();
            got.sort_unstable();
            assert_eq!(got, [7, 8, 9]);
            pool.put_bulk(&mut v);
        })
        .unwrap();
    }
}

/// The in-place form through the raw pointer (the `unsafe` escape hatch) for a large object
/// written field by field.
#[test]
fn in_place_init_through_the_raw_pointer() {
    struct Big {
        id: u32,
        data: [u8; 4096],
    }
    heap(PoolBuilder::<Big>::with_init(2, |i, mut slot| {
        let p = slot.as_mut_ptr();
        // SAFETY: p is valid for writes of a Big; both fields are written before assume_init.
        unsafe {
            std::ptr::addr_of_mut!((*p).id).write(i);
            std::ptr::addr_of_mut!((*p).data).write_bytes(0xab, 1);
            slot.assume_init()
        }
    }))
    .scoped(|pool| {
        let mut v = Vec::new();
        pool.get_bulk(&mut v, 2).unwrap();
        for h in &v {
            let b = pool.get_ref(h);
            assert!(b.id < 2);
            assert!(b.data.iter().all(|&x| x == 0xab));
        }
        pool.put_bulk(&mut v);
    })
    .unwrap();
}

// ---- case 5 (builder part): sizes from user input --------------------------------------------

fn invalid_config<T>(b: PoolBuilder<'_, T>) -> String {
    match b.scoped(|_| ()) {
        Err(PoolError::InvalidConfig { reason }) => reason,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

/// `max_threads(usize::MAX)` panicked ("capacity overflow") and `max_threads(1 << 40)` aborted
/// the process (the slot array was collected without a fallible reserve): both are now an
/// immediate `InvalidConfig`, before anything is allocated.
#[test]
fn huge_max_threads_is_invalid_config_without_allocating() {
    for n in [usize::MAX, 1 << 40, MAX_THREADS_LIMIT + 1] {
        let reason = invalid_config(PoolBuilder::<u64>::with_default(8).max_threads(n));
        assert!(reason.contains("max_threads"), "{reason}");
    }
}

/// The largest accepted `max_threads` builds (16 MiB of slots: skipped under Miri).
#[test]
#[cfg_attr(miri, ignore = "allocates and initialises 2^20 slots")]
fn max_threads_limit_itself_builds() {
    PoolBuilder::<u64>::with_default(8)
        .max_threads(MAX_THREADS_LIMIT)
        .scoped(|pool| {
            let h = pool.get().unwrap();
            pool.put(h);
        })
        .unwrap();
}

// ---- case 8: a default never makes a valid request invalid -----------------------------------

/// `with_default(cap).policy(Classic)` was refused for every capacity below 768, because the
/// default cache size (512) broke Classic's 1.5x rule. The default's flush threshold is at
/// most an eighth of the capacity, within every policy's rule; every policy builds at every
/// small capacity.
#[test]
fn default_cache_size_fits_every_policy_and_capacity() {
    let caps: &[u32] = if cfg!(miri) {
        &[1, 3, 7, 100, 767]
    } else {
        &[
            1, 2, 3, 4, 5, 7, 8, 31, 32, 100, 341, 342, 511, 512, 513, 767, 768, 769, 1000,
        ]
    };
    for &cap in caps {
        for policy in [
            FlushPolicy::Classic,
            FlushPolicy::Dpdk2607,
            FlushPolicy::SizeAligned,
        ] {
            heap(PoolBuilder::<u64>::with_default(cap))
                .policy(policy)
                .scoped(|pool| {
                    let cs = pool.cache_size();
                    assert!(cs <= CACHE_MAX_SIZE, "{policy} cap {cap}: {cs}");
                    policy.validate(cs, cap).unwrap();
                    // The largest size whose flush threshold is at most an eighth of the pool
                    // (tests/default_cache.rs: the caches of a few threads leave objects for
                    // a waiter), or 512.
                    let fits = |c: u32| u64::from(policy.fill_limit(c)) * 8 <= u64::from(cap);
                    assert!(fits(cs), "{policy} cap {cap}: {cs}");
                    assert!(
                        cs == CACHE_MAX_SIZE || !fits(cs + 1),
                        "{policy} cap {cap}: {cs}"
                    );
                    if !cfg!(miri) || cap <= 100 {
                        let mut v = Vec::new();
                        pool.get_bulk(&mut v, cap as usize).unwrap();
                        pool.put_bulk(&mut v);
                    }
                })
                .unwrap_or_else(|e| panic!("{policy} cap {cap}: {e}"));
        }
    }
}

/// A cache size the user set keeps its error.
#[test]
fn explicit_cache_size_is_still_checked() {
    let reason = invalid_config(
        PoolBuilder::<u64>::with_default(100)
            .policy(FlushPolicy::Classic)
            .cache_size(100),
    );
    assert!(reason.contains("cache size 100"), "{reason}");
}

// ---- case 9: a panicking T::drop during the pool's drop --------------------------------------

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct PanicsOnDrop(u32);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
        if self.0 == 2 {
            panic!("drop of object {} failed", self.0);
        }
    }
}

/// 3 of 6 objects were dropped when object 2's destructor panicked; now every object is
/// dropped (as `Vec` does), the panic reaches the caller, and the brand is retired or released
/// as for any drop.
#[test]
fn panicking_drop_still_drops_every_other_object() {
    idxpool::brand!(DropPanics);
    DROPPED.store(0, SeqCst);
    let pool = heap(PoolBuilder::<PanicsOnDrop>::with_fn(6, PanicsOnDrop))
        .build_named::<DropPanics>()
        .unwrap();
    let r = catch_unwind(AssertUnwindSafe(move || drop(pool)));
    let msg = r.expect_err("the drop panic propagates");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("object 2"), "{msg}");
    assert_eq!(DROPPED.load(SeqCst), 6, "every object dropped once");
    // The brand was released (every object was home) before the objects were dropped.
    let again = heap(PoolBuilder::<PanicsOnDrop>::with_fn(1, |_| PanicsOnDrop(0)))
        .build_named::<DropPanics>()
        .expect("brand released");
    drop(again);
}

// ---- an in-place initialiser that panics after writing -----------------------

static INIT_DROPS: AtomicUsize = AtomicUsize::new(0);

/// Owns heap memory, so that a leaked one is a leak Miri reports.
struct Boxed(#[allow(dead_code)] Box<u64>);

impl Drop for Boxed {
    fn drop(&mut self) {
        INIT_DROPS.fetch_add(1, SeqCst);
    }
}

/// `with_init` whose initialiser panics *after* `slot.write(..)`: the object written in that
/// call was never dropped (3 of 4 drops; Miri: "memory leaked", the `Box` inside it). Now the
/// builder's unwind guard drops it too, the brand is released and the panic propagates.
/// Miri: `cargo +nightly miri test --test soundness a_panic_after_slot_write`.
#[test]
fn a_panic_after_slot_write_still_drops_the_written_object() {
    idxpool::brand!(WritesThenPanics);
    INIT_DROPS.store(0, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| {
        heap(PoolBuilder::<Boxed>::with_init(8, |i, slot| {
            let w = slot.write(Boxed(Box::new(u64::from(i))));
            if i == 3 {
                panic!("init of object {i} failed after writing it");
            }
            w
        }))
        .build_named::<WritesThenPanics>()
    }));
    let msg = r.expect_err("the panic propagates");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("object 3"), "{msg}");
    assert_eq!(
        INIT_DROPS.load(SeqCst),
        4,
        "objects 0..=3 were written, all dropped"
    );
    let pool = heap(PoolBuilder::<Boxed>::with_fn(2, |i| {
        Boxed(Box::new(u64::from(i)))
    }))
    .build_named::<WritesThenPanics>()
    .expect("brand released after the panic");
    drop(pool);
    assert_eq!(INIT_DROPS.load(SeqCst), 6);
}

// ---- a leak hook that panics ---------------------------------------------------

static HOOKED_DROPS: AtomicUsize = AtomicUsize::new(0);

struct CountsDrops(#[allow(dead_code)] u32);

impl Drop for CountsDrops {
    fn drop(&mut self) {
        HOOKED_DROPS.fetch_add(1, SeqCst);
    }
}

/// A leak hook that panics stopped the pool's drop: `T drops: 0 of 4`, and the named brand
/// stayed claimed "by a live pool" forever. Now the drop completes (every object dropped, the
/// brand retired because a handle is still out) and the hook's panic reaches the caller
/// afterwards; while the pool is dropped during another unwinding, the hook's panic is
/// contained (a second panic escaping a destructor would abort). The hook panics only for
/// this test's pools (it is process-wide; other tests of this binary may drop leaky pools).
/// Miri: `cargo +nightly miri test --test soundness a_panicking_leak_hook`.
#[test]
fn a_panicking_leak_hook_does_not_stop_the_drop() {
    idxpool::brand!(HookPanics);
    idxpool::brand!(HookPanicsUnwinding);
    idxpool::leaks::set_leak_hook(|r| {
        if r.pool.starts_with("hook-panics") {
            panic!("leak hook: pool {} dropped with {} out", r.pool, r.in_use);
        }
    });
    HOOKED_DROPS.store(0, SeqCst);
    let pool = heap(PoolBuilder::<CountsDrops>::with_fn(4, CountsDrops))
        .name("hook-panics")
        .build_named::<HookPanics>()
        .unwrap();
    let h = pool.get().unwrap();
    drop(h); // leaked: never put back
    let r = catch_unwind(AssertUnwindSafe(move || drop(pool)));
    let msg = r.expect_err("the hook's panic propagates after the drop");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("leak hook: pool hook-panics dropped with 1 out"),
        "{msg}"
    );
    assert_eq!(HOOKED_DROPS.load(SeqCst), 4, "every object dropped");
    let slot = <HookPanics as idxpool::NamedBrand>::slot();
    assert!(
        !slot.is_live() && slot.is_retired(),
        "a handle is out: retired"
    );
    match heap(PoolBuilder::<CountsDrops>::with_fn(1, CountsDrops)).build_named::<HookPanics>() {
        Err(PoolError::BrandInUse { state, .. }) => assert!(state.contains("dropped"), "{state}"),
        other => panic!("expected the retired brand, got {other:?}"),
    }
    // Dropped while another panic unwinds: contained, the drop completes, no abort.
    HOOKED_DROPS.store(0, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let pool = heap(PoolBuilder::<CountsDrops>::with_fn(4, CountsDrops))
            .name("hook-panics-unwinding")
            .build_named::<HookPanicsUnwinding>()
            .unwrap();
        let h = pool.get().unwrap();
        drop(h);
        panic!("the caller's own panic");
    }));
    let msg = r.expect_err("the caller's panic");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"the caller's own panic"));
    assert_eq!(HOOKED_DROPS.load(SeqCst), 4, "every object dropped");
    assert!(<HookPanicsUnwinding as idxpool::NamedBrand>::slot().is_retired());
    idxpool::leaks::clear_leak_hook();
}

// ---- a forgotten LocalCache ------------------------------------------------------

/// `mem::forget(LocalCache)`: its objects were still counted as available (`available 64,
/// in_use 0`, the audit clean) while `get_bulk(64)` failed with `available: 48`. Now a local
/// cache's objects are its holder's (as DPDK's avail count ignores user-owned caches): after
/// the forget they count as in use, `available()` is what a get can take, and the first
/// `&mut` access (`audit()`, or the pool's drop) proves the cache's owner gone and gives them
/// back to the ring, so nothing is lost and the brand is released.
#[test]
fn a_forgotten_local_cache_is_not_counted_as_available() {
    idxpool::brand!(ForgottenCache);
    let mut pool = heap(PoolBuilder::<u64>::with_default(64))
        .cache_size(16)
        .build_named::<ForgottenCache>()
        .unwrap();
    let mut c = pool.local_cache();
    let h = c.get().unwrap(); // refills the cache from the ring
    c.put(h);
    let stranded = c.len();
    assert!(stranded > 0 && stranded < 64, "{stranded}");
    std::mem::forget(c);
    assert_eq!(
        pool.available(),
        64 - stranded,
        "the forgotten cache's objects are not free"
    );
    assert_eq!(pool.in_use(), stranded);
    // What available() says is what a get can take: all of it, and not one more.
    let mut v = Vec::new();
    match pool.get_bulk(&mut v, 64 - stranded + 1) {
        Err(PoolError::Exhausted { available, .. }) => assert_eq!(available, 64 - stranded),
        other => panic!("expected Exhausted, got {other:?}"),
    }
    pool.get_bulk(&mut v, 64 - stranded).unwrap();
    pool.put_bulk(&mut v);
    pool.flush();
    // The audit (&mut: no local cache can be alive) takes the stranded objects back.
    let r = pool.audit().unwrap();
    assert_eq!((r.in_ring + r.in_caches, r.in_use), (64, 0), "{r}");
    assert!(
        r.caches.iter().all(|(l, _)| !l.starts_with("local")),
        "{r:?}"
    );
    assert_eq!(pool.available(), 64);
    pool.get_bulk(&mut v, 64).unwrap();
    pool.put_bulk(&mut v);
    // Forgotten again, then the pool dropped: nothing is out, so the brand is released.
    let mut c = pool.local_cache();
    let h = c.get().unwrap();
    c.put(h);
    std::mem::forget(c);
    drop(pool);
    let slot = <ForgottenCache as idxpool::NamedBrand>::slot();
    assert!(
        !slot.is_live() && !slot.is_retired(),
        "every object came home"
    );
    drop(
        heap(PoolBuilder::<u64>::with_default(4))
            .build_named::<ForgottenCache>()
            .unwrap(),
    );
}

// ---- `&mut Pool` as the proof that no companion is alive ------------------------------------

/// `audit()` and the pool's drop reclaim every `LocalCache` still registered as forgotten,
/// reading `&mut Pool` as proof that none is alive. `PoolRef` is sealed to `&Pool` and
/// `Arc<Pool>` (a raw-pointer owner no longer compiles: tests/ui/pool_ref_sealed.rs); for the
/// `Arc` the proof is that `Arc::get_mut` fails while any companion's clone exists, also one
/// that was forgotten (it leaks its clone), so a live or forgotten cache's storage is never
/// reclaimed under it. Its objects stay stranded in it, counted as in use, never handed out
/// twice.
#[test]
fn an_arc_companion_keeps_mut_access_away_even_when_forgotten() {
    let mut arc = Arc::new(
        heap(PoolBuilder::<u64>::with_default(64))
            .cache_size(16)
            .build()
            .unwrap(),
    );
    let mut c = LocalCache::new(arc.clone());
    let mut v = Vec::new();
    c.get_bulk(&mut v, 16).unwrap();
    c.put_bulk(&mut v);
    let cached = c.len();
    assert!(cached > 0);
    assert!(
        Arc::get_mut(&mut arc).is_none(),
        "a live companion: no &mut Pool"
    );
    drop(c);
    let pool = Arc::get_mut(&mut arc).expect("the companion is gone: &mut Pool");
    assert_eq!(pool.audit().unwrap().in_use, 0);

    // Forgotten: `ManuallyDrop` is `mem::forget` that the test can undo at its end (so Miri's
    // leak check sees no leak of the pool).
    let mut c = std::mem::ManuallyDrop::new(LocalCache::new(arc.clone()));
    c.get_bulk(&mut v, 16).unwrap();
    c.put_bulk(&mut v);
    let stranded = c.len();
    assert!(
        Arc::get_mut(&mut arc).is_none(),
        "a forgotten companion leaks its clone: no &mut Pool, so nothing reclaims its storage"
    );
    // Every object the pool can hand out is distinct, and the stranded ones are not among them.
    let mut all = Vec::new();
    arc.get_bulk(&mut all, 64 - stranded).unwrap();
    let mut idx: Vec<u32> = all.iter().map(|h| arc.index_of(h)).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), 64 - stranded, "no object handed out twice");
    assert!(arc.get().is_err(), "the stranded objects are not free");
    arc.put_bulk(&mut all);
    drop(std::mem::ManuallyDrop::into_inner(c));
    let pool = Arc::get_mut(&mut arc).expect("the companion is gone at last");
    assert_eq!(pool.audit().unwrap().in_use, 0);
}

// ---- case 10: audit during thread-exit flushes -----------------------------------------------

/// Scoped threads fill their implicit caches and exit; the scope ends without joins, so their
/// TLS destructors flush the caches while the main thread audits in a loop. The audit locked
/// one thread slot at a time and reported "object named twice" (a cache read, then flushed
/// into the ring, then the ring read) about 1 run in 300-2000; it now holds every slot lock
/// and the registry lock for the whole snapshot. Bounded: fixed rounds, fixed audits each.
/// Against the old audit this test failed 5 of 30 runs at 200 rounds (release build, 2 vCPUs,
/// 2026-12-01); 1000 rounds take about a second.
#[test]
fn audit_is_consistent_while_threads_exit() {
    idxpool::brand!(AuditExits);
    let (rounds, threads, audits) = if cfg!(miri) {
        (3, 2, 20)
    } else {
        (1000, 4, 200)
    };
    let cap = 512;
    let mut pool = PoolBuilder::<u64>::with_default(cap)
        .cache_size(64)
        .max_threads(64)
        .build_named::<AuditExits>()
        .unwrap();
    for round in 0..rounds {
        std::thread::scope(|s| {
            for t in 0..threads {
                let pool = &pool;
                s.spawn(move || {
                    let mut v = Vec::new();
                    pool.get_bulk(&mut v, 40 + t).unwrap();
                    pool.put_bulk(&mut v);
                });
            }
        });
        for k in 0..audits {
            let rep = pool
                .audit()
                .unwrap_or_else(|e| panic!("round {round}, audit {k}: {e}"));
            assert_eq!(rep.in_use, 0);
            assert_eq!(rep.in_ring + rep.in_caches, cap as usize);
            if rep.in_caches == 0 {
                break; // every exiting thread has flushed
            }
        }
    }
}

// ---- owned companions as the last owner of their pool (found by attack, session 4) ----------

/// An `OwnedLocalCache` or `DynLocalCache` that holds the last reference to its pool and is
/// passed by value (`drop(cache)`, a by-value function argument, a `move` closure run on a
/// thread) frees the pool while the call runs. If the companion kept its pool borrow as a
/// plain reference field, that reference would be a protected function-argument reference
/// pointing at freed memory: undefined behaviour under both Stacked and Tree Borrows (Miri
/// reported it at `Arc::drop_slow`). The borrowing core is kept where the aliasing model does
/// not retag it (`owned::Dangling`, the stable form of RFC 3336's `MaybeDangling`).
#[test]
fn owned_companions_may_be_the_last_owner_of_their_pool() {
    use idxpool::{HandleRing, LocalCache, Pool, Pooled};
    use std::sync::Arc;
    idxpool::brand!(LastOwner);

    // Dropped by value after the pool's other owners.
    let pool = Arc::new(
        heap(PoolBuilder::<u64>::with_default(8))
            .build_named::<LastOwner>()
            .unwrap(),
    );
    let mut cache = LocalCache::new(pool.clone());
    let mut h = cache.get().unwrap();
    *cache.pool().get_mut(&mut h) = 1;
    cache.put(h);
    drop(pool);
    drop(cache);

    // The same through the run-time pool, and through a by-value function argument.
    struct Worker {
        cache: LocalCache<Arc<Pool<u64>>>,
    }
    fn finish(w: Worker) -> usize {
        let n = w.cache.len();
        drop(w);
        n
    }
    let pool = Arc::new(heap(PoolBuilder::<u64>::with_default(8)).build().unwrap());
    let cache = LocalCache::new(pool.clone());
    drop(pool);
    drop(cache);
    let pool = Arc::new(heap(PoolBuilder::<u64>::with_default(8)).build().unwrap());
    let w = Worker {
        cache: LocalCache::new(pool.clone()),
    };
    drop(pool);
    assert_eq!(finish(w), 0);

    // A guard and the two ring halves as the last owners.
    let pool = Arc::new(heap(PoolBuilder::<u64>::with_default(8)).build().unwrap());
    let g = Pooled::get(pool.clone()).unwrap();
    let (tx, rx) =
        HandleRing::new(pool.clone(), 4, idxpool::handle_ring::Zeroing::Immediate).unwrap();
    drop(pool);
    drop(tx);
    drop(g);
    drop(rx);

    // README's spawn pattern, with the spawning thread's pool dropped first.
    let pool = Arc::new(heap(PoolBuilder::<u64>::with_default(8)).build().unwrap());
    let mut cache = LocalCache::new(pool.clone());
    drop(pool);
    std::thread::spawn(move || {
        let mut h = cache.get().unwrap();
        *cache.pool().get_mut(&mut h) = 2;
        assert_eq!(*cache.pool().get_ref(&h), 2);
        cache.put(h);
    })
    .join()
    .unwrap();
}

/// Found by attack (session 7): `Ring::new` accepted `single_producer` from safe code, and a
/// `Ring` is `Sync`, so two threads could enqueue into one single-producer ring: a data race
/// on the slots (Miri) and lost entries (natively). The single-thread modes now need the
/// `unsafe` constructor; the safe one refuses them with a typed error.
#[test]
fn single_thread_ring_modes_need_unsafe() {
    use idxpool::ring::{Ring, RingFlags};
    for (sp, sc) in [(true, false), (false, true), (true, true)] {
        let flags = RingFlags {
            single_producer: sp,
            single_consumer: sc,
            ..RingFlags::default()
        };
        assert!(
            matches!(
                Ring::<u64>::new(1024, flags),
                Err(idxpool::PoolError::InvalidConfig { .. })
            ),
            "sp={sp} sc={sc}"
        );
    }
    // The safe ring is multi-producer: two threads enqueueing lose nothing.
    let ring = Ring::<u64>::new(1024, RingFlags::default()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let r = &ring;
            s.spawn(move || {
                for _ in 0..if cfg!(miri) { 10 } else { 100 } {
                    assert!(r.enqueue_bulk(&[7u64; 4]));
                    let mut out = [std::mem::MaybeUninit::uninit(); 4];
                    assert!(r.dequeue_bulk(&mut out));
                }
            });
        }
    });
    assert_eq!(ring.count(), 0);
}
