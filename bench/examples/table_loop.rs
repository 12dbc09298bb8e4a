//! DPDK's `test_loop` on the caller's table, one instance per bulk size and pool, each in its
//! own non-inlined function, for counting instructions per object with callgrind (the
//! deterministic measure of the hot path; BENCHMARKS.md section 20).
//!
//! Each loop runs `ROUNDS` rounds of: `get_into` over a table of `KEEP` slots in windows of
//! `n`, then `put_from` over it in windows of `n`, through a `LocalCache` (cache 512, the
//! default flush policy). Pools: the branded index pool (`scoped`), the run-time index pool
//! (`Pool<Obj, Runtime, Index>`), the branded pointer twin; bulk sizes run-time (`dyn`, `n`
//! read from the command line so the compiler cannot fold it) and constant (`const`).
//!
//! ```sh
//! cargo build --release -p idxpool-bench --example table_loop
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/examples/table_loop --n 4
//! target/release/examples/table_loop --report cg.out
//! ```
//! `--n N` is the run-time bulk size of the `m_dyn` loops (one per process: callgrind adds up
//! the calls of one function); `--report` prints, for every loop, the inclusive instructions
//! of its function (`callgrind_annotate --inclusive=yes`) over the `ROUNDS * KEEP` objects it
//! moved (each object got and put once).

use idxpool::repr::Repr;
use idxpool::{Brand, Handle, Index, LocalCache, Pointer, Pool, PoolBuilder};

/// Rounds of each loop (a round moves `KEEP` objects out and back).
const ROUNDS: usize = 200;
/// Slots in the table (DPDK's `n_keep`).
const KEEP: usize = 512;

#[derive(Clone, Copy, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Obj {
    _bytes: [u8; 2048],
}

type Table<B, R> = Vec<Option<Handle<Obj, B, R>>>;
/// A loop over a run-time bulk size.
type DynLoop<B, R> = fn(&mut LocalCache<&Pool<Obj, B, R>>, &mut Table<B, R>, usize);
/// A loop over a constant bulk size.
type ConstLoop<B, R> = fn(&mut LocalCache<&Pool<Obj, B, R>>, &mut Table<B, R>);

#[inline(always)]
fn run_dyn<B: Brand, R: Repr>(c: &mut LocalCache<&Pool<Obj, B, R>>, t: &mut Table<B, R>, n: usize) {
    for _ in 0..ROUNDS {
        let mut i = 0;
        while i + n <= KEEP {
            c.get_into(&mut t[i..i + n]).expect("the cache holds KEEP");
            i += n;
        }
        let mut i = 0;
        while i + n <= KEEP {
            c.put_from(&mut t[i..i + n]).expect("all full");
            i += n;
        }
    }
}

#[inline(always)]
fn run_const<const N: usize, B: Brand, R: Repr>(
    c: &mut LocalCache<&Pool<Obj, B, R>>,
    t: &mut Table<B, R>,
) {
    for _ in 0..ROUNDS {
        let mut i = 0;
        while i + N <= KEEP {
            c.get_into(&mut t[i..i + N]).expect("the cache holds KEEP");
            i += N;
        }
        let mut i = 0;
        while i + N <= KEEP {
            c.put_from(&mut t[i..i + N]).expect("all full");
            i += N;
        }
    }
}

