//! Store-to-load forwarding by access width and cache-line offset: the mechanism behind the
//! short-table cells (BENCHMARKS.md 33), on plain memory, no pool.
//!
//! The loop is the cells' data flow reduced to one window of 64 bytes (16 `u32` entries): a
//! "cache array" whose length lives in memory, a "table"; each step gets the top 16 entries
//! into the table and puts them back, so every load reads bytes the previous step stored, and
//! the next addresses depend on the length just stored (no memory renaming can hide the
//! forward). Each move is one 64-byte access (`zmm`, AVX-512F), two 32-byte ones (`ymm`,
//! AVX), or four 16-byte ones (`xmm`, SSE2); the cache's top and the table start 0, 4, 16 or 32
//! bytes past a 64-byte line. The result is nanoseconds of thread CPU time per get + put (the
//! best of 5 runs of 20 million steps). Built with `rustc` alone in seconds:
//!
//! ```sh
//! rustc --edition 2021 -C opt-level=3 bench/examples/store_forward.rs -o /tmp/store_forward
//! /tmp/store_forward
//! ```
//!
//! Two more rows take the get-32 / put-4 shape: the get's 16 entries in two 32-byte moves,
//! then four puts of 4 entries (16-byte moves) each; and the same with the get's loads 16
//! bytes wide (its stores still 32).
//!
//! Six rows model the caller's table of `get_into` / `put_from` (`table`): the get's check
//! that the slots are empty, its copy into them, and the puts' loads and clears of their
//! slots, each at a chosen width (BENCHMARKS.md 35).
//!
//! The widths the CPU lacks are skipped (runtime detection); other architectures print only
//! the length rows.
//!
//! Last, two rows on the cache's length (BENCHMARKS.md 39): 32 gets of one entry into a table
//! and 32 puts of one back (the constant 1/1 keep-32 cell), the length an atomic in memory that
//! each operation loads and stores (as `Cache::len`), 4 or 8 bytes wide: ns per object.

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// One step count per run.
    pub const STEPS: usize = 20_000_000;

    /// Keeps the compiler from merging or splitting the pieces of one move.
    #[inline(always)]
    fn bar() {
        // SAFETY: an empty block: no memory, no flags, no stack.
        unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) };
    }

    /// `zmm`: one 64-byte load and store per move.
    ///
    /// # Safety
    /// AVX-512F present; `c` valid for `*lp + 16` entries and `*lp >= 16`; `t` for 16.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn zmm(c: *mut u32, lp: *mut usize, t: *mut u32, steps: usize) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                let v = _mm512_loadu_si512(c.add(l - 16).cast());
                _mm512_storeu_si512(t.cast(), v);
                lp.write_volatile(l - 16);
                let l = lp.read_volatile();
                let w = _mm512_loadu_si512(t.cast());
                _mm512_storeu_si512(c.add(l).cast(), w);
                lp.write_volatile(l + 16);
            }
        }
    }

    /// `ymm`: two 32-byte loads and stores per move.
    ///
    /// # Safety
    /// AVX present; otherwise as [`zmm`].
    #[target_feature(enable = "avx")]
    pub unsafe fn ymm(c: *mut u32, lp: *mut usize, t: *mut u32, steps: usize) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                let v0 = _mm256_loadu_si256(c.add(l - 16).cast());
                let v1 = _mm256_loadu_si256(c.add(l - 8).cast());
                bar();
                _mm256_storeu_si256(t.cast(), v0);
                _mm256_storeu_si256(t.add(8).cast(), v1);
                lp.write_volatile(l - 16);
                let l = lp.read_volatile();
                let w0 = _mm256_loadu_si256(t.cast());
                let w1 = _mm256_loadu_si256(t.add(8).cast());
                bar();
                _mm256_storeu_si256(c.add(l).cast(), w0);
                _mm256_storeu_si256(c.add(l + 8).cast(), w1);
                lp.write_volatile(l + 16);
            }
        }
    }

    /// `xmm`: four 16-byte loads and stores per move.
    ///
    /// # Safety
    /// As [`zmm`] (SSE2 is baseline).
    pub unsafe fn xmm(c: *mut u32, lp: *mut usize, t: *mut u32, steps: usize) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                let v: [__m128i; 4] =
                    std::array::from_fn(|i| _mm_loadu_si128(c.add(l - 16 + 4 * i).cast()));
                bar();
                for (i, v) in v.into_iter().enumerate() {
                    _mm_storeu_si128(t.add(4 * i).cast(), v);
                }
                lp.write_volatile(l - 16);
                let l = lp.read_volatile();
                let w: [__m128i; 4] = std::array::from_fn(|i| _mm_loadu_si128(t.add(4 * i).cast()));
                bar();
                for (i, w) in w.into_iter().enumerate() {
                    _mm_storeu_si128(c.add(l + 4 * i).cast(), w);
                }
                lp.write_volatile(l + 16);
            }
        }
    }

    /// A get of 16 entries in two 32-byte moves, its put in four moves of 4 entries (16
    /// bytes): the get-32 / put-4 shape. Each of the get's 32-byte loads covers two of the
    /// puts' 16-byte stores.
    ///
    /// # Safety
    /// AVX present; otherwise as [`zmm`].
    #[target_feature(enable = "avx")]
    pub unsafe fn ymm_get_xmm_put(c: *mut u32, lp: *mut usize, t: *mut u32, steps: usize) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                let v0 = _mm256_loadu_si256(c.add(l - 16).cast());
                let v1 = _mm256_loadu_si256(c.add(l - 8).cast());
                bar();
                _mm256_storeu_si256(t.cast(), v0);
                _mm256_storeu_si256(t.add(8).cast(), v1);
                lp.write_volatile(l - 16);
                put4(c, lp, t);
            }
        }
    }

    /// As [`ymm_get_xmm_put`], the get's loads 16 bytes wide (each reads what one put's
    /// store wrote), its stores 32 bytes wide (two loads joined in a register).
    ///
    /// # Safety
    /// AVX2 present; otherwise as [`zmm`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn xmm_loads_get_xmm_put(c: *mut u32, lp: *mut usize, t: *mut u32, steps: usize) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                let v: [__m128i; 4] =
                    std::array::from_fn(|i| _mm_loadu_si128(apart(c.add(l - 16 + 4 * i)).cast()));
                bar();
                let mut v0 = _mm256_set_m128i(v[1], v[0]);
                let mut v1 = _mm256_set_m128i(v[3], v[2]);
                // The joined values in `ymm` registers, so that each store is one 32-byte move
                // (an empty block: no memory, no flags, no stack; the values come back as they
                // went in).
                std::arch::asm!("/* {0} {1} */", inout(ymm_reg) v0, inout(ymm_reg) v1,
                    options(pure, nomem, nostack, preserves_flags));
                _mm256_storeu_si256(t.cast(), v0);
                _mm256_storeu_si256(t.add(8).cast(), v1);
                lp.write_volatile(l - 16);
                put4(c, lp, t);
            }
        }
    }

    /// The caller's-table protocol of `get_into` / `put_from` (the pool's table of
    /// `Option<Handle>` slots, 0 = empty), for 16 entries: the get checks that the 16 slots
    /// are empty (loads `CHK` bytes wide, ORed, one test), copies the cache's top 16 into
    /// them (two 32-byte loads, stores `GST` bytes wide); then `16 / PUTN` puts of `PUTN`
    /// entries each load their slots and test them (`PW` bytes wide, or the run if
    /// narrower), store them on the cache and clear the slots (the same width). The lengths
    /// go through memory as in the other rows. Which widths keep every load reading what one
    /// store wrote decides the time.
    ///
    /// # Safety
    /// AVX2 present; `CHK`, `GST`, `PW` each 16 or 32, `PUTN` 4, 8 or 16; otherwise as [`zmm`],
    /// and the table's 16 slots zero on entry (else it aborts).
    #[target_feature(enable = "avx2")]
    pub unsafe fn table<const CHK: usize, const GST: usize, const PUTN: usize, const PW: usize>(
        c: *mut u32,
        lp: *mut usize,
        t: *mut u32,
        steps: usize,
    ) {
        for _ in 0..steps {
            // SAFETY: the function's contract.
            unsafe {
                let l = lp.read_volatile();
                // The get's check: the slots are empty.
                let mut acc = _mm256_setzero_si256();
                for i in 0..64 / CHK {
                    let p = apart(t.add(i * CHK / 4));
                    let v = if CHK == 32 {
                        _mm256_loadu_si256(p.cast())
                    } else {
                        _mm256_castsi128_si256(_mm_loadu_si128(p.cast()))
                    };
                    acc = _mm256_or_si256(acc, v);
                }
                if _mm256_testz_si256(acc, acc) == 0 {
                    std::process::abort();
                }
                // The get's copy.
                let v0 = _mm256_loadu_si256(apart(c.add(l - 16)).cast());
                let v1 = _mm256_loadu_si256(apart(c.add(l - 8)).cast());
                bar();
                if GST == 32 {
                    _mm256_storeu_si256(apart(t).cast(), v0);
                    _mm256_storeu_si256(apart(t.add(8)).cast(), v1);
                } else {
                    _mm_storeu_si128(apart(t).cast(), _mm256_castsi256_si128(v0));
                    _mm_storeu_si128(apart(t.add(4)).cast(), _mm256_extracti128_si256(v0, 1));
                    _mm_storeu_si128(apart(t.add(8)).cast(), _mm256_castsi256_si128(v1));
                    _mm_storeu_si128(apart(t.add(12)).cast(), _mm256_extracti128_si256(v1, 1));
                }
                lp.write_volatile(l - 16);
                // The puts.
                let w = if PUTN * 4 < PW { PUTN * 4 } else { PW };
                for k in 0..16 / PUTN {
                    let l = lp.read_volatile();
                    let mut any = 0;
                    for j in 0..PUTN * 4 / w {
                        let from = apart(t.add(k * PUTN + j * w / 4));
                        let to = apart(c.add(l + j * w / 4));
                        if w == 32 {
                            let v = _mm256_loadu_si256(from.cast());
                            any |= _mm256_testz_si256(v, v);
                            _mm256_storeu_si256(to.cast(), v);
                            _mm256_storeu_si256(from.cast(), _mm256_setzero_si256());
                        } else {
                            let v = _mm_loadu_si128(from.cast());
                            any |= _mm_testz_si128(v, v);
                            _mm_storeu_si128(to.cast(), v);
                            _mm_storeu_si128(from.cast(), _mm_setzero_si128());
                        }
                    }
                    // The pool branches on the test (never taken); a sink keeps it here.
                    std::hint::black_box(any);
                    lp.write_volatile(l + PUTN);
                }
            }
        }
    }

    /// `p`, which the compiler can no longer relate to another address (an empty `asm!`
    /// that returns its input): two 16-byte loads through such pointers stay two loads.
    #[inline(always)]
    fn apart(p: *mut u32) -> *mut u32 {
        let mut p = p;
        // The pointer is never dereferenced inside the block, so `nomem` is exact.
        #[allow(clippy::pointers_in_nomem_asm_block)]
        // SAFETY: an empty block: it reads and writes no memory, no flags and no stack; its
        // operand comes back unchanged.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) p, options(pure, nomem, nostack, preserves_flags))
        };
        p
    }

    /// The puts of [`ymm_get_xmm_put`]: four puts of 4 entries (16 bytes) each, from the
    /// table back onto the cache, the length through memory each time.
    ///
    /// # Safety
    /// As [`zmm`].
    #[inline(always)]
    unsafe fn put4(c: *mut u32, lp: *mut usize, t: *mut u32) {
        for i in 0..4 {
            // SAFETY: the caller's contract.
            unsafe {
                let l = lp.read_volatile();
                let w = _mm_loadu_si128(t.add(4 * i).cast());
                bar();
                _mm_storeu_si128(c.add(l).cast(), w);
                lp.write_volatile(l + 4);
            }
        }
    }
}

