//! Loom models of the lock-free core: the common ring (MPMC, SP/SC, bulk and burst, counter
//! wrap), user-owned caches flushing to and refilling from the ring while another thread
//! does the same, and `Pool::grow` publishing new objects while another thread gets them.
//!
//! Run with `scripts/loom.sh`, or:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom
//! ```
//!
//! Every model is small (capacities of 1-4 entries, one to three operations per thread): the
//! ring models run with a preemption bound of 1-3, the cache models exhaustively, and the
//! whole file takes about a minute on 2 cores (each test prints how many executions it
//! explored).
//! Under `--cfg loom`, `src/sync.rs` swaps the ring's head/tail counters, the caches' lengths
//! and the slot pointers for loom's atomics, and the ring shadows each slot with a
//! `loom::cell::UnsafeCell`, so loom checks both the counter protocol and that every slot write
//! happens-before the read that consumes it (and every read before the overwrite).
//!
//! Not modelled: the implicit per-thread caches (`pool.get()`), which rely on `thread_local!`
//! (loom runs all model threads on one OS thread, so std TLS would be shared), and concurrent
//! `available()` / `audit()` (they take a std `Mutex` that loom does not see).
#![cfg(loom)]

use std::mem::MaybeUninit;
use std::sync::atomic::AtomicU32 as StdAtomicU32;
use std::sync::atomic::Ordering::Relaxed;

use idxpool::ring::{Ring, RingFlags};
use idxpool::{Backing, BackingPolicy, FlushPolicy, Handle, PoolBuilder};
use loom::sync::Arc;
use loom::thread;

/// A model runner. `bound` is the preemption bound (the number of involuntary context switches
/// per execution loom explores; `None` = exhaustive); `LOOM_MAX_PREEMPTIONS` overrides it.
/// Prints how many executions were explored.
fn model(bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    model_with(bound, 1_000, f)
}

/// [`model`] with loom's limit of scheduling points per execution (`max_branches`).
fn model_with(bound: Option<usize>, max_branches: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = max_branches;
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        b.preemption_bound = bound;
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = runs.clone();
    b.check(move || {
        r.fetch_add(1, Relaxed);
        f()
    });
    println!(
        "loom explored {} executions (preemption bound {:?})",
        runs.load(Relaxed),
        b.preemption_bound
    );
}

fn flags(sp: bool, sc: bool, exact: bool) -> RingFlags {
    RingFlags {
        single_producer: sp,
        single_consumer: sc,
        exact_size: exact,
    }
}

/// Dequeues up to `n` entries (bulk or burst) and returns them.
fn deq(r: &Ring<u32>, n: usize, bulk: bool) -> Vec<u32> {
    let mut buf = vec![MaybeUninit::<u32>::uninit(); n];
    let got = if bulk {
        if r.dequeue_bulk(&mut buf) {
            n
        } else {
            0
        }
    } else {
        r.dequeue_burst(&mut buf)
    };
    // SAFETY: the ring wrote the first `got` entries.
    buf[..got]
        .iter()
        .map(|x| unsafe { x.assume_init() })
        .collect()
}

/// Checks what producers put in against what consumers took out plus what is left: every
/// enqueued entry comes out exactly once, nothing else comes out, and entries of one producer
/// come out in the order it enqueued them (FIFO), in every consumer's sequence.
fn check_conservation(enqueued: &[Vec<u32>], dequeued: &[Vec<u32>]) {
    let mut want: Vec<u32> = enqueued.iter().flatten().copied().collect();
    let mut got: Vec<u32> = dequeued.iter().flatten().copied().collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "enqueued {enqueued:?} dequeued {dequeued:?}");
    for seq in dequeued {
        for w in seq.windows(2) {
            // Entries are producer * 100 + sequence number.
            if w[0] / 100 == w[1] / 100 {
                assert!(w[0] < w[1], "FIFO broken: {seq:?}");
            }
        }
    }
}

