//! The workloads (burst, steady, forward, forward-burst) and the sample runner (`Job`).

#[allow(unused_imports)]
use super::*;

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use idxpool_bench::clock::thread_cpu_ns;
use idxpool_bench::{pin, spin};

// ---- workloads ------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    Burst,
    Steady,
    Forward,
    ForwardBurst,
}

impl Workload {
    pub(crate) const ALL: [Workload; 4] = [
        Workload::Burst,
        Workload::Steady,
        Workload::Forward,
        Workload::ForwardBurst,
    ];
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Burst => "burst",
            Workload::Steady => "steady",
            Workload::Forward => "forward",
            Workload::ForwardBurst => "forward-burst",
        }
    }
    pub(crate) fn threads(self) -> usize {
        match self {
            Workload::Forward | Workload::ForwardBurst => 2,
            _ => 1,
        }
    }
}

/// Sizes of one run.
pub(crate) struct Params {
    /// Bursts of `BURST` objects per burst sample.
    pub(crate) burst_rounds: usize,
    /// Live objects in steady.
    pub(crate) steady_live: usize,
    /// Slot replaced at each steady step (precomputed, the same for every contender).
    pub(crate) steady_idx: Vec<u32>,
    /// Objects forwarded per forward sample.
    pub(crate) forward_total: usize,
    /// Capacity of the forward queue.
    pub(crate) queue_cap: usize,
    /// Capacity of fixed-size contenders (idxpool, the ArrayQueue free list).
    pub(crate) pool_cap: u32,
    /// Longest wall time of a timed forward phase: the producer stops early when it is reached
    /// (a loaded machine), and ns per object is taken over the objects actually forwarded.
    pub(crate) forward_wall: Duration,
    /// CPUs of the forward producer and consumer (None: not pinned, the default).
    pub(crate) pin: Option<[usize; 2]>,
}

pub(crate) const BURST: usize = 32;

impl Params {
    pub(crate) fn new(quick: bool) -> Self {
        let (burst_rounds, steps, forward_total) = if quick {
            (20_000, 500_000, 250_000)
        } else {
            (100_000, 2_000_000, 600_000)
        };
        let mut p = Params::sized(burst_rounds, 4096, steps, forward_total, 1024, 8192);
        p.forward_wall = Duration::from_millis(if quick { 150 } else { 500 });
        p
    }

    pub(crate) fn sized(
        burst_rounds: usize,
        steady_live: usize,
        steps: usize,
        forward_total: usize,
        queue_cap: usize,
        pool_cap: u32,
    ) -> Self {
        let mut rng = SmallRng::seed_from_u64(0x1d7_9001);
        Params {
            burst_rounds,
            steady_live,
            steady_idx: (0..steps)
                .map(|_| rng.gen_range(0..steady_live as u32))
                .collect(),
            forward_total,
            queue_cap,
            pool_cap,
            forward_wall: Duration::from_secs(10),
            pin: None,
        }
    }
}

/// One sample to take: a workload with its sizes, optionally checked.
pub(crate) struct Job<'a> {
    pub(crate) wl: Workload,
    pub(crate) p: &'a Params,
    pub(crate) check: Option<&'a CheckLog>,
}

impl Job<'_> {
    /// Runs the workload with workers made by `mk` (one per thread) and returns ns per object.
    pub(crate) fn run<W, F>(&self, mk: F) -> f64
    where
        W: Worker,
        W::H: Send,
        F: Fn() -> W + Sync,
    {
        match self.wl {
            Workload::Burst | Workload::Steady => {
                let mut w = mk();
                match self.check {
                    Some(log) => self.single(&mut Checked { w: &mut w, log }),
                    None => self.single(&mut w),
                }
            }
            Workload::Forward => forward(&mk, self.p, self.check, false),
            Workload::ForwardBurst => forward(&mk, self.p, self.check, true),
        }
    }

    pub(crate) fn single<W: Worker>(&self, w: &mut W) -> f64 {
        match self.wl {
            Workload::Burst => burst(w, self.p.burst_rounds),
            Workload::Steady => steady(w, self.p),
            Workload::Forward | Workload::ForwardBurst => {
                unreachable!("forward takes two threads")
            }
        }
    }
}

