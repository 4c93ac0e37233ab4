#!/usr/bin/env python3
"""Renders one run's benchmark JSON lines into a PNG chart (matplotlib, no display).

A horizontal dot plot about 900 px wide, sized for a Markdown page: one line per workload,
labelled with its name and size, and one dot per peer at the ratio magpie / peer on a log
axis, so left of the line at 1 is magpie ahead. One panel per thread count, side by side
(1 and all hardware threads by default: every count in the file). A workload measured at
several sizes shows its largest (the last measured); the table has the rest. Rows measured
the way a newcomer writes the code (`…_unattached`, docs/benchmarks.md) have their labels
marked. The serial baseline is left out: it is the floor, not a peer.

    tools/bench_chart.py bench/results/run-<stamp>.jsonl            # writes run-<stamp>.png beside it
    tools/bench_chart.py run.jsonl -o chart.png --also docs/bench-latest.png
"""
import argparse
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # headless: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import UNATTACHED, load, ordered_peers  # noqa: E402

MARKERS = ["o", "s", "D", "^", "v", "P"]
NEWCOMER_COLOUR = "#b3005a"


def chart_rows(rows, peers):
    """[(workload, param)] in run order, one per workload (its last size), each compared
    with at least one peer at some thread count."""
    last_param = {}
    for workload, param, threads in rows:
        systems = rows[(workload, param, threads)]
        if "magpie" in systems and any(peer in systems for peer in peers):
            last_param[workload] = param
    return list(last_param.items())


def ratio(systems, peer):
    mine, theirs = systems.get("magpie"), systems.get(peer)
    if mine and theirs and mine["median_s"] > 0 and theirs["median_s"] > 0:
        return mine["median_s"] / theirs["median_s"]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON-lines file(s) from one run")
    parser.add_argument("-o", "--output", help="PNG to write (default: the first file with .png)")
    parser.add_argument("--also", action="append", default=[], help="write the same PNG here too (e.g. docs/bench-latest.png)")
    parser.add_argument("--title", default="magpie / peer, median wall time (task_bytes: memory per task); left of 1 = magpie ahead")
    args = parser.parse_args()
    rows = load(args.results)
    peers = [peer for peer in ordered_peers(rows) if peer != "serial"]
    if not rows or not peers:
        print("bench_chart: nothing to compare (no peers measured)")
        return 1
    shown = chart_rows(rows, peers)
    thread_counts = sorted({threads for _, _, threads in rows})
    ratios = [r for workload, param in shown for threads in thread_counts for peer in peers
              if (r := ratio(rows.get((workload, param, threads), {}), peer))]
    low = 10 ** math.floor(math.log10(min(ratios + [0.5])))
    high = 10 ** math.ceil(math.log10(max(ratios + [2.0])))

    # 9 inches at 100 dpi: a Markdown page's width; a line per workload keeps labels at 8 pt.
    figure, axes = plt.subplots(1, len(thread_counts), figsize=(9, 1.2 + 0.19 * len(shown)), sharey=True, squeeze=False)
    positions = list(range(len(shown)))
    for axis, threads in zip(axes[0], thread_counts):
        for index, peer in enumerate(peers):
            xs, ys = [], []
            for position, (workload, param) in zip(positions, shown):
                value = ratio(rows.get((workload, param, threads), {}), peer)
                if value:
                    xs.append(value)
                    ys.append(position)
            axis.scatter(xs, ys, s=18, marker=MARKERS[index % len(MARKERS)], label=peer, zorder=3, alpha=0.85)
        axis.axvline(1.0, color="black", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_xlim(low, high)
        axis.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.grid(axis="x", which="both", alpha=0.3)
        axis.grid(axis="y", alpha=0.15)
        axis.set_title(f"{threads} thread{'s' if threads > 1 else ''}", fontsize=9)
        axis.tick_params(axis="x", labelsize=8)
    axes[0][0].set_yticks(positions)
    axes[0][0].set_yticklabels([f"{workload}  {param}" for workload, param in shown], fontsize=7.5)
    for label, (workload, _) in zip(axes[0][0].get_yticklabels(), shown):
        if workload.endswith(UNATTACHED):
            label.set_color(NEWCOMER_COLOUR)
    axes[0][0].invert_yaxis()  # run order, top to bottom
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], linestyle="none"))
    labels.append("magenta label: as a newcomer writes it (from a plain main)")
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7.5, frameon=False)
    figure.suptitle(args.title, fontsize=9)
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    output = args.output or os.path.splitext(args.results[0])[0] + ".png"
    for path in [output] + args.also:
        figure.savefig(path, dpi=100)
        print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
