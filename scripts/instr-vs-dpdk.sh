#!/usr/bin/env bash
# Instructions per object, DPDK's C mempool against idxpool, on the 120 cache-512 cells of DPDK
# 22.11's mempool_perf matrix (1 and 2 cores; get/put bulks 1, 4, 8, 32 paired as the autotest
# pairs them; n_keep 32, 128, 512; constant and run-time sizes): exact, repeatable counts
# (callgrind), the deterministic measure on a machine whose wall-clock rates swing.
#
# Counted, the same way on both sides: the autotest's loop (get n_keep objects into a table in
# bulks of n_get_bulk, put them back in bulks of n_put_bulk; DPDK: its while loop, one pass per
# 65536 objects; idxpool: its timed loop, the clock check every 8192 objects replaced by an
# object count), under `valgrind --tool=callgrind --collect-atstart=no`: per cell and
# contender, one uncounted warm-up pass, then two counted runs of N and 2N objects per thread
# (--objects N); each thread switches callgrind's collection on just before its loop and off
# just after it (client requests: not the EAL init, the pool creation, the table's allocation
# or a clock read), and the harness dumps the counts after each run. Instructions per object =
# (Ir of the 2N run - Ir of the N run) / (the objects all threads moved in the difference):
# the loop's steady-state cost, with every fixed cost of a run cancelled. 2-core cells: both
# threads' loops over both threads' objects (callgrind runs the threads one at a time, which
# changes no instruction of a cache hit; the counts are the same every run).
#
# Contenders: DPDK C (bench/dpdk/mempool_perf.c --objects, DPDK 22.11 from the distribution's
# dpdk-dev: rte_mempool_generic_get/put inline, the cache-miss path in librte_mempool/ring);
# idxpool (bench/examples/mempool_perf --objects --runtime --floor --stride 2112): the index
# pool (branded idxpool::Pool, 4-byte offset entries), the run-time pool (Pool<T> with a
# Runtime identity, same entries), the pointer twin (8-byte Pointer entries, the same code),
# and the bare floors (the same loop on a thread-local LIFO array of u32 / u64, no pool).
#
# Two pairings, each a C build and a Rust build of the same instruction-set class:
#   native  C: cc ... $(pkg-config --cflags libdpdk) -O3 -march=native -mno-avx512f -mno-gfni
#           (compare-dpdk.sh --native's flags without AVX-512, given after pkg-config's
#           -march=corei7 so that they win); Rust: RUSTFLAGS="-C target-cpu=native -C target-feature=-avx512f,-gfni"
#           (target/instr-native). valgrind 3.19 cannot decode AVX-512 instructions, so both
#           sides leave out AVX-512F and every extension that needs it (AVX2, BMI2, FMA, ...
#           stay), and GFNI (valgrind cannot decode its VEX forms either, which LLVM emits for
#           some byte operations on CPUs that have it: AMD Zen 4, Intel Ice Lake and later).
#           The targets are judged on this pairing.
#   debian  C: cc -O2 -march=corei7 (how Debian builds DPDK 22.11); Rust: cargo's default
#           release build (x86-64 baseline, target/release): each side as its users get it.
#
# Usage: scripts/instr-vs-dpdk.sh [options] [-- extra mempool_perf args]
#   --filter WORDS     only the cells holding every word (short or DPDK's keys: get=1 or
#                      n_get_bulk=1, put=, keep=/n_keep=, const=/constant_n=, cores=);
#                      alternatives separated by '|', e.g. "keep=512 const=1|get=4 put=32"
#   --quick            8 cells (1/1 and 32/32, n_keep 512, constant and run-time, 1 and 2
#                      cores): the CI smoke run
#   --pairing P        native, debian or both [both]
#   --cores LIST       1, 2 or 1,2 [1,2]
#   --objects N        objects per thread of the shorter counted run (the longer: 2N) [65536]
#   --jobs J           valgrind processes at once [the CPU count]
#   --out DIR          dumps, logs, CSV, report [target/instr-vs-dpdk]
#   -h, --help         this text
# Installs valgrind and dpdk-dev with apt-get when they are missing (as root).
# Output: the report on stdout and in $out/report.txt (context, per pairing the table of every
# cell, a Markdown table of geomeans per group of cells, the verdict against the targets:
# index <= DPDK native in every cell and <= 0.8x in geomean, run-time <= 1.05x branded in
# every cell, pointer twin within 0.9-1.1x of DPDK native), $out/instr.csv (every count),
# $out/<pairing>/ (the callgrind dumps and each run's log).
# Time: about 2 minutes on 2 vCPUs for the 120 cells and both pairings, after the builds (the
# first native Rust build takes minutes).
# Exit status: 0 (also when targets are missed); 1 when a build or a run fails or a cell lacks
# a count; 2 on bad arguments or when valgrind or DPDK cannot be installed.
set -euo pipefail

