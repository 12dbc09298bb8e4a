#!/usr/bin/env bash
# mempool_perf built the three ways users build it, run side by side in one run, so that a
# change is judged on every build at once:
#   default   cargo's release build (x86-64 baseline: SSE2)
#   native    RUSTFLAGS="-C target-cpu=native" (AVX2, and AVX-512 where the CPU has it)
#   noavx512  RUSTFLAGS="-C target-cpu=native -C target-feature=-avx512f" (AVX-512 off, every
#             other extension of the CPU on). On a CPU without AVX-512F the flag changes
#             nothing: native and noavx512 are then the same code built twice, and their
#             difference is a build-to-build A/A (the script says so).
# Each build has its own target dir (target/builds/<build>). Per round, each build's
# mempool_perf runs once over the chosen cells (in the round's order: rounds alternate
# forwards and backwards over the builds, which cancels a linear drift); inside a run each cell
# runs its contenders interleaved: the index pool, the pointer twin, the index pool again (the
# A/A pair) and, for touch=0 cells, the floors (bare LIFO arrays of u32 / u64, --floor).
# Then per build and cell (medians over the rounds of mempool_perf's own medians):
#   index Mobj/s | index/twin | index/floor32 | A/A (index-aa/index) | keep=32 / keep=512
# (the last for keep=32 cells whose keep=512 partner, same other keys, is selected too; index
# pool and, in brackets, the twin), and a summary line per build: geomean index/twin, its
# worst cell, the cells slower than the twin beyond the build's A/A, the A/A's median.
#
# Usage: scripts/builds.sh [options] [-- extra mempool_perf args]
#   --filter WORDS   cells, as mempool_perf --full --filter (words all held by the label;
#                    alternatives separated by '|') [the short-table cells and their keep=512
#                    partners: get/put 32 const 0/1 touch 0/1, get 32 put 1/4, const 1/1]
#   --main           the main job's cells (mempool_perf without --full; no --filter): 24 at
#                    --cores 1, all 48 with --cores 1,2
#   --builds LIST    of default,native,noavx512 [all three]
#   --cores LIST     mempool_perf --cores [1]
#   --rounds N       runs per build [2]
#   --cell-ms MS     mempool_perf --cell-ms [150]
#   --reps N         mempool_perf --reps [5]
#   --clock cpu|wall mempool_perf --clock [cpu]
#   --no-build       use the binaries already in the root
#   --root DIR       where the builds go, one target dir per build [target/builds]
#   --against DIR    the root of another commit's builds (made with --root DIR in a checkout
#                    of it): each of its binaries runs next to this one's, as "<build>@base",
#                    and a table of this / base per build is added (a before/after on every
#                    build at once)
#   --out DIR        CSVs and the table [ROOT/out]
#   -h, --help       this text
# Each run is `mempool_perf --full --cores C --filter F --cell-ms MS --reps N --clock CLOCK
# --stride 2112 --floor --csv ...` (the flags of the issue's measurements and of
# compare-dpdk.sh). Time: per build and round about cells x (3 + 2 for touch=0) x (reps + 1)
# x cell-ms: the default 18 cells (cache 512), 2 rounds, 3 builds take about 5.5 minutes
# (357 s with --against at --cell-ms 80: 6 binaries), after the builds (cold, each takes 3-5
# minutes on 2 vCPUs; 20-25 s after a change to the crate); --main about 9 minutes per round.
# Output: the table on stdout and in $out/table.txt, every row in $out/runs.csv.
# Exit status: 0; 1 when a build or a run fails; 2 on bad arguments.
set -euo pipefail

