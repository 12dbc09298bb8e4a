#!/usr/bin/env bash
# Loom model checking of the lock-free core (tests/loom.rs): the common ring (MPMC, SP/SC,
# bulk, burst, 32-bit counter wrap, slot reuse) and user-owned caches flushing to / refilling
# from it while another thread does the same.
#
# Usage: scripts/loom.sh [test-name-filter] [-- extra test-harness args]
# Env:   LOOM_MAX_PREEMPTIONS=N  overrides each model's preemption bound (slower when raised).
#
# A separate target dir keeps the `--cfg loom` build from invalidating the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"
# Optimised but quick to build: the models need speed at run time, not full release codegen
# (cargo builds every dev-dependency for a test target, so this matters on a cold target).
export CARGO_PROFILE_RELEASE_DEBUG="${CARGO_PROFILE_RELEASE_DEBUG:-0}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
start=$(date +%s)
cargo test --release --test loom --test loom_channel "$@" -- --nocapture --test-threads=2
echo "loom: done in $(( $(date +%s) - start )) s"
