#!/usr/bin/env bash
# Validates bench/dpdk/mempool_perf.c against DPDK's official test: dpdk-test's
# mempool_perf_autotest on CPU 0 and, at the same time, the harness on CPU 1, on the same cells
# in the same order (the harness runs the no-cache 1-core section while dpdk-test does, then
# waits until dpdk-test's log reaches its "(with cache)" section and runs the cache-512 1-core
# cells alongside it); dpdk-test is stopped once that section is complete. About 35 minutes
# (dpdk-test's 5 s per cell and its fixed order: no-cache x 3, default ops x 3, then cache).
# Then prints, per section, the geomean harness/official and the cells within 5% and 15%.
#
# Usage: bench/dpdk/validate.sh HARNESS_BINARY OUT_DIR   (as root; dpdk-dev installed)
# The binary: scripts/compare-dpdk.sh builds target/dpdk/mempool_perf (-O3 -march=native); to
# compare like with like, build one with Debian's flags too:
#   cc -O2 -fstack-protector-strong -o target/dpdk/mempool_perf_deb bench/dpdk/mempool_perf.c \
#      $(pkg-config --cflags --libs libdpdk)
set -euo pipefail
harness=$(realpath "${1:?harness binary}")
out=${2:?output directory}
mkdir -p "$out"
cd "$out"
eal=(--no-pci --no-huge -m 512 --no-telemetry)
( DPDK_TEST=mempool_perf_autotest timeout -s INT 2400 stdbuf -oL -eL dpdk-test -l 0 "${eal[@]}" \
    --file-prefix val-official </dev/null >official.log 2>&1 ) &
official=$!
stdbuf -oL "$harness" -l 1 "${eal[@]}" --file-prefix val-harness -- --matrix 2211 --cache 0 \
  --cores 1 --seconds 5 >harness-nocache.log 2>&1
until grep -q 'start performance test (with cache)' official.log; do
  kill -0 "$official" 2>/dev/null || { echo "dpdk-test stopped early (see $out/official.log)" >&2; exit 1; }
  sleep 1
done
stdbuf -oL "$harness" -l 1 "${eal[@]}" --file-prefix val-harness -- --matrix 2211 --cache 512 \
  --cores 1 --seconds 5 >harness-cache.log 2>&1
while [ "$(sed -n '/with cache)/,$p' official.log | grep -c 'cache=512 cores=1 .*rate_persec')" -lt 60 ]; do
  kill -0 "$official" 2>/dev/null || break
  sleep 2
done
kill -INT "$official" 2>/dev/null || true
wait || true
python3 - <<'PY'
import math, re
def parse(path, section=None):
    cur, d = None, {}
    for line in open(path):
        if 'start performance test' in line:
            cur = line
            continue
        m = re.match(r'mempool_autotest (.*) rate_persec=\s*(\d+)', line)
        if not m or (section and (cur is None or section not in cur)):
            continue
        key = re.sub(r'=\s+', '=', m.group(1)).strip()
        if 'cores=1' in key:
            d.setdefault(key, int(m.group(2)))
    return d
for name, sec, h in [('no cache', '(without cache)', 'harness-nocache.log'),
                     ('cache 512', '(with cache)', 'harness-cache.log')]:
    o, hh = parse('official.log', sec), parse(h)
    rs = [hh[k] / o[k] for k in o if k in hh and o[k] > 0]
    if not rs:
        print(f'{name}: no cell in common'); continue
    g = math.exp(sum(map(math.log, rs)) / len(rs))
    print(f'{name}: {len(rs)} cells, geomean harness/official {g:.3f} (min {min(rs):.3f}, '
          f'max {max(rs):.3f}), within 5%: {sum(abs(r - 1) <= .05 for r in rs)}, '
          f'within 15%: {sum(abs(r - 1) <= .15 for r in rs)}')
PY
