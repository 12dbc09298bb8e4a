#!/usr/bin/env bash
# DPDK's C mempool against idxpool, cell by cell, on this machine, in minutes.
#
# Builds bench/dpdk/mempool_perf.c (DPDK's mempool_perf_autotest loop, reproduced exactly, with
# the cells and the seconds on its command line) against the installed dpdk-dev, then runs, per
# cell, interleaved: DPDK C, idxpool (index pool and pointer twin, mempool_perf), DPDK C,
# idxpool, ... (--rounds times), and joins them (bench/examples/dpdk_join.rs):
#   cell | DPDK C | index | pointer | index/DPDK | ptr/DPDK | A/A C | A/A idx | [floors]
# then a verdict line (geomeans, cells won, the targets). The DPDK C side stays one
# process (EAL initialised once, cells fed on its stdin); idxpool runs once per cell and round.
#
# Default: DPDK 22.11's matrix, cache 512, 1 and 2 cores (120 cells), 2 rounds of 0.4 s (DPDK)
# and 3 x 80 ms per contender (idxpool: index, pointer, index again for A/A, and the floors, bare
# LIFO arrays of u32 and u64): about 7 minutes on 2 cores, plus the builds.
#
# Usage: scripts/compare-dpdk.sh [options] [-- extra mempool_perf args]
#   --cores LIST       core counts, e.g. 1,2 [1 and 2, up to the CPUs available]
#   --cache LIST       0 and/or 512 [512]
#   --matrix 2211|2607 DPDK version of the cell list [2211]; with 2607 the C side still runs
#                      the installed DPDK's cache code, and each idxpool run builds 26.07's
#                      pools (2 x 143 MB per core, prefaulted): seconds per cell, so narrow it
#                      with --filter, or run both sides once over all cells (BENCHMARKS.md)
#   --filter WORDS     only cells whose DPDK key holds every word, e.g. "n_keep=512 constant_n=0"
#   --rounds N         DPDK/idxpool alternations per cell (or per pass) [2]
#   --passes           alternate whole passes over the cells (DPDK C pass, idxpool pass, ...)
#                      instead of single cells: one process per pass, for --matrix 2607 whose
#                      pools take seconds to build [default with --matrix 2607]
#   --per-cell         alternate per cell [default with --matrix 2211]
#   --seconds S        DPDK C seconds per cell per round (the autotest's TIME_S) [0.4]
#   --cell-ms MS       idxpool --cell-ms [80]
#   --reps N           idxpool --reps per round [3]
#   --clock wall|cpu   wall: rates per elapsed second (DPDK's own); cpu: per second of each
#                      thread's CPU time, both sides (robust when other work shares the CPUs) [wall]
#   --no-floor         skip the floor contenders (mempool_perf --floor)
#   --policy NAME      idxpool flush policy [the crate's default; dpdk2607 with --matrix 2607]
#   --pin              DPDK lcores pinned one per CPU (-l 0-N, as dpdk-test); default: every
#                      lcore floats over all the CPUs (--lcores '(0-N)@(0-CPUS)'), as
#                      idxpool's threads do (never pinned)
#   --huge             DPDK memory on reserved 2 MiB hugepages (--in-memory); default --no-huge
#   --install-dpdk     apt-get install -y dpdk-dev when pkg-config cannot find libdpdk (root)
#   --c-flags FLAGS    the C harness's optimisation flags [-O3 -march=native]; Debian's build of
#                      DPDK: --c-flags "-O2 -march=corei7" (BENCHMARKS.md section 4)
#   --native           build idxpool for this CPU too (RUSTFLAGS="-C target-cpu=native", in
#                      target/native), as the C side is (-march=native): like for like
#   --out DIR          logs, CSV and table [target/compare-dpdk]
#   --dpdk-log FILE    join only: DPDK lines from this file (harness or dpdk-test output)
#   --idxpool-csv FILE join only: idxpool rows from this CSV (mempool_perf --csv)
#   -h, --help         this text
# Output: $out/dpdk.log, $out/idxpool.csv, $out/compare.txt (the table and the verdict).
# Exit status: 0 on success; 2 on bad arguments or when DPDK (dpdk-dev) is missing; 1 when a
# run fails or nothing could be joined.
set -euo pipefail

