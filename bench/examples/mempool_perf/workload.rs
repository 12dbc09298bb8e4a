//! The workload of a cell, generic over the representation: the very same code runs on both
//! pools, only the entry type differs (4-byte index vs 8-byte pointer). The floor (`--floor`)
//! runs the same loops on a bare thread-local LIFO array of entries ([`Lifo`]): what the copies
//! alone cost, with no pool around them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::Duration;

use idxpool::repr::Repr;
use idxpool::{Brand, Handle, LocalCache, Pool, PoolError};
use idxpool_bench::callgrind;
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

/// How long one run of a cell lasts, per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// A length of wall time, checked every [`OBJS_PER_CLOCK_CHECK`] objects (whole passes of
    /// `n_keep`).
    Time(Duration),
    /// At least `n` objects got-and-put, in whole chunks of [`OBJS_PER_CLOCK_CHECK`] objects
    /// (or of `n_keep` when it is larger: the very loop of a timed run, with the limit test in
    /// place of the clock read); no clock is read. With `counted`, the
    /// thread's loop (and nothing around it: not the table's allocation, not the clock) is
    /// bracketed by callgrind's collection toggles (`--objects`, scripts/instr-vs-dpdk.sh).
    Objects { n: u64, counted: bool },
}

impl Limit {
    /// Before the loop: callgrind's collection on for a counted run.
    #[inline(always)]
    fn begin(self) {
        if let Limit::Objects { counted: true, .. } = self {
            callgrind::toggle_collect();
        }
    }

    /// After a chunk: whether the run is over (then collection off for a counted run).
    #[inline(always)]
    fn reached(self, start: &Stopwatch, count: u64) -> bool {
        let done = match self {
            Limit::Time(d) => start.wall_elapsed() >= d,
            Limit::Objects { n, .. } => count >= n,
        };
        if done {
            self.begin();
        }
        done
    }
}

type H<B, R> = Handle<Obj, B, R>;

/// `--table-offset`: bytes between a 64-byte line and the start of each thread's table
/// (`usize::MAX`, the default: wherever the allocator puts it).
pub static TABLE_OFFSET: AtomicUsize = AtomicUsize::new(usize::MAX);

/// `--spread-tables`: each repetition places the tables at its own offset in a page.
pub static TABLE_SPREAD: AtomicBool = AtomicBool::new(false);

/// The page offset of the tables of the current repetition (`--spread-tables`).
static TABLE_PAGE_AT: AtomicUsize = AtomicUsize::new(0);

/// Bytes of the page whose offsets `--spread-tables` walks (the address bits that 4K aliasing
/// compares).
const PAGE: usize = 4096;

/// `--spread-tables`: the tables of repetition `rep` start `(rep x 1040 + 336) mod 4096` bytes
/// into a page (a stride of 65 x 16 bytes: successive repetitions land far apart, on 16-byte
/// boundaries, and 256 repetitions visit every one).
pub fn set_table_rep(rep: usize) {
    TABLE_PAGE_AT.store((rep * 1040 + 336) % PAGE, Ordering::Relaxed);
}

/// The caller's table: `keep` slots, slot `i` = `f(i)`, starting [`TABLE_OFFSET`] bytes past a
/// 64-byte line (a multiple of the slot size below 64), or (`--spread-tables`) at the current
/// repetition's offset in a page, or where the allocator puts it. Returns the buffer and the
/// index of slot 0 in it (the slots are `buf[at..at + keep]`).
fn placed_table<E>(keep: usize, f: impl Fn(usize) -> E) -> (Vec<E>, usize) {
    let size = std::mem::size_of::<E>();
    let (off, line) = if TABLE_SPREAD.load(Ordering::Relaxed) {
        (TABLE_PAGE_AT.load(Ordering::Relaxed), PAGE)
    } else {
        (TABLE_OFFSET.load(Ordering::Relaxed), 64)
    };
    if off == usize::MAX {
        return ((0..keep).map(f).collect(), 0);
    }
    let pad = line / size;
    let mut buf = Vec::with_capacity(keep + pad);
    let base = buf.as_ptr() as usize;
    let at = (0..pad)
        .find(|i| (base + i * size) % line == off)
        .unwrap_or_else(|| panic!("--table-offset {off}: not a multiple of the slot size {size}"));
    buf.extend((0..keep + pad).map(|j| f(j.saturating_sub(at).min(keep - 1))));
    debug_assert_eq!(buf.as_ptr() as usize, base, "no reallocation");
    (buf, at)
}