die() { echo "instr-vs-dpdk: $1" >&2; exit "${2:-1}"; }
say() { echo "instr-vs-dpdk: $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

repo=$(cd "$(dirname "$0")/.." && pwd)
filter=""
quick=""
pairing=both
cores=1,2
objects=65536
jobs=$(nproc 2>/dev/null || echo 1)
out="$repo/target/instr-vs-dpdk"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) filter=${2:?--filter needs words}; shift 2 ;;
    --quick) quick=1; shift ;;
    --pairing) pairing=${2:?--pairing needs native, debian or both}; shift 2 ;;
    --cores) cores=${2:?--cores needs a list}; shift 2 ;;
    --objects) objects=${2:?--objects needs a count}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a count}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument: $1" 2 ;;
  esac
done
case "$pairing" in
  both) pairings=(native debian) ;;
  native|debian) pairings=("$pairing") ;;
  *) die "--pairing is native, debian or both" 2 ;;
esac
[[ $cores =~ ^(1|2|1,2|2,1)$ ]] || die "--cores is 1, 2 or 1,2" 2
[[ $objects =~ ^[1-9][0-9]*$ ]] || die "bad --objects $objects" 2
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "bad --jobs $jobs" 2
user_filter=$filter
if [ -n "$quick" ]; then
  [ -z "$filter" ] || die "--quick and --filter go separately" 2
  filter="get=1 put=1 keep=512|get=32 put=32 keep=512"
fi
t_start=$(date +%s)