/// Two producers and two consumers on a tiny ring. Each producer makes `tries` attempts to
/// enqueue its batch of `batch` entries; each consumer makes `tries` attempts to dequeue up to
/// `batch`. The main thread then drains the ring and checks conservation and FIFO order.
fn mpmc(capacity: u32, exact: bool, start: u32, batch: u32, bulk: bool, tries: usize) {
    let ring = Arc::new(
        // SAFETY: multi-producer, multi-consumer: no contract.
        unsafe { Ring::<u32>::with_start_counter(capacity, flags(false, false, exact), start) }
            .unwrap(),
    );
    let producers: Vec<_> = (1..=2u32)
        .map(|p| {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut next = p * 100;
                let mut sent = Vec::new();
                for _ in 0..tries {
                    let src: Vec<u32> = (next..next + batch).collect();
                    let n = if bulk {
                        if ring.enqueue_bulk(&src) {
                            src.len()
                        } else {
                            0
                        }
                    } else {
                        ring.enqueue_burst(&src)
                    };
                    assert!(n <= src.len());
                    sent.extend_from_slice(&src[..n]);
                    next += n as u32;
                }
                sent
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..tries {
                    got.extend(deq(&ring, batch as usize, bulk));
                }
                got
            })
        })
        .collect();
    let enqueued: Vec<Vec<u32>> = producers.into_iter().map(|h| h.join().unwrap()).collect();
    let mut dequeued: Vec<Vec<u32>> = consumers.into_iter().map(|h| h.join().unwrap()).collect();
    let left = ring.count();
    let rest = deq(&ring, left, true);
    assert_eq!(rest.len(), left);
    assert_eq!(ring.count(), 0);
    assert_eq!(ring.free_count(), ring.capacity());
    dequeued.push(rest);
    check_conservation(&enqueued, &dequeued);
}

#[test]
fn ring_mpmc_bulk_two_slots_wrapping_counters() {
    // Exact capacity 2 (2 slots), counters start 1 before 2^32: the model crosses the wrap.
    model(Some(2), || mpmc(2, true, u32::MAX - 1, 2, true, 1));
}

#[test]
fn ring_mpmc_bulk_four_slots() {
    // Capacity 3 (4 slots): batches of 2 force one bulk of each pair to fail or wait.
    model(Some(2), || mpmc(3, false, 0, 2, true, 1));
}

#[test]
fn ring_mpmc_burst_three_slots() {
    // Exact capacity 3 (4 slots), bursts of 2: partial transfers.
    model(Some(2), || mpmc(3, true, u32::MAX, 2, false, 1));
}

#[test]
fn ring_mpmc_one_slot_reused() {
    // Exact capacity 1 (1 slot): every transfer reuses the same slot, so each write must be
    // ordered after the previous read of it (checked through the ring's loom shadow cells).
    model(Some(2), || mpmc(1, true, u32::MAX, 1, true, 1));
}

#[test]
fn ring_mpmc_single_entries_two_rounds() {
    // Capacity 2, each thread moves single entries twice. 4 threads x 2 rounds is the largest
    // model here, so it runs with preemption bound 1.
    model(Some(1), || mpmc(2, true, 0, 1, true, 2));
}

#[test]
fn ring_spsc_fifo() {
    // One producer, one consumer, single-producer/single-consumer mode: no CAS, no tail wait.
    model(Some(3), || {
        let ring = Arc::new(
            // SAFETY: the model has one producer thread and one consumer thread.
            unsafe { Ring::<u32>::with_start_counter(2, flags(true, true, true), u32::MAX - 1) }
                .unwrap(),
        );
        let r = ring.clone();
        let prod = thread::spawn(move || {
            let mut sent = Vec::new();
            for k in 0..3u32 {
                let v = 100 + k;
                if r.enqueue_burst(&[v]) == 1 {
                    sent.push(v);
                } else {
                    break; // keep FIFO: never skip a value
                }
            }
            sent
        });
        let r = ring.clone();
        let cons = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                got.extend(deq(&r, 2, false));
            }
            got
        });
        let sent = prod.join().unwrap();
        let mut got = cons.join().unwrap();
        let left = ring.count();
        got.extend(deq(&ring, left, true));
        assert_eq!(got, sent, "SP/SC ring must be exactly FIFO");
        assert_eq!(ring.count(), 0);
    });
}