/// Runs one cell on one thread's cache until `limit`: returns (objects got-and-put, elapsed).
///
/// `--prefetch` (touch=1 cells with `cell.prefetch`) runs separate instances of the workers
/// (`PREFETCH = true`): the default instances (`PREFETCH = false`) have no prefetch code and
/// no run-time test of the flag in their loops, so they compile to the same code as before.
fn worker<B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    cell: &Cell,
    limit: Limit,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let prefetch = cell.touch && cell.prefetch;
    if cell.max_bulk != 0 {
        return match (cell.touch, prefetch) {
            (true, true) => worker_random::<true, true, B, R>(c, cell, limit, clock),
            (true, false) => worker_random::<true, false, B, R>(c, cell, limit, clock),
            (false, _) => worker_random::<false, false, B, R>(c, cell, limit, clock),
        };
    }
    match (cell.constant, cell.touch) {
        (false, false) => worker_dyn::<false, false, B, R>(c, cell, limit, clock),
        (false, true) if prefetch => worker_dyn::<true, true, B, R>(c, cell, limit, clock),
        (false, true) => worker_dyn::<true, false, B, R>(c, cell, limit, clock),
        (true, touch) => {
            assert_eq!(cell.get, cell.put, "constant_n cells have get == put");
            let keep = cell.keep;
            match (cell.get, touch) {
                (1, false) => worker_const::<1, false, false, B, R>(c, keep, limit, clock),
                (1, true) => worker_const_touch::<1, B, R>(c, keep, limit, clock, prefetch),
                (4, false) => worker_const::<4, false, false, B, R>(c, keep, limit, clock),
                (4, true) => worker_const_touch::<4, B, R>(c, keep, limit, clock, prefetch),
                (8, false) => worker_const::<8, false, false, B, R>(c, keep, limit, clock),
                (8, true) => worker_const_touch::<8, B, R>(c, keep, limit, clock, prefetch),
                (32, false) => worker_const::<32, false, false, B, R>(c, keep, limit, clock),
                (32, true) => worker_const_touch::<32, B, R>(c, keep, limit, clock, prefetch),
                // DPDK 26.07's larger constant bulks (its cells have touch = 0).
                (64, false) => worker_const::<64, false, false, B, R>(c, keep, limit, clock),
                (128, false) => worker_const::<128, false, false, B, R>(c, keep, limit, clock),
                (256, false) => worker_const::<256, false, false, B, R>(c, keep, limit, clock),
                (512, false) => worker_const::<512, false, false, B, R>(c, keep, limit, clock),
                (n, t) => panic!("no constant_n instance for bulk size {n} with touch={t}"),
            }
        }
    }
}

/// The touch=1 instances of `worker_const` for bulk size `N`, with or without `--prefetch`.
fn worker_const_touch<const N: usize, B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    keep: usize,
    limit: Limit,
    clock: Clock,
    prefetch: bool,
) -> Result<(u64, Duration), PoolError> {
    if prefetch {
        worker_const::<N, true, true, B, R>(c, keep, limit, clock)
    } else {
        worker_const::<N, true, false, B, R>(c, keep, limit, clock)
    }
}

/// `constant_n = 0`: bulk sizes are run-time values. DPDK's `test_loop`: a table of `n_keep`
/// slots filled by `get_into(&mut table[i..i + n_get])`, emptied by
/// `put_from(&mut table[i..i + n_put])`. Not inlined, so that each variant is one function to
/// profile and disassemble.
#[inline(never)]
fn worker_dyn<const TOUCH: bool, const PREFETCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    cell: &Cell,
    limit: Limit,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let (n_get, n_put, keep) = (cell.get, cell.put, cell.keep);
    assert!(
        keep % n_get == 0 && keep % n_put == 0,
        "n_keep is a multiple of both bulks"
    );
    // Handle -> &mut T converter holding base and stride by value (registers in the loop).
    let objs = c.pool().resolver();
    let (mut buf, at) = placed_table(keep, |_| None::<H<B, R>>);
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            // Windows by `chunks_exact_mut`: no bounds check per window (DPDK's C loop has
            // none); a failure leaves the loop, then the table is given back.
            let mut failed = None;
            for slots in table.chunks_exact_mut(n_get) {
                if let Err(e) = c.get_into(slots) {
                    failed = Some(e);
                    break;
                }
                if TOUCH {
                    touch::<PREFETCH, B, R>(&objs, slots, count);
                }
            }
            if failed.is_none() {
                for slots in table.chunks_exact_mut(n_put) {
                    if let Err(e) = c.put_from(slots) {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                return Err(give_back(c, table, e));
            }
            count += keep as u64;
        }
        if limit.reached(&start, count) {
            return Ok((count, start.measured()));
        }
    }
}

