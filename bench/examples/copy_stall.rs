//! The short-table loop of mempool_perf (DPDK's `test_loop`: get `keep` entries from the top of
//! a cache array into a table in bulks of `g`, put them back in bulks of `p`) reduced to its
//! copies, checks and clears on plain `u32` arrays, with the shape of each step chosen per
//! variant, so that one thing varies at a time (BENCHMARKS.md section 23): no pool, no
//! dependency but std, built with `rustc` alone in seconds:
//!
//! ```sh
//! rustc -C opt-level=3 -C codegen-units=1 -C panic=abort bench/examples/copy_stall.rs -o /tmp/cs-default
//! rustc -C opt-level=3 -C codegen-units=1 -C panic=abort -C target-cpu=native bench/examples/copy_stall.rs -o /tmp/cs-native
//! /tmp/cs-default [ms per run] [rounds] [get/put/keep]
//! valgrind --tool=callgrind /tmp/cs-default 0 1 32/4/32   # ms 0: 16 x 65536 entries per run
//! ```
//!
//! Variants (the crate's steps are `repr::Shape`: a run of `K < n <= 2K` entries is two
//! fixed-size windows of `K`, disjoint at `n = 2K`):
//! * `halves`: as the crate (copy, slot check, clear: two windows of `K`);
//! * `whole`: a run of `n = 2K` as one window of `2K` (one store sequence per run), else halves;
//! * `x16`: every copy in 16-byte moves at most (`whole` otherwise): no load wider than the
//!   narrowest whole-run store of 4 entries;
//! * `scalar`: copies one entry at a time (each load reads what one store wrote);
//! * `w-copy`: the copies as `whole`, the checks and clears as `halves`; `w-check`: the
//!   reverse;
//! * `halves+4k`: `halves` with the table placed at the same address modulo 4096 as the top
//!   of the cache array (the loads of one alias the stores of the other: 4K aliasing);
//! * `halves+mis`: `halves` with the table 4 bytes off 16-byte alignment.
//!
//! Rates are entries got-and-put per microsecond of the thread's CPU time; each variant runs
//! interleaved with the others, `rounds` times, and the first variant again at the end of each
//! round (the A/A); medians are printed.

use std::hint::black_box;
use std::time::Duration;

/// Entries of the cache array (the crate's `2 x size`, size 512).
const CACHE: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Halves,
    Whole,
    X16,
    Scalar,
    WholeCopy,
    WholeCheck,
}

/// Copies `n` entries, `K < n <= 2K` when `n > 1`, in the mode's shape.
#[inline(always)]
unsafe fn copy<const M: u8>(src: *const u32, dst: *mut u32, n: usize) {
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    unsafe {
        match M {
            3 => {
                for i in 0..n {
                    std::ptr::write_volatile(dst.add(i), std::ptr::read_volatile(src.add(i)));
                }
            }
            2 => {
                // 16-byte moves (x86-64 baseline SSE2), then the remainder whole.
                let mut i = 0;
                while i + 4 <= n {
                    #[cfg(target_arch = "x86_64")]
                    {
                        use std::arch::x86_64::*;
                        let v = _mm_loadu_si128(src.add(i).cast());
                        // a compiler barrier between moves: no merging into wider moves
                        std::arch::asm!("", options(nomem, nostack, preserves_flags));
                        _mm_storeu_si128(dst.add(i).cast(), v);
                    }
                    i += 4;
                }
                if i < n {
                    by_k::<1>(src.add(i), dst.add(i), n - i);
                }
            }
            1 | 4 => by_k::<1>(src, dst, n),
            _ => by_k::<0>(src, dst, n),
        }
    }
}

