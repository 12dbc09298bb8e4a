//! Model-based property tests: random sequences of get / put / get_bulk / put_bulk /
//! get_burst / get_array / flush over the implicit per-thread cache and two explicit
//! `LocalCache`s, under every flush policy, with small capacities and cache sizes, for both
//! entry representations (index pool and pointer twin), checked step by step against a simple
//! model of what the pool must do when one thread uses it:
//!
//! * conservation: `available() + held + held by the local caches == capacity` after every
//!   step (a `LocalCache`'s objects are its holder's, not counted as available);
//! * bulk is all-or-nothing: a failed `get_bulk` leaves the vector unchanged, and fails exactly
//!   when the caller's cache plus the common ring held fewer than `n` objects (never spuriously,
//!   the DPDK bug "a get that failed although cache + ring held enough"); its `Exhausted`
//!   error reports that reachable count;
//! * burst is best effort: `get_burst(n)` returns `min(n, reachable)`;
//! * handles are distinct: no index is handed out while held, and each object keeps the stamp
//!   written through its handle until it is put back (no two handles alias one object);
//! * every cache stays within its flush threshold; a flush empties the cache into the ring;
//! * `audit()` passes at the end and finds every object in the ring once the caches are gone.

use std::collections::HashMap;

use idxpool::repr::Repr;
use idxpool::{Brand, FlushPolicy, Handle, LocalCache, Pool, PoolError};
use proptest::prelude::*;

/// Which cache an operation goes through.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// `pool.get()` etc.: the calling thread's implicit cache.
    Implicit,
    /// One of two explicit `LocalCache`s.
    Local(usize),
}

#[derive(Clone, Debug)]
enum Op {
    Get(Via),
    GetBulk(Via, usize),
    GetBurst(Via, usize),
    /// Explicit caches only: `get_array::<4>` (bulk size known at compile time).
    GetArray4(usize),
    /// Puts the held handle at position `k % held` (through `put`).
    Put(Via, usize),
    /// Puts `n` held handles starting at position `k % held` (through `put_bulk`).
    PutBulk(Via, usize, usize),
    /// Explicit caches only: `put_bulk_tail` of the last `n` held handles.
    PutBulkTail(usize, usize),
    /// Explicit caches only: `put_array` of 4 held handles, if at least 4 are held.
    PutArray4(usize),
    /// `get_into` a table of `n` empty slots; `occupied` puts one held handle in the slot
    /// `k % n` first (then the get must fail with `SlotOccupied` and move nothing).
    GetInto(Via, usize, Option<usize>),
    /// `put_from` a table of up to `n` held handles starting at `k % held`; `hole` leaves the
    /// slot `j % len` empty (then the put must fail with `SlotEmpty` and move nothing).
    PutFrom(Via, usize, usize, Option<usize>),
    Flush(Via),
}

fn via() -> impl Strategy<Value = Via> {
    prop_oneof![Just(Via::Implicit), (0..2usize).prop_map(Via::Local)]
}

fn op(max_n: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => via().prop_map(Op::Get),
        3 => (via(), 0..=max_n).prop_map(|(v, n)| Op::GetBulk(v, n)),
        2 => (via(), 0..=max_n).prop_map(|(v, n)| Op::GetBurst(v, n)),
        1 => (0..2usize).prop_map(Op::GetArray4),
        4 => (via(), any::<usize>()).prop_map(|(v, k)| Op::Put(v, k)),
        3 => (via(), any::<usize>(), 0..=max_n).prop_map(|(v, k, n)| Op::PutBulk(v, k, n)),
        1 => (0..2usize, 0..=max_n).prop_map(|(c, n)| Op::PutBulkTail(c, n)),
        1 => (0..2usize).prop_map(Op::PutArray4),
        3 => (via(), 0..=max_n, prop::option::weighted(0.15, any::<usize>()))
            .prop_map(|(v, n, o)| Op::GetInto(v, n, o)),
        3 => (via(), any::<usize>(), 0..=max_n, prop::option::weighted(0.15, any::<usize>()))
            .prop_map(|(v, k, n, h)| Op::PutFrom(v, k, n, h)),
        1 => via().prop_map(Op::Flush),
    ]
}