/// Writes `head` of every object of `slots` (all full), after prefetching them all when
/// `PREFETCH` (VPP / DPDK: the whole burst's lines in flight before the writes).
#[inline(always)]
fn touch<const PREFETCH: bool, B: Brand, R: Repr>(
    objs: &idxpool::Resolver<'_, Obj, B, R>,
    slots: &mut [Option<H<B, R>>],
    count: u64,
) {
    if PREFETCH {
        for h in slots.iter().flatten() {
            objs.prefetch(h);
        }
    }
    for h in slots.iter_mut().flatten() {
        objs.get_mut(h).head = count;
    }
}

/// After a failed get: every handle of the table goes back through `c`; returns `e`.
#[cold]
fn give_back<B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    table: &mut [Option<H<B, R>>],
    e: PoolError,
) -> PoolError {
    for s in table.iter_mut() {
        if let Some(h) = s.take() {
            c.put(h);
        }
    }
    e
}

/// `constant_n = 1`: the bulk size is the compile-time constant `N`: DPDK's loop with
/// `&mut table[i..i + N]`, a slice of constant length after inlining (the cache's copy is
/// specialised for N as DPDK's inlined constant-n path), monomorphised per N. Not inlined
/// (see `worker_dyn`).
#[inline(never)]
fn worker_const<const N: usize, const TOUCH: bool, const PREFETCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    keep: usize,
    limit: Limit,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    assert!(keep.is_multiple_of(N), "n_keep is a multiple of the bulk");
    let objs = c.pool().resolver();
    let (mut buf, at) = placed_table(keep, |_| None::<H<B, R>>);
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            // Windows of constant length by `as_chunks_mut`: no bounds check per window.
            let mut failed = None;
            for slots in table.as_chunks_mut::<N>().0 {
                if let Err(e) = c.get_into(slots) {
                    failed = Some(e);
                    break;
                }
                if TOUCH {
                    touch::<PREFETCH, B, R>(&objs, slots, count);
                }
            }
            if failed.is_none() {
                for slots in table.as_chunks_mut::<N>().0 {
                    if let Err(e) = c.put_from(slots) {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                return Err(give_back(c, table, e));
            }
            count += keep as u64;
        }
        if limit.reached(&start, count) {
            return Ok((count, start.measured()));
        }
    }
}

/// DPDK 26.07's pseudorandom bulk size (`test_loop_random`): `((r ^ (r >> 2) ^ (r << 3)) &
/// (max - 1)) + 1` with `mask = max - 1`, cut to the `left` objects of the phase; advances `r`.
#[inline(always)]
fn random_bulk(r: &mut u32, mask: u32, left: usize) -> usize {
    let x = ((*r ^ (*r >> 2) ^ (*r << 3)) & mask) as usize + 1;
    *r = r.wrapping_add(1);
    x.min(left)
}