die() { echo "compare-dpdk: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

repo=$(cd "$(dirname "$0")/.." && pwd)
navail=$(nproc 2>/dev/null || echo 1)
cores=""
cache="512"
matrix="2211"
filter=""
rounds=2
seconds=0.4
cell_ms=80
floor=(--floor)
mode=""
reps=3
clock="wall"
policy=""
pin=""
huge=""
install=""
native=""
cflags="-O3 -march=native"
out="$repo/target/compare-dpdk"
dpdk_log=""
idx_csv=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cores) cores=${2:?--cores needs a list}; shift 2 ;;
    --cache) cache=${2:?--cache needs a list}; shift 2 ;;
    --matrix) matrix=${2:?--matrix needs 2211 or 2607}; shift 2 ;;
    --filter) filter=${2:?--filter needs words}; shift 2 ;;
    --native) native=1; shift ;;
    --c-flags) cflags=${2:?--c-flags needs flags}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --cell-ms) cell_ms=${2:?--cell-ms needs milliseconds}; shift 2 ;;
    --reps) reps=${2:?--reps needs a count}; shift 2 ;;
    --clock) clock=${2:?--clock needs wall or cpu}; shift 2 ;;
    --policy) policy=${2:?--policy needs a name}; shift 2 ;;
    --no-floor) floor=(); shift ;;
    --passes) mode=passes; shift ;;
    --per-cell) mode=cells; shift ;;
    --pin) pin=1; shift ;;
    --huge) huge=1; shift ;;
    --install-dpdk) install=1; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --dpdk-log) dpdk_log=${2:?--dpdk-log needs a file}; shift 2 ;;
    --idxpool-csv) idx_csv=${2:?--idxpool-csv needs a file}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument: $1" 2 ;;
  esac
done
[[ $matrix == 2211 || $matrix == 2607 ]] || die "--matrix is 2211 or 2607" 2
[[ $clock == wall || $clock == cpu ]] || die "--clock is wall or cpu" 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "bad --rounds $rounds" 2
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "bad --reps $reps" 2
[[ $cell_ms =~ ^[1-9][0-9]*$ ]] || die "bad --cell-ms $cell_ms" 2
[[ $seconds =~ ^[0-9]*\.?[0-9]+$ ]] || die "bad --seconds $seconds" 2
[[ $cache =~ ^(0|512)(,(0|512))?$ ]] || die "--cache takes 0 and/or 512" 2
if [ -z "$cores" ]; then
  cores=1
  [ "$navail" -ge 2 ] && cores=1,2
