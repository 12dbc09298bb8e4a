#!/usr/bin/env python3
"""Table of scripts/ab_mempool_perf.sh's cells.csv: per (pool, cell) the median over rounds of
after / mean(before, before'), the same for the aligned builds, and before'/before (the cell's
A/A). Rows marked ** are below 0.92 in both builds: a change that shows with either layout."""
import collections
import math
import statistics as st
import sys

d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    # round, position, binary, pool, policy, cache, cores, get, put, keep, const, touch, ..., rate
    key = (f[3], int(f[7]), int(f[9]), int(f[10]), int(f[11]))
    d[(key, f[0])][int(f[1])] = float(f[-1]) / 1e6


def gm(xs):
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs))


print("| pool | get/put | keep | const | touch | before (Mobj/s) | after/before | aligned after/before | before A/A |")
print("|---|---|---|---|---|---|---|---|---|")
summary = collections.defaultdict(list)
for key in sorted(set(k for k, _ in d if k[0] != "index-aa")):
    ab, al, aa, base = [], [], [], []
    for r in sorted(set(r for k, r in d if k == key)):
        x = d[(key, r)]
        if len(x) < 5:
            continue
        ab.append(x[2] / st.mean([x[1], x[5]]))
        al.append(x[4] / x[3])
        aa.append(x[5] / x[1])
        base.append(x[1])
    if not ab:
        continue
    row = (st.median(ab), st.median(al), st.median(aa))
    summary[key[0]].append(row)
    mark = " **" if row[0] < 0.92 and row[1] < 0.92 else ""
    p, g, keep, c, t = key
    print(f"| {p} | {g}/{g} | {keep} | {c} | {t} | {st.median(base):.0f} | {row[0]:.2f}{mark} | {row[1]:.2f} | {row[2]:.2f} |")
for p, rows in summary.items():
    print(f"{p}: after/before geomean {gm(r[0] for r in rows):.3f} (min {min(r[0] for r in rows):.2f}), "
          f"aligned {gm(r[1] for r in rows):.3f} (min {min(r[1] for r in rows):.2f}), "
          f"A/A {gm(r[2] for r in rows):.3f} (range {min(r[2] for r in rows):.2f}-{max(r[2] for r in rows):.2f})")