/// 26.07's random-bulk pass: get `n_keep` objects in bulks of pseudorandom sizes in
/// `1..=max_bulk` into the table, then put them back the same way (DPDK's
/// `test_loop_random`, one counter across both phases). Not inlined (see `worker_dyn`).
#[inline(never)]
fn worker_random<const TOUCH: bool, const PREFETCH: bool, B: Brand, R: Repr>(
    c: &mut LocalCache<&'_ Pool<Obj, B, R>>,
    cell: &Cell,
    limit: Limit,
    clock: Clock,
) -> Result<(u64, Duration), PoolError> {
    let keep = cell.keep;
    assert!(cell.max_bulk.is_power_of_two(), "max_bulk is a power of 2");
    let mask = (cell.max_bulk - 1) as u32;
    let objs = c.pool().resolver();
    let (mut buf, at) = placed_table(keep, |_| None::<H<B, R>>);
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let mut r = 0u32;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            let mut i = 0;
            while i < keep {
                let n = random_bulk(&mut r, mask, keep - i);
                let slots = &mut table[i..i + n];
                if let Err(e) = c.get_into(slots) {
                    return Err(give_back(c, table, e));
                }
                if TOUCH {
                    touch::<PREFETCH, B, R>(&objs, slots, count);
                }
                i += n;
            }
            let mut i = 0;
            while i < keep {
                let n = random_bulk(&mut r, mask, keep - i);
                if let Err(e) = c.put_from(&mut table[i..i + n]) {
                    return Err(give_back(c, table, e));
                }
                i += n;
            }
            count += keep as u64;
        }
        if limit.reached(&start, count) {
            return Ok((count, start.measured()));
        }
    }
}

/// The floor: a bare thread-local LIFO array of entries (`u32` as the index pool's, `u64` as
/// the pointer twin's), no pool, no cache bookkeeping, no shared state. Getting `n` copies the
/// top `n` entries out, putting copies them back: what the cells' copies alone cost. It keeps
/// the pool's two rules for its copies (DESIGN.md, "No access wider than 32 bytes"): the
/// array starts on a cache line, and with AVX-512 enabled no access is wider than 32 bytes
/// ([`copy_entries`]); without them it stalls where the pool does not (a 64-byte store that
/// straddles a line, read back at once, does not forward) and is no floor.
pub struct Lifo<E> {
    /// The entries are `buf[at..]`, `at` putting the first on a 64-byte line.
    buf: Vec<E>,
    at: usize,
    len: usize,
}

impl<E: Copy> Lifo<E> {
    /// A full array of `n` entries, `f(i)` for `i` in `0..n`, starting on a cache line.
    pub fn full(n: usize, f: impl Fn(usize) -> E) -> Self {
        let size = std::mem::size_of::<E>().max(1);
        let pad = 64 / size;
        let mut buf = Vec::with_capacity(n + pad);
        let base = buf.as_ptr() as usize;
        let at = (0..pad)
            .find(|i| (base + i * size).is_multiple_of(64))
            .unwrap_or(0);
        buf.extend((0..n + at).map(|j| f(j.saturating_sub(at))));
        debug_assert_eq!(buf.as_ptr() as usize, base, "no reallocation");
        Lifo { buf, at, len: n }
    }

    /// Entry `i` of the full array.
    fn entry(&self, i: usize) -> E {
        self.buf[self.at + i]
    }

    /// Copies the top `dst.len()` entries into `dst` (the caller's table); false (nothing
    /// moved) when fewer are held.
    #[inline(always)]
    pub fn get_into(&mut self, dst: &mut [E]) -> bool {
        let Some(from) = self.len.checked_sub(dst.len()) else {
            return false;
        };
        copy_short(dst, &self.buf[self.at + from..self.at + self.len]);
        self.len = from;
        true
    }

    /// [`Lifo::get_into`] for a window of constant size `N` (the floor's `constant_n`): fixed-size
    /// array copies, no loop.
    #[inline(always)]
    pub fn get_into_n<const N: usize>(&mut self, dst: &mut [E; N]) -> bool {
        let Some(from) = self.len.checked_sub(N) else {
            return false;
        };
        let at = self.at + from;
        copy_entries(dst, &self.buf[at..at + N]);
        self.len = from;
        true
    }

    /// [`Lifo::put_from`] for a window of constant size `N`.
    #[inline(always)]
    pub fn put_from_n<const N: usize>(&mut self, src: &[E; N]) {
        let end = self.len + N;
        let at = self.at + self.len;
        copy_entries(&mut self.buf[at..at + N], src);
        self.len = end;
    }

