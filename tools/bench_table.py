#!/usr/bin/env python3
"""Prints the benchmark table from the JSON lines the bench executables append.

For each (workload, param, threads): every system's median, ns per task per core (wall
time x threads / tasks), the ratio magpie/peer (below 1 means magpie is faster), and
magpie's own speedup at N threads over 1 thread. Only lines from the given file(s) are
used, so one file = one run on one machine. Workloads keep the order they were run in. A
measurement taken in several rounds (tools/bench.sh --rounds) shows the median of the
rounds' medians.

    tools/bench_table.py bench/results/run-<stamp>.jsonl
    tools/bench_table.py --memory bench/results/run-<stamp>.jsonl   # peak resident MB instead
    tools/bench_table.py --best-peer bench/results/scaling-<stamp>.jsonl  # one peer column: the fastest
"""
import argparse
import json
import statistics
import sys

# Peers in the order their columns appear; any other system follows, then the baseline.
PEER_ORDER = ["tbb", "taskflow", "libfork", "omp-libomp", "omp-libgomp", "ue_heap"]


def merge_rounds(records):
    """One record from a measurement's rounds (tools/bench.sh --rounds runs every system's
    executable once per round, the systems taking turns): the median of the rounds'
    medians, so a round that a busy host slowed down does not decide the figure."""
    if len(records) == 1:
        return records[0]
    merged = dict(records[-1])
    merged["median_s"] = statistics.median(record["median_s"] for record in records)
    merged["min_s"] = min(record["min_s"] for record in records)
    merged["max_s"] = max(record["max_s"] for record in records)
    merged["runs"] = sum(record["runs"] for record in records)
    merged["peak_rss_kb"] = max(record["peak_rss_kb"] for record in records)
    merged["rounds"] = len(records)
    return merged


def load_records(paths):
    """Returns {(workload, param, system, threads): record}, rounds merged, in the order first seen."""
    found = {}
    for path in paths:
        with open(path) as lines:
            for line in lines:
                if line.strip():
                    record = json.loads(line)
                    key = (record["workload"], record["param"], record["system"], record["threads"])
                    found.setdefault(key, []).append(record)
    return {key: merge_rounds(records) for key, records in found.items()}


UNATTACHED = "_unattached"


def load(paths):
    """Returns {(workload, param, threads): {system: record}} in the order first seen.

    A peer is called from `main` the same way whether magpie's row attaches or not, so a
    peer without its own `…_unattached` row is compared through its measurement of the
    attached row's workload (docs/benchmarks.md, "Which rows attach")."""
    rows = {}
    for (workload, param, system, threads), record in load_records(paths).items():
        rows.setdefault((workload, param, threads), {})[system] = record
    for (workload, param, threads), systems in rows.items():
        if workload.endswith(UNATTACHED):
            same_code = rows.get((workload[: -len(UNATTACHED)], param, threads), {})
            for system, record in same_code.items():
                systems.setdefault(system, record)
    return rows


def ordered_peers(rows):
    systems = {system for row in rows.values() for system in row} - {"magpie"}
    known = [peer for peer in PEER_ORDER if peer in systems]
    others = sorted(systems - set(known) - {"serial"})
    return known + others + (["serial"] if "serial" in systems else [])


def cell(record, memory=False):
    if not record:
        return "-"
    if memory:
        return f"{record['peak_rss_kb'] / 1024:.1f} MB"
    if record.get("unit") == "ratio":  # a ratio timed in pairs (fib_cutoff_over_serial)
        return f"{record['median_s']:.3f}x"
    if record.get("unit") == "bytes":  # memory per task (task_bytes)
        return f"{record['median_s']:.0f} B"
    if record["tasks"]:
        return f"{record['median_s'] * 1e9 * record['threads'] / record['tasks']:.1f} ns"
    micros = record["median_s"] * 1e6
    return f"{micros:.2f} us" if micros < 10 else f"{micros:.1f} us"  # sub-µs latencies keep two digits


def ratio(mine, theirs, field="median_s"):
    if mine and theirs and theirs[field] > 0:
        return f"{mine[field] / theirs[field]:.2f}"
    return "-"


