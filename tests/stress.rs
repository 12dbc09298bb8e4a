//! Multi-threaded stress: more threads than cores on tiny pools (capacity 1 and 17, so nearly
//! every get contends), `yield_now` between steps so that threads are preempted mid-sequence,
//! random bulk sizes, explicit and implicit caches mixed, every flush policy, both entry
//! representations. Each object is stamped with its owner's thread id on get and checked on
//! put, which catches an object handed out twice. At the end every object must be home:
//! `available() == capacity` and `audit()` finds each index exactly once.
//!
//! Bounded: the whole file runs in a few seconds in a debug build (and with a handful of
//! iterations under Miri).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use idxpool::repr::Repr;
use idxpool::{Brand, FlushPolicy, Handle, Pool, PoolBuilder};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// An object: the id of the thread that holds it (0 = free) and a payload written through
/// `get_mut` while held.
#[derive(Default)]
struct Obj {
    owner: AtomicU32,
    payload: u64,
}

/// Iterations per thread: enough for many interleavings, small enough for debug builds.
const ITERS: usize = if cfg!(miri) { 12 } else { 1500 };
/// Threads per test: more than the 2 cores of the test machine.
const THREADS: u32 = if cfg!(miri) { 3 } else { 8 };

/// How a worker thread reaches the pool.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// `pool.get()` / `pool.put()`: the implicit per-thread cache.
    Implicit,
    /// A `LocalCache` owned by the thread.
    Explicit,
}

/// Counts of what the workers did, to show the test exercised contention.
#[derive(Default)]
struct Tally {
    got: AtomicU64,
    failed: AtomicU64,
}

fn on_get<B: Brand, R: Repr>(pool: &Pool<Obj, B, R>, h: &mut Handle<Obj, B, R>, me: u32) {
    let prev = pool.get_ref(h).owner.swap(me, Relaxed);
    assert_eq!(
        prev,
        0,
        "object {} handed to thread {me} while thread {prev} holds it",
        pool.index_of(h)
    );
    let o = pool.get_mut(h);
    o.payload = o.payload.wrapping_add(me as u64);
}

fn on_put<B: Brand, R: Repr>(pool: &Pool<Obj, B, R>, h: &Handle<Obj, B, R>, me: u32) {
    let prev = pool.get_ref(h).owner.swap(0, Relaxed);
    assert_eq!(
        prev,
        me,
        "thread {me} puts object {} stamped by thread {prev}",
        pool.index_of(h)
    );
}

/// One worker: `ITERS` rounds of a random get (single, bulk, burst), a yield while holding
/// the objects (so that other threads run mid-sequence), and a random put of some of what it
/// holds; returns everything at the end.
fn worker<B: Brand, R: Repr>(
    pool: &Pool<Obj, B, R>,
    mode: Mode,
    me: u32,
    max_bulk: usize,
    tally: &Tally,
) {
    let mut rng = SmallRng::seed_from_u64(0x5eed ^ me as u64);
    let mut local = (mode == Mode::Explicit).then(|| pool.local_cache());
    let mut held: Vec<Handle<Obj, B, R>> = Vec::new();
    let mut got: Vec<Handle<Obj, B, R>> = Vec::new();
    for _ in 0..ITERS {
        let n = rng.gen_range(1..=max_bulk);
        match rng.gen_range(0..3) {
            0 => {
                let r = match &mut local {
                    Some(c) => c.get(),
                    None => pool.get(),
                };
                if let Ok(h) = r {
                    got.push(h);
                }
            }
            1 => {
                let r = match &mut local {
                    Some(c) => c.get_bulk(&mut got, n),
                    None => pool.get_bulk(&mut got, n),
                };
                if r.is_ok() {
                    assert_eq!(got.len(), n, "bulk of {n}");
                } else {
                    assert!(got.is_empty(), "failed bulk must add nothing");
                }
            }
            _ => {
                let k = match &mut local {
                    Some(c) => c.get_burst(&mut got, n),
                    None => pool.get_burst(&mut got, n),
                };
                assert!(k <= n && got.len() == k);
            }
        }
        if got.is_empty() {
            tally.failed.fetch_add(1, Relaxed);
        }
        tally.got.fetch_add(got.len() as u64, Relaxed);
        for mut h in got.drain(..) {
            on_get(pool, &mut h, me);
            held.push(h);
        }
        std::thread::yield_now();
        // Put back a random number of held objects, singly or in bulk.
        let k = rng.gen_range(0..=held.len());
        let mut back: Vec<_> = held.drain(held.len() - k..).collect();
        for h in &back {
            on_put(pool, h, me);
        }
        if rng.gen_bool(0.5) {
            match &mut local {
                Some(c) => c.put_bulk(&mut back),
                None => pool.put_bulk(&mut back),
            }
        } else {
            for h in back.drain(..) {
                match &mut local {
                    Some(c) => c.put(h),
                    None => pool.put(h),
                }
            }
        }
        if rng.gen_ratio(1, 16) {
            match &mut local {
                Some(c) => c.flush(),
                None => pool.flush(),
            }
        }
    }
    for h in &held {
        on_put(pool, h, me);
    }
    match &mut local {
        Some(c) => c.put_bulk(&mut held),
        None => pool.put_bulk(&mut held),
    }
}