/// Thread CPU time.
fn cpu() -> std::time::Duration {
    #[repr(C)]
    struct Ts {
        s: i64,
        ns: i64,
    }
    extern "C" {
        fn clock_gettime(c: i32, t: *mut Ts) -> i32;
    }
    let mut t = Ts { s: 0, ns: 0 };
    // SAFETY: clock_gettime(CLOCK_THREAD_CPUTIME_ID = 3) writes one timespec into `t`.
    unsafe { clock_gettime(3, &mut t) };
    std::time::Duration::new(t.s as u64, t.ns as u32)
}

#[cfg(target_arch = "x86_64")]
fn main() {
    type Step = unsafe fn(*mut u32, *mut usize, *mut u32, usize);
    let mut mem = vec![0u32; 1 << 14];
    let base = mem.as_mut_ptr();
    // SAFETY: at most 15 entries into a 16 Ki-entry buffer.
    let base = unsafe { base.add((64 - base as usize % 64) % 64 / 4) };
    let mut widths: Vec<(&str, Step)> = Vec::new();
    if std::is_x86_feature_detected!("avx512f") {
        widths.push(("zmm 1 x 64 B", x86::zmm));
    }
    if std::is_x86_feature_detected!("avx") {
        widths.push(("ymm 2 x 32 B", x86::ymm));
    }
    widths.push(("xmm 4 x 16 B", x86::xmm));
    if std::is_x86_feature_detected!("avx2") {
        widths.push(("get ymm, put 4 x xmm", x86::ymm_get_xmm_put));
        widths.push((
            "get xmm loads ymm stores, put 4 x xmm",
            x86::xmm_loads_get_xmm_put,
        ));
        // The caller's table (`table::<CHK, GST, PUTN, PW>`).
        widths.extend([
            (
                "table: check 32, get stores 32, put 4 x 16",
                x86::table::<32, 32, 4, 16> as Step,
            ),
            (
                "table: check 16, get stores 32, put 4 x 16",
                x86::table::<16, 32, 4, 16>,
            ),
            (
                "table: check 16, get stores 16, put 4 x 16",
                x86::table::<16, 16, 4, 16>,
            ),
            (
                "table: check 32, get stores 32, put 2 x (2 x 16)",
                x86::table::<32, 32, 8, 16>,
            ),
            (
                "table: check 32, get stores 32, put 2 x 32",
                x86::table::<32, 32, 8, 32>,
            ),
            (
                "table: check 32, get stores 32, put 16 x 32",
                x86::table::<32, 32, 16, 32>,
            ),
            (
                "table: check 16, get stores 32, put 16 x 32",
                x86::table::<16, 32, 16, 32>,
            ),
            (
                "table: check 16, get stores 16, put 16 x 16",
                x86::table::<16, 16, 16, 16>,
            ),
        ]);
    }
    println!("width        | cache top, table: bytes past a line | ns per get + put of 16 entries");
    for (name, f) in widths {
        for (c_off, t_off) in [
            (0usize, 0usize),
            (16, 0),
            (0, 16),
            (16, 16),
            (32, 32),
            (4, 4),
        ] {
            let mut best = f64::MAX;
            for _ in 0..5 {
                // Entries nonzero, the table's slots empty (what `table` expects).
                // SAFETY: both ranges lie inside the 16 Ki-entry buffer past `base`.
                unsafe {
                    std::slice::from_raw_parts_mut(base, 1024).fill(7);
                    std::slice::from_raw_parts_mut(base.add(8192), 32).fill(0);
                }
                let mut len = 512 + c_off / 4;
                // SAFETY: the cache top stays within 512 + 16 entries, the table at 8192
                // entries + 16 (inside the 16 Ki-entry buffer); the width is present.
                let t0 = cpu();
                unsafe { f(base, &mut len, base.add(8192 + t_off / 4), x86::STEPS) };
                best = best.min((cpu() - t0).as_secs_f64() * 1e9 / x86::STEPS as f64);
                std::hint::black_box(len);
            }
            println!("{name} | {c_off:2}, {t_off:2} | {best:.2}");
        }
    }
    length_rows();
}

