//! Callgrind's client requests, for instruction counts of chosen code regions
//! (`mempool_perf --objects`, `scripts/instr-vs-dpdk.sh`).
//!
//! Under `valgrind --tool=callgrind --collect-atstart=no`, a thread that calls
//! [`toggle_collect`] before and after a loop has exactly that loop's instructions counted
//! (callgrind's collection state is per thread: a freshly spawned thread starts with collection
//! off); [`dump_stats_at`] then writes the counts collected so far, over every thread, to a new
//! dump file whose `desc: Trigger: Client Request: <label>` line names it, and zeroes them.
//! These are the macros `CALLGRIND_TOGGLE_COLLECT` and `CALLGRIND_DUMP_STATS_AT` of valgrind's
//! `callgrind.h`, which C code includes; here the request is issued directly, as
//! `valgrind.h`'s `VALGRIND_DO_CLIENT_REQUEST_EXPR` does on amd64: a "special instruction"
//! sequence (four rotations of `rdi` by 3, 13, 61 and 51 bits, 128 in all, which leave it as
//! it was, then `xchg rbx, rbx`) with `rax` pointing at the request and its five arguments.
//! Valgrind recognises the sequence and serves the request; run natively, it is six
//! instructions that change nothing (the result is the default, 0). No build-time dependency
//! on valgrind's headers, so the bench crate builds where valgrind is not installed. On other
//! architectures the requests do nothing.

/// `VG_USERREQ_TOOL_BASE('C', 'T')` (valgrind.h): the base of callgrind's requests.
const CALLGRIND_BASE: u64 = ((b'C' as u64) << 24) | ((b'T' as u64) << 16);
/// `VG_USERREQ__TOGGLE_COLLECT` (callgrind.h: base + 2).
const TOGGLE_COLLECT: u64 = CALLGRIND_BASE + 2;
/// `VG_USERREQ__DUMP_STATS_AT` (callgrind.h: base + 3).
const DUMP_STATS_AT: u64 = CALLGRIND_BASE + 3;

/// Issues a client request with up to five arguments; returns valgrind's answer, or 0 when
/// not running under valgrind.
#[inline(always)]
fn client_request(request: u64, args: [u64; 5]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let block: [u64; 6] = [request, args[0], args[1], args[2], args[3], args[4]];
        let mut result: u64 = 0;
        // SAFETY: the sequence rotates rdi by 128 bits in all (declared clobbered anyway, and
        // the flags are clobbered by default) and exchanges rbx with itself: natively it
        // changes nothing but rdi's declared clobber and the flags; under valgrind, valgrind
        // reads the six words at `block` (alive and initialised for the whole asm block) and
        // writes its answer to rdx. Memory is not declared untouched (no `nomem`): a dump
        // reads the label's bytes.
        unsafe {
            std::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                in("rax") block.as_ptr(),
                inout("rdx") result,
                out("rdi") _,
                options(nostack),
            );
        }
        result
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (request, args);
        0
    }
}

/// `CALLGRIND_TOGGLE_COLLECT`: flips the calling thread's collection state (on after the
/// first call under `--collect-atstart=no`, off after the second). Does nothing outside
/// valgrind.
#[inline(always)]
pub fn toggle_collect() {
    client_request(TOGGLE_COLLECT, [0; 5]);
}

/// `CALLGRIND_DUMP_STATS_AT(label)`: writes the counts collected since the last dump (every
/// thread's) to a new dump file labelled `label`, and zeroes them. Does nothing outside
/// valgrind. A NUL in `label` ends it there.
pub fn dump_stats_at(label: &str) {
    let mut bytes: Vec<u8> = label.bytes().take_while(|&b| b != 0).collect();
    bytes.push(0);
    client_request(DUMP_STATS_AT, [bytes.as_ptr() as u64, 0, 0, 0, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_match_callgrind_h() {
        // callgrind.h: VG_USERREQ__DUMP_STATS = VG_USERREQ_TOOL_BASE('C','T'), then
        // ZERO_STATS, TOGGLE_COLLECT, DUMP_STATS_AT in that order.
        assert_eq!(CALLGRIND_BASE, 0x4354_0000);
        assert_eq!(TOGGLE_COLLECT, 0x4354_0002);
        assert_eq!(DUMP_STATS_AT, 0x4354_0003);
    }

    #[test]
    fn requests_do_nothing_natively() {
        // Outside valgrind the answer is the default and nothing else changes.
        let x = std::hint::black_box(41u64);
        toggle_collect();
        toggle_collect();
        dump_stats_at("a label\0ignored");
        assert_eq!(client_request(TOGGLE_COLLECT, [1, 2, 3, 4, 5]), 0);
        assert_eq!(x + 1, 42);
    }
}