/// `whole == 1`: a run of `n = 2K` is one window of `2K`.
#[inline(always)]
unsafe fn by_k<const WHOLE: u8>(s: *const u32, d: *mut u32, n: usize) {
    macro_rules! win {
        ($k:literal) => {{
            if WHOLE == 1 && n == 2 * $k {
                std::ptr::copy_nonoverlapping(s, d, 2 * $k);
            } else {
                std::ptr::copy_nonoverlapping(s, d, $k);
                std::ptr::copy_nonoverlapping(s.add(n - $k), d.add(n - $k), $k);
            }
        }};
    }
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    unsafe {
        if n == 1 {
            d.write(s.read());
        } else if n == 2 {
            win!(1)
        } else if n <= 4 {
            win!(2)
        } else if n <= 8 {
            win!(4)
        } else if n <= 16 {
            win!(8)
        } else if n <= 32 {
            win!(16)
        } else {
            std::ptr::copy_nonoverlapping(s, d, n)
        }
    }
}

/// OR over `n` entries (the slot checks), in windows as the copy's mode.
#[inline(always)]
unsafe fn or_all<const M: u8>(p: *const u32, n: usize) -> u32 {
    #[inline(always)]
    unsafe fn w<const K: usize, const K2: usize>(p: *const u32, n: usize, whole: bool) -> u32 {
        // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
        // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
        unsafe {
            if whole && n == K2 {
                let a = &*p.cast::<[u32; K2]>();
                let mut acc = 0;
                for x in a {
                    acc |= x;
                }
                return acc;
            }
            let (a, b) = (&*p.cast::<[u32; K]>(), &*p.add(n - K).cast::<[u32; K]>());
            let mut acc = 0;
            for x in a {
                acc |= x;
            }
            for x in b {
                acc |= x;
            }
            acc
        }
    }
    let whole = matches!(M, 1 | 2 | 5);
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    unsafe {
        if n == 1 {
            *p
        } else if n == 2 {
            w::<1, 2>(p, n, whole)
        } else if n <= 4 {
            w::<2, 4>(p, n, whole)
        } else if n <= 8 {
            w::<4, 8>(p, n, whole)
        } else if n <= 16 {
            w::<8, 16>(p, n, whole)
        } else {
            w::<16, 32>(p, n, whole)
        }
    }
}

/// "Some slot empty" over `n` entries (the put's check: the crate ORs `is_none`).
#[inline(always)]
unsafe fn any_zero<const M: u8>(p: *const u32, n: usize) -> bool {
    #[inline(always)]
    unsafe fn w<const K: usize, const K2: usize>(p: *const u32, n: usize, whole: bool) -> bool {
        // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
        // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
        unsafe {
            if whole && n == K2 {
                let a = &*p.cast::<[u32; K2]>();
                let mut any = false;
                for x in a {
                    any |= *x == 0;
                }
                return any;
            }
            let (a, b) = (&*p.cast::<[u32; K]>(), &*p.add(n - K).cast::<[u32; K]>());
            let mut any = false;
            for x in a {
                any |= *x == 0;
            }
            for x in b {
                any |= *x == 0;
            }
            any
        }
    }
    let whole = matches!(M, 1 | 2 | 5);
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    unsafe {
        if n == 1 {
            *p == 0
        } else if n == 2 {
            w::<1, 2>(p, n, whole)
        } else if n <= 4 {
            w::<2, 4>(p, n, whole)
        } else if n <= 8 {
            w::<4, 8>(p, n, whole)
        } else if n <= 16 {
            w::<8, 16>(p, n, whole)
        } else {
            w::<16, 32>(p, n, whole)
        }
    }
}

/// Zeroes `n` entries (the table's clear), in windows as the copy's mode.
#[inline(always)]
unsafe fn clear<const M: u8>(p: *mut u32, n: usize) {
    #[inline(always)]
    unsafe fn w<const K: usize, const K2: usize>(p: *mut u32, n: usize, whole: bool) {
        // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
        // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
        unsafe {
            if whole && n == K2 {
                p.cast::<[u32; K2]>().write([0; K2]);
            } else {
                p.cast::<[u32; K]>().write([0; K]);
                p.add(n - K).cast::<[u32; K]>().write([0; K]);
            }
        }
    }
    let whole = matches!(M, 1 | 2 | 5);
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    unsafe {
        if n == 1 {
            p.write(0)
        } else if n == 2 {
            w::<1, 2>(p, n, whole)
        } else if n <= 4 {
            w::<2, 4>(p, n, whole)
        } else if n <= 8 {
            w::<4, 8>(p, n, whole)
        } else if n <= 16 {
            w::<8, 16>(p, n, whole)
        } else {
            w::<16, 32>(p, n, whole)
        }
    }
}