fi
[[ $cores =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "bad --cores $cores" 2
maxcores=$(tr ',' '\n' <<<"$cores" | sort -n | tail -n1)
[ -z "$policy" ] && [ "$matrix" = 2607 ] && policy=dpdk2607
if [ -z "$mode" ]; then
  mode=cells
  [ "$matrix" = 2607 ] && mode=passes
fi
mkdir -p "$out"

join_bin="$repo/target/release/examples/dpdk_join"
perf_bin="$repo/target/release/examples/mempool_perf"
title="DPDK C: bench/dpdk/mempool_perf.c"
if [ -n "$dpdk_log" ] || [ -n "$idx_csv" ]; then
  [ -n "$dpdk_log" ] && [ -n "$idx_csv" ] || die "--dpdk-log and --idxpool-csv go together" 2
  title="DPDK: $dpdk_log"
else
  # ---- build ------------------------------------------------------------------------------------
  if ! pkg-config --exists libdpdk 2>/dev/null; then
    if [ -n "$install" ] && command -v apt-get >/dev/null; then
      echo "compare-dpdk: installing dpdk-dev (apt-get)" >&2
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev >&2 ||
        die "apt-get install dpdk-dev failed" 2
    else
      die "DPDK not found (pkg-config libdpdk). As root on Debian/Ubuntu: apt-get install -y dpdk-dev (or pass --install-dpdk)" 2
    fi
  fi
  command -v cc >/dev/null || die "no C compiler (cc)" 2
  dpdk_version=$(pkg-config --modversion libdpdk)
  harness="$repo/target/dpdk/mempool_perf"
  mkdir -p "$(dirname "$harness")"
  # $cflags go last: Debian's libdpdk.pc carries -march=corei7, which overrode an earlier
  # -march=native (GCC takes the last -march): before this order, "-O3 -march=native" built
  # -O3 -march=corei7 (no AVX).
  # shellcheck disable=SC2046,SC2086 # pkg-config's flags and $cflags are words
  cc -o "$harness" "$repo/bench/dpdk/mempool_perf.c" \
    $(pkg-config --cflags --libs libdpdk) $cflags || die "building bench/dpdk/mempool_perf.c failed"
  (cd "$repo" && cargo build --quiet --release -p idxpool-bench --example mempool_perf --example dpdk_join) ||
    die "cargo build failed"
  if [ -n "$native" ]; then
    (cd "$repo" && RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native" CARGO_TARGET_DIR="$repo/target/native" \
      cargo build --quiet --release -p idxpool-bench --example mempool_perf) || die "cargo build (native) failed"
    perf_bin="$repo/target/native/release/examples/mempool_perf"
  fi

  # ---- EAL arguments ----------------------------------------------------------------------------
  [ "$maxcores" -le "$navail" ] || echo "compare-dpdk: warning: $maxcores lcores on $navail CPUs: they time-share" >&2
  last=$((maxcores - 1))
  lastcpu=$((navail - 1))
  if [ -n "$pin" ]; then
    lc=(-l "0-$last")
  else
    lc=(--lcores "(0-$last)@(0-$lastcpu)")
  fi
  mem=(--no-huge -m 512)
  [ "$matrix" = 2607 ] && mem=(--no-huge -m $((512 + 300 * maxcores)))
  if [ -n "$huge" ]; then
    free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
    [ "${free:-0}" -ge 256 ] || die "--huge needs 256 free 2 MiB hugepages (have ${free:-0})" 2
    mem=(--in-memory -m 512)
  fi
  eal=("${lc[@]}" --no-pci --no-telemetry --no-shconf --file-prefix "idxpool-cmp-$$" "${mem[@]}" --log-level=error)
  sel=(--matrix "$matrix" --cache "$cache" --cores "$cores")
  [ -n "$filter" ] && sel+=(--filter "$filter")
  mapfile -t cells < <("$harness" "${eal[@]}" -- "${sel[@]}" --list 2>/dev/null | grep -v '^EAL' | sed 's/ *$//')
  [ "${#cells[@]}" -gt 0 ] || die "no cell selected (see: $harness ${eal[*]} -- ${sel[*]} --list)"
  policy_args=()
  [ -n "$policy" ] && policy_args=(--policy "$policy")
  matrix_args=(--full)
  [ "$matrix" = 2607 ] && matrix_args=(--matrix 2607)
  est=$(awk -v n="${#cells[@]}" -v r="$rounds" -v s="$seconds" -v ms="$cell_ms" -v reps="$reps" \
    -v k="$(( ${#floor[@]} ? 5 : 3 ))" \
    'BEGIN { printf "%.0f", n * r * (s + 0.1 + k * (reps + 0.3) * ms / 1000) / 60 + 0.5 }')
  echo "compare-dpdk: ${#cells[@]} cells x $rounds rounds (DPDK $dpdk_version C: ${seconds}s, idxpool: $reps x ${cell_ms}ms per pool), clock $clock, ~$est min" >&2
  echo "compare-dpdk: DPDK C: $harness ${eal[*]} -- --matrix $matrix --seconds $seconds --clock $clock --stdin" >&2
  echo "compare-dpdk: idxpool: $perf_bin --cores N --filter CELL --cell-ms $cell_ms --reps $reps --clock $clock --stride 2112 ${floor[*]} ${matrix_args[*]} ${policy_args[*]} ${extra[*]}" >&2

  dpdk_log="$out/dpdk.log"
  idx_csv="$out/idxpool.csv"
  : >"$dpdk_log"
  : >"$idx_csv"
  tmp="$out/cell.csv"
  if [ "$mode" = passes ]; then
    # ---- run, whole passes: DPDK C over every cell, idxpool over every cell, per round --------
    # mempool_perf's --filter in its label words (n_get_bulk= -> get=, ...), touch=0 only
    rfilter="touch=0 $(sed 's/n_get_bulk=/get=/g; s/n_put_bulk=/put=/g; s/n_keep=/keep=/g;
      s/constant_n=/const=/g; s/n_max_bulk=/max=/g' <<<"$filter")"
    [[ $cache =~ , ]] || rfilter="$rfilter cache=$cache"
    for ((r = 1; r <= rounds; r++)); do
      echo "compare-dpdk: round $r of $rounds: DPDK C pass over ${#cells[@]} cells" >&2
      "$harness" "${eal[@]}" -- "${sel[@]}" --seconds "$seconds" --clock "$clock" \
        2>>"$out/dpdk.stderr" | grep -E '^mempool_(autotest|perf)' >>"$dpdk_log" ||
        die "the DPDK harness failed (see $out/dpdk.stderr)"
      echo "compare-dpdk: round $r of $rounds: idxpool pass (mempool_perf --filter \"$rfilter\")" >&2
      (cd "$repo" && "$perf_bin" --cores "$cores" --filter "$rfilter" --cell-ms "$cell_ms" --reps "$reps" \
        --clock "$clock" --stride 2112 "${floor[@]}" "${matrix_args[@]}" "${policy_args[@]}" "${extra[@]}" --csv "$tmp" \
        >"$out/idxpool.txt" 2>"$out/idxpool.stderr") ||
        { cat "$out/idxpool.stderr" >&2; die "mempool_perf failed"; }
      if [ ! -s "$idx_csv" ]; then head -n1 "$tmp" >"$idx_csv"; fi
      tail -n +2 "$tmp" >>"$idx_csv"
    done
  else
    # ---- run, interleaved per cell ----------------------------------------------------------------
    coproc DPDK { stdbuf -oL "$harness" "${eal[@]}" -- --matrix "$matrix" --seconds "$seconds" \
      --clock "$clock" --stdin 2>"$out/dpdk.stderr"; }
    dpdk_in=${DPDK[1]}
    dpdk_out=${DPDK[0]}
    # the harness's banner
    IFS= read -r -t 120 banner <&"$dpdk_out" || die "the DPDK harness did not start (see $out/dpdk.stderr)"
    echo "$banner" | tee -a "$dpdk_log" >&2
    i=0
    for cell in "${cells[@]}"; do
      i=$((i + 1))
      # cell key -> mempool_perf label words
      eval "$(sed 's/= */=/g; s/\([a-z_]*\)=\([0-9]*\)/k_\1=\2;/g' <<<"$cell")"
      if [ "${k_n_max_bulk:-0}" != 0 ]; then
        label="cache=$k_cache cores=$k_cores keep=$k_n_keep max=$k_n_max_bulk touch=0"
      else
        label="cache=$k_cache cores=$k_cores get=$k_n_get_bulk put=$k_n_put_bulk keep=$k_n_keep const=$k_constant_n touch=0"
      fi
      unset k_n_max_bulk
      for ((r = 1; r <= rounds; r++)); do
        echo "$cell" >&"$dpdk_in"
        line=""
        while IFS= read -r -t 600 line <&"$dpdk_out"; do
          case "$line" in
            mempool_autotest*rate_persec=*) break ;;
            "mempool_perf: cell failed"*|*"not full"*|*"test failed"*) die "DPDK harness: $line (see $out/dpdk.stderr)" ;;
          esac
        done
        [[ $line == *rate_persec=* ]] || die "the DPDK harness stopped (see $out/dpdk.stderr)"
        echo "$line" >>"$dpdk_log"
        (cd "$repo" && "$perf_bin" --cores "$k_cores" --filter "$label" --cell-ms "$cell_ms" --reps "$reps" \
          --clock "$clock" --stride 2112 "${floor[@]}" "${matrix_args[@]}" "${policy_args[@]}" "${extra[@]}" --csv "$tmp" \
          >"$out/idxpool.txt" 2>"$out/idxpool.stderr") ||
          { cat "$out/idxpool.stderr" >&2; die "mempool_perf failed on $label"; }
        if [ ! -s "$idx_csv" ]; then head -n1 "$tmp" >"$idx_csv"; fi
        tail -n +2 "$tmp" >>"$idx_csv"
      done
      printf 'compare-dpdk: [%d/%d] %s: DPDK %s, idxpool %s\n' "$i" "${#cells[@]}" "$label" \
        "$(tail -n1 "$dpdk_log" | sed 's/.*rate_persec= *//')" \
        "$(tail -n +2 "$tmp" | awk -F, '{printf "%s %.0f ", $1, $NF / 1e6}')M" >&2
    done
    exec {dpdk_in}>&-
    wait "$DPDK_PID" 2>/dev/null || true
  fi
  title="DPDK $dpdk_version C (bench/dpdk/mempool_perf.c, --matrix $matrix, the installed librte_mempool), $rounds rounds of ${seconds}s; clock $clock"
  [ "$matrix" = 2607 ] && title="$title; DPDK 26.07's cells on DPDK $dpdk_version's cache algorithm"
fi

# ---- join ---------------------------------------------------------------------------------------
[ -x "$join_bin" ] || (cd "$repo" && cargo build --quiet --release -p idxpool-bench --example dpdk_join) ||
  die "cargo build of dpdk_join failed"
table="$out/compare.txt"
"$join_bin" --dpdk "$dpdk_log" --idxpool "$idx_csv" --title "$title" | tee "$table"
echo "compare-dpdk: table written to $table" >&2