# ---- tools ----------------------------------------------------------------------------------
need=()
command -v valgrind >/dev/null && [ -f /usr/include/valgrind/callgrind.h ] || need+=(valgrind)
pkg-config --exists libdpdk 2>/dev/null || need+=(dpdk-dev pkg-config)
command -v cc >/dev/null || need+=(gcc)
if [ "${#need[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing ${need[*]} (apt-get)"
    for _ in 1 2 3 4 5 6; do # wait for another apt/dpkg to finish
      if apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2; then
        break
      fi
      sleep 20
    done
  fi
  command -v valgrind >/dev/null && [ -f /usr/include/valgrind/callgrind.h ] ||
    die "valgrind (with valgrind/callgrind.h) is missing; as root on Debian/Ubuntu: apt-get install -y valgrind" 2
  pkg-config --exists libdpdk 2>/dev/null ||
    die "DPDK not found (pkg-config libdpdk); as root on Debian/Ubuntu: apt-get install -y dpdk-dev" 2
  command -v cc >/dev/null || die "no C compiler (cc)" 2
fi
dpdk_version=$(pkg-config --modversion libdpdk)

# ---- builds ---------------------------------------------------------------------------------
cflags_native="-O3 -march=native -mno-avx512f -mno-gfni"
cflags_debian="-O2 -march=corei7"
rustflags_native="-C target-cpu=native -C target-feature=-avx512f,-gfni"
rustflags_debian=""
mkdir -p "$out" "$repo/target/dpdk"
out=$(cd "$out" && pwd)
say "building bench/dpdk/mempool_perf.c and mempool_perf (${pairings[*]})"
for p in "${pairings[@]}"; do
  cf_var="cflags_$p"
  # The flags go last: Debian's libdpdk.pc carries -march=corei7, which would override an
  # earlier -march=native (GCC takes the last -march).
  # shellcheck disable=SC2046,SC2086 # pkg-config's flags and the C flags are words
  cc -o "$repo/target/dpdk/mempool_perf-instr-$p" "$repo/bench/dpdk/mempool_perf.c" \
    $(pkg-config --cflags --libs libdpdk) ${!cf_var} || die "building bench/dpdk/mempool_perf.c ($p: ${!cf_var}) failed"
done
(cd "$repo" && cargo build --quiet --release -p idxpool-bench --example mempool_perf --example instr_report) ||
  die "cargo build failed"
rust_bin_debian="$repo/target/release/examples/mempool_perf"
rust_bin_native="$repo/target/instr-native/release/examples/mempool_perf"
if [[ " ${pairings[*]} " == *" native "* ]]; then
  (cd "$repo" && RUSTFLAGS="${RUSTFLAGS:-} $rustflags_native" CARGO_TARGET_DIR="$repo/target/instr-native" \
    cargo build --quiet --release -p idxpool-bench --example mempool_perf) ||
    die "cargo build (native, $rustflags_native) failed"
fi
report_bin="$repo/target/release/examples/instr_report"
t_built=$(date +%s)

# ---- cells ----------------------------------------------------------------------------------
# the C harness takes DPDK's keys, mempool_perf its short ones (plus cache=512 touch=0 in each
# alternative)
cfilter=$(sed -E 's/(^|[ |])get=/\1n_get_bulk=/g; s/(^|[ |])put=/\1n_put_bulk=/g;
  s/(^|[ |])keep=/\1n_keep=/g; s/(^|[ |])const=/\1constant_n=/g' <<<"$filter")
rfilter=$(sed -E 's/n_get_bulk=/get=/g; s/n_put_bulk=/put=/g; s/n_keep=/keep=/g;
  s/constant_n=/const=/g' <<<"$filter")
if [ -z "$rfilter" ]; then
  rfilter="cache=512 touch=0"
else
  rfilter=$(awk -v RS='|' -v ORS='|' '{ sub(/^ +/, ""); sub(/[ \n]+$/, ""); print $0 " cache=512 touch=0" }' \
    <<<"$rfilter" | sed 's/|$//')
fi
navail=$(nproc 2>/dev/null || echo 1)
last=1
lastcpu=$((navail - 1))
eal=(--lcores "(0-$last)@(0-$lastcpu)" --no-pci --no-telemetry --no-shconf --no-huge -m 512
  --file-prefix "idxpool-instr-$$" --log-level=error)
csel=(--matrix 2211 --cache 512 --cores "$cores")
[ -n "$cfilter" ] && csel+=(--filter "$cfilter")
ncells=$("$repo/target/dpdk/mempool_perf-instr-${pairings[0]}" "${eal[@]}" -- "${csel[@]}" --list 2>/dev/null |
  grep -c '^cache=' || true)
[ "$ncells" -gt 0 ] || die "no cell selected by --filter \"$filter\""

# ---- runs -----------------------------------------------------------------------------------
vg=(valgrind --tool=callgrind --collect-atstart=no --dump-instr=no --dump-line=no)
runs=()
for p in "${pairings[@]}"; do
  rm -rf "${out:?}/$p"
  mkdir -p "$out/$p"
  runs+=("$p dpdk" "$p idxpool")
done
run_one() { # pairing side
  local p=$1 side=$2 dir="$out/$1" bin
  if [ "$side" = dpdk ]; then
    "${vg[@]}" --callgrind-out-file="$dir/callgrind.out.dpdk.%p" \
      "$repo/target/dpdk/mempool_perf-instr-$p" "${eal[@]}" -- "${csel[@]}" --objects "$objects" \
      >"$dir/dpdk.log" 2>"$dir/dpdk.stderr"
  else
    bin="rust_bin_$p"
    (cd "$repo" && "${vg[@]}" --callgrind-out-file="$dir/callgrind.out.idxpool.%p" \
      "${!bin}" --full --cores "$cores" --filter "$rfilter" --objects "$objects" --runtime --floor \
      --stride 2112 --clock cpu "${extra[@]}" >"$dir/idxpool.log" 2>"$dir/idxpool.stderr")
  fi
}
say "$ncells cells x (DPDK C; index, runtime, pointer, floors) x ${#pairings[@]} pairing(s), $objects and $((2 * objects)) objects per thread: ${#runs[@]} valgrind runs, $jobs at a time"
say "DPDK C: valgrind --tool=callgrind --collect-atstart=no target/dpdk/mempool_perf-instr-P ${eal[*]} -- ${csel[*]} --objects $objects"
say "idxpool: valgrind --tool=callgrind --collect-atstart=no mempool_perf --full --cores $cores --filter \"$rfilter\" --objects $objects --runtime --floor --stride 2112 --clock cpu ${extra[*]}"
pids=()
names=()
failed=()
wait_one() { # the oldest run still going
  local rc
  wait "${pids[0]}" && rc=0 || rc=$?
  [ "$rc" = 0 ] || failed+=("${names[0]}")
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for r in "${runs[@]}"; do
  [ "${#pids[@]}" -ge "$jobs" ] && wait_one
  # shellcheck disable=SC2086 # "pairing side"
  run_one $r &
  pids+=($!)
  names+=("$r")
done
while [ "${#pids[@]}" -gt 0 ]; do wait_one; done
for f in "${failed[@]}"; do
  log="$out/${f% *}/${f#* }.stderr"
  say "run failed: $f; the end of $log:"
  tail -n 15 "$log" >&2 || true
  if grep -q "unhandled instruction" "$log" 2>/dev/null; then
    say "valgrind met an instruction it cannot decode (AVX-512?): see the flags in --help"
  fi
done
[ "${#failed[@]}" = 0 ] || die "${#failed[@]} run(s) failed"
t_ran=$(date +%s)

# ---- report ---------------------------------------------------------------------------------
rargs=()
for p in "${pairings[@]}"; do
  cf_var="cflags_$p"
  rf_var="rustflags_$p"
  rargs+=(--pairing "$p=$out/$p" --about "$p=DPDK $dpdk_version C: cc ${!cf_var}; idxpool: RUSTFLAGS=\"${!rf_var}\" ($(
    [ "$p" = native ] && echo "target/instr-native" || echo "cargo's default, target/release"))")
done
rc=0
{
  echo "instr-vs-dpdk: $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p'), $navail CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "idxpool $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$repo" && git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)'); $(rustc --version); $(cc --version | head -n1); $(valgrind --version); DPDK $dpdk_version"
  echo "command: scripts/instr-vs-dpdk.sh${quick:+ --quick}${user_filter:+ --filter \"$user_filter\"} --pairing $pairing --cores $cores --objects $objects"
  echo "$ncells cells; per cell and contender a warm-up pass, then $objects and $((2 * objects)) objects per thread counted (their difference is reported); runs $((t_ran - t_built)) s (builds $((t_built - t_start)) s)"
  echo
  rc=0
  "$report_bin" "${rargs[@]}" --csv "$out/instr.csv" || rc=$?
  echo
  echo "CSV: $out/instr.csv; dumps and logs: $out/<pairing>/"
  exit "$rc"
} | tee "$out/report.txt" || rc=$?
[ "$rc" = 0 ] || die "the report is incomplete (exit $rc): see above"
say "done in $(( $(date +%s) - t_start )) s (runs $((t_ran - t_built)) s); report in $out/report.txt"