/// Runs `THREADS` workers (modes alternate when `mixed`), joins them explicitly (so that the
/// implicit caches' thread-exit flushes have run), then checks conservation.
fn run<B: Brand, R: Repr>(mut pool: Pool<Obj, B, R>, mixed: bool, max_bulk: usize) {
    let cap = pool.capacity() as usize;
    let tally = Tally::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..=THREADS)
            .map(|me| {
                let mode = if mixed && me % 2 == 0 {
                    Mode::Explicit
                } else if mixed {
                    Mode::Implicit
                } else {
                    Mode::Explicit
                };
                let (pool, tally) = (&pool, &tally);
                s.spawn(move || worker(pool, mode, me, max_bulk, tally))
            })
            .collect();
        // An explicit join waits for the OS thread, TLS destructors (cache flush) included.
        for h in handles {
            h.join().expect("worker panicked");
        }
    });
    assert!(tally.got.load(Relaxed) > 0, "no get ever succeeded");
    assert_eq!(pool.available(), cap, "objects stranded: {}", pool.dump());
    assert_eq!(pool.in_use(), 0);
    let rep = pool.audit().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rep.in_use, 0);
    assert_eq!(rep.in_ring + rep.in_caches, cap);
    if idxpool::DEBUG_CHECKS {
        for i in 0..cap as u32 {
            assert!(
                pool.check_raw(i).is_err(),
                "object {i} should be marked free"
            );
        }
    }
    let mut payloads = 0u64;
    for (_, o) in pool.obj_iter() {
        assert_eq!(o.owner.load(Relaxed), 0);
        payloads = payloads.wrapping_add(o.payload);
    }
    assert!(payloads > 0 || cfg!(miri));
}

#[test]
fn capacity_1_every_get_contends_explicit_caches() {
    for policy in FlushPolicy::ALL {
        // Cache size 1 is allowed for capacity 1 under every policy (Classic: 1.5 x 1 -> 1).
        for cache in [0, 1] {
            PoolBuilder::<Obj>::with_default(1)
                .cache_size(cache)
                .policy(policy)
                .scoped(|pool| run(pool, false, 2))
                .unwrap();
        }
    }
}

#[test]
fn capacity_1_implicit_and_explicit_caches() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<Obj>::with_default(1)
            .cache_size(1)
            .policy(policy)
            .scoped(|pool| run(pool, true, 1))
            .unwrap();
    }
}

#[test]
fn capacity_17_mixed_caches_every_policy() {
    let caches: &[u32] = if cfg!(miri) { &[0, 8] } else { &[0, 2, 8] };
    for policy in FlushPolicy::ALL {
        for &cache in caches {
            PoolBuilder::<Obj>::with_default(17)
                .cache_size(cache)
                .policy(policy)
                .scoped(|pool| run(pool, true, 6))
                .unwrap();
        }
    }
}

