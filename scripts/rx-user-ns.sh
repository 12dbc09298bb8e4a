#!/usr/bin/env bash
# The receiving thread's CPU per packet of one xdp_rx receiver, split by perf's cpu-clock
# samples (20 kHz: 50 us each) into its user-space part and the part of it spent in
# `XdpSocket::rx_burst`, where a packet buffer's header is written. The whole thread's figure
# (what `xdp_rx --buffers` reports) also holds the kernel's softirq work that lands on the
# thread (the veth pair's backlog, skb frees), which moves by +-10% between runs; the user part
# and `rx_burst` are the receiver's own code.
#
# Usage: scripts/rx-user-ns.sh [--frame 2048|2112] [--packets N] [--binary PATH] RX...
#   RX: xdp, xdpbuf, uring, uringbuf, fwd, fwdrec (xdp_rx --only); each runs once, in order:
#   list them alternately (xdp xdpbuf xdp xdpbuf ...) and compare medians.
# Needs root, perf (linux-perf) and what xdp_rx needs (a veth pair, AF_XDP); builds xdp_rx
# unless --binary names one. About 6 s per receiver at the default 2,000,000 packets.
set -euo pipefail
cd "$(dirname "$0")/.."
frame=2048
packets=2000000
bin=""
rxs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --frame) frame="$2"; shift 2 ;;
    --packets) packets="$2"; shift 2 ;;
    --binary) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) rxs+=("$1"); shift ;;
  esac
done
[ ${#rxs[@]} -gt 0 ] || { sed -n '2,14p' "$0"; exit 2; }
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
if [ -z "$bin" ]; then
  cargo build --quiet --release --features xdp,uring --example xdp_rx
  bin=target/release/examples/xdp_rx
fi
data=$(mktemp /tmp/rx-user-ns.XXXXXX)
trap 'rm -f "$data"' EXIT
echo "frame $frame, $packets packets a run; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
for rx in "${rxs[@]}"; do
  perf record -q -e cpu-clock -F 20000 -o "$data" "$bin" --only "$rx" --packets "$packets" \
    --frame "$frame" >/dev/null 2>&1
  # The receiving thread is the one whose samples include rx_burst's (or, for io_uring,
  # the receiver function's); per thread: all samples, user-space ones ([.]), rx_burst's.
  perf report -i "$data" --no-children --sort pid,sym --stdio -g none -F sample,pid,sym 2>/dev/null |
    grep -v '^#' | awk -v n="$packets" -v rx="$rx" '
      NF >= 3 {
        all[$2] += $1
        if ($3 == "[.]") user[$2] += $1
        if ($0 ~ /::rx_burst|receiver_/ && tid == "") tid = $2
        if ($0 ~ /::rx_burst/) burst[$2] += $1
      }
      END {
        k = 50000 / n   # ns per sample, per packet
        printf "%-8s thread %6.1f ns/pkt  user %6.1f  rx_burst %5.1f\n", rx, all[tid] * k, user[tid] * k, burst[tid] * k
      }'
done
