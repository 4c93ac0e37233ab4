#!/usr/bin/env python3
"""Prints the benchmark table from the JSON lines the bench executables append.

For each (workload, param, threads): every system's median, ns per task per core (wall
time x threads / tasks), the ratio magpie/peer (below 1 means magpie is faster), and
magpie's own speedup at N threads over 1 thread. Only lines from the given file(s) are
used, so one file = one run on one machine.

    tools/bench_table.py bench/results/run-<stamp>.jsonl
"""
import json
import sys
from collections import defaultdict


def main(paths):
    rows = defaultdict(dict)  # (workload, param, threads) -> system -> record
    for path in paths:
        with open(path) as lines:
            for line in lines:
                if line.strip():
                    record = json.loads(line)
                    rows[(record["workload"], record["param"], record["threads"])][record["system"]] = record
    if not rows:
        print("no measurements")
        return 1
    peers = sorted({system for row in rows.values() for system in row} - {"magpie"})
    header = f"{'workload':<24} {'param':<8} {'thr':>3}  {'magpie':>12}"
    header += "".join(f"  {peer:>12}  {'ratio':>6}" for peer in peers) + "  speedup"
    print(header)
    print("-" * len(header))
    for (workload, param, threads), systems in sorted(rows.items()):
        mine = systems.get("magpie")
        line = f"{workload:<24} {param:<8} {threads:>3}  {cell(mine):>12}"
        for peer in peers:
            theirs = systems.get(peer)
            ratio = f"{mine['median_s'] / theirs['median_s']:.2f}" if mine and theirs and theirs["median_s"] > 0 else "-"
            line += f"  {cell(theirs):>12}  {ratio:>6}"
        one = rows.get((workload, param, 1), {}).get("magpie")
        speedup = f"{one['median_s'] / mine['median_s']:.2f}x" if mine and one and threads > 1 and mine["median_s"] > 0 else ""
        print(line + "  " + speedup)
    print("\ncells: ns per task per core where a workload counts tasks, else the median in microseconds;")
    print("ratio: magpie / peer (lower is better for magpie); speedup: magpie at N threads over 1 thread")
    return 0


def cell(record):
    if not record:
        return "-"
    if record["tasks"]:
        return f"{record['median_s'] * 1e9 * record['threads'] / record['tasks']:.1f} ns"
    micros = record["median_s"] * 1e6
    return f"{micros:.2f} us" if micros < 10 else f"{micros:.1f} us"  # sub-µs latencies keep two digits


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