#[test]
fn capacity_17_pointer_twin() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<Obj>::with_default(17)
            .cache_size(4)
            .policy(policy)
            .repr::<idxpool::Pointer>()
            .scoped(|pool| run(pool, true, 5))
            .unwrap();
    }
}

#[test]
fn capacity_17_offset_entries() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<Obj>::with_default(17)
            .cache_size(4)
            .policy(policy)
            .repr::<idxpool::Offset>()
            .scoped(|pool| run(pool, true, 5))
            .unwrap();
    }
}

#[test]
fn capacity_17_index_entries() {
    for policy in FlushPolicy::ALL {
        PoolBuilder::<Obj>::with_default(17)
            .cache_size(4)
            .policy(policy)
            .repr::<idxpool::Index>()
            .scoped(|pool| run(pool, true, 5))
            .unwrap();
    }
}

#[test]
fn more_threads_than_cache_slots() {
    // max_threads 2: most workers have no implicit cache slot and go straight to the ring,
    // mixed with the cached ones.
    PoolBuilder::<Obj>::with_default(17)
        .cache_size(4)
        .max_threads(2)
        .scoped(|pool| run(pool, true, 4))
        .unwrap();
}

#[test]
fn capacity_17_ring_modes_mpmc_with_max_bulk_above_capacity() {
    // Requests up to 20 > capacity: bulk must fail cleanly, burst take what is there.
    PoolBuilder::<Obj>::with_default(17)
        .cache_size(2)
        .policy(FlushPolicy::SizeAligned)
        .scoped(|pool| run(pool, true, 20))
        .unwrap();
}

/// Many short-lived threads that use the implicit cache and exit while it holds objects: the
/// thread-exit flush must bring every object back (nothing stranded in dead threads' caches),
/// and thread ids recycled by later threads must not see stale caches.
#[test]
fn short_lived_threads_leave_nothing_stranded() {
    let (waves, per_wave) = if cfg!(miri) { (2, 3) } else { (40, 8) };
    for policy in FlushPolicy::ALL {
        PoolBuilder::<Obj>::with_default(64)
            .cache_size(8)
            .policy(policy)
            .max_threads(16)
            .scoped(|mut pool| {
                for wave in 0..waves {
                    std::thread::scope(|s| {
                        let handles: Vec<_> = (0..per_wave)
                            .map(|t| {
                                let pool = &pool;
                                s.spawn(move || {
                                    let me = 1 + wave * per_wave + t;
                                    let mut v = Vec::new();
                                    let n = pool.get_burst(&mut v, 1 + (me as usize % 7));
                                    for h in v.iter_mut() {
                                        on_get(pool, h, me);
                                    }
                                    std::thread::yield_now();
                                    for h in &v {
                                        on_put(pool, h, me);
                                    }
                                    pool.put_bulk(&mut v);
                                    // The cache now holds up to n objects; exit without flush.
                                    n
                                })
                            })
                            .collect();
                        for h in handles {
                            h.join().expect("thread panicked");
                        }
                    });
                    assert_eq!(
                        pool.ring_count(),
                        64,
                        "wave {wave}: exited threads' caches were not flushed"
                    );
                }
                assert_eq!(pool.available(), 64);
                let rep = pool.audit().unwrap();
                assert_eq!((rep.in_ring, rep.in_caches, rep.in_use), (64, 0, 0));
            })
            .unwrap();
    }
}