    /// Copies the entries of `src` (the caller's table) back on top.
    #[inline(always)]
    pub fn put_from(&mut self, src: &[E]) {
        let end = self.len + src.len();
        copy_short(&mut self.buf[self.at + self.len..self.at + end], src);
        self.len = end;
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

/// Copies `src` into `dst` (equal lengths) in the pool's shape for short runs (the crate's
/// `copy_entries`: `n == 1` first, then two overlapping fixed-size windows of `K` entries,
/// `K < n <= 2K`, for `n <= 64`; `copy_from_slice` beyond), so that the floor pays for its
/// run-time length what the pool pays and no more. An element loop (`zip`) was a vectorised
/// loop with a scalar remainder: at 1/1 it cost the floor 96 instructions per object where
/// the index pool needed 71 (callgrind, BENCHMARKS.md 14).
#[inline(always)]
fn copy_short<E: Copy>(dst: &mut [E], src: &[E]) {
    #[inline(always)]
    fn halves<const K: usize, E: Copy>(dst: &mut [E], src: &[E]) {
        let n = src.len();
        if narrow::<E>(K) {
            // `dst` and `src` are different arrays: the overlapping halves write the same
            // values in either order.
            copy_entries(&mut dst[..K], &src[..K]);
            copy_entries(&mut dst[n - K..], &src[n - K..]);
            return;
        }
        let a: [E; K] = src[..K].try_into().expect("K < n");
        let b: [E; K] = src[n - K..].try_into().expect("K < n");
        dst[..K].copy_from_slice(&a);
        dst[n - K..].copy_from_slice(&b);
    }
    let n = src.len();
    assert_eq!(dst.len(), n, "equal lengths");
    if n == 1 {
        dst[0] = src[0];
    } else if n <= 2 {
        if n == 2 {
            halves::<1, E>(dst, src);
        }
    } else if n <= 4 {
        halves::<2, E>(dst, src);
    } else if n <= 8 {
        halves::<4, E>(dst, src);
    } else if n <= 16 {
        halves::<8, E>(dst, src);
    } else if n <= 32 {
        halves::<16, E>(dst, src);
    } else if n <= 64 {
        halves::<32, E>(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Whether a window of `k` entries of `E` is copied in 32-byte pieces: the crate's rule
/// (`src/repr/piece.rs`): builds with AVX-512F enabled, windows wider than 32 bytes and a whole
/// number of pieces.
#[inline(always)]
const fn narrow<E>(k: usize) -> bool {
    let bytes = k * std::mem::size_of::<E>();
    cfg!(all(target_arch = "x86_64", target_feature = "avx512f"))
        && bytes > 32
        && bytes.is_multiple_of(32)
}

/// `p`, with the compiler unable to relate it to another address (an empty `asm!`): two
/// 32-byte copies through two such pointers are never merged into one 64-byte move. The
/// crate's `repr::piece::opaque`, which the harness cannot reach (crate-private).
#[inline(always)]
fn opaque(p: *mut u8) -> *mut u8 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut p = p;
        #[allow(clippy::pointers_in_nomem_asm_block)]
        // SAFETY: an empty block: it reads and writes no memory, no flags and no stack; its
        // one operand comes back unchanged.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) p, options(pure, nomem, nostack, preserves_flags))
        };
        p
    }
    #[cfg(not(target_arch = "x86_64"))]
    p
}

/// Copies `src` into `dst` (equal lengths): in 32-byte pieces where [`narrow`] says so, as the
/// pool's windows are; else one `copy_from_slice`.
#[inline(always)]
fn copy_entries<E: Copy>(dst: &mut [E], src: &[E]) {
    assert_eq!(dst.len(), src.len(), "equal lengths");
    let bytes = std::mem::size_of_val(src);
    if !narrow::<E>(src.len()) {
        dst.copy_from_slice(src);
        return;
    }
    let (d, s) = (dst.as_mut_ptr().cast::<u8>(), src.as_ptr().cast::<u8>());
    for i in (0..bytes).step_by(32) {
        // SAFETY: `i + 32 <= bytes`, the length of both slices in bytes (a whole number of
        // pieces, `narrow`); `dst` and `src` are a `&mut` and a `&` borrow: they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(opaque(s.add(i).cast_mut()), opaque(d.add(i)), 32) };
    }
}

/// The floor's `worker_dyn`: the same loop (DPDK's table) on a [`Lifo`] (no touch).
#[inline(never)]
fn floor_dyn<E: Copy>(l: &mut Lifo<E>, cell: &Cell, limit: Limit, clock: Clock) -> (u64, Duration) {
    let (n_get, n_put, keep) = (cell.get, cell.put, cell.keep);
    let (mut buf, at) = placed_table(keep, |i| l.entry(i));
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            for w in table.chunks_exact_mut(n_get) {
                assert!(l.get_into(w), "the floor holds n_keep");
            }
            for w in table.chunks_exact(n_put) {
                l.put_from(w);
            }
            count += keep as u64;
            std::hint::black_box(&mut *table);
        }
        if limit.reached(&start, count) {
            return (count, start.measured());
        }
    }
}

