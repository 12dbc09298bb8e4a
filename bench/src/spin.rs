//! Spin-wait for producer/consumer loops.

use std::time::Duration;

/// What a waiting thread does once it has spun `limit` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// `std::thread::yield_now()`: the thread stays runnable (busy polling, as DPDK lcores).
    Yield,
    /// Sleeps this long: a waiting thread burns little CPU time while its peer is preempted.
    Sleep(Duration),
}

/// Spin limit of a pinned thread polling like a DPDK lcore (long spins before yielding).
pub const PINNED_SPINS: u32 = 1 << 14;
/// Spin limit of an unpinned thread (the machine may have fewer free cores than threads).
pub const UNPINNED_SPINS: u32 = 64;

/// One step of a spin-wait: a `spin_loop` hint while `*spins < limit` (and counts it), then
/// [`After`]. Reset `*spins` to 0 after progress.
#[inline]
pub fn backoff(spins: &mut u32, limit: u32, after: After) {
    if *spins < limit {
        std::hint::spin_loop();
        *spins += 1;
    } else {
        match after {
            After::Yield => std::thread::yield_now(),
            After::Sleep(d) => std::thread::sleep(d),
        }
    }
}

/// The spin limit for a thread that is pinned (or not): [`PINNED_SPINS`] or
/// [`UNPINNED_SPINS`].
pub fn spin_limit(pinned: bool) -> u32 {
    if pinned {
        PINNED_SPINS
    } else {
        UNPINNED_SPINS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_counts_up_to_the_limit_then_stays() {
        let mut s = 0;
        for _ in 0..10 {
            backoff(&mut s, 4, After::Yield);
        }
        assert_eq!(s, 4);
        backoff(&mut s, 4, After::Sleep(Duration::from_micros(1)));
        assert_eq!(s, 4);
        assert_eq!(spin_limit(true), PINNED_SPINS);
        assert_eq!(spin_limit(false), UNPINNED_SPINS);
    }
}
