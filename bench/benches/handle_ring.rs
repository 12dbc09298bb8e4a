//! Two-thread SPSC queue benchmark: the handle ring (ptr_ring algorithm) with and without
//! batched slot zeroing, against crossbeam's `ArrayQueue<u32>` and the pool's own common ring
//! (`idxpool::ring::Ring<u32>`, MPMC and SP/SC flags) used as a queue. One producer thread,
//! one consumer thread, one entry per call, 1024 entries of capacity each.
//!
//! Regimes (per-entry busy work on one side makes the other side wait):
//! * `near_full`: the consumer works, the producer does not, so the ring stays almost full and
//!   the producer refills each slot right after the consumer frees it (the case ptr_ring's
//!   batched zeroing targets);
//! * `near_empty`: the producer works, so the consumer finds the ring almost empty;
//! * `balanced` (table mode only): no work on either side.
//!
//! ```sh
//! cargo bench -p idxpool-bench --bench handle_ring                    # criterion, short measurement times
//! cargo bench -p idxpool-bench --bench handle_ring -- table           # side by side: interleaved, median of 5
//! cargo bench -p idxpool-bench --bench handle_ring -- table 9 128     # 9 reps, ring of 128
//! ```
//!
//! Threads are not pinned unless `PIN=on` (or `PIN=auto`: only when the two CPUs are idle) is
//! in the environment; the first line says which, with the load average.
//!
//! Entries moved through the handle ring are handles made with `Handle::from_raw` over an
//! `Unchecked` pool that is never touched, so only the queue is measured.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use idxpool::handle_ring::Zeroing;
use idxpool::ring::{Ring, RingFlags};
use idxpool::{Handle, HandleRing, Pool, PoolBuilder, Unchecked};
use idxpool_bench::pin::{context_line, PinMode, Pinning};
use idxpool_bench::spin;
use idxpool_bench::stats::median;

const CAP: usize = 1024;
/// Busy-work iterations per entry on the slow side (about 1 ns each).
const WORK: u32 = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    HandleRingBatch,
    HandleRingBatch16,
    HandleRingNoBatch,
    CrossbeamArray,
    RingMpmc,
    RingSpsc,
}

impl Queue {
    const MAIN: [Queue; 5] = [
        Queue::HandleRingBatch,
        Queue::HandleRingNoBatch,
        Queue::CrossbeamArray,
        Queue::RingMpmc,
        Queue::RingSpsc,
    ];
    /// The table adds a one-line batch (16 indices), between none and ptr_ring's two lines.
    const TABLE: [Queue; 6] = [
        Queue::HandleRingBatch,
        Queue::HandleRingBatch16,
        Queue::HandleRingNoBatch,
        Queue::CrossbeamArray,
        Queue::RingMpmc,
        Queue::RingSpsc,
    ];
    fn name(self) -> &'static str {
        match self {
            Queue::HandleRingBatch => "HandleRing batch",
            Queue::HandleRingBatch16 => "HandleRing batch=16",
            Queue::HandleRingNoBatch => "HandleRing nobatch",
            Queue::CrossbeamArray => "ArrayQueue<u32>",
            Queue::RingMpmc => "ring::Ring<u32> MPMC",
            Queue::RingSpsc => "ring::Ring<u32> SPSC",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Regime {
    NearFull,
    NearEmpty,
    Balanced,
}

impl Regime {
    fn name(self) -> &'static str {
        match self {
            Regime::NearFull => "near_full",
            Regime::NearEmpty => "near_empty",
            Regime::Balanced => "balanced",
        }
    }
    /// (producer work, consumer work) per entry.
    fn work(self) -> (u32, u32) {
        match self {
            Regime::NearFull => (0, WORK),
            Regime::NearEmpty => (WORK, 0),
            Regime::Balanced => (0, 0),
        }
    }
}

#[inline(always)]
fn work(v: u32, n: u32) -> u32 {
    let mut x = v;
    for _ in 0..n {
        x = black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    x
}

/// The pinning of the two threads: `PIN=on` pins producer and consumer to the first two
/// allowed CPUs, `PIN=auto` only when those are idle; unset or `off`, no pinning (on a shared
/// machine a pinned thread waits for its busy CPU). Decided once, printed once.
fn pinning() -> &'static Pinning {
    static P: std::sync::OnceLock<Pinning> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mode = match std::env::var("PIN").as_deref() {
            Ok("on") | Ok("1") => PinMode::On,
            Ok("auto") => PinMode::Auto,
            _ => PinMode::Off,
        };
        let p = Pinning::decide(mode, 2);
        eprintln!("handle_ring: {}", context_line(&p));
        p
    })
}

/// Busy-polls when pinned (long spins before yielding, as DPDK lcores), yields after 64
/// spins otherwise.
#[inline(always)]
fn backoff(spins: &mut u32) {
    static LIMIT: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let limit = *LIMIT.get_or_init(|| spin::spin_limit(pinning().is_on()));
    spin::backoff(spins, limit, spin::After::Yield);
}

/// Pins the calling thread as thread `i` when [`pinning`] says so.
fn pin(i: usize) {
    pinning().apply(i);
}

struct Sample {
    elapsed: Duration,
    /// Failed produces (ring full) per entry.
    full: f64,
    /// Failed consumes (ring empty) per entry.
    empty: f64,
}

