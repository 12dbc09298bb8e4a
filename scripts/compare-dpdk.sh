#!/usr/bin/env bash
# Compare DPDK's own mempool_perf_autotest with idxpool's port of it, cell by cell.
#
# Runs `dpdk-test` (Debian/Ubuntu package dpdk-dev, DPDK 22.11) with
#   DPDK_TEST=mempool_perf_autotest dpdk-test -l <lcores> --no-pci --no-huge -m 512
# (or, with --huge, on 2 MiB hugepages in --in-memory mode, leaving no hugetlbfs files), then
#   cargo run --release -p idxpool-bench --example mempool_perf -- --full --clock wall --cores 1,..,N --filter touch=0 --csv ...
# pinned to the same CPUs with taskset, and joins both per cell (DPDK does not touch objects,
# so only touch=0 cells are compared):
#   cell | dpdk | idxpool index | idxpool pointer | index/dpdk | pointer/dpdk | index/pointer
#
# Time: DPDK's test is fixed at 5 s per cell and runs 9 passes of 60 cells (no cache, default
# per-lcore cache, user-owned cache; each with 1, 2 and all cores): about 45 minutes for
# -l 0-1. Use --timeout to stop it early: the cells it printed are still compared (the first
# pass is the no-cache one). The "dpdk" column takes the user-owned-cache pass when present
# (idxpool's example uses an explicit LocalCache, the same thing), else the per-lcore cache
# pass; repeated cells (e.g. "2 cores" and "all cores" on a 2-core machine) are averaged.
#
# Usage: scripts/compare-dpdk.sh [options] [-- extra mempool_perf args]
#   --lcores LIST      CPUs for both sides, DPDK -l syntax "0-1" or "0,1" (default 0-1)
#   --timeout SECS     stop dpdk-test after SECS seconds (default: run it to the end)
#   --dpdk-log FILE    do not run dpdk-test: parse this saved output instead
#   --idxpool-csv FILE do not run the example: use this CSV (from mempool_perf --csv)
#   --out DIR          where logs, CSVs and the joined table go (default target/compare-dpdk)
#   --huge             give DPDK 512 MiB of reserved 2 MiB hugepages (--in-memory) instead of
#                      --no-huge; needs 256 free pages (see README.md, "Hugepages")
#   --filter STR       mempool_perf --filter (default "touch=0"; words must all match, e.g.
#                      "cache=512 cores=1 touch=0")
#   --quick            pass --quick to mempool_perf (its subset; fewer cells joined)
#   -h, --help         this text
#
# Exit status: 0 on success; 2 when dpdk-test is absent (and no --dpdk-log given) or on bad
# arguments; 1 when a run fails or nothing could be joined.
set -euo pipefail