/// The floor's `worker_const`.
#[inline(never)]
fn floor_const<const N: usize, E: Copy>(
    l: &mut Lifo<E>,
    keep: usize,
    limit: Limit,
    clock: Clock,
) -> (u64, Duration) {
    let (mut buf, at) = placed_table(keep, |i| l.entry(i));
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            for w in table.as_chunks_mut::<N>().0 {
                assert!(l.get_into_n(w), "the floor holds n_keep");
            }
            for w in table.as_chunks::<N>().0 {
                l.put_from_n(w);
            }
            count += keep as u64;
            std::hint::black_box(&mut *table);
        }
        if limit.reached(&start, count) {
            return (count, start.measured());
        }
    }
}

/// The floor's `worker_random`.
#[inline(never)]
fn floor_random<E: Copy>(
    l: &mut Lifo<E>,
    cell: &Cell,
    limit: Limit,
    clock: Clock,
) -> (u64, Duration) {
    let keep = cell.keep;
    let mask = (cell.max_bulk - 1) as u32;
    let (mut buf, at) = placed_table(keep, |i| l.entry(i));
    let table = &mut buf[at..at + keep];
    let cycles = (OBJS_PER_CLOCK_CHECK / keep).max(1);
    let mut count = 0u64;
    let mut r = 0u32;
    let start = Stopwatch::start(clock);
    limit.begin();
    loop {
        for _ in 0..cycles {
            let mut i = 0;
            while i < keep {
                let n = random_bulk(&mut r, mask, keep - i);
                assert!(l.get_into(&mut table[i..i + n]), "the floor holds n_keep");
                i += n;
            }
            let mut i = 0;
            while i < keep {
                let n = random_bulk(&mut r, mask, keep - i);
                l.put_from(&table[i..i + n]);
                i += n;
            }
            count += keep as u64;
            std::hint::black_box(&mut *table);
        }
        if limit.reached(&start, count) {
            return (count, start.measured());
        }
    }
}

/// One floor run of one cell on one thread.
fn floor_worker<E: Copy>(
    l: &mut Lifo<E>,
    cell: &Cell,
    limit: Limit,
    clock: Clock,
) -> (u64, Duration) {
    if cell.max_bulk != 0 {
        return floor_random(l, cell, limit, clock);
    }
    if !cell.constant {
        return floor_dyn(l, cell, limit, clock);
    }
    let k = cell.keep;
    match cell.get {
        1 => floor_const::<1, E>(l, k, limit, clock),
        4 => floor_const::<4, E>(l, k, limit, clock),
        8 => floor_const::<8, E>(l, k, limit, clock),
        32 => floor_const::<32, E>(l, k, limit, clock),
        64 => floor_const::<64, E>(l, k, limit, clock),
        128 => floor_const::<128, E>(l, k, limit, clock),
        256 => floor_const::<256, E>(l, k, limit, clock),
        512 => floor_const::<512, E>(l, k, limit, clock),
        n => panic!("no constant_n instance for bulk size {n}"),
    }
}

/// One timed floor run of one cell: one thread per core, each with its own full [`Lifo`] of
/// `pool_size / cores` entries made by `entry` (created on the thread, before the barrier).
/// Returns the summed rate, as [`run_cell`].
pub fn run_floor<E: Copy + Send>(
    cell: &Cell,
    limit: Limit,
    clock: Clock,
    pinning: &Pinning,
    entry: fn(usize) -> E,
) -> f64 {
    run_floor_counted(cell, limit, clock, pinning, entry).0
}

