//! Placement, code and data, of the `touch=1` cells' loops: the same instructions at other
//! addresses (BENCHMARKS.md 40).
//!
//! **Code.** The same machine code, its hot loop started 0, 16, 32 or 48 bytes past a
//! 64-byte line, on the touch loop of the `touch=1` cells.
//!
//! The loop is `mempool_perf`'s write through `&mut T`, as rustc compiled it for the index pool
//! (`worker_dyn`, `for h in slots.iter_mut().flatten() { objs.get_mut(h).head = count }`):
//! load a 4-byte offset entry of the caller's table, skip an empty slot, store 8 bytes at
//! `base + entry x 8`; 32 slots, the table re-walked `reps` times. A second loop adds the
//! run-time pool's identity check (`rank = entry ^ e0`, `rank < span` or a branch to a trap,
//! the store at `base + rank x 8`). Each loop is written once in assembly and placed four times
//! by `.p2align 6` plus 0-48 bytes of padding, so the copies differ only in where they sit.
//! The result is nanoseconds of thread CPU time per object (the best of 7 runs of 2^26 objects).
//!
//! **Data.** The get-4 / touch / put-4 cycle of the constant 4/4 keep-32 cell on plain memory:
//! 32 objects 2112 bytes apart in a page-aligned buffer, a cache array of 4-byte entries, and the
//! caller's table of 32 slots; each get copies the cache's top 4 entries (one 16-byte move) into
//! a window of the table, then stores 8 bytes at the head of each of its 4 objects (the address
//! from the entry just copied); the puts copy the windows back. Only the table's address
//! changes between rows: its offset in a 4 KiB page, in steps of 16 bytes (the cache array and
//! the objects stay put). A load whose address matches a pending store's in bits 0-11 waits
//! for it (4K aliasing), as if it depended on it: the table's loads meet the object stores just
//! before them when the table shares page offsets with the objects' heads.
//!
//! x86-64 only; built with `rustc` alone in seconds:
//!
//! ```sh
//! rustc --edition 2021 -C opt-level=3 bench/examples/placement.rs -o /tmp/placement
//! /tmp/placement
//! ```

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::global_asm;

    /// Emits `$name`: the touch loop (`$checked`: with the run-time identity check), its hot
    /// part starting `$pad` bytes past a 64-byte line. SysV arguments: rdi = table, rsi = table
    /// end, rdx = base, rcx = value stored, r8 = passes over the table, r9 = e0, [rsp+8] = span.
    macro_rules! touch_loop {
        ($name:literal, $pad:literal, plain) => {
            global_asm!(
                concat!(".globl ", $name),
                ".p2align 6",
                concat!($name, ":"),
                "    jmp 3f",
                ".p2align 6",
                concat!(".skip ", $pad, ", 0x90"),
                // the hot loop: 7 instructions, 22 bytes
                "2:  mov r10d, dword ptr [rax]",
                "    test r10, r10",
                "    je 4f",
                "    mov qword ptr [rdx + r10*8], rcx",
                "4:  add rax, 4",
                "    cmp rax, rsi",
                "    jne 2b",
                "    dec r8",
                "    je 5f",
                "3:  mov rax, rdi",
                "    jmp 2b",
                "5:  ret",
            );
        };
        ($name:literal, $pad:literal, checked) => {
            global_asm!(
                concat!(".globl ", $name),
                ".p2align 6",
                concat!($name, ":"),
                "    mov r11d, dword ptr [rsp + 8]",
                "    jmp 3f",
                ".p2align 6",
                concat!(".skip ", $pad, ", 0x90"),
                // the hot loop: 9 instructions, 29 bytes
                "2:  mov r10d, dword ptr [rax]",
                "    test r10d, r10d",
                "    je 4f",
                "    xor r10d, r9d",
                "    cmp r10d, r11d",
                "    jae 6f",
                "    mov qword ptr [rdx + r10*8], rcx",
                "4:  add rax, 4",
                "    cmp rax, rsi",
                "    jne 2b",
                "    dec r8",
                "    je 5f",
                "3:  mov rax, rdi",
                "    jmp 2b",
                "5:  ret",
                "6:  ud2",
            );
        };
    }

    touch_loop!("idxpool_touch_0", 0, plain);
    touch_loop!("idxpool_touch_16", 16, plain);
    touch_loop!("idxpool_touch_32", 32, plain);
    touch_loop!("idxpool_touch_48", 48, plain);
    touch_loop!("idxpool_checked_0", 0, checked);
    touch_loop!("idxpool_checked_16", 16, checked);
    touch_loop!("idxpool_checked_32", 32, checked);
    touch_loop!("idxpool_checked_48", 48, checked);

    type Loop = unsafe extern "sysv64" fn(*const u32, *const u32, *mut u64, u64, u64, u32, u32);

    extern "sysv64" {
        fn idxpool_touch_0(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_touch_16(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_touch_32(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_touch_48(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_checked_0(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_checked_16(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_checked_32(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
        fn idxpool_checked_48(
            t: *const u32,
            e: *const u32,
            b: *mut u64,
            v: u64,
            r: u64,
            e0: u32,
            s: u32,
        );
    }

    /// Slots of the caller's table (`keep = 32`, as the cells).
    const SLOTS: usize = 32;
    /// Bytes between objects (`mempool_perf`'s 2112).
    const STRIDE: usize = 2112;
    /// Objects written per run.
    const OBJECTS: u64 = 1 << 26;
    /// The run-time pool's first entry: a nonzero multiple of the span, as `space::claim` gives.
    const E0: u32 = 1 << 16;
    /// The run-time pool's span of the handle space.
    const SPAN: u32 = 1 << 16;

    fn thread_cpu_ns() -> u64 {
        let mut ts = std::mem::MaybeUninit::<[i64; 2]>::uninit();
        extern "C" {
            fn clock_gettime(clk: i32, ts: *mut [i64; 2]) -> i32;
        }
        // SAFETY: CLOCK_THREAD_CPUTIME_ID (3) fills the two words of a timespec.
        let ts = unsafe {
            assert_eq!(clock_gettime(3, ts.as_mut_ptr()), 0);
            ts.assume_init()
        };
        ts[0] as u64 * 1_000_000_000 + ts[1] as u64
    }

    /// Best of 7 runs, in ns per object.
    fn time(f: Loop, table: &[u32], base: *mut u64) -> f64 {
        let passes = OBJECTS / SLOTS as u64;
        let mut best = f64::MAX;
        for rep in 0..7u64 {
            let t0 = thread_cpu_ns();
            // SAFETY: every entry of `table` (plain: `e`; checked: `e ^ E0`) times 8 lands on
            // an object of the buffer behind `base`; the loops read `table` only.
            unsafe {
                f(
                    table.as_ptr(),
                    table.as_ptr().add(table.len()),
                    base,
                    rep,
                    passes,
                    E0,
                    SPAN,
                )
            };
            let ns = (thread_cpu_ns() - t0) as f64 / OBJECTS as f64;
            best = best.min(ns);
        }
        best
    }

    /// Bytes of a page: the span of the address bits 4K aliasing compares.
    const PAGE: usize = 4096;
    /// Where the cache array's 32 entries start in their page.
    const CACHE_AT: usize = 0x800;

    /// A page-aligned, zeroed buffer of `pages` pages (leaked: the program's life).
    fn pages(n: usize) -> *mut u8 {
        let layout = std::alloc::Layout::from_size_align(n * PAGE, PAGE).unwrap();
        // SAFETY: the layout has a nonzero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!p.is_null());
        p
    }

    /// `cycles` rounds of the constant 4/4 keep-32 cell with touch: 8 gets of 4 entries from the
    /// cache's top into the table's windows, each followed by the 4 object stores, then 8 puts.
    /// `cache` holds `len` entries (at least 32).
    ///
    /// # Safety
    /// `table` has 32 slots, `cache` room above `len`, and every entry times 8 lands in the
    /// objects' buffer at `obase`.
    #[inline(never)]
    unsafe fn cycle44(cache: *mut u32, len: usize, table: *mut u32, obase: *mut u8, cycles: u64) {
        let mut len = len;
        for count in 0..cycles {
            for w in 0..8 {
                len -= 4;
                let win = table.add(w * 4);
                std::ptr::copy_nonoverlapping(
                    cache.add(len) as *const [u32; 4],
                    win as *mut [u32; 4],
                    1,
                );
                for k in 0..4 {
                    let e = std::ptr::read_volatile(win.add(k)) as usize;
                    std::ptr::write_volatile(obase.add(e * 8) as *mut u64, count);
                }
            }
            for w in 0..8 {
                let win = table.add(w * 4);
                std::ptr::copy_nonoverlapping(
                    win as *const [u32; 4],
                    cache.add(len) as *mut [u32; 4],
                    1,
                );
                len += 4;
            }
        }
    }

    fn data_rows() {
        let obase = pages(SLOTS * STRIDE / PAGE + 2);
        let cache = pages(1) as *mut u32;
        // The cache array: 32 entries from 0x800 (2 KiB into its page: the objects' heads are
        // at every multiple of 128 bytes of a page, so the array's 128 bytes meet one).
        let cache_at = CACHE_AT / 4;
        for i in 0..SLOTS {
            // SAFETY: within the cache's page.
            unsafe { *cache.add(cache_at + i) = (i * STRIDE / 8) as u32 };
        }
        let tbuf = pages(2);
        let cycles = OBJECTS / SLOTS as u64;
        let mut rows = Vec::new();
        for off in (0..PAGE).step_by(16) {
            // SAFETY: the table's 128 bytes lie in its 2 pages; entries land on the objects.
            let table = unsafe { tbuf.add(off) } as *mut u32;
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t0 = thread_cpu_ns();
                // SAFETY: as above; the cache holds 32 entries from `cache_at`.
                unsafe { cycle44(cache.add(cache_at), SLOTS, table, obase, cycles / 4) };
                best = best.min((thread_cpu_ns() - t0) as f64 / (OBJECTS / 4) as f64);
            }
            rows.push((off, best));
        }
        let mut sorted: Vec<f64> = rows.iter().map(|r| r.1).collect();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        println!();
        println!(
            "get 4 / touch / put 4, keep 32, stride {STRIDE}: ns per object (best of 5) by the"
        );
        println!(
            "table's offset in its page: min {:.3}, median {median:.3}, max {:.3}",
            sorted[0],
            sorted[sorted.len() - 1]
        );
        println!(
            "(the cache array at {CACHE_AT:#06x}..{:#06x}); offsets more than 25% above the median:",
            CACHE_AT + SLOTS * 4
        );
        for (off, ns) in &rows {
            if *ns > median * 1.25 {
                println!("  {off:#06x}: {ns:.3} ns");
            }
        }
    }

    pub fn main() {
        let mut objects = vec![0u64; SLOTS * STRIDE / 8];
        let base = objects.as_mut_ptr();
        // Offset entries: object i at base + e x 8, e = i x stride / 8 (the plain loop's
        // `obase0` is the buffer itself here; the +1 of real entries only moves the base).
        let plain: Vec<u32> = (0..SLOTS as u32)
            .map(|i| 1 + i * (STRIDE / 8) as u32)
            .collect();
        let checked: Vec<u32> = plain.iter().map(|&e| e ^ E0).collect();
        let rows: [(&str, Loop, &[u32]); 8] = [
            ("plain   +0 ", idxpool_touch_0, &plain),
            ("plain   +16", idxpool_touch_16, &plain),
            ("plain   +32", idxpool_touch_32, &plain),
            ("plain   +48", idxpool_touch_48, &plain),
            ("checked +0 ", idxpool_checked_0, &checked),
            ("checked +16", idxpool_checked_16, &checked),
            ("checked +32", idxpool_checked_32, &checked),
            ("checked +48", idxpool_checked_48, &checked),
        ];
        println!("touch loop, {SLOTS} slots, stride {STRIDE}: ns per object (best of 7), by the");
        println!("hot loop's start past a 64-byte line; addresses of the loops' entries:");
        for &(name, f, table) in &rows {
            let ns = time(f, table, base);
            println!("  {name} at {:>#12x}: {ns:.3} ns", f as usize);
        }
        std::hint::black_box(&objects);
        data_rows();
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("placement: x86-64 only");
}