/// A valid configuration: policy, capacity 1..=40, cache size within the policy's limit
/// (0 = no cache), and a sequence of operations with request sizes up to a little more than
/// the capacity (so that bulk requests larger than the pool are exercised too).
/// Longest operation sequence (shorter under Miri, which is ~1000x slower).
const MAX_OPS: usize = if cfg!(miri) { 30 } else { 80 };

fn config() -> impl Strategy<Value = (FlushPolicy, u32, u32, Vec<Op>)> {
    (
        prop_oneof![
            Just(FlushPolicy::Classic),
            Just(FlushPolicy::Dpdk2607),
            Just(FlushPolicy::SizeAligned)
        ],
        1u32..=40,
    )
        .prop_flat_map(|(policy, cap)| {
            let max_size = match policy {
                FlushPolicy::Classic => cap * 2 / 3,
                _ => cap,
            }
            .min(16);
            (
                Just(policy),
                Just(cap),
                0..=max_size,
                prop::collection::vec(op(cap as usize + 3), 1..MAX_OPS),
            )
        })
}

/// The single-threaded model of a pool: the handles the test holds, with the stamp written
/// into each object through its handle.
struct Model<T, B, R: Repr> {
    held: Vec<Handle<T, B, R>>,
    stamps: HashMap<u32, u64>,
    next_stamp: u64,
}