die() { echo "builds: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

repo=$(cd "$(dirname "$0")/.." && pwd)
filter="cache=512 get=32 put=32 keep=32|cache=512 get=32 put=32 keep=512|cache=512 get=32 put=4 keep=32|cache=512 get=32 put=4 keep=512|cache=512 get=32 put=1 keep=32|cache=512 get=1 put=1 const=1 keep=32|cache=512 get=1 put=1 const=1 keep=512"
main=""
builds="default,native,noavx512"
cores=1
rounds=2
cell_ms=150
reps=5
clock=cpu
build=1
root="$repo/target/builds"
against=""
out=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) filter=${2:?--filter needs words}; shift 2 ;;
    --main) main=1; shift ;;
    --builds) builds=${2:?--builds needs a list}; shift 2 ;;
    --cores) cores=${2:?--cores needs a list}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    --cell-ms) cell_ms=${2:?--cell-ms needs milliseconds}; shift 2 ;;
    --reps) reps=${2:?--reps needs a count}; shift 2 ;;
    --clock) clock=${2:?--clock needs cpu or wall}; shift 2 ;;
    --no-build) build=""; shift ;;
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --against) against=${2:?--against needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument: $1" 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "bad --rounds $rounds" 2
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "bad --reps $reps" 2
[[ $cell_ms =~ ^[1-9][0-9]*$ ]] || die "bad --cell-ms $cell_ms" 2
[[ $clock == cpu || $clock == wall ]] || die "--clock is cpu or wall" 2
[[ $cores =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "bad --cores $cores" 2
IFS=, read -r -a blist <<<"$builds"
for b in "${blist[@]}"; do
  [[ $b == default || $b == native || $b == noavx512 ]] || die "unknown build $b (default, native, noavx512)" 2
done
flags_default=""
flags_native="-C target-cpu=native"
flags_noavx512="-C target-cpu=native -C target-feature=-avx512f"
has_avx512=0
grep -qw avx512f /proc/cpuinfo 2>/dev/null && has_avx512=1
mkdir -p "$root"
root=$(cd "$root" && pwd)
[ -n "$out" ] || out="$root/out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$against" ]; then
  against=$(cd "$against" && pwd) || die "no directory $against" 2
fi

# bin_of BUILD: this tree's binary; BUILD@base: the --against root's
bin_of() {
  case "$1" in
    *@base) echo "$against/${1%@base}/release/examples/mempool_perf" ;;
    *) echo "$root/$1/release/examples/mempool_perf" ;;
  esac
}
if [ -n "$build" ]; then
  for b in "${blist[@]}"; do
    [[ $b == *@base ]] && continue
    fv="flags_$b"
    echo "builds: building $b (RUSTFLAGS=\"${!fv}\", $root/$b)" >&2
    (cd "$repo" && RUSTFLAGS="${RUSTFLAGS:-} ${!fv}" CARGO_TARGET_DIR="$root/$b" \
      cargo build --quiet --release -p idxpool-bench --example mempool_perf) || die "cargo build ($b) failed"
  done
fi
if [ -n "$against" ]; then
  with=()
  for b in "${blist[@]}"; do with+=("$b@base" "$b"); done
  blist=("${with[@]}")
fi
for b in "${blist[@]}"; do [ -x "$(bin_of "$b")" ] || die "no binary for $b: $(bin_of "$b") (run without --no-build)"; done

sel=(--full --filter "$filter")
[ -n "$main" ] && sel=()
common=(--cores "$cores" --cell-ms "$cell_ms" --reps "$reps" --clock "$clock" --stride 2112 --floor)
csv="$out/runs.csv"
echo "round,position,build,pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,n_max_bulk,rate_per_sec" >"$csv"
t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  order=("${blist[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#blist[@]} - 1; i >= 0; i--)); do order+=("${blist[$i]}"); done
  fi
  pos=0
  for b in "${order[@]}"; do
    pos=$((pos + 1))
    echo "builds: round $r of $rounds: $b" >&2
    (cd "$repo" && "$(bin_of "$b")" "${sel[@]}" "${common[@]}" "${extra[@]}" --csv "$out/one.csv" \
      >"$out/one.txt" 2>"$out/one.err") || { cat "$out/one.err" >&2; die "mempool_perf ($b) failed"; }
    tail -n +2 "$out/one.csv" | sed "s/^/$r,$pos,$b,/" >>"$csv"
  done
done
t1=$(date +%s)

{
  echo "builds: $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) CPUs, AVX-512F: $([ $has_avx512 = 1 ] && echo yes || echo no); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "idxpool $(cd "$repo" && git rev-parse --short HEAD)$(cd "$repo" && git diff --quiet HEAD -- src bench || echo ' (with local changes)'); $(rustc --version)"
  echo "per build and round: mempool_perf ${sel[*]:+--full --filter \"$filter\" }${common[*]} ${extra[*]}; $rounds rounds, runs $((t1 - t0)) s"
  if [ $has_avx512 = 0 ] && [[ " ${blist[*]} " == *" native "* ]] && [[ " ${blist[*]} " == *" noavx512 "* ]]; then
    echo "this CPU has no AVX-512F: -C target-feature=-avx512f changes nothing, native and noavx512 are the same code built twice (their difference is build-to-build noise)"
  fi
  echo
  python3 "$repo/scripts/builds.py" "$csv"
} | tee "$out/table.txt"