#[test]
fn ring_mpsc_bulk_vs_sc_burst() {
    // Two producers (MP), one consumer in single-consumer mode.
    model(Some(2), || {
        // SAFETY: one consumer thread (the main thread of the model).
        let ring = Arc::new(
            unsafe { Ring::<u32>::with_start_counter(2, flags(false, true, true), 0) }.unwrap(),
        );
        let producers: Vec<_> = (1..=2u32)
            .map(|p| {
                let r = ring.clone();
                thread::spawn(move || {
                    let v = p * 100;
                    if r.enqueue_bulk(&[v]) {
                        vec![v]
                    } else {
                        vec![]
                    }
                })
            })
            .collect();
        let r = ring.clone();
        let cons = thread::spawn(move || deq(&r, 2, false));
        let enqueued: Vec<Vec<u32>> = producers.into_iter().map(|h| h.join().unwrap()).collect();
        let mut dequeued = vec![cons.join().unwrap()];
        let left = ring.count();
        dequeued.push(deq(&ring, left, true));
        check_conservation(&enqueued, &dequeued);
    });
}

// ---- caches over the ring ----------------------------------------------------------------

idxpool::brand!(LoomClassic);
idxpool::brand!(LoomDpdk2607);
idxpool::brand!(LoomAligned);
idxpool::brand!(LoomBurst);

/// An object that records which thread owns it: 0 = free, else the owner's id. A second
/// handout of an object that is still held shows up as a non-zero stamp on get.
type Obj = StdAtomicU32;

fn stamp_get<B: idxpool::Brand>(pool: &idxpool::Pool<Obj, B>, h: &Handle<Obj, B>, me: u32) {
    let prev = pool.get_ref(h).swap(me, Relaxed);
    assert_eq!(
        prev,
        0,
        "object {} handed out twice (held by {prev}, given to {me})",
        pool.index_of(h)
    );
}

fn stamp_put<B: idxpool::Brand>(pool: &idxpool::Pool<Obj, B>, h: &Handle<Obj, B>, me: u32) {
    let prev = pool.get_ref(h).swap(0, Relaxed);
    assert_eq!(
        prev,
        me,
        "object {} put by {me} but stamped {prev}",
        pool.index_of(h)
    );
}