/// The cache's length in memory: loaded and stored (relaxed) by every operation.
trait Len {
    fn at(v: usize) -> Self;
    fn get(&self) -> usize;
    fn set(&self, v: usize);
}

impl Len for std::sync::atomic::AtomicU32 {
    fn at(v: usize) -> Self {
        Self::new(v as u32)
    }
    #[inline(always)]
    fn get(&self) -> usize {
        self.load(std::sync::atomic::Ordering::Relaxed) as usize
    }
    #[inline(always)]
    fn set(&self, v: usize) {
        self.store(v as u32, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Len for std::sync::atomic::AtomicU64 {
    fn at(v: usize) -> Self {
        Self::new(v as u64)
    }
    #[inline(always)]
    fn get(&self) -> usize {
        self.load(std::sync::atomic::Ordering::Relaxed) as usize
    }
    #[inline(always)]
    fn set(&self, v: usize) {
        self.store(v as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `rounds` x (32 gets of one entry from the top of `objs` into `table`, then 32 puts of one
/// back), the length in `len`; ns per object (one get and one put).
#[inline(never)]
fn lifo_one_by_one<L: Len>(objs: &mut [u32], rounds: usize) -> f64 {
    // In a heap block that the compiler must assume others see (as a cache's length is), so
    // that it keeps every load and store.
    let home = Box::new(L::at(objs.len() / 2));
    let len: &L = std::hint::black_box(&*home);
    let mut table = [0u32; 32];
    let t0 = cpu();
    for _ in 0..rounds {
        for s in table.iter_mut() {
            let l = len.get();
            *s = objs[l - 1];
            len.set(l - 1);
        }
        for s in table.iter() {
            let l = len.get();
            objs[l] = *s;
            len.set(l + 1);
        }
        std::hint::black_box(&mut table);
    }
    (cpu() - t0).as_secs_f64() * 1e9 / (rounds * table.len()) as f64
}

/// The length rows: best of 5 runs of each width.
fn length_rows() {
    let mut objs = vec![7u32; 1024];
    let rounds = 2_000_000;
    let best = |f: fn(&mut [u32], usize) -> f64, objs: &mut [u32]| {
        (0..5).map(|_| f(objs, rounds)).fold(f64::MAX, f64::min)
    };
    let narrow = best(lifo_one_by_one::<std::sync::atomic::AtomicU32>, &mut objs);
    let wide = best(lifo_one_by_one::<std::sync::atomic::AtomicU64>, &mut objs);
    println!("length | ns per object (a get of 1 and a put of 1, keep 32)");
    println!("length: 4-byte atomic in memory | {narrow:.2}");
    println!("length: 8-byte atomic in memory | {wide:.2}");
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    length_rows();
}
