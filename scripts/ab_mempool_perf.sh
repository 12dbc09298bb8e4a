#!/usr/bin/env bash
# Before/after of two commits on mempool_perf's one-thread cache-512 cells, built twice each
# (as is, and with loops aligned to 64 bytes, so that a change of code placement alone shows),
# run cell by cell in the order before, after, before-aligned, after-aligned, before: each
# cell's before/after pair is seconds apart, and the two `before` runs give the cell's own A/A.
# The 4-byte pool is the index representation on both sides where the binary has `--repr`.
#
# Usage: scripts/ab_mempool_perf.sh BEFORE_REV AFTER_REV [ROUNDS=4] [WORD_FILTER]
#        e.g. scripts/ab_mempool_perf.sh ffbac97 HEAD 4 "const=1"
# Takes 4 release builds (~3 min each cold, in target/ab/) and ~2 min per round; prints one row
# per (pool, cell) and the geomeans (scripts/ab_mempool_perf.py). Run it on a quiet machine:
# anything else running widens the A/A column. BENCHMARKS.md section 11 (fifth sitting) is its
# output for ffbac97 against the one-path consolidation.
set -euo pipefail
cd "$(dirname "$0")/.."
# Commits resolved here: inside a worktree, HEAD would name the worktree's own commit.
before=$(git rev-parse --verify "$1^{commit}") after=$(git rev-parse --verify "$2^{commit}")
rounds=${3:-4} sel=${4:-}
root=$PWD/target/ab
mkdir -p "$root"
git worktree prune   # worktrees of an earlier run whose target/ was cleaned
for side in before after; do
  rev=${!side}
  wt=$root/src-$side
  if [ -d "$wt" ]; then git -C "$wt" checkout -q --detach "$rev"; else git worktree add -q --detach "$wt" "$rev"; fi
  (cd "$wt" && CARGO_TARGET_DIR=$root/tgt-$side cargo build -q --release -p idxpool-bench --example mempool_perf)
  (cd "$wt" && RUSTFLAGS="-C llvm-args=-align-loops=64" CARGO_TARGET_DIR=$root/tgt-$side-al \
    cargo build -q --release -p idxpool-bench --example mempool_perf)
done
# `--repr index` where the binary has the flag (ffbac97's has only the index pool). Asked once
# per binary, and from a captured string: `--help | grep -q` under pipefail can fail on SIGPIPE.
declare -A repr_of
for b in before after before-al after-al; do
  help=$("$root/tgt-$b/release/examples/mempool_perf" --help)
  if [[ $help == *--repr* ]]; then repr_of[$b]="--repr index"; else repr_of[$b]=""; fi
done
csv=$root/cells.csv
: > "$csv"
for r in $(seq "$rounds"); do
  for g in 1 4 32; do for keep in 32 512; do for c in 0 1; do for t in 0 1; do
    cell="cache=512 get=$g put=$g keep=$keep const=$c touch=$t"
    if [ -n "$sel" ]; then ok=1; for w in $sel; do case " $cell " in *" $w "*) ;; *) ok=0;; esac; done; [ $ok = 1 ] || continue; fi
    i=0
    for b in before after before-al after-al before; do
      i=$((i + 1))
      bin=$root/tgt-$b/release/examples/mempool_perf
      # shellcheck disable=SC2086 # the flag pair is meant to split
      "$bin" ${repr_of[$b]} --filter "$cell" --cores 1 --cell-ms 50 --clock cpu --csv "$root/one.csv" > /dev/null 2> "$root/one.err"
      # round, position, binary, then mempool_perf's row (pool, policy, cache, cores, get, put, keep, const, touch, ..., rate)
      grep -v '^pool' "$root/one.csv" | sed "s/^/$r,$i,$b,/" >> "$csv"
    done
  done; done; done; done
done
python3 scripts/ab_mempool_perf.py "$csv"