/// `run::<M>` under a name of its own per variant (callgrind's report names functions).
macro_rules! named {
    ($($name:ident = $m:literal),*) => {$(
        #[inline(never)]
        fn $name(c: *mut u32, l: usize, t: *mut u32, k: usize, g: usize, p: usize, it: usize) -> u32 {
            run::<$m>(c, l, t, k, g, p, it)
        }
    )*};
}
named!(
    loop_halves = 0,
    loop_whole = 1,
    loop_x16 = 2,
    loop_scalar = 3,
    loop_wcopy = 4,
    loop_wcheck = 5
);

/// The loop: `iters` passes of get `keep` in bulks of `g`, put back in bulks of `p`. Returns
/// a checksum (so nothing is optimised away).
#[inline(always)]
fn run<const M: u8>(
    cache: *mut u32,
    len0: usize,
    table: *mut u32,
    keep: usize,
    g: usize,
    p: usize,
    iters: usize,
) -> u32 {
    let mut len = len0;
    let mut bad = 0u32;
    for _ in 0..iters {
        let mut i = 0;
        while i < keep {
            // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
            // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
            unsafe {
                // the get: slot check (all empty), copy from the cache's top
                if or_all::<M>(table.add(i), g) != 0 || g > len {
                    bad += 1;
                    break;
                }
                copy::<M>(cache.add(len - g), table.add(i), g);
            }
            len -= g;
            i += g;
        }
        let mut i = 0;
        while i < keep {
            // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
            // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
            unsafe {
                // the put: slot check (all full), copy onto the cache, clear the slots
                if any_zero::<M>(table.add(i), p) {
                    bad += 1;
                    break;
                }
                copy::<M>(table.add(i), cache.add(len), p);
                clear::<M>(table.add(i), p);
            }
            len += p;
            i += p;
        }
    }
    bad + len as u32
}

fn thread_cpu() -> Duration {
    #[repr(C)]
    struct Ts {
        s: i64,
        ns: i64,
    }
    extern "C" {
        fn clock_gettime(c: i32, t: *mut Ts) -> i32;
    }
    let mut t = Ts { s: 0, ns: 0 };
    // CLOCK_THREAD_CPUTIME_ID = 3
    // SAFETY: clock_gettime writes one timespec into `t`, a live local of that layout.
    unsafe { clock_gettime(3, &mut t) };
    Duration::new(t.s as u64, t.ns as u32)
}

#[derive(Clone, Copy, Debug)]
struct Variant {
    name: &'static str,
    mode: Mode,
    /// table placement: 0 its own 64-byte aligned place, 1 aliasing the cache's top mod 4096,
    /// 2 four bytes off 16-byte alignment
    place: u8,
}

