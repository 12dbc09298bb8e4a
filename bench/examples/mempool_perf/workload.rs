//! The workload of a cell, generic over the representation: the very same code runs on both
//! pools, only the entry type differs (4-byte index vs 8-byte pointer).

use std::sync::Barrier;
use std::time::Duration;

use idxpool::repr::Repr;
use idxpool::{Brand, GenericHandle, LocalCache, PoolError};
use idxpool_bench::clock::{Clock, Stopwatch};
use idxpool_bench::pin::Pinning;

use crate::matrix::Cell;

/// Objects moved between two reads of the clock (DPDK checks the clock every N = 65536).
const OBJS_PER_CLOCK_CHECK: usize = 8192;

/// The object: 2048 bytes as DPDK's test elements, cache-line aligned. `head` is the 8 bytes
/// written by `touch=1`.
#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub struct Obj {
    pub head: u64,
    pub rest: [u8; 2040],
}

const _: () = assert!(std::mem::size_of::<Obj>() == 2048);

type H<B, R> = GenericHandle<Obj, B, R>;

/// Runs one cell on one thread's cache for `dur`: returns (objects got-and-put, elapsed).
fn worker<B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    cell: &Cell,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    match (cell.constant, cell.touch) {
        (false, false) => worker_dyn::<false, B, R>(c, cell, dur, clock),
        (false, true) => worker_dyn::<true, B, R>(c, cell, dur, clock),
        (true, touch) => {
            assert_eq!(cell.get, cell.put, "constant_n cells have get == put");
            match (cell.get, touch) {
                (1, false) => worker_const::<1, false, B, R>(c, cell.keep, dur, clock),
                (1, true) => worker_const::<1, true, B, R>(c, cell.keep, dur, clock),
                (4, false) => worker_const::<4, false, B, R>(c, cell.keep, dur, clock),
                (4, true) => worker_const::<4, true, B, R>(c, cell.keep, dur, clock),
                (8, false) => worker_const::<8, false, B, R>(c, cell.keep, dur, clock),
                (8, true) => worker_const::<8, true, B, R>(c, cell.keep, dur, clock),
                (32, false) => worker_const::<32, false, B, R>(c, cell.keep, dur, clock),
                (32, true) => worker_const::<32, true, B, R>(c, cell.keep, dur, clock),
                (n, _) => panic!("no constant_n instance for bulk size {n}"),
            }
        }
    }
}

/// `constant_n = 0`: bulk sizes are run-time values (`get_bulk` / `put_bulk_tail`). Not
/// inlined, so that each variant is one function to profile and disassemble.
#[inline(never)]
fn worker_dyn<const TOUCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    cell: &Cell,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let (n_get, n_put, keep) = (cell.get, cell.put, cell.keep);
    // Handle -> &mut T converter holding base and stride by value (registers in the loop).
    let objs = c.pool().resolver();
    let mut kept: Vec<H<B, R>> = Vec::with_capacity(keep);
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    loop {
        for _ in 0..cycles {
            while kept.len() < keep {
                let at = kept.len();
                if let Err(e) = c.get_bulk(&mut kept, n_get) {
                    c.put_bulk(&mut kept);
                    return Err(e);
                }
                if TOUCH {
                    for h in &mut kept[at..] {
                        objs.get_mut(h).head = count;
                    }
                }
            }
            while !kept.is_empty() {
                c.put_bulk_tail(&mut kept, n_put);
            }
            count += keep as u64;
        }
        if start.wall_elapsed() >= dur {
            return Ok((count, start.measured()));
        }
    }
}

/// `constant_n = 1`: the bulk size is the compile-time constant `N` (`get_array::<N>` /
/// `put_array`), monomorphised per N. Not inlined (see `worker_dyn`).
#[inline(never)]
fn worker_const<const N: usize, const TOUCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<'_, Obj, B, R>,
    keep: usize,
    dur: Duration,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let chunks = keep / N;
    let objs = c.pool().resolver();
    let mut kept: Vec<[H<B, R>; N]> = Vec::with_capacity(chunks);
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    loop {
        for _ in 0..cycles {
            for _ in 0..chunks {
                match c.get_array::<N>() {
                    Ok(mut a) => {
                        if TOUCH {
                            for h in &mut a {
                                objs.get_mut(h).head = count;
                            }
                        }
                        kept.push(a);
                    }
                    Err(e) => {
                        while let Some(a) = kept.pop() {
                            c.put_array(a);
                        }
                        return Err(e);
                    }
                }
            }
            while let Some(a) = kept.pop() {
                c.put_array(a);
            }
            count += (chunks * N) as u64;
        }
        if start.wall_elapsed() >= dur {
            return Ok((count, start.measured()));
        }
    }
}

/// One timed run of one cell: one thread per cache, started together behind a barrier.
/// Thread `i` is pinned as `pinning` says. Returns the summed rate (objects got-and-put per
/// second).
pub fn run_cell<B: Brand, R: Repr>(
    caches: &mut [LocalCache<'_, Obj, B, R>],
    cell: &Cell,
    dur: Duration,
    clock: Clock,
    pinning: &Pinning,
) -> Result<f64, PoolError> {
    let barrier = Barrier::new(caches.len());
    let results: Vec<Result<(u64, Duration), PoolError>> = std::thread::scope(|s| {
        let handles: Vec<_> = caches
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                let barrier = &barrier;
                s.spawn(move || {
                    pinning.apply(i);
                    barrier.wait();
                    worker(c, cell, dur, clock)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    });
    let mut rate = 0.0;
    for r in results {
        let (count, elapsed) = r?;
        rate += count as f64 / elapsed.as_secs_f64();
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use idxpool::PoolBuilder;

    #[test]
    fn workload_runs_on_both_pools_and_returns_every_object() {
        // A tiny timed run of every kind of cell on both representations: no object lost.
        let cells = [
            (4, 1, false, true),
            (1, 4, false, false),
            (8, 8, true, true),
            (32, 32, true, false),
        ];
        let off = Pinning::off("test");
        for (get, put, constant, touch) in cells {
            let cell = Cell {
                cache: 64,
                cores: 1,
                get,
                put,
                keep: 32,
                constant,
                touch,
            };
            let d = Duration::from_millis(1);
            PoolBuilder::<Obj>::zeroed(200)
                .cache_size(64)
                .scoped(|pool| {
                    let mut caches = vec![pool.local_cache()];
                    assert!(run_cell(&mut caches, &cell, d, Clock::Cpu, &off).unwrap() > 0.0);
                    drop(caches);
                    assert_eq!(pool.in_use(), 0);
                })
                .unwrap();
            PoolBuilder::<Obj>::zeroed(200)
                .cache_size(0)
                .scoped_ptr(|pool| {
                    let mut caches = vec![pool.local_cache(), pool.local_cache()];
                    let two = Cell { cores: 2, ..cell };
                    assert!(run_cell(&mut caches, &two, d, Clock::Wall, &off).unwrap() > 0.0);
                    drop(caches);
                    assert_eq!(pool.in_use(), 0);
                })
                .unwrap();
        }
    }
}