def best_peer_line(workload, param, threads, systems, one):
    """One row of the --best-peer table: magpie beside the fastest peer of the row (the serial
    baseline is no peer)."""
    mine = systems.get("magpie")
    peers = [(record["median_s"], system, record) for system, record in systems.items()
             if system not in ("magpie", "serial") and record.get("unit", "s") == (mine or record).get("unit", "s")]
    best = min(peers, key=lambda peer: peer[0]) if peers else None
    name, theirs = (best[1], best[2]) if best else ("-", None)
    timed = mine and mine.get("unit", "s") == "s"
    speedup = f"{one['median_s'] / mine['median_s']:.2f}x" if timed and one and threads > 1 and mine["median_s"] > 0 else ""
    return (f"{workload:<28} {param:<9} {threads:>3}  {cell(mine):>10}  {name:>12} {cell(theirs):>11}"
            f"  {ratio(mine, theirs):>6}  {speedup}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON-lines file(s) from one run")
    parser.add_argument("--memory", action="store_true", help="cells and ratios of peak resident memory per measurement")
    parser.add_argument("--best-peer", action="store_true", help="one peer column per row: the fastest peer of that row")
    args = parser.parse_args()
    field = "peak_rss_kb" if args.memory else "median_s"
    rows = load(args.results)
    if not rows:
        print("no measurements")
        return 1
    # Keep each workload's rows together, in the order workloads ran; within one, its sizes
    # in the order first seen (a size only some systems ran stays with the others), each
    # at 1 thread, then more.
    workloads, params = [], {}
    for workload, param, _ in rows:
        if workload not in params:
            workloads.append(workload)
            params[workload] = []
        if param not in params[workload]:
            params[workload].append(param)
    keys = sorted(rows, key=lambda key: (workloads.index(key[0]), params[key[0]].index(key[1]), key[2]))
    if args.best_peer:
        header = f"{'workload':<28} {'param':<9} {'thr':>3}  {'magpie':>10}  {'best peer':>12} {'':>11}  {'ratio':>6}  speedup"
        print(header)
        print("-" * len(header))
        for workload, param, threads in keys:
            one = rows.get((workload, param, 1), {}).get("magpie")
            print(best_peer_line(workload, param, threads, rows[(workload, param, threads)], one))
        print("\ncells as in the full table (ns per task per core, or microseconds); best peer: the peer with the")
        print("lowest median in that row; ratio: magpie / best peer, below 1 = magpie faster than every peer;")
        print("speedup: magpie at N threads over magpie at 1 thread")
        return 0
    peers = ordered_peers(rows)
    name_width = max([24] + [len(workload) for workload in workloads])  # the newcomer rows' names are long
    header = f"{'workload':<{name_width}} {'param':<9} {'thr':>3}  {'magpie':>10}"
    header += "".join(f"  {peer:>11} {'ratio':>6}" for peer in peers) + ("" if args.memory else "  speedup")
    print(header)
    print("-" * len(header))
    previous = None
    for workload, param, threads in keys:
        systems = rows[(workload, param, threads)]
        if previous is not None and previous != workload.split("_")[0]:
            print()
        previous = workload.split("_")[0]
        mine = systems.get("magpie")
        line = f"{workload:<{name_width}} {param:<9} {threads:>3}  {cell(mine, args.memory):>10}"
        for peer in peers:
            theirs = systems.get(peer)
            line += f"  {cell(theirs, args.memory):>11} {ratio(mine, theirs, field):>6}"
        one = rows.get((workload, param, 1), {}).get("magpie")
        timed = mine and mine.get("unit", "s") == "s"
        speedup = f"{one['median_s'] / mine['median_s']:.2f}x" if timed and one and threads > 1 and mine["median_s"] > 0 else ""
        print(line + "  " + ("" if args.memory else speedup))
    if args.memory:
        print("\ncells: peak resident memory of the process while the measurement ran (its own window: the")
        print("harness resets the kernel's mark before each, but memory a system kept from earlier")
        print("measurements is still resident and counts); ratio: magpie / peer")
        return 0
    print("\ncells: ns per task per core (wall time x threads / tasks) where a workload counts tasks, else the")
    print("median in microseconds (idle_cpu: CPU time used in 100 ms idle), or a factor (…_over_serial: each")
    print("system's time over serial's, timed in alternating pairs in one process), or bytes (task_bytes: resident")
    print("memory per task launched and not yet run, 16 bytes of captures); ratio: magpie / peer, below")
    print("1 = magpie faster (or smaller); speedup: magpie at N threads over magpie at 1 thread (on 2 cores the honest scaling figure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
