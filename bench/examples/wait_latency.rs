//! Wake-up latency of a waiting get after a put: the time from just before a put
//! into an empty pool to the return of the get it wakes, median and p99, with 1 and 8 waiters.
//!
//! * blocking: `Pool::get_wait` against a `Mutex<Vec<u32>>` + `Condvar` pool;
//! * async: `Pool::get_async` on a tokio multi-thread runtime (2 workers) against a
//!   `tokio::sync::Semaphore` guarding a `Mutex<Vec<u32>>` free list.
//!
//! Each round: every waiter is blocked on an empty pool; the main thread sleeps `--gap-us`
//! (so that they are asleep, not spinning), stamps the time and puts one object; the waiter it
//! wakes records `now - stamp` and sends the object back to the main thread. Never pins.
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example wait_latency -- --rounds 2000
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use idxpool::{Handle, Pool, PoolBuilder};

#[derive(Parser)]
struct Args {
    /// Puts (wake-ups measured) per configuration.
    #[arg(long, default_value_t = 2000)]
    rounds: usize,
    /// Pause before each put, in microseconds (lets the waiters fall asleep).
    #[arg(long, default_value_t = 200)]
    gap_us: u64,
    /// Repetitions of the whole matrix (medians are printed per repetition).
    #[arg(long, default_value_t = 1)]
    reps: usize,
}

/// The stamp of the last put, in ns since `base`.
struct Clock {
    base: Instant,
    stamp: AtomicU64,
}
impl Clock {
    fn stamp(&self) {
        self.stamp
            .store(self.base.elapsed().as_nanos() as u64, Ordering::SeqCst);
    }
    fn since(&self) -> u64 {
        (self.base.elapsed().as_nanos() as u64).saturating_sub(self.stamp.load(Ordering::SeqCst))
    }
}

/// One contender: (waiters, args) -> (median, p99) wake-up latency in microseconds.
type Contender = fn(usize, &Args) -> (f64, f64);

fn summary(mut v: Vec<u64>) -> (f64, f64) {
    v.sort_unstable();
    let q = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize] as f64 / 1000.0;
    (q(0.5), q(0.99))
}

/// Drives `rounds` wake-ups: `put(obj)` wakes a waiter, which sends `(latency, obj)` back.
fn drive<O: Send>(
    rounds: usize,
    gap: Duration,
    clock: &Clock,
    mut objs: Vec<O>,
    rx: &mpsc::Receiver<(u64, O)>,
    put: impl Fn(O),
) -> (Vec<u64>, Vec<O>) {
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        std::thread::sleep(gap);
        let o = objs.pop().expect("an object to put");
        clock.stamp();
        put(o);
        let (l, o) = rx.recv().unwrap();
        lat.push(l);
        objs.push(o);
    }
    (lat, objs)
}

fn idxpool_blocking(waiters: usize, a: &Args) -> (f64, f64) {
    let pool: Pool<u64> = PoolBuilder::with_default(1).cache_size(0).build().unwrap();
    let clock = Clock {
        base: Instant::now(),
        stamp: AtomicU64::new(0),
    };
    let h = pool.get().unwrap();
    let (tx, rx) = mpsc::channel::<(u64, Option<Handle<u64>>)>();
    let out = std::thread::scope(|s| {
        for _ in 0..waiters {
            let (pool, clock, tx) = (&pool, &clock, tx.clone());
            s.spawn(move || loop {
                let h = pool.get_wait(Duration::MAX).unwrap();
                let l = clock.since();
                if *pool.get_ref(&h) == u64::MAX {
                    pool.put(h); // the stop object: pass it on
                    return;
                }
                tx.send((l, Some(h))).unwrap();
            });
        }
        let (lat, mut objs) = drive(
            a.rounds,
            Duration::from_micros(a.gap_us),
            &clock,
            vec![Some(h)],
            &rx,
            |o| pool.put(o.unwrap()),
        );
        let mut h = objs.pop().unwrap().unwrap();
        *pool.get_mut(&mut h) = u64::MAX;
        pool.put(h);
        lat
    });
    summary(out)
}