/// CPU time of the calling thread in ns (see [`idxpool_bench::clock::thread_cpu_time`]):
/// samples are timed with it, so time spent preempted by other processes is not counted.
pub(crate) fn cpu_now() -> u64 {
    thread_cpu_ns()
}

pub(crate) fn ns_per(t0: u64, t1: u64, n: usize) -> f64 {
    t1.saturating_sub(t0) as f64 / n.max(1) as f64
}

/// Allocate `BURST`, write each, free them; `rounds` times after a warm-up tenth.
pub(crate) fn burst<W: Worker>(w: &mut W, rounds: usize) -> f64 {
    let mut v = Vec::with_capacity(BURST);
    for r in 0..rounds / 10 + 1 {
        w.alloc_n(&mut v, BURST, (r * BURST) as u64);
        w.free_all(&mut v);
    }
    let t0 = cpu_now();
    for r in 0..rounds {
        w.alloc_n(&mut v, BURST, (r * BURST) as u64);
        w.free_all(&mut v);
    }
    ns_per(t0, cpu_now(), rounds * BURST)
}

pub(crate) fn steady_steps<W: Worker>(w: &mut W, slots: &mut [Option<W::H>], idx: &[u32]) {
    for (k, &i) in idx.iter().enumerate() {
        let s = &mut slots[i as usize];
        if let Some(h) = s.take() {
            w.free(h);
        }
        *s = Some(w.alloc(k as u64));
    }
}

/// Keep `steady_live` objects; at each step free a random one and allocate its replacement.
pub(crate) fn steady<W: Worker>(w: &mut W, p: &Params) -> f64 {
    let live = p.steady_live;
    // Pre-warm: the working set once, freed.
    let mut slots: Vec<Option<W::H>> = (0..live).map(|i| Some(w.alloc(i as u64))).collect();
    for h in slots.iter_mut().filter_map(Option::take) {
        w.free(h);
    }
    for (i, s) in slots.iter_mut().enumerate() {
        *s = Some(w.alloc(i as u64));
    }
    steady_steps(w, &mut slots, &p.steady_idx[..p.steady_idx.len() / 10]);
    let t0 = cpu_now();
    steady_steps(w, &mut slots, &p.steady_idx);
    let t1 = cpu_now();
    for h in slots.iter_mut().filter_map(Option::take) {
        w.free(h);
    }
    ns_per(t0, t1, p.steady_idx.len())
}

/// Waits for the other side of the forward queue: a short spin, then sleeps, so that a
/// waiting thread burns little CPU time while the other is preempted.
pub(crate) fn backoff(spins: &mut u32) {
    spin::backoff(spins, 32, spin::After::Sleep(Duration::from_micros(20)));
}

/// The queues between the forward threads: one handle per slot (`forward`), or bursts of up
/// to `BURST` handles in recycled vectors (`forward-burst`, with a return queue of empty
/// vectors so that the steady state allocates nothing).
pub(crate) struct Queues<H> {
    pub(crate) bursts: bool,
    pub(crate) one: ArrayQueue<H>,
    pub(crate) full: ArrayQueue<Vec<H>>,
    pub(crate) spare: ArrayQueue<Vec<H>>,
}

impl<H> Queues<H> {
    pub(crate) fn new(cap: usize, bursts: bool) -> Self {
        let nb = (cap / BURST).max(1);
        Queues {
            bursts,
            one: ArrayQueue::new(cap),
            full: ArrayQueue::new(nb),
            // Every vector in existence fits: those in `full`, plus one on each side.
            spare: ArrayQueue::new(nb + 2),
        }
    }
}

pub(crate) fn push_wait<X>(q: &ArrayQueue<X>, mut x: X) {
    let mut spins = 0;
    while let Err(back) = q.push(x) {
        x = back;
        backoff(&mut spins);
    }
}

/// Every how many bursts the producer reads the clock for its deadline.
const BURSTS_PER_CLOCK_CHECK: usize = 64;