/// Runs `ops` on `pool` and checks the model after each step.
fn run<B: Brand, R: Repr>(
    mut pool: Pool<u64, B, R>,
    policy: FlushPolicy,
    cache_size: u32,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let cap = pool.capacity() as usize;
    let limit = policy.fill_limit(cache_size) as usize;
    let mut m = Model::<u64, B, R> {
        held: Vec::new(),
        stamps: HashMap::new(),
        next_stamp: 1,
    };
    {
        let pool = &pool;
        let mut locals: [LocalCache<&'_ Pool<u64, B, R>>; 2] =
            [pool.local_cache(), pool.local_cache()];
        // Objects reachable by a caller through `via`: its cache plus the common ring.
        let reachable = |locals: &[LocalCache<&'_ Pool<u64, B, R>>; 2], via: Via| -> usize {
            match via {
                Via::Local(i) => locals[i].len() + pool.ring_count(),
                // available(): the ring plus the implicit caches (this thread's only; the
                // local caches' objects are their holder's).
                Via::Implicit => pool.available(),
            }
        };
        for (step, op) in ops.iter().enumerate() {
            let before = m.held.len();
            match *op {
                Op::Get(via) => {
                    let r = reachable(&locals, via);
                    let got = match via {
                        Via::Implicit => pool.get(),
                        Via::Local(i) => locals[i].get(),
                    };
                    match got {
                        Ok(h) => take(pool, &mut m, vec![h])?,
                        Err(PoolError::Exhausted {
                            requested,
                            available,
                        }) => {
                            prop_assert_eq!(r, 0, "step {}: get failed with {} reachable", step, r);
                            prop_assert_eq!((requested, available), (1, 0));
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                    }
                }
                Op::GetBulk(via, n) => {
                    let r = reachable(&locals, via);
                    let mut v: Vec<Handle<u64, B, R>> = Vec::new();
                    let res = match via {
                        Via::Implicit => pool.get_bulk(&mut v, n),
                        Via::Local(i) => locals[i].get_bulk(&mut v, n),
                    };
                    match res {
                        Ok(()) => {
                            prop_assert!(r >= n, "step {step}: bulk {n} succeeded, {r} reachable");
                            prop_assert_eq!(v.len(), n);
                            take(pool, &mut m, v)?;
                        }
                        Err(PoolError::Exhausted {
                            requested,
                            available,
                        }) => {
                            prop_assert!(
                                r < n,
                                "step {}: bulk {} failed although {} were reachable ({:?})",
                                step,
                                n,
                                r,
                                via
                            );
                            prop_assert!(v.is_empty(), "step {step}: failed bulk changed out");
                            prop_assert_eq!(requested, n);
                            prop_assert_eq!(available, r, "step {}: Exhausted.available", step);
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                    }
                }
                Op::GetBurst(via, n) => {
                    let r = reachable(&locals, via);
                    let mut v = Vec::new();
                    let got = match via {
                        Via::Implicit => pool.get_burst(&mut v, n),
                        Via::Local(i) => locals[i].get_burst(&mut v, n),
                    };
                    prop_assert_eq!(
                        got,
                        n.min(r),
                        "step {}: burst {} with {} reachable",
                        step,
                        n,
                        r
                    );
                    prop_assert_eq!(v.len(), got);
                    take(pool, &mut m, v)?;
                }
                Op::GetArray4(i) => {
                    let r = reachable(&locals, Via::Local(i));
                    match locals[i].get_array::<4>() {
                        Ok(arr) => {
                            prop_assert!(r >= 4, "step {step}: array of 4 with {r} reachable");
                            take(pool, &mut m, arr.into_iter().collect())?;
                        }
                        Err(PoolError::Exhausted { available, .. }) => {
                            prop_assert!(r < 4, "step {step}: array of 4 failed, {r} reachable");
                            prop_assert_eq!(available, r);
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                    }
                }
                Op::Put(via, k) => {
                    if m.held.is_empty() {
                        continue;
                    }
                    let h = m.held.swap_remove(k % m.held.len());
                    check_stamp(pool, &mut m, &h)?;
                    match via {
                        Via::Implicit => pool.put(h),
                        Via::Local(i) => locals[i].put(h),
                    }
                }
                Op::PutBulk(via, k, n) => {
                    let mut v = give(pool, &mut m, k, n)?;
                    match via {
                        Via::Implicit => pool.put_bulk(&mut v),
                        Via::Local(i) => locals[i].put_bulk(&mut v),
                    }
                    prop_assert!(v.is_empty(), "put_bulk drains its vector");
                }
                Op::PutBulkTail(i, n) => {
                    // Put the last n of all held handles; the rest stay held.
                    let len = m.held.len();
                    for h in &m.held[len - n.min(len)..] {
                        check_stamp_ref(pool, &m, h)?;
                    }
                    for h in &m.held[len - n.min(len)..] {
                        m.stamps.remove(&pool.index_of(h));
                    }
                    locals[i].put_bulk_tail(&mut m.held, n);
                    prop_assert_eq!(m.held.len(), len - n.min(len));
                }
                Op::PutArray4(i) => {
                    if m.held.len() < 4 {
                        continue;
                    }
                    let v = give(pool, &mut m, 0, 4)?;
                    let arr: [Handle<u64, B, R>; 4] = v.try_into().expect("4 handles");
                    locals[i].put_array(arr);
                }
                Op::GetInto(via, n, occupied) => {
                    let r = reachable(&locals, via);
                    let mut table: Vec<Option<Handle<u64, B, R>>> = (0..n).map(|_| None).collect();
                    // A held handle in one slot: the get must refuse and leave it there.
                    let planted = match occupied {
                        Some(k) if n > 0 && !m.held.is_empty() => {
                            let j = k % n;
                            table[j] = m.held.pop();
                            Some(j)
                        }
                        _ => None,
                    };
                    let res = match via {
                        Via::Implicit => pool.get_into(&mut table),
                        Via::Local(i) => locals[i].get_into(&mut table),
                    };
                    if let Some(j) = planted {
                        prop_assert!(
                            matches!(res, Err(PoolError::SlotOccupied { index, len }) if index == j && len == n),
                            "step {}: get_into over an occupied slot {} gave {:?}",
                            step,
                            j,
                            res.as_ref().err()
                        );
                        prop_assert_eq!(reachable(&locals, via), r, "step {}: moved", step);
                        prop_assert_eq!(table.iter().filter(|s| s.is_some()).count(), 1);
                        m.held
                            .push(table[j].take().expect("the planted handle stays"));
                    } else {
                        match res {
                            Ok(()) => {
                                prop_assert!(
                                    r >= n,
                                    "step {step}: get_into {n} succeeded, {r} reachable"
                                );
                                let hs: Vec<_> = table
                                    .iter_mut()
                                    .map(|s| s.take().expect("every slot filled"))
                                    .collect();
                                take(pool, &mut m, hs)?;
                            }
                            Err(PoolError::Exhausted {
                                requested,
                                available,
                            }) => {
                                prop_assert!(
                                    r < n,
                                    "step {step}: get_into {n} failed, {r} reachable"
                                );
                                prop_assert!(table.iter().all(Option::is_none));
                                prop_assert_eq!(requested, n);
                                prop_assert_eq!(available, r, "step {}: Exhausted.available", step);
                            }
                            Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
                        }
                    }
                }
                Op::PutFrom(via, k, n, hole) => {
                    let v = give(pool, &mut m, k, n)?;
                    let len = v.len();
                    let mut table: Vec<Option<Handle<u64, B, R>>> =
                        v.into_iter().map(Some).collect();
                    let hole = match hole {
                        Some(j) if len > 0 => {
                            let j = j % len;
                            let h = table[j].take().expect("full");
                            m.stamps.insert(pool.index_of(&h), *pool.get_ref(&h));
                            m.held.push(h);
                            Some(j)
                        }
                        _ => None,
                    };
                    let r = reachable(&locals, via);
                    let res = match via {
                        Via::Implicit => pool.put_from(&mut table),
                        Via::Local(i) => locals[i].put_from(&mut table),
                    };
                    match hole {
                        Some(j) => {
                            prop_assert!(
                                matches!(res, Err(PoolError::SlotEmpty { index, len: l }) if index == j && l == len),
                                "step {}: put_from with a hole at {} gave {:?}",
                                step,
                                j,
                                res.as_ref().err()
                            );
                            prop_assert_eq!(reachable(&locals, via), r, "step {}: moved", step);
                            // Nothing moved: take the rest back, stamps and all.
                            let hs: Vec<_> = table.iter_mut().filter_map(Option::take).collect();
                            for h in hs {
                                m.stamps.insert(pool.index_of(&h), *pool.get_ref(&h));
                                m.held.push(h);
                            }
                        }
                        None => {
                            prop_assert!(res.is_ok(), "step {}: put_from: {:?}", step, res.err());
                            prop_assert!(
                                table.iter().all(Option::is_none),
                                "put_from empties its table"
                            );
                        }
                    }
                }
                Op::Flush(via) => {
                    let ring_before = pool.ring_count();
                    let cached = match via {
                        Via::Implicit => {
                            let c = reachable(&locals, Via::Implicit) - ring_before;
                            pool.flush();
                            c
                        }
                        Via::Local(i) => {
                            let c = locals[i].len();
                            locals[i].flush();
                            prop_assert!(locals[i].is_empty());
                            c
                        }
                    };
                    prop_assert_eq!(pool.ring_count(), ring_before + cached, "step {}", step);
                }
            }
            // Conservation, distinctness (checked in take), and thresholds, after every step.
            let local_total: usize = locals.iter().map(|c| c.len()).sum();
            prop_assert_eq!(
                pool.available() + m.held.len() + local_total,
                cap,
                "step {}: {:?} (held before {}) broke conservation",
                step,
                op,
                before
            );
            prop_assert_eq!(pool.in_use(), m.held.len() + local_total);
            for (label, n) in pool.cache_counts() {
                prop_assert!(
                    n <= limit,
                    "step {step}: cache {label} holds {n} > threshold {limit}"
                );
            }
        }
        // Every object still held must still carry its stamp; then give them all back.
        for h in &m.held {
            check_stamp_ref(pool, &m, h)?;
        }
        let mut all = std::mem::take(&mut m.held);
        locals[0].put_bulk(&mut all);
        let local_total: usize = locals.iter().map(|c| c.len()).sum();
        prop_assert_eq!(pool.available() + local_total, cap);
        // Dropping the explicit caches flushes them into the ring.
        drop(locals);
        prop_assert!(pool.is_full());
        pool.flush();
        prop_assert_eq!(pool.ring_count(), cap);
    }
    let rep = pool
        .audit()
        .map_err(|e| TestCaseError::fail(format!("audit: {e}")))?;
    prop_assert_eq!(rep.in_use, 0);
    prop_assert_eq!(rep.in_ring, cap);
    prop_assert_eq!(rep.in_caches, 0);
    Ok(())
}

/// Takes ownership of freshly got handles: each index must be new (not held), and gets a
/// fresh stamp written through `get_mut`.
fn take<B: Brand, R: Repr>(
    pool: &Pool<u64, B, R>,
    m: &mut Model<u64, B, R>,
    hs: Vec<Handle<u64, B, R>>,
) -> Result<(), TestCaseError> {
    for mut h in hs {
        let i = pool.index_of(&h);
        prop_assert!(
            (i as usize) < pool.capacity() as usize,
            "index {i} out of range"
        );
        prop_assert!(!m.stamps.contains_key(&i), "object {i} handed out twice");
        let s = m.next_stamp;
        m.next_stamp += 1;
        *pool.get_mut(&mut h) = s;
        m.stamps.insert(i, s);
        m.held.push(h);
    }
    Ok(())
}

fn check_stamp_ref<B: Brand, R: Repr>(
    pool: &Pool<u64, B, R>,
    m: &Model<u64, B, R>,
    h: &Handle<u64, B, R>,
) -> Result<(), TestCaseError> {
    let i = pool.index_of(h);
    prop_assert_eq!(
        Some(pool.get_ref(h)),
        m.stamps.get(&i),
        "object {} lost its stamp",
        i
    );
    Ok(())
}

fn check_stamp<B: Brand, R: Repr>(
    pool: &Pool<u64, B, R>,
    m: &mut Model<u64, B, R>,
    h: &Handle<u64, B, R>,
) -> Result<(), TestCaseError> {
    check_stamp_ref(pool, m, h)?;
    m.stamps.remove(&pool.index_of(h));
    Ok(())
}

/// Removes up to `n` held handles starting at `k % held` (checking their stamps) for a put.
fn give<B: Brand, R: Repr>(
    pool: &Pool<u64, B, R>,
    m: &mut Model<u64, B, R>,
    k: usize,
    n: usize,
) -> Result<Vec<Handle<u64, B, R>>, TestCaseError> {
    if m.held.is_empty() {
        return Ok(Vec::new());
    }
    let start = k % m.held.len();
    let end = (start + n).min(m.held.len());
    let v: Vec<_> = m.held.drain(start..end).collect();
    for h in &v {
        check_stamp(pool, m, h)?;
    }
    Ok(v)
}

fn proptest_config() -> ProptestConfig {
    if cfg!(miri) {
        // Miri runs a handful of cases (it is ~1000x slower) and cannot write regression files.
        ProptestConfig {
            cases: 3,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    } else {
        ProptestConfig::with_cases(300)
    }
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn index_pool_matches_model((policy, cap, size, ops) in config()) {
        idxpool::PoolBuilder::<u64>::with_default(cap)
            .cache_size(size)
            .policy(policy)
            .scoped(|pool| run(pool, policy, size, &ops))
            .map_err(|e| TestCaseError::fail(format!("build: {e}")))??;
    }

    #[test]
    fn pointer_pool_matches_model((policy, cap, size, ops) in config()) {
        idxpool::PoolBuilder::<u64>::with_default(cap)
            .cache_size(size)
            .policy(policy)
            .repr::<idxpool::Pointer>().scoped(|pool| run(pool, policy, size, &ops))
            .map_err(|e| TestCaseError::fail(format!("build: {e}")))??;
    }

    #[test]
    fn offset_pool_matches_model((policy, cap, size, ops) in config()) {
        idxpool::PoolBuilder::<u64>::with_default(cap)
            .cache_size(size)
            .policy(policy)
            .repr::<idxpool::Offset>().scoped(|pool| run(pool, policy, size, &ops))
            .map_err(|e| TestCaseError::fail(format!("build: {e}")))??;
    }

    #[test]
    fn index_pool_matches_model_explicitly((policy, cap, size, ops) in config()) {
        idxpool::PoolBuilder::<u64>::with_default(cap)
            .cache_size(size)
            .policy(policy)
            .repr::<idxpool::Index>().scoped(|pool| run(pool, policy, size, &ops))
            .map_err(|e| TestCaseError::fail(format!("build: {e}")))??;
    }
}

/// The failure mode DPDK once had: objects split between the cache and the ring, a bulk get
/// of all of them must still succeed (here for every policy and cache size, deterministic).
#[test]
fn bulk_of_everything_succeeds_when_split_between_cache_and_ring() {
    for policy in FlushPolicy::ALL {
        for size in [1u32, 2, 3, 8] {
            let cap = 12;
            if policy.validate(size, cap).is_err() {
                continue;
            }
            idxpool::PoolBuilder::<u64>::with_default(cap)
                .cache_size(size)
                .policy(policy)
                .scoped(|pool| {
                    let mut c = pool.local_cache();
                    let mut v = Vec::new();
                    c.get_bulk(&mut v, 5).unwrap();
                    c.put_bulk(&mut v);
                    c.get_bulk(&mut v, cap as usize)
                        .unwrap_or_else(|e| panic!("{policy}/{size}: {e}"));
                    assert_eq!(v.len(), cap as usize);
                    c.put_bulk(&mut v);
                })
                .unwrap();
        }
    }
}
