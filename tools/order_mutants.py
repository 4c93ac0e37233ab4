#!/usr/bin/env python3
"""Memory-order mutation sweep.

For every atomic operation with an explicit order in the lock-free parts, makes one
mutant per one-step weakening of an order (seq_cst -> acquire / release / acq_rel,
acq_rel -> acquire and release, acquire / release -> relaxed; a compare-exchange's
failure order separately), applies it, builds only what it affects, and runs the Relacy
models that include the file (plain build) and then the stress-carrying test suites of the
ThreadSanitizer build with chaos on (`MAGPIE_CHAOS=<seed>`), until one fails (the mutant is
killed) or the mutant's time cap runs out (it survived). The source is restored after
every mutant, also on Ctrl-C or SIGTERM; a journal restores it after a hard kill.

  tools/order_mutants.py --budget 2h              sweep in place, 2 hours at most
  tools/order_mutants.py --snapshot --budget 2h   sweep a private copy (build/mutants/src),
                                                  so the checkout stays editable meanwhile
  tools/order_mutants.py --list                   the mutants, nothing run
  tools/order_mutants.py --report                 rewrite the table in docs/testing.md
  tools/order_mutants.py --import-table           rebuild a lost results.json from that table
  tools/order_mutants.py --only deque --retest survived --budget 30m

Results are cached in build/mutants/results.json, keyed by file, operation text and
occurrence (not line numbers): a rerun continues where the last stopped and re-tests a
mutant only when its enclosing function changed (chaos hooks ignored) or --retest says so.
Not part of CI: a full sweep takes hours on two cores.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

# The sweep itself is the package tools/order_sweep/ (sites, mutants, runner, report); this
# script is its command line.
from order_sweep.mutants import discover, mutants_of
from order_sweep.report import import_table, write_docs
from order_sweep.runner import Sweep, migrate
from order_sweep.sites import ROOT, SCOPE


def parse_budget(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"budget '{text}': say 90m, 2h, 3600s")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=parse_budget, default=parse_budget("2h"),
                   help="wall-clock time for the sweep (90m, 2h, 3600s); default 2h")
    p.add_argument("--cap", type=parse_budget, default=parse_budget("6m"),
                   help="time cap per mutant (build and tests); default 6m")
    p.add_argument("--only", action="append", help="sweep files whose path contains this (repeatable)")
    p.add_argument("--retest", choices=["none", "survived", "invalid", "all"], default="none",
                   help="re-test cached results of this status too")
    p.add_argument("--seeds", type=int, default=2, help="chaos seeds per mutant (default 2)")
    p.add_argument("--repeat", type=int, default=1, help="MAGPIE_STRESS_REPEAT for the suites")
    p.add_argument("--watchdog", type=int, default=120, help="MAGPIE_TEST_WATCHDOG_S (default 120)")
    p.add_argument("--jobs", "-j", type=int, default=2, help="ninja's parallelism (default 2)")
    p.add_argument("--snapshot", action="store_true",
                   help="sweep a copy of the checkout in build/mutants/src (own build dirs there)")
    p.add_argument("--no-sync", action="store_true",
                   help="with --snapshot: sweep the copy as it is (e.g. the suites before a new test)")
    p.add_argument("--models-only", action="store_true", help="run only the Relacy models")
    p.add_argument("--results", help="results file (default build/mutants/results.json)")
    p.add_argument("--list", action="store_true", help="list the mutants and stop")
    p.add_argument("--report", action="store_true", help="only rewrite the table in docs/testing.md")
    p.add_argument("--import-table", action="store_true",
                   help="rebuild the results file from the table in docs/testing.md (if it was lost)")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/testing.md at the end")
    args = p.parse_args()
    path = Path(args.results) if args.results else ROOT / "build" / "mutants" / "results.json"
    if args.import_table:
        import_table(path)
        return
    if args.report:
        results = json.loads(path.read_text()) if path.exists() else {"mutants": {}}
        ops = discover(ROOT, SCOPE)
        migrate(results, [m for op in ops for m in mutants_of(op)])
        write_docs(results, ops)
        return
    Sweep(args).main()


if __name__ == "__main__":
    main()
