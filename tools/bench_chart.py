#!/usr/bin/env python3
"""Renders one run's benchmark JSON lines into a PNG chart (matplotlib, no display).

One panel per thread count (1 and all hardware threads by default: every count in the
file): for each workload, grouped bars of the ratio magpie / peer (below 1 = magpie faster),
on a log scale with the parity line at 1. The serial baseline is left out (it is the floor,
not a peer; bench_table.py shows it). Workloads keep the order they were run in.

    tools/bench_chart.py bench/results/run-<stamp>.jsonl            # writes run-<stamp>.png beside it
    tools/bench_chart.py run.jsonl -o chart.png --also docs/bench-latest.png
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")  # headless: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import load, ordered_peers  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON-lines file(s) from one run")
    parser.add_argument("-o", "--output", help="PNG to write (default: the first file with .png)")
    parser.add_argument("--also", action="append", default=[], help="write the same PNG here too (e.g. docs/bench-latest.png)")
    parser.add_argument("--title", default="magpie / peer: median wall time ratio (task_bytes: memory per task; below 1 = magpie ahead)")
    args = parser.parse_args()
    rows = load(args.results)
    peers = [peer for peer in ordered_peers(rows) if peer != "serial"]
    thread_counts = sorted({threads for _, _, threads in rows})
    if not rows or not peers:
        print("bench_chart: nothing to compare (no peers measured)")
        return 1
    order = []
    for workload, param, _ in rows:
        if (workload, param) not in order:
            order.append((workload, param))

    figure, axes = plt.subplots(len(thread_counts), 1, figsize=(max(10, 0.45 * len(order) * len(peers) / 2 + 4), 4.2 * len(thread_counts)),
                                squeeze=False)
    width = 0.8 / len(peers)
    for axis, threads in zip(axes[:, 0], thread_counts):
        labels = []
        ratios = {peer: [] for peer in peers}
        for workload, param in order:
            systems = rows.get((workload, param, threads), {})
            mine = systems.get("magpie")
            if not mine or mine["median_s"] <= 0 or not any(peer in systems for peer in peers):
                continue
            labels.append(f"{workload}\n{param}")
            for peer in peers:
                theirs = systems.get(peer)
                ratios[peer].append(mine["median_s"] / theirs["median_s"] if theirs and theirs["median_s"] > 0 else float("nan"))
        positions = range(len(labels))
        for index, peer in enumerate(peers):
            axis.bar([p + (index - (len(peers) - 1) / 2) * width for p in positions], ratios[peer], width, label=peer)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xticks(list(positions))
        axis.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        axis.set_ylabel("magpie / peer")
        axis.set_title(f"{threads} thread{'s' if threads > 1 else ''}", fontsize=10)
        axis.grid(axis="y", which="both", alpha=0.3)
        axis.legend(fontsize=8, ncol=len(peers))
    figure.suptitle(args.title, fontsize=11)
    figure.tight_layout()
    output = args.output or os.path.splitext(args.results[0])[0] + ".png"
    for path in [output] + args.also:
        figure.savefig(path, dpi=110)
        print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