/// One named, non-inlined function per (pool, kind, n): the names callgrind reports (each
/// module's functions are instantiated for one brand only, so a name is one instance).
macro_rules! loops {
    ($pool:ident, $R:ty) => {
        mod $pool {
            use super::*;
            #[inline(never)]
            pub fn m_dyn<B: Brand>(
                c: &mut LocalCache<&Pool<Obj, B, $R>>,
                t: &mut Table<B, $R>,
                n: usize,
            ) {
                run_dyn(c, t, n)
            }
            #[inline(never)]
            pub fn m_const_1<B: Brand>(
                c: &mut LocalCache<&Pool<Obj, B, $R>>,
                t: &mut Table<B, $R>,
            ) {
                run_const::<1, _, _>(c, t)
            }
            #[inline(never)]
            pub fn m_const_4<B: Brand>(
                c: &mut LocalCache<&Pool<Obj, B, $R>>,
                t: &mut Table<B, $R>,
            ) {
                run_const::<4, _, _>(c, t)
            }
            #[inline(never)]
            pub fn m_const_8<B: Brand>(
                c: &mut LocalCache<&Pool<Obj, B, $R>>,
                t: &mut Table<B, $R>,
            ) {
                run_const::<8, _, _>(c, t)
            }
            #[inline(never)]
            pub fn m_const_32<B: Brand>(
                c: &mut LocalCache<&Pool<Obj, B, $R>>,
                t: &mut Table<B, $R>,
            ) {
                run_const::<32, _, _>(c, t)
            }
            pub fn all<B: Brand>(pool: &Pool<Obj, B, $R>, ns: &[usize]) {
                run_all(
                    pool,
                    ns,
                    m_dyn::<B>,
                    [
                        m_const_1::<B>,
                        m_const_4::<B>,
                        m_const_8::<B>,
                        m_const_32::<B>,
                    ],
                );
            }
        }
    };
}

/// The run-time bulks measured, each by its own call of `m_dyn` (callgrind then reports one
/// total for `m_dyn`: run it once per process with `--n`, see `main`).
fn bulks(args: &[String]) -> Vec<usize> {
    match args.iter().position(|a| a == "--n") {
        Some(i) => vec![args[i + 1].parse().expect("--n takes a number")],
        None => vec![1],
    }
}

fn run_all<B: Brand, R: Repr>(
    pool: &Pool<Obj, B, R>,
    ns: &[usize],
    dyn_: DynLoop<B, R>,
    consts: [ConstLoop<B, R>; 4],
) {
    let mut c = pool.local_cache();
    let mut t: Table<B, R> = (0..KEEP).map(|_| None).collect();
    // Warm the cache: KEEP objects in it (a first round refills from the ring).
    c.get_into(&mut t).expect("warm-up");
    c.put_from(&mut t).expect("warm-up");
    for &n in ns {
        dyn_(&mut c, &mut t, std::hint::black_box(n));
    }
    for f in consts {
        f(&mut c, &mut t);
    }
    assert!(t.iter().all(Option::is_none));
}

/// `--report FILE`: reads `callgrind_annotate --inclusive=yes FILE` and prints instructions per
/// object for each loop.
fn report(file: &str) {
    let out = std::process::Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=100", file])
        .output()
        .expect("callgrind_annotate");
    let text = String::from_utf8_lossy(&out.stdout);
    let objs = (ROUNDS * KEEP) as f64;
    for line in text.lines() {
        if let Some(p) = line.find("table_loop::") {
            let name = &line[p + "table_loop::".len()..];
            let name = name.split_whitespace().next().unwrap_or(name);
            // Function totals only (the per-file lines of inlined code have no `[binary]`).
            if !name.contains("::m_") || !line.trim_end().ends_with(']') {
                continue;
            }
            let ir: f64 = line
                .split_whitespace()
                .next()
                .unwrap_or("0")
                .replace(',', "")
                .parse()
                .unwrap_or(0.0);
            println!("{name:<40} {:>8.2}", ir / objs);
        }
    }
}

loops!(branded, Index);
loops!(runtime, Index);
loops!(pointer, Pointer);

fn main() -> Result<(), idxpool::PoolError> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--report") {
        report(&args[i + 1]);
        return Ok(());
    }
    let ns = bulks(&args);
    let builder = || {
        PoolBuilder::<Obj>::zeroed(4 * KEEP as u32)
            .cache_size(512)
            .prefault(true)
    };
    builder()
        .repr::<Index>()
        .scoped(|p| branded::all(&p, &ns))?;
    runtime::all(&builder().repr::<Index>().build()?, &ns);
    // SAFETY: one Unchecked pool in this process: its handles are never given to another.
    pointer::all(
        &unsafe { builder().repr::<Pointer>().build_unchecked()? },
        &ns,
    );
    Ok(())
}
