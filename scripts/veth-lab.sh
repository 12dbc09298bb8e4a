#!/usr/bin/env bash
# A virtual ethernet pair for the AF_XDP receive path (examples/xdp_rx.rs, tests/xdp.rs):
# `xdp0` stays in the root network namespace (the receiver's side), its peer `xdp1` goes into
# the namespace `xdplab` (the sender's side). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#
# Usage: scripts/veth-lab.sh up [A B NS]      (default: xdp0 xdp1 xdplab)
#        scripts/veth-lab.sh down [A B NS]
#        scripts/veth-lab.sh deps             (install the packages only)
# `up` installs what it needs with apt-get when missing (iproute2 for `ip`; libxdp-dev and
# libbpf-dev for the `xdp` feature, whose default redirect program ships with libxdp1), mounts
# the BPF file system at /sys/fs/bpf when it is not (libxdp keeps its dispatcher there), and is
# idempotent: an existing pair of the same names is removed first. Prints the names and MACs.
set -euo pipefail
cmd=${1:-up}
A=${2:-xdp0}
B=${3:-xdp1}
NS=${4:-xdplab}

need_pkgs() {
  local missing=()
  command -v ip >/dev/null || missing+=(iproute2)
  [ -e /usr/include/xdp/xsk.h ] || missing+=(libxdp-dev)
  [ -e /usr/include/bpf/libbpf.h ] || missing+=(libbpf-dev)
  compgen -G '/usr/lib/*/bpf/xsk_def_xdp_prog.o' >/dev/null || compgen -G '/usr/lib/bpf/xsk_def_xdp_prog.o' >/dev/null || missing+=(libxdp1)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "veth-lab: installing ${missing[*]}"
    if ! command -v apt-get >/dev/null; then
      echo "veth-lab: apt-get not found; install ${missing[*]} by hand" >&2
      return 1
    fi
    # Another apt/dpkg may hold the lock: wait for it (up to 10 min).
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}"
  fi
}

bpffs() {
  if ! grep -q ' /sys/fs/bpf bpf ' /proc/mounts; then
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null || echo "veth-lab: could not mount bpffs at /sys/fs/bpf (libxdp falls back to a single program)"
  fi
}

down() {
  ip link del "$A" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}

case "$cmd" in
  deps)
    need_pkgs
    ;;
  up)
    need_pkgs
    bpffs
    down
    ip netns add "$NS"
    ip link add "$A" numrxqueues 1 numtxqueues 1 type veth peer name "$B" numrxqueues 1 numtxqueues 1
    ip link set "$B" netns "$NS"
    ip link set "$A" up
    ip -n "$NS" link set "$B" up
    ip -n "$NS" link set lo up
    # No IP addresses: the traffic is raw Ethernet frames of a local experimental EtherType.
    echo "veth-lab: $A ($(cat /sys/class/net/$A/address)) <-> $B in netns $NS ($(ip -n "$NS" -br link show "$B" | awk '{print $3}'))"
    ;;
  down)
    down
    echo "veth-lab: $A and netns $NS removed"
    ;;
  *)
    echo "usage: $0 up|down|deps [A B NS]" >&2
    exit 2
    ;;
esac