/// Allocates and sends `n` objects, or fewer if `deadline` passes first; stores the count sent
/// in `sent_total` at the end (the consumer's target).
pub(crate) fn producer<W: Worker>(
    w: &mut W,
    q: &Queues<W::H>,
    n: usize,
    deadline: Option<Instant>,
    sent_total: &AtomicUsize,
) {
    let mut burst = Vec::with_capacity(BURST);
    let mut sent = 0;
    let mut bursts = 0usize;
    while sent < n {
        bursts += 1;
        if bursts.is_multiple_of(BURSTS_PER_CLOCK_CHECK)
            && deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        let k = BURST.min(n - sent);
        if q.bursts {
            let mut v = q.spare.pop().unwrap_or_else(|| Vec::with_capacity(BURST));
            w.alloc_n(&mut v, k, sent as u64);
            push_wait(&q.full, v);
        } else {
            w.alloc_n(&mut burst, k, sent as u64);
            for h in burst.drain(..) {
                push_wait(&q.one, h);
            }
        }
        sent += k;
    }
    sent_total.store(sent, Ordering::Release);
}

/// Receives and frees objects until it has `n`, or as many as the producer stored in
/// `sent_total` once it stopped early.
pub(crate) fn consumer<W: Worker>(
    w: &mut W,
    q: &Queues<W::H>,
    n: usize,
    sent_total: &AtomicUsize,
) -> u64 {
    let mut got = Vec::with_capacity(BURST);
    let mut recv = 0;
    let mut sum = 0u64;
    let mut spins = 0;
    while recv < n.min(sent_total.load(Ordering::Acquire)) {
        if q.bursts {
            if let Some(v) = q.full.pop() {
                let empty = std::mem::replace(&mut got, v);
                let _ = q.spare.push(empty);
            }
        } else {
            while got.len() < BURST {
                match q.one.pop() {
                    Some(h) => got.push(h),
                    None => break,
                }
            }
        }
        if got.is_empty() {
            backoff(&mut spins);
            continue;
        }
        spins = 0;
        for h in &got {
            sum = sum.wrapping_add(w.val(h));
        }
        recv += got.len();
        w.free_all(&mut got);
    }
    sum
}

/// Thread A allocates (in bursts where the API has them) and pushes each handle into a bounded
/// queue (or, with `bursts`, each burst of 32 handles); thread B pops up to a burst, reads each
/// object and frees them (through its own cache for idxpool). A warm-up run of a tenth precedes
/// the timed one. The figure is the CPU time of the busier thread per object: the pipeline's
/// time per object on two idle cores (waits spin briefly, then sleep, so that a thread
/// preempted by another process does not make the other one burn CPU time). The timed phase
/// stops after `p.forward_wall` of wall time even if fewer objects were forwarded (the figure
/// is per object forwarded), so that a loaded machine cannot stretch a run. Threads are pinned
/// only when `p.pin` says so.
pub(crate) fn forward<W, F>(mk: &F, p: &Params, check: Option<&CheckLog>, bursts: bool) -> f64
where
    W: Worker,
    W::H: Send,
    F: Fn() -> W + Sync,
{
    let q: Queues<W::H> = Queues::new(p.queue_cap, bursts);
    let start = Barrier::new(2);
    let n = p.forward_total;
    let warm = n / 10 + 1;
    // The producer's count of each phase (warm-up, timed): the consumer's target.
    let limits = [AtomicUsize::new(usize::MAX), AtomicUsize::new(usize::MAX)];
    let side = |role: usize| {
        let (q, start, limits) = (&q, &start, &limits);
        move || {
            if let Some(cpus) = p.pin {
                pin::pin_current(cpus[role]);
            }
            let mut w = mk();
            let go = |w: &mut dyn FnMut(usize, Option<Instant>, &AtomicUsize)| {
                w(warm, None, &limits[0]);
                start.wait();
                let t0 = cpu_now();
                w(n, Some(Instant::now() + p.forward_wall), &limits[1]);
                cpu_now() - t0
            };
            match check {
                Some(log) => {
                    let mut c = Checked { w: &mut w, log };
                    go(&mut |k, d, lim| {
                        if role == 0 {
                            producer(&mut c, q, k, d, lim);
                        } else {
                            black_box(consumer(&mut c, q, k, lim));
                        }
                    })
                }
                None => go(&mut |k, d, lim| {
                    if role == 0 {
                        producer(&mut w, q, k, d, lim);
                    } else {
                        black_box(consumer(&mut w, q, k, lim));
                    }
                }),
            }
        }
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(side(0));
        let b = s.spawn(side(1));
        (a.join().expect("producer"), b.join().expect("consumer"))
    });
    let moved = n.min(limits[1].load(Ordering::Acquire));
    ns_per(0, a.max(b), moved)
}
