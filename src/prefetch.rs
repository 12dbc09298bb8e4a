//! The prefetch hint behind [`crate::Resolver::prefetch`] (issue 12): one instruction that asks
//! the core to bring a cache line towards L1 in a state ready for writing, as DPDK's
//! `rte_prefetch0_write` and VPP's `vlib_prefetch_buffer_header(b, STORE)` do.
//!
//! - x86-64: `_mm_prefetch::<_MM_HINT_ET0>`. LLVM emits `prefetchw` (fetch for ownership) only
//!   when the target feature `prfchw` is enabled (e.g. `-C target-cpu=native` on a CPU that has
//!   it, which is every x86-64 since Broadwell / AMD K8); without it the same call compiles to
//!   `prefetcht0` (a read prefetch into every level), which still hides the miss but leaves the
//!   line shared until the first store upgrades it.
//! - aarch64: `prfm pstl1keep, [p]` (prefetch for store, L1, temporal).
//! - Other targets, and Miri (which interprets no prefetch): nothing.
//!
//! A prefetch never faults, whatever the address; the callers still only pass addresses of
//! objects inside a pool's region, computed from valid handles, so that no address arithmetic
//! leaves the region's allocation (Miri, strict provenance).

/// Hints that the cache line holding `p` will be written soon. No effect on program semantics:
/// no read, no write, no fault.
#[inline(always)]
pub(crate) fn prefetch_write(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: a prefetch is a hint: it reads and writes no memory and never faults, for any
        // address (SSE, part of the x86-64 baseline). `p` is an object address in a pool region.
        unsafe { _mm_prefetch::<{ _MM_HINT_ET0 }>(p.cast::<i8>()) };
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        // SAFETY: PRFM is a hint: it reads and writes no memory, never faults (also on an
        // unmapped address), touches no stack and no flags.
        unsafe {
            core::arch::asm!(
                "prfm pstl1keep, [{0}]",
                in(reg) p,
                options(nostack, readonly, preserves_flags)
            )
        };
    }
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        let _ = p;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefetch_of_any_address_in_a_buffer_is_harmless() {
        let buf = vec![7u8; 4096];
        for off in (0..buf.len()).step_by(64) {
            super::prefetch_write(buf[off..].as_ptr());
        }
        assert!(buf.iter().all(|&b| b == 7), "a prefetch writes nothing");
    }
}
