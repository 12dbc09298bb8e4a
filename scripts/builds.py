#!/usr/bin/env python3
"""Tables of scripts/builds.sh's runs.csv (builds named `<build>` and, with --against,
`<build>@base`), builds side by side: per cell and build, the medians
over rounds of the index pool's rate and of the per-round ratios index/twin, index/floor32,
index-aa/index (the A/A), and keep=32 / keep=512 for keep=32 cells whose partner was run;
then per build the geomean index/twin, its worst cell, the cells slower than the twin beyond
the build's A/A (median |A/A - 1| over its cells) and that A/A."""
import collections
import math
import statistics as st
import sys

# (build, cell, round) -> pool -> rate
runs = collections.defaultdict(dict)
with open(sys.argv[1]) as f:
    next(f)
    for line in f:
        x = line.strip().split(",")
        if len(x) < 14:
            continue
        rnd, _pos, build, pool = x[0], x[1], x[2], x[3]
        # cache, cores, get, put, keep, const, touch, max
        cell = tuple(int(v) for v in x[5:13])
        runs[(build, cell, rnd)][pool] = float(x[13]) / 1e6

builds = []
for k in runs:
    if k[0] not in builds:
        builds.append(k[0])
builds.sort(key=lambda b: (["default", "native", "noavx512"].index(b.split("@")[0]), "@" not in b))
cells = sorted({k[1] for k in runs}, key=lambda c: (c[1], -c[2], -c[3], c[4], c[5], c[6], c[0]))


def label(c):
    cache, cores, g, p, keep, const, touch, mx = c
    if mx:
        return f"cores={cores} keep={keep} max={mx}"
    return f"cores={cores} get={g} put={p} keep={keep} const={const} touch={touch}"


def med(build, cell, f):
    vals = []
    for (b, c, _r), pools in runs.items():
        if b == build and c == cell:
            try:
                v = f(pools)
            except (KeyError, ZeroDivisionError):
                continue
            if v is not None:
                vals.append(v)
    return st.median(vals) if vals else None


def partner(c):
    """The keep=512 cell with the same other keys as keep=32 cell `c`."""
    if c[4] != 32:
        return None
    p = c[:4] + (512,) + c[5:]
    return p if p in cells else None


def fmt(v, spec="{:.2f}"):
    return "-" if v is None else spec.format(v)


def table(title, f):
    print(f"{title}:")
    print("| cell | " + " | ".join(builds) + " |")
    print("|---|" + "---|" * len(builds))
    for c in cells:
        vals = [f(b, c) for b in builds]
        if all(v is None for v in vals):
            continue
        print(f"| {label(c)} | " + " | ".join(v if isinstance(v, str) else fmt(v) for v in vals) + " |")
    print()


def rates(b, c):
    i = med(b, c, lambda p: p["index"])
    t = med(b, c, lambda p: p["pointer"])
    return f"{fmt(i, '{:.0f}')} / {fmt(t, '{:.0f}')}"


def ratio(b, c):
    return med(b, c, lambda p: p["index"] / p["pointer"])


def floor(b, c):
    return med(b, c, lambda p: p["index"] / p["floor32"] if "floor32" in p else None)


def aa(b, c):
    return med(b, c, lambda p: p["index-aa"] / p["index"])


def keep(b, c):
    p = partner(c)
    if p is None:
        return None
    i32, i512 = med(b, c, lambda x: x["index"]), med(b, p, lambda x: x["index"])
    t32, t512 = med(b, c, lambda x: x["pointer"]), med(b, p, lambda x: x["pointer"])
    if None in (i32, i512, t32, t512):
        return None
    return f"{i32 / i512:.2f} ({t32 / t512:.2f})"


table("index pool / pointer twin, Mobj/s (medians over rounds)", rates)
table("index / twin (median of the rounds' ratios)", ratio)
table("index / u32 floor (touch=0 cells)", floor)
table("A/A: index-aa / index", aa)
if any(partner(c) for c in cells):
    table("keep=32 / keep=512: index (twin)", keep)

based = [b for b in builds if b + "@base" in builds]
if based:
    print("this tree / base (--against), median of the rounds' ratios: index (twin)")
    print("| cell | " + " | ".join(based) + " |")
    print("|---|" + "---|" * len(based))
    for c in cells:
        row = []
        for b in based:
            vals = {}
            for pool in ("index", "pointer"):
                rs = []
                for (bb, cc, r), pools in runs.items():
                    if bb == b and cc == c and pool in pools:
                        base = runs.get((b + "@base", c, r), {})
                        if pool in base:
                            rs.append(pools[pool] / base[pool])
                vals[pool] = st.median(rs) if rs else None
            row.append(f"{fmt(vals['index'])} ({fmt(vals['pointer'])})")
        print(f"| {label(c)} | " + " | ".join(row) + " |")
    print()
    for b in based:
        rs = []
        for c in cells:
            per = []
            for (bb, cc, r), pools in runs.items():
                base = runs.get((b + "@base", cc, r), {})
                if bb == b and cc == c and "index" in pools and "index" in base:
                    per.append(pools["index"] / base["index"])
            if per:
                rs.append(st.median(per))
        if rs:
            print(f"{b}: index this/base geomean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f}, min {min(rs):.2f}, max {max(rs):.2f} over {len(rs)} cells")
    print()

for b in builds:
    rs = [(ratio(b, c), c) for c in cells if ratio(b, c) is not None]
    noise = st.median(abs(aa(b, c) - 1) for c in cells if aa(b, c) is not None)
    slower = [c for r, c in rs if r < 1 - noise]
    gm = math.exp(sum(math.log(r) for r, _ in rs) / len(rs))
    worst = min(rs)
    print(
        f"{b}: index/twin geomean {gm:.3f} over {len(rs)} cells, worst {worst[0]:.2f} ({label(worst[1])}); "
        f"{len(slower)} slower than the twin beyond the A/A (median |A/A - 1| {100 * noise:.1f}%)"
    )