/// Two threads, each with its own LocalCache over a pool of `capacity` objects and caches of
/// `cache_size`, do `rounds` x (a bulk get of 2, single puts, a single get and put), then drop
/// the cache (flush). Every get may fail (the other thread's cache can hold what is missing); what
/// matters is that no object is handed out twice and that all come home.
fn cache_race<B: idxpool::NamedBrand + Send + Sync>(
    policy: FlushPolicy,
    capacity: u32,
    cache_size: u32,
    rounds: usize,
) {
    let pool = Arc::new(
        PoolBuilder::<Obj>::with_default(capacity)
            .cache_size(cache_size)
            .policy(policy)
            .backing(BackingPolicy::Require(Backing::Heap))
            .max_threads(1)
            .build_named::<B>()
            .unwrap(),
    );
    let workers: Vec<_> = (1..=2u32)
        .map(|me| {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut c = pool.local_cache();
                let mut v = Vec::new();
                for _ in 0..rounds {
                    if c.get_bulk(&mut v, 2).is_ok() {
                        assert_eq!(v.len(), 2);
                        for h in &v {
                            stamp_get(&pool, h, me);
                        }
                        while let Some(h) = v.pop() {
                            stamp_put(&pool, &h, me);
                            c.put(h);
                        }
                    } else {
                        assert!(v.is_empty(), "failed bulk left handles in the vector");
                    }
                    if let Ok(h) = c.get() {
                        stamp_get(&pool, &h, me);
                        stamp_put(&pool, &h, me);
                        c.put(h);
                    }
                }
                drop(c); // flushes into the ring
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut pool = Arc::try_unwrap(pool).unwrap_or_else(|_| panic!("pool still shared"));
    assert_eq!(
        pool.ring_count(),
        capacity as usize,
        "every object back in the ring"
    );
    assert_eq!(pool.available(), capacity as usize);
    let rep = pool.audit().expect("audit after the race");
    assert_eq!(rep.in_use, 0);
    assert_eq!(rep.in_ring, capacity as usize);
}

/// Rounds of get/put per thread in the cache models (explored exhaustively).
const ROUNDS: usize = 3;

#[test]
fn cache_race_classic() {
    // Classic, size 2: threshold 3 == capacity; refill takes size + n - len from the ring.
    model(None, || {
        cache_race::<LoomClassic>(FlushPolicy::Classic, 3, 2, ROUNDS)
    });
}

#[test]
fn cache_race_dpdk2607() {
    // Dpdk2607, size 2: refill and flush of size/2 = 1 object; bulk of 2 bypasses the cache.
    model(None, || {
        cache_race::<LoomDpdk2607>(FlushPolicy::Dpdk2607, 3, 2, ROUNDS)
    });
}

#[test]
fn cache_race_size_aligned() {
    // SizeAligned, size 1: threshold 2, every transfer exactly 1 object.
    model(None, || {
        cache_race::<LoomAligned>(FlushPolicy::SizeAligned, 3, 1, ROUNDS)
    });
}

#[test]
fn cache_burst_and_flush_race() {
    // A thread doing bursts through its cache against one doing single gets/puts and an
    // explicit flush, on a pool of 2 objects with caches of 1.
    model(None, || {
        let pool = Arc::new(
            PoolBuilder::<Obj>::with_default(2)
                .cache_size(1)
                .policy(FlushPolicy::Dpdk2607)
                .backing(BackingPolicy::Require(Backing::Heap))
                .max_threads(1)
                .build_named::<LoomBurst>()
                .unwrap(),
        );
        let p = pool.clone();
        let a = thread::spawn(move || {
            let mut c = p.local_cache();
            let mut v = Vec::new();
            let n = c.get_burst(&mut v, 2);
            assert_eq!(n, v.len());
            for h in &v {
                stamp_get(&p, h, 1);
            }
            for h in &v {
                stamp_put(&p, h, 1);
            }
            c.put_bulk(&mut v);
            assert!(v.is_empty());
        });
        let p = pool.clone();
        let b = thread::spawn(move || {
            let mut c = p.local_cache();
            if let Ok(h) = c.get() {
                stamp_get(&p, &h, 2);
                stamp_put(&p, &h, 2);
                c.put(h);
            }
            c.flush();
            assert!(c.is_empty());
        });
        a.join().unwrap();
        b.join().unwrap();
        let mut pool = Arc::try_unwrap(pool).unwrap_or_else(|_| panic!("pool still shared"));
        assert_eq!(pool.available(), 2);
        assert_eq!(pool.audit().unwrap().in_ring, 2);
    });
}

// ---- growth: publication of new objects ---------------------------------------

idxpool::brand!(LoomGrow);

/// One thread grows a pool of 1 object (maximum 2) while another gets and puts through its
/// own cache of size 0 (every get from the ring). Objects are loom cells, written by the
/// initialiser inside `grow`: loom checks that the initialisation happens-before the getter's
/// read (the ring's release/acquire), and that a reader that sees the new capacity
/// (`Acquire`) sees the new object in the ring or in its hands (published after enqueued).
#[test]
fn grow_publishes_initialised_objects() {
    model(None, || {
        type Cell = loom::cell::UnsafeCell<u32>;
        let pool = Arc::new(
            PoolBuilder::<Cell>::with_fn(1, Cell::new)
                .max_capacity(2)
                .cache_size(0)
                .backing(BackingPolicy::Require(Backing::Heap))
                .max_threads(1)
                .build_named::<LoomGrow>()
                .unwrap(),
        );
        let p = pool.clone();
        let grower = thread::spawn(move || {
            assert_eq!(p.grow(1).unwrap(), 2);
        });
        let p = pool.clone();
        let getter = thread::spawn(move || {
            let mut c = p.local_cache();
            let mut held = Vec::new();
            for _ in 0..2 {
                if let Ok(h) = c.get() {
                    // SAFETY: the handle owns the object; nobody else touches it.
                    let v = p.get_ref(&h).with(|v| unsafe { *v });
                    assert_eq!(v, p.index_of(&h), "initialised before it was handed out");
                    held.push(h);
                }
            }
            // The capacity is published after the new entry is in the ring: a reader that
            // sees it sees the entry counted (in the ring, or held here).
            if p.capacity() == 2 {
                assert_eq!(p.ring_count() + held.len(), 2, "published before enqueued");
            }
            for h in held {
                c.put(h);
            }
        });
        grower.join().unwrap();
        getter.join().unwrap();
        let mut pool = Arc::try_unwrap(pool).unwrap_or_else(|_| panic!("pool still shared"));
        assert_eq!(pool.capacity(), 2);
        assert_eq!(pool.available(), 2);
        assert_eq!(pool.audit().unwrap().in_use, 0);
    });
}

// ---- the waiter handshake (src/wait.rs) ----------------------------------------
//
// A put into the ring (a pool with no caches: every put goes to the ring) against a getter
// that finds the pool empty and waits. A lost wake-up leaves the waiter parked (or its future
// pending) for ever, which loom reports as a deadlock; a lost object fails the final count.

idxpool::brand!(LoomWaitBlocking);
idxpool::brand!(LoomWaitAsync);
idxpool::brand!(LoomWaitTwo);

fn empty_pool<B: idxpool::NamedBrand>(capacity: u32) -> idxpool::Pool<u64, B> {
    PoolBuilder::<u64>::with_default(capacity)
        .cache_size(0)
        .backing(BackingPolicy::Require(Backing::Heap))
        .max_threads(1)
        .build_named::<B>()
        .unwrap()
}

#[test]
fn waiter_handshake_blocking() {
    model(Some(3), || {
        let pool = Arc::new(empty_pool::<LoomWaitBlocking>(1));
        let h = pool.get().unwrap(); // the pool is empty now
        let p = pool.clone();
        let putter = thread::spawn(move || p.put(h));
        let h = pool.get_wait(std::time::Duration::MAX).unwrap();
        putter.join().unwrap();
        pool.put(h);
        assert_eq!(pool.available(), 1);
    });
}

#[test]
fn waiter_handshake_async() {
    model(Some(3), || {
        let pool = Arc::new(empty_pool::<LoomWaitAsync>(1));
        let h = pool.get().unwrap();
        let p = pool.clone();
        let putter = thread::spawn(move || p.put(h));
        let h = loom::future::block_on(pool.get_async()).unwrap();
        putter.join().unwrap();
        pool.put(h);
        assert_eq!(pool.available(), 1);
    });
}

#[test]
fn waiter_handshake_two_waiters_two_puts() {
    // Two waiters, two objects put one at a time: both are served (the wake budget and the
    // hand-over between waiters).
    // Three threads, two of them in the wait loop: longer executions than loom's default
    // limit of scheduling points.
    model_with(Some(1), 20_000, || {
        let pool = Arc::new(empty_pool::<LoomWaitTwo>(2));
        let (a, b) = (pool.get().unwrap(), pool.get().unwrap());
        let p = pool.clone();
        let waiter = thread::spawn(move || {
            let h = p.get_wait(std::time::Duration::MAX).unwrap();
            p.put(h);
        });
        let p = pool.clone();
        let putter = thread::spawn(move || {
            p.put(a);
            p.put(b);
        });
        let h = pool.get_wait(std::time::Duration::MAX).unwrap();
        pool.put(h);
        waiter.join().unwrap();
        putter.join().unwrap();
        assert_eq!(pool.available(), 2);
    });
}