fn condvar_blocking(waiters: usize, a: &Args) -> (f64, f64) {
    let pool = (Mutex::new(Vec::<u32>::new()), Condvar::new());
    let clock = Clock {
        base: Instant::now(),
        stamp: AtomicU64::new(0),
    };
    let (tx, rx) = mpsc::channel::<(u64, u32)>();
    let put = |o: u32| {
        pool.0.lock().unwrap().push(o);
        pool.1.notify_one();
    };
    let out = std::thread::scope(|s| {
        for _ in 0..waiters {
            let (pool, clock, tx) = (&pool, &clock, tx.clone());
            s.spawn(move || loop {
                let o = {
                    let mut v = pool.0.lock().unwrap();
                    loop {
                        if let Some(o) = v.pop() {
                            break o;
                        }
                        v = pool.1.wait(v).unwrap();
                    }
                };
                let l = clock.since();
                if o == u32::MAX {
                    pool.0.lock().unwrap().push(o);
                    pool.1.notify_one();
                    return;
                }
                tx.send((l, o)).unwrap();
            });
        }
        let (lat, _) = drive(
            a.rounds,
            Duration::from_micros(a.gap_us),
            &clock,
            vec![0u32],
            &rx,
            put,
        );
        put(u32::MAX);
        lat
    });
    summary(out)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

fn idxpool_async(waiters: usize, a: &Args) -> (f64, f64) {
    let rt = runtime();
    let pool: Arc<Pool<u64>> =
        Arc::new(PoolBuilder::with_default(1).cache_size(0).build().unwrap());
    let clock = Arc::new(Clock {
        base: Instant::now(),
        stamp: AtomicU64::new(0),
    });
    let h = pool.get().unwrap();
    let (tx, rx) = mpsc::channel::<(u64, Option<Handle<u64>>)>();
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let (pool, clock, tx) = (pool.clone(), clock.clone(), tx.clone());
        tasks.push(rt.spawn(async move {
            loop {
                let h = pool.get_async().await.unwrap();
                let l = clock.since();
                if *pool.get_ref(&h) == u64::MAX {
                    pool.put(h);
                    return;
                }
                tx.send((l, Some(h))).unwrap();
            }
        }));
    }
    let (lat, mut objs) = drive(
        a.rounds,
        Duration::from_micros(a.gap_us),
        &clock,
        vec![Some(h)],
        &rx,
        |o| pool.put(o.unwrap()),
    );
    let mut h = objs.pop().unwrap().unwrap();
    *pool.get_mut(&mut h) = u64::MAX;
    pool.put(h);
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    summary(lat)
}

fn semaphore_async(waiters: usize, a: &Args) -> (f64, f64) {
    let rt = runtime();
    let pool = Arc::new((
        tokio::sync::Semaphore::new(0),
        Mutex::new(Vec::<u32>::new()),
    ));
    let clock = Arc::new(Clock {
        base: Instant::now(),
        stamp: AtomicU64::new(0),
    });
    let (tx, rx) = mpsc::channel::<(u64, u32)>();
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let (pool, clock, tx) = (pool.clone(), clock.clone(), tx.clone());
        tasks.push(rt.spawn(async move {
            loop {
                pool.0.acquire().await.unwrap().forget();
                let o = pool.1.lock().unwrap().pop().unwrap();
                let l = clock.since();
                if o == u32::MAX {
                    pool.1.lock().unwrap().push(o);
                    pool.0.add_permits(1);
                    return;
                }
                tx.send((l, o)).unwrap();
            }
        }));
    }
    let put = |o: u32| {
        pool.1.lock().unwrap().push(o);
        pool.0.add_permits(1);
    };
    let (lat, _) = drive(
        a.rounds,
        Duration::from_micros(a.gap_us),
        &clock,
        vec![0u32],
        &rx,
        put,
    );
    put(u32::MAX);
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    summary(lat)
}

fn main() {
    let a = Args::parse();
    println!(
        "wake-up latency after a put, us (median / p99), {} rounds, gap {} us",
        a.rounds, a.gap_us
    );
    println!(
        "{:<28} {:>8} {:>18} {:>18}",
        "pool", "waiters", "median", "p99"
    );
    for rep in 0..a.reps {
        for waiters in [1, 8] {
            let rows: [(&str, Contender); 4] = [
                ("idxpool get_wait", idxpool_blocking),
                ("Mutex<Vec> + Condvar", condvar_blocking),
                ("idxpool get_async", idxpool_async),
                ("tokio Semaphore + Vec", semaphore_async),
            ];
            for (name, f) in rows {
                let (m, p) = f(waiters, &a);
                println!("{name:<28} {waiters:>8} {m:>18.1} {p:>18.1}   (rep {rep})");
            }
        }
    }
}
