//! Code placement of a hot loop: the same machine code, started 0, 16, 32 or 48 bytes past a
//! 64-byte line, on the touch loop of the `touch=1` cells (BENCHMARKS.md 40).
//!
//! The loop is `mempool_perf`'s write through `&mut T`, as rustc compiled it for the index pool
//! (`worker_dyn`, `for h in slots.iter_mut().flatten() { objs.get_mut(h).head = count }`):
//! load a 4-byte offset entry of the caller's table, skip an empty slot, store 8 bytes at
//! `base + entry x 8`; 32 slots, the table re-walked `reps` times. A second loop adds the
//! run-time pool's identity check (`rank = entry ^ e0`, `rank < span` or a branch to a trap,
//! the store at `base + rank x 8`). Each loop is written once in assembly and placed four times
//! by `.p2align 6` plus 0-48 bytes of padding, so the copies differ only in where they sit.
//! The result is nanoseconds of thread CPU time per object (the best of 7 runs of 2^26 objects).
//! x86-64 only; built with `rustc` alone in seconds:
//!
//! ```sh
//! rustc --edition 2021 -C opt-level=3 bench/examples/loop_placement.rs -o /tmp/loop_placement
//! /tmp/loop_placement
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
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("loop_placement: x86-64 only");
}