die() { echo "compare-dpdk: $*" >&2; exit "${2:-1}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

repo=$(cd "$(dirname "$0")/.." && pwd)
lcores="0-1"
timeout_s=""
dpdk_log=""
idx_csv=""
out="$repo/target/compare-dpdk"
quick=""
huge=""
filter="touch=0"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --lcores) lcores=${2:?--lcores needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
    --dpdk-log) dpdk_log=${2:?--dpdk-log needs a file}; shift 2 ;;
    --idxpool-csv) idx_csv=${2:?--idxpool-csv needs a file}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --quick) quick="--quick"; shift ;;
    --huge) huge=1; shift ;;
    --filter) filter=${2:?--filter needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument: $1" 2 ;;
  esac
done
mkdir -p "$out"

# CPUs of the lcore list, e.g. "0-1" -> 0 1 ; "0,2-3" -> 0 2 3.
cpus=()
IFS=',' read -r -a parts <<<"$lcores"
for p in "${parts[@]}"; do
  if [[ $p =~ ^([0-9]+)-([0-9]+)$ ]]; then
    for ((c = BASH_REMATCH[1]; c <= BASH_REMATCH[2]; c++)); do cpus+=("$c"); done
  elif [[ $p =~ ^[0-9]+$ ]]; then
    cpus+=("$p")
  else
    die "bad --lcores $lcores (expected e.g. 0-1 or 0,1)" 2
  fi
done
ncpu=${#cpus[@]}
[ "$ncpu" -ge 1 ] || die "empty --lcores" 2
# DPDK measures 1 core, 2 cores and all lcores; idxpool gets the same counts.
core_counts="1"
[ "$ncpu" -ge 2 ] && core_counts="1,2"
[ "$ncpu" -gt 2 ] && core_counts="1,2,$ncpu"

# ---- 1. DPDK ----------------------------------------------------------------------------------
if [ -z "$dpdk_log" ]; then
  dpdk_bin=${DPDK_TEST_BIN:-$(command -v dpdk-test || true)}
  if [ -z "$dpdk_bin" ] || [ ! -x "$dpdk_bin" ]; then
    cat >&2 <<'EOF'
compare-dpdk: dpdk-test not found.
  It ships with DPDK's test application: on Debian/Ubuntu, as root,
      apt-get install -y dpdk-dev        # DPDK 22.11 on Debian 12, provides /usr/bin/dpdk-test
  or point DPDK_TEST_BIN at a dpdk-test binary, or pass --dpdk-log FILE with the saved output
  of `DPDK_TEST=mempool_perf_autotest dpdk-test -l 0-1 --no-pci --no-huge -m 512`.
EOF
    exit 2
  fi
  if [ -n "$huge" ]; then
    free_huge=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
    [ "${free_huge:-0}" -ge 256 ] ||
      die "--huge needs 256 free 2 MiB hugepages, /proc/meminfo says ${free_huge:-0}" 2
    # --in-memory: no files in hugetlbfs, so an interrupted run leaks no hugepage.
    mem_args=(--in-memory -m 512)
    mem_desc="2 MiB hugepages, --in-memory ($free_huge free)"
  else
    mem_args=(--no-huge -m 512)
    mem_desc="--no-huge (4 KiB pages)"
  fi
  dpdk_log="$out/dpdk.log"
  cmd=(env DPDK_TEST=mempool_perf_autotest stdbuf -oL -eL "$dpdk_bin" -l "$lcores" --no-pci
       --no-telemetry --file-prefix "idxpool-cmp-$$" "${mem_args[@]}")
  echo "compare-dpdk: running DPDK's mempool_perf_autotest on lcores $lcores, $mem_desc" >&2
  echo "compare-dpdk:   ${cmd[*]}" >&2
  if [ -n "$timeout_s" ]; then
    echo "compare-dpdk:   stopping it after ${timeout_s}s (full run: ~45 min on 2 lcores)" >&2
    cmd=(timeout -s INT "$timeout_s" "${cmd[@]}")
  else
    echo "compare-dpdk:   5 s per cell, 9 passes of 60 cells: ~45 min on 2 lcores" >&2
  fi
  set +e
  "${cmd[@]}" </dev/null >"$dpdk_log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ] && ! { [ -n "$timeout_s" ] && [ "$rc" -eq 124 ]; }; then
    tail -n 20 "$dpdk_log" >&2
    die "dpdk-test failed with status $rc (log: $dpdk_log)"
  fi
fi
[ -r "$dpdk_log" ] || die "cannot read DPDK log $dpdk_log" 2
ndpdk=$(grep -c '^mempool_autotest ' "$dpdk_log" || true)
[ "$ndpdk" -gt 0 ] || die "no 'mempool_autotest cache=...' line in $dpdk_log"
echo "compare-dpdk: $ndpdk DPDK result lines in $dpdk_log" >&2

# ---- 2. idxpool ---------------------------------------------------------------------------------
if [ -z "$idx_csv" ]; then
  idx_csv="$out/idxpool.csv"
  command -v cargo >/dev/null || die "cargo not found"
  pin=()
  if command -v taskset >/dev/null; then
    pin=(taskset -c "$(IFS=,; echo "${cpus[*]}")")
  fi
  (cd "$repo" && cargo build --release -p idxpool-bench --example mempool_perf >&2)
  # DPDK's whole matrix (--full), or mempool_perf's --quick subset; rows of the A/A repeat
  # (pool "index-aa") are ignored by the join below.
  ex=(cargo run --quiet --release -p idxpool-bench --example mempool_perf -- --cores "$core_counts"
      --clock wall --filter "$filter" --csv "$idx_csv" "${quick:---full}" "${extra[@]}")
  echo "compare-dpdk: running ${pin[*]} ${ex[*]}" >&2
  (cd "$repo" && "${pin[@]}" "${ex[@]}" >"$out/idxpool.txt") ||
    die "mempool_perf failed (see above)"
fi
[ -r "$idx_csv" ] || die "cannot read $idx_csv" 2
head -n1 "$idx_csv" | grep -q '^pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate_per_sec$' ||
  die "$idx_csv does not have mempool_perf's CSV header"

# ---- 3. join --------------------------------------------------------------------------------------
table="$out/compare.txt"
awk -v dpdk="$dpdk_log" -v idx="$idx_csv" '
function key(cache, cores, g, p, k, c) {
  return sprintf("cache=%s cores=%s get=%s put=%s keep=%s const=%s", cache, cores, g, p, k, c)
}
BEGIN {
  # DPDK: "start performance test (without cache|with cache|with user-owned cache)" sections,
  # then lines "mempool_autotest cache=512 cores=1 n_get_bulk=32 ... rate_persec=N".
  mode = "default"
  while ((getline line < dpdk) > 0) {
    if (line ~ /start performance test/) {
      if (line ~ /user-owned/) mode = "user"
      else if (line ~ /without cache/) mode = "none"
      else mode = "default"
      continue
    }
    if (line !~ /^mempool_autotest /) continue
    delete f
    n = split(line, tok, " ")
    for (i = 2; i <= n; i++) { split(tok[i], kv, "="); f[kv[1]] = kv[2] }
    if (!("rate_persec" in f)) continue
    k = key(f["cache"], f["cores"], f["n_get_bulk"], f["n_put_bulk"], f["n_keep"], f["constant_n"])
    sum[mode, k] += f["rate_persec"]; cnt[mode, k]++
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
  }
  # idxpool CSV: pool,policy,cache,cores,n_get_bulk,n_put_bulk,n_keep,constant_n,touch,rate
  getline hdr < idx
  while ((getline line < idx) > 0) {
    split(line, c, ",")
    if (c[9] != 0) continue
    k = key(c[3], c[4], c[5], c[6], c[7], c[8])
    if (c[1] == "index") irate[k] = c[10]; else if (c[1] == "pointer") prate[k] = c[10]; else continue
    pol[k] = c[2]
  }
  printf "%-52s %5s %10s %10s %10s %11s %12s %13s\n", "cell (DPDK 22.11 mempool_perf_autotest)", \
    "dpdk", "dpdk M/s", "index M/s", "pointer M/s", "index/dpdk", "pointer/dpdk", "index/pointer"
  joined = 0
  for (j = 1; j <= nk; j++) {
    k = order[j]
    if (!(k in irate) || !(k in prate)) continue
    m = (("user", k) in cnt) ? "user" : ((("default", k) in cnt) ? "default" : "none")
    d = sum[m, k] / cnt[m, k]
    if (d <= 0 || prate[k] <= 0) continue
    printf "%-52s %5s %10.2f %10.2f %10.2f %11.3f %12.3f %13.3f\n", k, m, d / 1e6, \
      irate[k] / 1e6, prate[k] / 1e6, irate[k] / d, prate[k] / d, irate[k] / prate[k]
    li += log(irate[k] / d); lp += log(prate[k] / d); joined++
  }
  if (joined == 0) {
    print "no cell in common (DPDK log cells vs idxpool CSV cells)" > "/dev/stderr"
    exit 1
  }
  printf "geomean over %d cells: index/dpdk = %.3f, pointer/dpdk = %.3f\n", joined, \
    exp(li / joined), exp(lp / joined)
}' | tee "$table"
echo "compare-dpdk: table written to $table" >&2
