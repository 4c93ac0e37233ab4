#!/usr/bin/env python3
"""Compares two benchmark runs (JSON-lines files): the regression check.

For every (workload, param, system, threads) present in both files, prints the change of
the median in percent (positive = slower: every figure is a time, CPU time or latency, so
lower is better). A change above --threshold is flagged; the exit status is 1 when a magpie
figure regressed by more than the threshold, else 0. Peers' changes are shown for context
(a peer that moved as much as magpie points at the machine, not at magpie).

    tools/bench_diff.py bench/results/run-A.jsonl bench/results/run-B.jsonl --threshold 15
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import load_records  # noqa: E402


def load(path):
    return load_records([path])  # rounds merged as in the table


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="baseline run (JSON lines)")
    parser.add_argument("after", help="run to check (JSON lines)")
    parser.add_argument("--threshold", type=float, default=10.0, help="percent slower that counts as a regression (default 10)")
    parser.add_argument("--system", default="magpie", help="system whose regressions fail the check (default magpie)")
    parser.add_argument("--all", action="store_true", help="print every row, not only the changed ones")
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    common = [key for key in after if key in before]
    if not common:
        print("bench_diff: no measurement in common")
        return 1
    failed = []
    print(f"{'workload':<24} {'param':<9} {'system':<11} {'thr':>3}  {'before':>12} {'after':>12} {'change':>8}")
    for key in common:
        old, new = before[key]["median_s"], after[key]["median_s"]
        change = (new - old) / old * 100.0 if old > 0 else 0.0
        flag = ""
        if change > args.threshold:
            flag = "REGRESSION" if key[2] == args.system else "slower"
            if key[2] == args.system:
                failed.append(key)
        elif change < -args.threshold:
            flag = "faster"
        if flag or args.all:
            workload, param, system, threads = key
            print(f"{workload:<24} {param:<9} {system:<11} {threads:>3}  {old:>12.6g} {new:>12.6g} {change:>+7.1f}%  {flag}")
    missing = [key for key in before if key not in after and key[2] == args.system]
    for key in missing:
        print(f"missing in {args.after}: {key}")
    print(f"\n{len(common)} measurements compared, threshold {args.threshold:g}%: "
          f"{len(failed)} {args.system} regression(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
