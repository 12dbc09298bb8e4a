//! `HandleChannel` (MPMC, with close) against `HandleRing` (SPSC, ptr_ring) and against
//! crossbeam-channel's bounded channel, all carrying the same 4-byte handles of one pool.
//!
//! Each producer takes objects from the pool through its own `LocalCache` and sends their
//! handles; the consumer receives them and puts them back through its own `LocalCache`. The
//! pool has 4096 objects and every queue has room for all of them, so a send never finds a
//! queue full: the pool bounds what is in flight (a producer waits when it is dry). Two
//! shapes: 1 producer / 1 consumer (`HandleRing` can take part) and 4 producers / 1 consumer.
//! Rates are objects moved per second of wall time, medians over repetitions in a rotated
//! order, with `channel` measured twice (the A/A pair).
//!
//! `cargo run --release -p idxpool-bench --example handle_channel -- --quick`

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use idxpool::channel::TryRecvError;
use idxpool::handle_ring::Zeroing;
use idxpool::{Handle, HandleChannel, HandleRing, LocalCache, Pool, PoolBuilder};
use idxpool_bench::pin::{context_line, Pinning};
use idxpool_bench::spin::{backoff, After, UNPINNED_SPINS};
use idxpool_bench::stats::median;

const HELP: &str = "\
handle_channel: moving pool handles between threads, objects per second (wall), medians:
  ring       HandleRing (SPSC, ptr_ring; 1 producer only), spin-then-yield on full/empty
  channel    HandleChannel (MPMC with close)
  crossbeam  crossbeam_channel::bounded, the same handles
  channel2   HandleChannel again (the A/A pair)
Producers get objects from a 4096-object pool (u64) through a LocalCache and send their
handles; the consumer puts each back through its own LocalCache. Shapes 1p1c and 4p1c.
Receives poll (try_recv, then spin/yield) by default; --blocking uses recv() for channel
and crossbeam (parks), the ring still polls.

usage: handle_channel [--quick] [--objects N] [--reps R] [--blocking] [--help]
  --quick     200000 objects per cell, 3 reps: under a second
  --objects   objects per cell (default 10000000)
  --reps      repetitions (default 5): about 6 s in all (quiet 2-vCPU machine)
";

const POOL: u32 = 4096;

type P = Arc<Pool<u64>>;
type H = Handle<u64>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Ring,
    Channel,
    Crossbeam,
    Channel2,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ring => "ring",
            Kind::Channel => "channel",
            Kind::Crossbeam => "crossbeam",
            Kind::Channel2 => "channel2",
        }
    }
}

fn pool() -> P {
    Arc::new(
        PoolBuilder::<u64>::with_default(POOL)
            .cache_size(256)
            .prefault(true)
            .build()
            .expect("pool"),
    )
}

/// A producer's loop: `n` objects from the pool, each handed to `send`.
fn produce(pool: &P, n: u64, mut send: impl FnMut(H)) {
    let mut cache = LocalCache::new(pool.clone());
    let mut spins = 0;
    let mut k = 0;
    while k < n {
        match cache.get() {
            Ok(h) => {
                send(h);
                k += 1;
                spins = 0;
            }
            Err(_) => backoff(&mut spins, UNPINNED_SPINS, After::Yield),
        }
    }
}