/// The common ring alone, hammered without yields by more threads than cores: every entry
/// enqueued comes out exactly once, and nothing else does. Tiny ring (8 slots), bursts of 1-4,
/// so producers and consumers constantly overtake each other around the ring.
#[test]
fn ring_mpmc_hammer_exactly_once() {
    use idxpool::ring::{Ring, RingFlags};
    use std::mem::MaybeUninit;
    let threads = if cfg!(miri) { 3u32 } else { 6 };
    let per = if cfg!(miri) { 20u32 } else { 30_000 };
    let ring = Ring::<u32>::new(7, RingFlags::default()).unwrap();
    let seen: Vec<AtomicU32> = (0..threads * per).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (ring, seen) = (&ring, &seen);
            s.spawn(move || {
                let (mut next, end) = (t * per, (t + 1) * per);
                let mut buf = [MaybeUninit::<u32>::uninit(); 4];
                let mut k = t as usize;
                let mut spins = 0u32;
                while next < end {
                    k = k.wrapping_mul(5).wrapping_add(1);
                    let n = 1 + k % 4;
                    let src: Vec<u32> = (next..end.min(next + n as u32)).collect();
                    next += ring.enqueue_burst(&src) as u32;
                    let got = ring.dequeue_burst(&mut buf[..1 + (k >> 3) % 4]);
                    for x in &buf[..got] {
                        // SAFETY: the ring wrote the first `got` entries.
                        let v = unsafe { x.assume_init() };
                        assert!(v < threads * per, "garbage entry {v}");
                        let c = seen[v as usize].fetch_add(1, Relaxed);
                        assert_eq!(c, 0, "entry {v} dequeued twice");
                    }
                    spins += 1;
                    if spins.is_multiple_of(1024) {
                        std::thread::yield_now();
                    }
                }
            });
        }
    });
    // Drain what is left and check every entry came out once.
    let mut buf = vec![MaybeUninit::<u32>::uninit(); ring.count()];
    let got = ring.dequeue_burst(&mut buf);
    for x in &buf[..got] {
        // SAFETY: as above.
        let v = unsafe { x.assume_init() };
        assert_eq!(seen[v as usize].fetch_add(1, Relaxed), 0, "entry {v} twice");
    }
    assert_eq!(ring.count(), 0);
    for (v, c) in seen.iter().enumerate() {
        assert_eq!(c.load(Relaxed), 1, "entry {v} lost");
    }
}

/// `Ring::count()` (behind `available()`, `ring_count()`, `is_full()`) while producers and
/// consumers race: with only `N` entries in circulation, no snapshot may report more than `N`
/// (a snapshot reading `prod.tail` before `cons.tail` could see the consumer overtake the stale
/// producer tail and report a full ring).
#[test]
fn ring_count_snapshot_never_exceeds_the_entries_in_circulation() {
    use idxpool::ring::{Ring, RingFlags};
    use std::mem::MaybeUninit;
    use std::sync::atomic::AtomicBool;
    let circulating = 2u32; // entries that exist at all; the ring can hold 63
    let ring = Ring::<u32>::new(63, RingFlags::default()).unwrap();
    let stop = AtomicBool::new(false);
    let rounds = if cfg!(miri) { 50 } else { 5_000_000 };
    let worst = std::thread::scope(|s| {
        for t in 0..circulating {
            let (ring, stop) = (&ring, &stop);
            s.spawn(move || {
                // Each worker owns one entry and moves it through the ring forever.
                let mut buf = [MaybeUninit::<u32>::uninit(); 1];
                let mut mine = Some(t);
                while !stop.load(Relaxed) {
                    if let Some(e) = mine.take() {
                        assert!(ring.enqueue_bulk(&[e]));
                    }
                    if ring.dequeue_burst(&mut buf) == 1 {
                        // SAFETY: one entry was written.
                        mine = Some(unsafe { buf[0].assume_init() });
                    }
                }
                if let Some(e) = mine {
                    assert!(ring.enqueue_bulk(&[e]));
                }
            });
        }
        let observer = s.spawn(|| {
            let mut worst = 0;
            for _ in 0..rounds {
                worst = worst.max(ring.count());
            }
            worst
        });
        let worst = observer.join().unwrap();
        stop.store(true, Relaxed);
        worst
    });
    assert_eq!(ring.count(), circulating as usize);
    assert!(
        worst <= circulating as usize,
        "count() reported {worst} entries while only {circulating} exist"
    );
}
