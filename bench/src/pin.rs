//! Thread pinning that cannot wreck a run, and the run's context line.
//!
//! On a shared machine a thread pinned to a busy CPU waits for that CPU even when another one
//! is free: `pktpipe` measured 100-500x slower pinned than unpinned there. So
//! pinning is off by default; `--pin auto` pins only when the chosen CPUs are idle (less than
//! [`IDLE_BUSY_MAX`] busy over [`IDLE_SAMPLE`], measured from `/proc/stat`), `--pin on`
//! always. Every harness prints [`context_line`]: whether threads were pinned, and the load
//! average.

use std::time::Duration;

/// Pinning mode (`--pin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PinMode {
    /// Never pin (the default): the scheduler places threads.
    Off,
    /// Pin each thread to its CPU (thread i to the i-th allowed CPU).
    On,
    /// Pin only when the CPUs the threads would use are idle now.
    Auto,
}

/// Largest busy fraction of a CPU that `auto` still calls idle.
pub const IDLE_BUSY_MAX: f64 = 0.10;
/// How long `auto` watches the CPUs.
pub const IDLE_SAMPLE: Duration = Duration::from_millis(200);

/// The decision for one run: which CPUs the threads go to (none: not pinned) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinning {
    cpus: Vec<usize>,
    reason: String,
}

impl Pinning {
    /// Not pinned, for `reason`.
    pub fn off(reason: impl Into<String>) -> Self {
        Pinning {
            cpus: Vec::new(),
            reason: reason.into(),
        }
    }

    /// Decides for `threads` threads under `mode` (reads `/proc/stat` for `auto`).
    pub fn decide(mode: PinMode, threads: usize) -> Self {
        let cpus: Vec<usize> = allowed_cpus().into_iter().take(threads).collect();
        match mode {
            PinMode::Off => Pinning::off("--pin off"),
            _ if cpus.len() < threads => Pinning::off(format!(
                "{threads} threads but only {} CPUs allowed",
                cpus.len()
            )),
            PinMode::On => Pinning {
                cpus,
                reason: "--pin on".into(),
            },
            PinMode::Auto => match cpu_busy(&cpus, IDLE_SAMPLE) {
                Some(busy) => {
                    let worst = busy.iter().copied().fold(0.0f64, f64::max);
                    if worst <= IDLE_BUSY_MAX {
                        Pinning {
                            cpus,
                            reason: format!(
                                "--pin auto: CPUs idle (max {:.0}% busy)",
                                worst * 100.0
                            ),
                        }
                    } else {
                        Pinning::off(format!(
                            "--pin auto: CPUs busy (max {:.0}% busy)",
                            worst * 100.0
                        ))
                    }
                }
                None => Pinning::off("--pin auto: /proc/stat unreadable"),
            },
        }
    }

    /// True when threads get pinned.
    pub fn is_on(&self) -> bool {
        !self.cpus.is_empty()
    }

    /// The CPU of thread `i` (None when not pinned).
    pub fn cpu_for(&self, i: usize) -> Option<usize> {
        if self.cpus.is_empty() {
            None
        } else {
            Some(self.cpus[i % self.cpus.len()])
        }
    }

    /// Pins the calling thread as thread `i`; returns true if it is now pinned.
    pub fn apply(&self, i: usize) -> bool {
        self.cpu_for(i).is_some_and(pin_current)
    }

    /// "pinned to CPUs 0,1 (--pin on)" or "not pinned (--pin off)".
    pub fn describe(&self) -> String {
        if self.is_on() {
            let l: Vec<String> = self.cpus.iter().map(|c| c.to_string()).collect();
            format!("threads pinned to CPUs {} ({})", l.join(","), self.reason)
        } else {
            format!("threads not pinned ({})", self.reason)
        }
    }
}

/// The CPUs this process may run on, in order (via `core_affinity`; `0..n` if unknown).
pub fn allowed_cpus() -> Vec<usize> {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => ids.into_iter().map(|c| c.id).collect(),
        _ => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Pins the calling thread to `cpu` (`core_affinity::set_for_current`); false on failure.
pub fn pin_current(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
pub fn load_average() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse_loadavg(s: &str) -> Option<[f64; 3]> {
    let mut it = s.split_whitespace().map(|w| w.parse::<f64>());
    Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
}

/// The line every harness prints before measuring: pinning, load average, CPUs.
pub fn context_line(pinning: &Pinning) -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = match load_average() {
        Some([a, b, c]) => format!("load average {a:.2} {b:.2} {c:.2}"),
        None => "load average unknown".into(),
    };
    let warn = match load_average() {
        Some([a, ..]) if a > 0.5 * cpus as f64 => {
            " (a loaded machine: compare only ratios measured side by side)"
        }
        _ => "",
    };
    format!("{}; {load} on {cpus} CPUs{warn}", pinning.describe())
}

/// (busy, total) jiffies of each `cpuN` line of a `/proc/stat` text.
fn parse_stat(s: &str) -> Vec<(usize, u64, u64)> {
    s.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let id: usize = name.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
            if v.len() < 5 {
                return None;
            }
            let total: u64 = v.iter().take(8).sum();
            let idle = v[3] + v[4];
            Some((id, total - idle, total))
        })
        .collect()
}

/// Busy fraction of each of `cpus` over `window` (None if `/proc/stat` is unreadable or lacks a
/// CPU).
pub fn cpu_busy(cpus: &[usize], window: Duration) -> Option<Vec<f64>> {
    let a = parse_stat(&std::fs::read_to_string("/proc/stat").ok()?);
    std::thread::sleep(window);
    let b = parse_stat(&std::fs::read_to_string("/proc/stat").ok()?);
    cpus.iter()
        .map(|&c| {
            let x = a.iter().find(|t| t.0 == c)?;
            let y = b.iter().find(|t| t.0 == c)?;
            let total = y.2.saturating_sub(x.2);
            Some(if total == 0 {
                0.0
            } else {
                y.1.saturating_sub(x.1) as f64 / total as f64
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_is_never_pinned() {
        let p = Pinning::decide(PinMode::Off, 2);
        assert!(!p.is_on());
        assert_eq!(p.cpu_for(0), None);
        assert!(!p.apply(0));
        assert!(p.describe().starts_with("threads not pinned"));
        assert!(context_line(&p).contains("load average"));
    }

    #[test]
    fn too_many_threads_are_not_pinned() {
        let p = Pinning::decide(PinMode::On, 100_000);
        assert!(!p.is_on());
        assert!(p.describe().contains("only"));
    }

    #[test]
    fn on_pins_to_allowed_cpus() {
        let p = Pinning::decide(PinMode::On, 1);
        assert_eq!(p.cpu_for(0), allowed_cpus().first().copied());
        assert!(p.describe().contains("pinned to CPUs"));
        // Pin a scratch thread, not the test thread.
        let cpu = p.cpu_for(0).unwrap();
        assert!(std::thread::spawn(move || pin_current(cpu)).join().unwrap());
    }

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            parse_loadavg("0.28 0.53 0.26 1/123 456\n"),
            Some([0.28, 0.53, 0.26])
        );
        assert_eq!(parse_loadavg("x"), None);
        let stat = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        assert_eq!(parse_stat(stat), vec![(0, 10, 60), (1, 27, 36)]);
        let busy = cpu_busy(&[0], Duration::from_millis(1)).unwrap();
        assert!((0.0..=1.0).contains(&busy[0]));
    }
}
