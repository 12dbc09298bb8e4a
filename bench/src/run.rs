//! Running a harness on a shared machine: time budgets, Ctrl-C, progress bars.
//!
//! A [`Budget`] makes a run keep the time it announced: before each unit of work (a cell) it
//! gives that unit its share of the time left, so a run that fell behind (a loaded machine,
//! slow pool creation) shortens the units still to come instead of overrunning. [`interrupted`]
//! turns Ctrl-C into a flag the harness polls between measurements, so that it stops and
//! prints the summary of what it measured (a second Ctrl-C quits at once). [`progress_bar`]
//! draws on stderr only when stderr is a terminal (never in CI logs).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A time budget shared by `units` units of work.
#[derive(Clone, Debug)]
pub struct Budget {
    total: Duration,
    start: Instant,
    units: usize,
    done: usize,
}

impl Budget {
    /// Starts a budget of `total` for `units` units now.
    pub fn new(total: Duration, units: usize) -> Self {
        Budget {
            total,
            start: Instant::now(),
            units,
            done: 0,
        }
    }

    /// The time the next unit may take: what is left of the budget, shared equally by the
    /// units left (zero once the budget is spent or every unit is done).
    pub fn next_slot(&self) -> Duration {
        self.slot_at(self.start.elapsed())
    }

    /// [`Budget::next_slot`] at a given elapsed time (for tests).
    pub fn slot_at(&self, elapsed: Duration) -> Duration {
        let left = self.units.saturating_sub(self.done);
        if left == 0 {
            return Duration::ZERO;
        }
        self.total.saturating_sub(elapsed) / left as u32
    }

    /// Marks one unit done.
    pub fn unit_done(&mut self) {
        self.done += 1;
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The whole budget.
    pub fn total(&self) -> Duration {
        self.total
    }
}

/// Splits a unit's `slot` into `runs` equal timed runs, clamped to `[min, max]`.
pub fn run_length(slot: Duration, runs: f64, min: Duration, max: Duration) -> Duration {
    let d = if runs > 0.0 { slot.div_f64(runs) } else { max };
    d.clamp(min, max.max(min))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static HANDLER: OnceLock<bool> = OnceLock::new();
static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// Installs the Ctrl-C handler (once per process; true if it is in place). The first Ctrl-C
/// sets the flag that [`interrupted`] reads; the second exits at once with status 130.
pub fn install_ctrlc() -> bool {
    *HANDLER.get_or_init(|| {
        ctrlc::set_handler(|| {
            if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 {
                INTERRUPTED.store(true, Ordering::SeqCst);
                eprintln!(
                    "\ninterrupted: stopping after the current measurement and printing the \
                     summary (Ctrl-C again to quit now)"
                );
            } else {
                std::process::exit(130);
            }
        })
        .is_ok()
    })
}

/// True once Ctrl-C was pressed (see [`install_ctrlc`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Sets the interrupt flag as Ctrl-C would (for tests and for harnesses that stop early).
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// A progress bar of `len` steps on stderr, drawn only when `show` and stderr is a terminal.
/// Print other lines through `bar.suspend(|| ...)` (or `bar.println`) so they do not tear it.
pub fn progress_bar(len: u64, show: bool, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template =
        format!("{{elapsed:>4}} [{{bar:32}}] {{pos}}/{{len}} {unit}, ETA {{eta}} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Formats a duration for announcements: "45 s", "2 min 10 s", "1 h 05 min".
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    if s < 100 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_shares_what_is_left() {
        let mut b = Budget::new(Duration::from_secs(100), 10);
        assert_eq!(b.slot_at(Duration::ZERO), Duration::from_secs(10));
        b.unit_done();
        // On time: the same share; behind: smaller shares.
        assert_eq!(b.slot_at(Duration::from_secs(10)), Duration::from_secs(10));
        assert_eq!(b.slot_at(Duration::from_secs(55)), Duration::from_secs(5));
        assert_eq!(b.slot_at(Duration::from_secs(200)), Duration::ZERO);
        for _ in 0..9 {
            b.unit_done();
        }
        assert_eq!(b.slot_at(Duration::ZERO), Duration::ZERO);
        assert_eq!(b.total(), Duration::from_secs(100));
    }

    #[test]
    fn run_length_is_clamped() {
        let (min, max) = (Duration::from_millis(10), Duration::from_millis(250));
        assert_eq!(
            run_length(Duration::from_secs(1), 10.0, min, max),
            Duration::from_millis(100)
        );
        assert_eq!(run_length(Duration::ZERO, 10.0, min, max), min);
        assert_eq!(run_length(Duration::from_secs(100), 10.0, min, max), max);
        assert_eq!(run_length(Duration::from_secs(1), 0.0, min, max), max);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_secs(45)), "45 s");
        assert_eq!(human(Duration::from_secs(130)), "2 min 10 s");
        assert_eq!(human(Duration::from_secs(3900)), "1 h 05 min");
    }

    #[test]
    fn hidden_bar_and_interrupt_flag() {
        let b = progress_bar(10, false, "cells");
        b.inc(1);
        assert!(b.is_hidden());
        assert!(install_ctrlc());
        // The flag is process-wide: only check that it can be raised.
        interrupt();
        assert!(interrupted());
    }
}
