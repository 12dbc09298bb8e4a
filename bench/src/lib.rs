//! Shared helpers of the idxpool harnesses (the examples `mempool_perf`, `peers`, `pktpipe` and
//! the criterion benches of this crate): one copy of each measuring tool instead of one per
//! harness.
//!
//! - [`clock`]: per-thread CPU clock and a stopwatch on a chosen time base.
//! - [`pin`]: thread pinning through `core_affinity` (off by default, `auto` pins only on idle
//!   CPUs) and the one line every run prints about pinning and the load average.
//! - [`stats`]: median, geometric mean, spread, the A/A noise estimate and the one-glance
//!   verdict line.
//! - [`spin`]: the spin-then-yield backoff of the producer/consumer loops.
//! - [`report`]: CSV files and the per-cell bar chart (SVG).
//! - [`callgrind`]: callgrind's client requests (collection toggles and labelled dumps), for
//!   exact instruction counts of a measured loop.
//! - [`run`]: time budgets (a `--quick` keeps the time it announces), Ctrl-C handling and
//!   progress bars on stderr.

pub mod callgrind;
pub mod clock;
pub mod pin;
pub mod report;
pub mod run;
pub mod spin;
pub mod stats;
