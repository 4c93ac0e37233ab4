#!/usr/bin/env python3
"""Runs a program linked with magpie that never calls magpie/trace.h, with MAGPIE_TRACE set,
and checks what it leaves: a Chrome trace-event JSON file holding the program's task
slices; with a path that cannot be written, or a device that fails the write at exit
(/dev/full), a clear report naming the variable and the path, and the program's own output
and exit status unchanged; with MAGPIE_TRACE unset or empty, no file.

    check.py PROGRAM
"""
import json
import os
import subprocess
import sys
import tempfile

TIMEOUT_S = 60


def run(program, trace):
    environment = dict(os.environ)
    environment.pop("MAGPIE_TRACE", None)
    if trace is not None:
        environment["MAGPIE_TRACE"] = trace
    return subprocess.run([program], env=environment, capture_output=True, text=True, timeout=TIMEOUT_S)


def main():
    program = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "frame.json")
        result = run(program, path)
        if result.returncode != 0:
            failures.append(f"with MAGPIE_TRACE={path}: exit status {result.returncode}\n{result.stderr}")
        if not os.path.exists(path):
            failures.append(f"with MAGPIE_TRACE={path}: no file written")
        else:
            with open(path) as file:
                events = json.load(file)["traceEvents"]
            leaves = [e for e in events if e.get("ph") == "B" and e.get("cat") == "task" and e.get("name") == "environment leaf"]
            roots = [e for e in events if e.get("ph") == "B" and e.get("cat") == "task" and e.get("name") == "environment root"]
            if len(leaves) != 8 or len(roots) != 1:
                failures.append(f"expected 8 leaf slices and 1 root slice, found {len(leaves)} and {len(roots)}")
            if path not in result.stderr:
                failures.append(f"the program did not say where the trace went; stderr:\n{result.stderr}")

        unwritable = os.path.join(folder, "no such folder", "frame.json")
        result = run(program, unwritable)
        if result.returncode != 0:
            failures.append(f"with an unwritable MAGPIE_TRACE: exit status {result.returncode}\n{result.stderr}")
        if "MAGPIE_TRACE" not in result.stderr or unwritable not in result.stderr:
            failures.append(f"with an unwritable MAGPIE_TRACE: no report naming it and the path; stderr:\n{result.stderr}")

        if os.path.exists("/dev/full"):  # opens, then every write fails: the failure shows at exit
            result = run(program, "/dev/full")
            if result.returncode != 0 or "sum 28" not in result.stdout:
                failures.append(f"with MAGPIE_TRACE=/dev/full: exit status {result.returncode}, stdout "
                                f"{result.stdout!r}\n{result.stderr}")
            if "MAGPIE_TRACE" not in result.stderr or "/dev/full" not in result.stderr or "warning" not in result.stderr:
                failures.append(f"with MAGPIE_TRACE=/dev/full: no warning naming it and the path; stderr:\n{result.stderr}")
            if "another try" in result.stderr or "written to" in result.stderr:
                failures.append(f"with MAGPIE_TRACE=/dev/full: the report promises a write; stderr:\n{result.stderr}")

        before = set(os.listdir(folder))
        for trace in (None, ""):
            result = run(program, trace)
            if result.returncode != 0 or "MAGPIE_TRACE" in result.stderr:
                failures.append(f"with MAGPIE_TRACE={trace!r}: status {result.returncode}, stderr:\n{result.stderr}")
        if set(os.listdir(folder)) != before:
            failures.append("a file was written with MAGPIE_TRACE unset or empty")

    for failure in failures:
        print("FAILED:", failure)
    if not failures:
        print("MAGPIE_TRACE: trace written and read back; bad path reported")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
