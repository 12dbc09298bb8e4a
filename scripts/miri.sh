#!/usr/bin/env bash
# Miri over the unsafe core: the library's unit tests (ring, caches, handles, region on the heap
# backing) and a chosen integration subset (the proptest model, multi-threaded stress with the
# data-race detector, bad input, debug checks), with small sizes.
#
# Usage: scripts/miri.sh [extra cargo-miri-test args]     (about 17 min from a clean clone on
#                                                          2 vCPUs, CI of 2026-12-02)
#        MIRI_QUICK=1 scripts/miri.sh                      (lib + stress + debug_checks + runtime_pools + bytes)
# Needs: rustup component add --toolchain nightly miri rust-src
#
# Under cfg(miri) the region uses the heap backing (Miri interprets no mmap flags but
# MAP_PRIVATE|MAP_ANONYMOUS). Skipped here, with the reason:
#   shared::                                    idxpool::shared maps files and reads /proc
#                                               (Miri: no open() under isolation, no MAP_SHARED)
#   cache::tests::every_policy_conserves_...    2000 random ops x 15 configs: 5.5 min under
#                                               Miri; tests/model.rs covers the same ground
# Hugetlb / MAP_POPULATE / trybuild tests carry #[cfg_attr(miri, ignore = "...")] themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
# Strict provenance: no integer-to-pointer casts anywhere on the paths tested.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
start=$(date +%s)
cargo +nightly miri test --lib "$@" -- \
  --skip shared:: \
  --skip every_policy_conserves_and_respects_its_limit
if [ "${MIRI_QUICK:-0}" = 1 ]; then
  # CI subset: the multi-threaded stress (data races), the debug checks, the soundness
  # regressions and the run-time pools, ~1.5 min warm.
  cargo +nightly miri test "$@" --test stress --test debug_checks --test soundness \
    --test runtime_pools --test reentrant_alloc --test grow
else
  cargo +nightly miri test "$@" \
    --test model --test table --test stress --test bad_input --test debug_checks --test pool_basics \
    --test soundness --test runtime_pools --test reentrant_alloc --test grow --test on_put \
    --test packet_buf --test channel --test channel_edges
fi
# Packet buffers as `Bytes` (feature bytes): the owner's drop on another thread, after the
# user's Arc of the pool is gone; the unsized object's pointer (`PacketBuf`) on every path.
cargo +nightly miri test "$@" --features bytes --test bytes --test packet_edges
echo "miri: done in $(( $(date +%s) - start )) s (MIRIFLAGS=$MIRIFLAGS)"
