//! Clocks: the calling thread's CPU time and a stopwatch on wall or CPU time.

use std::time::{Duration, Instant};

/// CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID`): unlike wall time it
/// leaves out the time the thread waits to be scheduled, so it is robust on a shared machine.
///
/// # Panics
/// If `clock_gettime` fails (it cannot on Linux >= 2.6.12).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on
    // every Linux since 2.6.12, and clock_gettime only writes through the pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// [`thread_cpu_time`] in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    thread_cpu_time().as_nanos() as u64
}

/// Time base of a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Clock {
    /// Elapsed (wall-clock) time.
    Wall,
    /// The measuring thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
    Cpu,
}

impl Clock {
    /// Name for the output ("wall" or "thread CPU").
    pub fn describe(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Cpu => "thread CPU",
        }
    }
}

/// Measures one run: the deadline is always wall time (so runs have a fixed length); the
/// rate's time base is the chosen clock, read only at the start and the end.
#[derive(Debug)]
pub struct Stopwatch {
    clock: Clock,
    wall: Instant,
    cpu: Duration,
}

impl Stopwatch {
    /// Starts both clocks (the CPU clock only when it is the chosen one).
    pub fn start(clock: Clock) -> Self {
        Stopwatch {
            clock,
            cpu: if clock == Clock::Cpu {
                thread_cpu_time()
            } else {
                Duration::ZERO
            },
            wall: Instant::now(),
        }
    }

    /// Wall time since the start.
    pub fn wall_elapsed(&self) -> Duration {
        self.wall.elapsed()
    }

    /// Elapsed time on the chosen clock.
    pub fn measured(&self) -> Duration {
        match self.clock {
            Clock::Wall => self.wall.elapsed(),
            Clock::Cpu => thread_cpu_time().saturating_sub(self.cpu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_clock_advances_with_work() {
        let t0 = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time() > t0);
        let sw = Stopwatch::start(Clock::Cpu);
        assert!(sw.measured() <= sw.wall_elapsed() + Duration::from_millis(50));
    }
}