/// [`run_floor`], also returning the objects got-and-put by all threads.
pub fn run_floor_counted<E: Copy + Send>(
    cell: &Cell,
    limit: Limit,
    clock: Clock,
    pinning: &Pinning,
    entry: fn(usize) -> E,
) -> (f64, u64) {
    let threads = cell.cores.max(1);
    let per_thread = (cell.pool_size() as usize / threads).max(cell.keep);
    let barrier = Barrier::new(threads);
    let results: Vec<(u64, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    pinning.apply(i);
                    let mut l = Lifo::full(per_thread, entry);
                    barrier.wait();
                    floor_worker(&mut l, cell, limit, clock)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("floor thread panicked"))
            .collect()
    });
    let rate = results
        .iter()
        .map(|&(count, elapsed)| count as f64 / elapsed.as_secs_f64())
        .sum();
    (rate, results.iter().map(|&(count, _)| count).sum())
}

/// One timed run of one cell: one thread per cache, started together behind a barrier.
/// Thread `i` is pinned as `pinning` says. Returns the summed rate (objects got-and-put per
/// second).
pub fn run_cell<B: Brand, R: Repr>(
    caches: &mut [LocalCache<&'_ Pool<Obj, B, R>>],
    cell: &Cell,
    limit: Limit,
    clock: Clock,
    pinning: &Pinning,
) -> Result<f64, PoolError> {
    run_cell_counted(caches, cell, limit, clock, pinning).map(|(rate, _)| rate)
}

/// [`run_cell`], also returning the objects got-and-put by all threads.
pub fn run_cell_counted<B: Brand, R: Repr>(
    caches: &mut [LocalCache<&'_ Pool<Obj, B, R>>],
    cell: &Cell,
    limit: Limit,
    clock: Clock,
    pinning: &Pinning,
) -> Result<(f64, u64), PoolError> {
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
                    worker(c, cell, limit, clock)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    });
    let (mut rate, mut objects) = (0.0, 0);
    for r in results {
        let (count, elapsed) = r?;
        rate += count as f64 / elapsed.as_secs_f64();
        objects += count;
    }
    Ok((rate, objects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Dpdk;
    use idxpool::PoolBuilder;

    #[test]
    fn random_bulks_follow_dpdks_sequence() {
        // DPDK 26.07: x = ((r ^ (r >> 2) ^ (r << 3)) & (max - 1)) + 1, r = 0, 1, 2, ...
        let mut r = 0u32;
        let got: Vec<usize> = (0..6).map(|_| random_bulk(&mut r, 7, 100)).collect();
        // r=0: 0+1; r=1: (1^0^8)&7=1 -> 2; r=2: (2^0^16)&7=2 -> 3; r=3: (3^0^24)&7=3 -> 4;
        // r=4: (4^1^32)&7=5 -> 6; r=5: (5^1^40)&7=4 -> 5.
        assert_eq!(got, vec![1, 2, 3, 4, 6, 5]);
        assert_eq!(random_bulk(&mut r, 511, 3), 3, "cut to what is left");
        let mut r = u32::MAX;
        assert!(random_bulk(&mut r, 511, 1000) <= 512);
        assert_eq!(r, 0, "the counter wraps as DPDK's unsigned int");
    }

    #[test]
    fn lifo_moves_entries_and_refuses_underflow() {
        let mut l = Lifo::full(8, |i| i as u32);
        let mut t = [0u32; 8];
        assert!(l.get_into(&mut t[..3]));
        assert_eq!(t[..3], [5, 6, 7]);
        assert!(!l.get_into(&mut t[2..]), "only 5 left");
        assert_eq!(l.len(), 5);
        l.put_from(&t[1..3]);
        assert_eq!(l.len(), 7);
        assert!(l.get_into(&mut t[..4]));
        assert_eq!(t[..4], [3, 4, 6, 7], "last put, first got");
        l.put_from(&t[..4]);
        l.put_from(&t[..1]);
        assert_eq!(l.len(), 8);
        // The constant-size windows of the floor's constant_n loop.
        let mut w = [0u32; 4];
        assert!(l.get_into_n(&mut w));
        assert_eq!(w, [4, 6, 7, 3]);
        assert!(!l.get_into_n(&mut [0u32; 5]), "only 4 left");
        l.put_from_n(&w);
        assert_eq!(l.len(), 8);
    }

    #[test]
    fn copy_short_copies_every_length() {
        for n in 0..150usize {
            let src: Vec<u64> = (0..n as u64).map(|i| i * 7 + 1).collect();
            let mut dst = vec![0u64; n];
            super::copy_short(&mut dst, &src);
            assert_eq!(dst, src, "n = {n}");
        }
    }

    #[test]
    fn the_floor_keeps_its_array_on_a_line_and_its_windows_whole() {
        // Every window the cells use, for both entry sizes (32-byte pieces in AVX-512 builds).
        fn round_trip<E: Copy + PartialEq + std::fmt::Debug + From<u32>, const N: usize>() {
            let mut l = Lifo::full(64, |i| E::from(i as u32 * 3 + 1));
            assert_eq!(
                (l.buf.as_ptr() as usize + l.at * std::mem::size_of::<E>()) % 64,
                0
            );
            let mut w = [E::from(0); N];
            assert!(l.get_into_n(&mut w));
            let want: Vec<E> = (64 - N..64).map(|i| E::from(i as u32 * 3 + 1)).collect();
            assert_eq!(w[..], want[..], "N = {N}");
            l.put_from_n(&w);
            let mut t = vec![E::from(0); N];
            assert!(l.get_into(&mut t));
            assert_eq!(t, want, "run-time N = {N}");
            l.put_from(&t);
            assert_eq!(l.len(), 64);
            assert_eq!(l.entry(0), E::from(1));
        }
        round_trip::<u32, 8>();
        round_trip::<u32, 16>();
        round_trip::<u32, 32>();
        round_trip::<u64, 4>();
        round_trip::<u64, 16>();
        round_trip::<u64, 32>();
        let src: Vec<u32> = (0..64).collect();
        let mut dst = vec![0u32; 64];
        super::copy_entries(&mut dst, &src);
        assert_eq!(dst, src);
    }

    #[test]
    fn spread_tables_start_at_each_repetitions_page_offset() {
        TABLE_SPREAD.store(true, Ordering::Relaxed);
        let mut seen = std::collections::HashSet::new();
        for rep in 0..8 {
            set_table_rep(rep);
            let (buf, at) = placed_table(32, |i| i as u32);
            let start = buf[at..].as_ptr() as usize;
            assert_eq!(start % PAGE, (rep * 1040 + 336) % PAGE);
            assert!(
                buf[at..at + 32].iter().copied().eq(0..32u32),
                "the slots, in order"
            );
            seen.insert(start % PAGE);
        }
        TABLE_SPREAD.store(false, Ordering::Relaxed);
        assert_eq!(seen.len(), 8, "every repetition at its own offset");
    }

    #[test]
    fn floor_and_random_cells_run() {
        let off = Pinning::off("test");
        let d = Limit::Time(Duration::from_millis(1));
        let base = Cell {
            cache: 512,
            cores: 1,
            get: 0,
            put: 0,
            keep: 128,
            constant: false,
            touch: false,
            max_bulk: 64,
            dpdk: Dpdk::V2607,
            prefetch: false,
        };
        for cell in [
            base,
            Cell {
                max_bulk: 0,
                get: 128,
                put: 128,
                constant: true,
                ..base
            },
            Cell {
                max_bulk: 0,
                get: 4,
                put: 32,
                cores: 2,
                ..base
            },
        ] {
            assert!(run_floor(&cell, d, Clock::Cpu, &off, |i| i as u32) > 0.0);
            assert!(run_floor(&cell, d, Clock::Wall, &off, |i| i as u64) > 0.0);
        }
        // The random pass on a pool: every object comes back.
        for touch in [false, true] {
            let cell = Cell {
                touch,
                dpdk: Dpdk::V2211,
                ..base
            };
            PoolBuilder::<Obj>::zeroed(1000)
                .cache_size(64)
                .scoped(|pool| {
                    let mut caches = vec![pool.local_cache()];
                    assert!(run_cell(&mut caches, &cell, d, Clock::Cpu, &off).unwrap() > 0.0);
                    drop(caches);
                    assert_eq!(pool.in_use(), 0);
                })
                .unwrap();
        }
    }

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
            for prefetch in [false, touch] {
                let cell = Cell {
                    cache: 64,
                    cores: 1,
                    get,
                    put,
                    keep: 32,
                    constant,
                    touch,
                    max_bulk: 0,
                    dpdk: Default::default(),
                    prefetch,
                };
                let d = Limit::Time(Duration::from_millis(1));
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
                    .repr::<idxpool::Pointer>()
                    .scoped(|pool| {
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
}