/// Moves `n` objects from `producers` threads to one consumer; returns the wall time from the
/// start barrier to the last object's put.
fn cell(kind: Kind, producers: usize, n: u64, blocking: bool) -> Duration {
    let pool = pool();
    let per = n / producers as u64;
    let total = per * producers as u64;
    let start = Arc::new(Barrier::new(producers + 1));
    let mut threads = Vec::new();
    let t0;
    match kind {
        Kind::Ring => {
            assert_eq!(producers, 1, "HandleRing is single-producer");
            let (mut tx, mut rx) =
                HandleRing::new(pool.clone(), POOL as usize, Zeroing::Batched).expect("ring");
            let (p, s) = (pool.clone(), start.clone());
            threads.push(std::thread::spawn(move || {
                s.wait();
                produce(&p, per, |h| {
                    let mut h = h;
                    let mut spins = 0;
                    while let Err(back) = tx.produce(h) {
                        h = back;
                        backoff(&mut spins, UNPINNED_SPINS, After::Yield);
                    }
                });
            }));
            let mut cache = LocalCache::new(pool.clone());
            start.wait();
            t0 = Instant::now();
            let (mut got, mut spins) = (0, 0);
            while got < total {
                match rx.consume() {
                    Some(h) => {
                        cache.put(h);
                        got += 1;
                        spins = 0;
                    }
                    None => backoff(&mut spins, UNPINNED_SPINS, After::Yield),
                }
            }
        }
        Kind::Channel | Kind::Channel2 => {
            let (tx, rx) = HandleChannel::new(pool.clone()).expect("channel");
            for _ in 0..producers {
                let (p, s, tx) = (pool.clone(), start.clone(), tx.clone());
                threads.push(std::thread::spawn(move || {
                    s.wait();
                    produce(&p, per, |h| tx.send(h).expect("never full, never closed"));
                }));
            }
            drop(tx);
            let mut cache = LocalCache::new(pool.clone());
            start.wait();
            t0 = Instant::now();
            let (mut got, mut spins) = (0, 0);
            while got < total {
                if blocking {
                    cache.put(rx.recv().expect("senders remain until the last object"));
                    got += 1;
                    continue;
                }
                match rx.try_recv() {
                    Ok(h) => {
                        cache.put(h);
                        got += 1;
                        spins = 0;
                    }
                    Err(TryRecvError::Empty) => backoff(&mut spins, UNPINNED_SPINS, After::Yield),
                    Err(TryRecvError::Disconnected) => panic!("disconnected early"),
                }
            }
        }
        Kind::Crossbeam => {
            let (tx, rx) = crossbeam_channel::bounded::<H>(POOL as usize);
            for _ in 0..producers {
                let (p, s, tx) = (pool.clone(), start.clone(), tx.clone());
                threads.push(std::thread::spawn(move || {
                    s.wait();
                    produce(&p, per, |h| {
                        if tx.send(h).is_err() {
                            panic!("receiver gone");
                        }
                    });
                }));
            }
            drop(tx);
            let mut cache = LocalCache::new(pool.clone());
            start.wait();
            t0 = Instant::now();
            let (mut got, mut spins) = (0, 0);
            while got < total {
                if blocking {
                    cache.put(rx.recv().expect("senders remain until the last object"));
                    got += 1;
                    continue;
                }
                match rx.try_recv() {
                    Ok(h) => {
                        cache.put(h);
                        got += 1;
                        spins = 0;
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {
                        backoff(&mut spins, UNPINNED_SPINS, After::Yield)
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    let wall = t0.elapsed();
    for t in threads {
        t.join().expect("producer");
    }
    assert_eq!(pool.in_use(), 0, "{}: every object back", kind.name());
    wall
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut objects, mut reps, mut blocking) = (10_000_000u64, 5usize, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            "--quick" => {
                objects = 200_000;
                reps = 3;
            }
            "--blocking" => blocking = true,
            "--objects" => objects = it.next().and_then(|s| s.parse().ok()).unwrap_or(objects),
            "--reps" => {
                reps = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(reps)
                    .max(1)
            }
            other => {
                eprintln!("handle_channel: unknown argument {other:?}\n\n{HELP}");
                std::process::exit(2);
            }
        }
    }
    println!("{}", context_line(&Pinning::off("not pinned")));
    println!(
        "{objects} objects per cell, {reps} reps, receive by {}",
        if blocking {
            "recv() (parks; the ring polls)"
        } else {
            "polling (try_recv, spin then yield)"
        }
    );
    for producers in [1usize, 4] {
        let kinds: Vec<Kind> = if producers == 1 {
            vec![Kind::Ring, Kind::Channel, Kind::Crossbeam, Kind::Channel2]
        } else {
            vec![Kind::Channel, Kind::Crossbeam, Kind::Channel2]
        };
        let mut rates: Vec<Vec<f64>> = kinds.iter().map(|_| Vec::new()).collect();
        for rep in 0..reps {
            for k in 0..kinds.len() {
                let i = (k + rep) % kinds.len();
                let wall = cell(kinds[i], producers, objects, blocking);
                rates[i].push(objects as f64 / wall.as_secs_f64() / 1e6);
            }
        }
        let med: Vec<f64> = rates.iter().map(|r| median(r)).collect();
        let chan = med[kinds.iter().position(|&k| k == Kind::Channel).unwrap()];
        println!("\n{producers} producer(s), 1 consumer: Mobj/s, median of {reps}");
        println!(
            "{:<10} {:>8} {:>10} {:>22}",
            "queue", "Mobj/s", "/ channel", "reps"
        );
        for (i, k) in kinds.iter().enumerate() {
            let all: Vec<String> = rates[i].iter().map(|r| format!("{r:.1}")).collect();
            println!(
                "{:<10} {:>8.2} {:>10.3} {:>22}",
                k.name(),
                med[i],
                med[i] / chan,
                all.join(" ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_moves_every_object_and_gives_it_back() {
        for kind in [Kind::Ring, Kind::Channel, Kind::Crossbeam] {
            cell(kind, 1, 20_000, false);
        }
        for kind in [Kind::Channel, Kind::Crossbeam] {
            cell(kind, 4, 20_000, false);
            cell(kind, 4, 20_000, true);
        }
    }
}