/// Moves `n` entries from a producer thread to the calling (consumer) thread.
fn run_pair(
    n: u64,
    (pw, cw): (u32, u32),
    mut push: impl FnMut(u32) -> bool + Send,
    mut pop: impl FnMut() -> Option<u32>,
) -> Sample {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let barrier = &barrier;
        let prod = s.spawn(move || {
            pin(0);
            barrier.wait();
            let mut full = 0u64;
            for i in 0..n {
                black_box(work(i as u32, pw));
                let mut spins = 0;
                while !push(i as u32) {
                    full += 1;
                    backoff(&mut spins);
                }
            }
            full
        });
        pin(1);
        barrier.wait();
        let t0 = Instant::now();
        let mut got = 0;
        let mut acc = 0u32;
        let mut empty = 0u64;
        let mut spins = 0;
        while got < n {
            match pop() {
                Some(v) => {
                    acc ^= work(v, cw);
                    got += 1;
                    spins = 0;
                }
                None => {
                    empty += 1;
                    backoff(&mut spins);
                }
            }
        }
        let elapsed = t0.elapsed();
        black_box(acc);
        let full = prod.join().expect("producer");
        Sample {
            elapsed,
            full: full as f64 / n as f64,
            empty: empty as f64 / n as f64,
        }
    })
}

/// A pool that is never used: it only types the handles.
fn dummy_pool(cap: usize) -> Pool<u8, Unchecked> {
    // SAFETY: the handles of this pool are raw indices that are never resolved or put.
    unsafe {
        PoolBuilder::<u8>::with_default(2 * cap as u32)
            .cache_size(0)
            .build_unchecked()
            .expect("pool")
    }
}

fn measure(q: Queue, regime: Regime, n: u64, cap: usize, pool: &Pool<u8, Unchecked>) -> Sample {
    let w = regime.work();
    // Raw indices cycle over 2 x cap, so an index is never in the ring twice.
    let m = 2 * cap as u32;
    match q {
        Queue::HandleRingBatch | Queue::HandleRingBatch16 | Queue::HandleRingNoBatch => {
            let z = match q {
                Queue::HandleRingBatch => Zeroing::Batched,
                Queue::HandleRingBatch16 => Zeroing::BatchOf(16),
                _ => Zeroing::Immediate,
            };
            let (mut p, mut c) = HandleRing::new(pool, cap, z).expect("ring");
            let s = run_pair(
                n,
                w,
                |i| {
                    // SAFETY: never resolved nor put back (see dummy_pool).
                    let h: Handle<u8, Unchecked> = unsafe { Handle::from_raw(i % m) };
                    p.produce(h).map_err(|h| h.into_raw()).is_ok()
                },
                || c.consume().map(|h| h.into_raw()),
            );
            // Nothing may stay behind for the ring's Drop to put into the (unused) pool.
            debug_assert!(c.is_empty());
            s
        }
        Queue::CrossbeamArray => {
            let q = ArrayQueue::<u32>::new(cap);
            run_pair(n, w, |i| q.push(i).is_ok(), || q.pop())
        }
        Queue::RingMpmc | Queue::RingSpsc => {
            let spsc = q == Queue::RingSpsc;
            // SAFETY: run_pair has one producer thread and one consumer thread.
            let r = unsafe {
                Ring::<u32>::with_start_counter(
                    cap as u32,
                    RingFlags {
                        single_producer: spsc,
                        single_consumer: spsc,
                        exact_size: true,
                    },
                    0,
                )
            }
            .expect("ring");
            run_pair(
                n,
                w,
                |i| r.enqueue_bulk(&[i]),
                || {
                    let mut b = [MaybeUninit::<u32>::uninit()];
                    if r.dequeue_burst(&mut b) == 1 {
                        // SAFETY: dequeue_burst wrote the first entry.
                        Some(unsafe { b[0].assume_init() })
                    } else {
                        None
                    }
                },
            )
        }
    }
}

fn bench(c: &mut Criterion) {
    let pool = dummy_pool(CAP);
    for regime in [Regime::NearFull, Regime::NearEmpty] {
        let mut g = c.benchmark_group(format!("handle_ring/{}", regime.name()));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1500))
            .throughput(Throughput::Elements(1));
        for q in Queue::MAIN {
            g.bench_function(q.name(), |b| {
                b.iter_custom(|iters| measure(q, regime, iters, CAP, &pool).elapsed)
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);

/// Side-by-side table: every queue in every regime, interleaved (rotating order), median.
fn table(reps: usize, cap: usize) {
    let pool = dummy_pool(cap);
    let n = 2_000_000u64;
    println!(
        "two threads, {n} entries per run, capacity {cap}, work {WORK} iterations per entry on \
         the slow side, {reps} reps interleaved, median"
    );
    for regime in [Regime::NearFull, Regime::NearEmpty, Regime::Balanced] {
        let qs = Queue::TABLE;
        let mut rate = vec![Vec::new(); qs.len()];
        let mut full = vec![0.0; qs.len()];
        let mut empty = vec![0.0; qs.len()];
        for r in 0..reps {
            for k in 0..qs.len() {
                let k = (k + r) % qs.len();
                let s = measure(qs[k], regime, n, cap, &pool);
                rate[k].push(n as f64 / s.elapsed.as_secs_f64() / 1e6);
                full[k] += s.full / reps as f64;
                empty[k] += s.empty / reps as f64;
            }
        }
        println!(
            "\n{:<12} {:<22} {:>10} {:>10} {:>10} {:>12} {:>12}",
            regime.name(),
            "queue",
            "Mops/s",
            "min",
            "max",
            "full/entry",
            "empty/entry"
        );
        for k in 0..qs.len() {
            let v = &mut rate[k];
            v.sort_by(|a, b| a.total_cmp(b));
            println!(
                "{:<12} {:<22} {:>10.2} {:>10.2} {:>10.2} {:>12.5} {:>12.5}",
                "",
                qs[k].name(),
                median(v),
                v[0],
                v[v.len() - 1],
                full[k],
                empty[k]
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "table") {
        let reps = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(5);
        let cap = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(CAP);
        table(reps, cap);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