fn measure(v: Variant, keep: usize, g: usize, p: usize, ms: u64, mem: &mut [u32]) -> f64 {
    // one allocation: the cache array at 0 (64-byte aligned), the table 8192 bytes above it
    // (2 pages: no aliasing with the cache's top), or where `place` says
    let base = mem.as_mut_ptr();
    let off = (64 - (base as usize % 64)) % 64 / 4;
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    let cache = unsafe { base.add(off) };
    let len0 = 512;
    for k in 0..CACHE {
        // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
        // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
        unsafe { *cache.add(k) = k as u32 + 1 };
    }
    let mut t = 2 * CACHE + 1024; // 4096 bytes past the array's end
    match v.place {
        1 => t = 3 * CACHE + len0 - keep, // table[0] at cache[len0 - keep] + 8 KiB... mod 4096
        2 => t += 1,
        _ => {}
    }
    // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
    // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
    let table = unsafe { cache.add(t) };
    for k in 0..keep {
        // SAFETY: the caller passes (or this function made) pointers into `mem` valid for
        // the `n` (`keep`, `g`, `p`) entries touched: the cache array of 1024, the table after it.
        unsafe { *table.add(k) = 0 };
    }
    let (g, p) = (black_box(g), black_box(p));
    let f = match v.mode {
        Mode::Halves => loop_halves,
        Mode::Whole => loop_whole,
        Mode::X16 => loop_x16,
        Mode::Scalar => loop_scalar,
        Mode::WholeCopy => loop_wcopy,
        Mode::WholeCheck => loop_wcheck,
    };
    let chunk = (1 << 16) / keep;
    let start = thread_cpu();
    let mut n = 0usize;
    let mut sum = 0;
    let budget = Duration::from_millis(ms);
    // ms == 0: a fixed 16 chunks (instruction counts under callgrind: objects moved = 16 x
    // chunk x keep per call of `run`)
    while if ms == 0 {
        n < 16 * chunk * keep
    } else {
        thread_cpu() - start < budget
    } {
        sum += f(cache, len0, table, keep, g, p, chunk);
        n += chunk * keep;
    }
    black_box(sum);
    n as f64 / (thread_cpu() - start).as_secs_f64() / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ms: u64 = args.get(1).map_or(100, |s| s.parse().expect("ms"));
    let rounds: usize = args.get(2).map_or(7, |s| s.parse().expect("rounds"));
    let only = args.get(3).cloned();
    let cells: &[(usize, usize, usize)] = &[
        (32, 32, 32),
        (32, 4, 32),
        (32, 8, 32),
        (32, 1, 32),
        (4, 4, 32),
        (8, 8, 32),
        (1, 1, 32),
        (32, 32, 512),
        (32, 4, 512),
    ];
    let variants = [
        Variant {
            name: "halves",
            mode: Mode::Halves,
            place: 0,
        },
        Variant {
            name: "whole",
            mode: Mode::Whole,
            place: 0,
        },
        Variant {
            name: "x16",
            mode: Mode::X16,
            place: 0,
        },
        Variant {
            name: "scalar",
            mode: Mode::Scalar,
            place: 0,
        },
        Variant {
            name: "w-copy",
            mode: Mode::WholeCopy,
            place: 0,
        },
        Variant {
            name: "w-check",
            mode: Mode::WholeCheck,
            place: 0,
        },
        Variant {
            name: "halves+4k",
            mode: Mode::Halves,
            place: 1,
        },
        Variant {
            name: "halves+mis",
            mode: Mode::Halves,
            place: 2,
        },
    ];
    let mut mem = vec![0u32; 8 * CACHE];
    print!("{:<22}", "cell (get/put/keep)");
    for v in &variants {
        print!(" {:>10}", v.name);
    }
    println!(" {:>8}   (Mentries/s of thread CPU time, medians of {rounds}; A/A = halves again / halves)", "A/A");
    for &(g, p, keep) in cells {
        if only
            .as_ref()
            .is_some_and(|o| *o != format!("{g}/{p}/{keep}"))
        {
            continue;
        }
        let mut r: Vec<Vec<f64>> = vec![Vec::new(); variants.len() + 1];
        for _ in 0..rounds {
            for (i, v) in variants.iter().enumerate() {
                r[i].push(measure(*v, keep, g, p, ms, &mut mem));
            }
            let aa = measure(variants[0], keep, g, p, ms, &mut mem);
            let a = *r[0].last().unwrap();
            r[variants.len()].push(aa / a);
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        print!("{:<22}", format!("{g}/{p}/{keep}"));
        for x in r.iter_mut().take(variants.len()) {
            print!(" {:>10.0}", med(x));
        }
        println!(" {:>8.3}", med(&mut r[variants.len()]));
    }
}
