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
import datetime as dt
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The lock-free parts, in sweep priority order: templates with models first.
SCOPE = [
    "include/magpie/detail/deque.h",
    "include/magpie/detail/event_count.h",
    "include/magpie/detail/subsequent_list.h",
    "include/magpie/detail/task_state.h",
    "include/magpie/detail/task_base.h",
    "include/magpie/detail/task_pool.h",
    "include/magpie/detail/injection_queue.h",
    "include/magpie/detail/thread_context.h",
    "include/magpie/detail/work_item.h",
    "include/magpie/detail/atomics.h",
    "lib/tasks/task.cpp",
    "lib/tasks/task_references.cpp",
    "lib/tasks/task_launch.cpp",
    "lib/tasks/task_nesting.cpp",
    "lib/tasks/task_wait.cpp",
    "lib/tasks/wait_retraction.cpp",
    "lib/tasks/deque_owner_view.h",
    "lib/forkjoin/task_group.cpp",
    "lib/tasks/task_event.cpp",
    "lib/tasks/task_cycles.cpp",
    "lib/tasks/task_internal.h",
    "lib/scheduler/scheduler.cpp",
    "lib/scheduler/scheduler_shutdown.cpp",
    "lib/scheduler/scheduler_impl.h",
    "lib/scheduler/scheduler_slots.cpp",
    "lib/scheduler/scheduler_facade.cpp",
    "lib/tasks/pipe.cpp",
    "lib/primitives/task_pool.cpp",
    "lib/scheduler/task_census.cpp",
    "lib/scheduler/task_census.h",
    "lib/scheduler/lent_deques.cpp",
    "lib/scheduler/named_thread.cpp",
    "lib/tasks/concurrency_limiter.cpp",
]

# Test executables (test/<name>_test) whose cases exercise each file, most direct first.
# Each runs whole (fast and stress cases) under TSan with chaos; the first failure kills.
SUITES = {
    "include/magpie/detail/deque.h": ["deque", "scheduler", "lent_deques"],
    "include/magpie/detail/event_count.h": ["event_count", "scheduler", "wait"],
    "include/magpie/detail/subsequent_list.h": ["subsequent_list", "task", "task_prerequisites", "task_event"],
    "include/magpie/detail/task_state.h": ["task_state", "task", "task_prerequisites", "nested", "wait"],
    "include/magpie/detail/task_base.h": ["task", "task_prerequisites", "nested", "wait", "pipe", "pipe_wait"],
    "include/magpie/detail/task_pool.h": ["task_pool", "task", "task_prerequisites"],
    "include/magpie/detail/injection_queue.h": ["injection_queue", "scheduler"],
    "include/magpie/detail/thread_context.h": ["scheduler", "task_group", "task_group_threads"],
    "include/magpie/detail/work_item.h": ["scheduler"],
    "include/magpie/detail/atomics.h": ["event_count", "wait", "task", "task_prerequisites"],
    "lib/tasks/task.cpp": ["task", "task_prerequisites", "nested", "task_event", "pipe", "pipe_wait", "wait"],
    "lib/tasks/task_references.cpp": ["task", "task_prerequisites", "task_event", "wait", "nested"],
    "lib/tasks/task_launch.cpp": ["task", "task_prerequisites", "task_event", "pipe", "pipe_wait", "wait"],
    "lib/tasks/task_nesting.cpp": ["nested", "task", "task_prerequisites", "wait"],
    "lib/tasks/task_wait.cpp": ["wait", "task", "task_prerequisites", "nested"],
    "lib/tasks/wait_retraction.cpp": ["wait_retraction", "wait", "task", "task_prerequisites", "nested", "pipe", "pipe_wait"],
    "lib/tasks/deque_owner_view.h": ["deque", "wait_retraction", "held_runs", "wait_launch_order", "lent_deques"],
    "lib/forkjoin/task_group.cpp": ["task_group", "task_group_threads", "parallel_for"],
    "lib/tasks/task_event.cpp": ["task_event"],
    "lib/tasks/task_cycles.cpp": ["task", "task_prerequisites"],
    "lib/tasks/task_internal.h": ["task", "task_prerequisites", "pipe", "pipe_wait", "nested"],
    "lib/scheduler/scheduler.cpp": ["scheduler", "task", "task_prerequisites", "lent_deques", "wait"],
    "lib/scheduler/scheduler_shutdown.cpp": ["scheduler", "wait", "coroutine", "named_thread", "named_thread_shutdown"],
    "lib/scheduler/scheduler_impl.h": ["scheduler", "named_thread", "named_thread_shutdown", "lent_deques"],
    "lib/scheduler/scheduler_slots.cpp": ["scheduler", "lent_deques", "wait"],
    "lib/scheduler/scheduler_facade.cpp": ["scheduler"],
    "lib/tasks/pipe.cpp": ["pipe", "pipe_wait", "task", "task_prerequisites"],
    "lib/primitives/task_pool.cpp": ["task_pool", "task", "task_prerequisites"],
    "lib/scheduler/task_census.cpp": ["task", "task_prerequisites", "scheduler"],
    "lib/scheduler/task_census.h": ["task", "task_prerequisites", "scheduler"],
    "lib/scheduler/lent_deques.cpp": ["lent_deques", "scheduler"],
    "lib/scheduler/named_thread.cpp": ["named_thread", "named_thread_shutdown", "scheduler"],
    "lib/tasks/concurrency_limiter.cpp": ["concurrency_limiter", "concurrency_limiter_handover"],
}

OPS = ("load", "store", "exchange", "fetch_add", "fetch_sub", "fetch_or", "fetch_and",
       "fetch_xor", "compare_exchange_strong", "compare_exchange_weak", "test_and_set", "clear")
CALL = re.compile(r"(?:\.|->)(" + "|".join(OPS) + r")\s*\(")
FENCE = re.compile(r"\b(atomic_thread_fence)\s*\(")
ORDER = re.compile(r"\bstd::memory_order(?:_|::)(relaxed|consume|acquire|release|acq_rel|seq_cst)\b")

STRENGTH = {"relaxed": 0, "consume": 1, "acquire": 1, "release": 1, "acq_rel": 2, "seq_cst": 3}
LOAD_PART = {"relaxed": "relaxed", "consume": "consume", "acquire": "acquire",
             "release": "relaxed", "acq_rel": "acquire", "seq_cst": "seq_cst"}


def kind_of(op: str) -> str:
    if op == "load":
        return "load"
    if op in ("store", "clear"):
        return "store"
    if op.startswith("compare_exchange"):
        return "cas"
    return "rmw"


def weaker(order: str, kind: str) -> list[str]:
    """One step weaker, valid for the kind of access."""
    if kind == "load":
        return {"seq_cst": ["acquire"], "acquire": ["relaxed"], "consume": ["relaxed"]}.get(order, [])
    if kind == "store":
        return {"seq_cst": ["release"], "release": ["relaxed"]}.get(order, [])
    if kind == "fence":
        return {"seq_cst": ["acq_rel"], "acq_rel": ["acquire", "release"]}.get(order, [])
    return {"seq_cst": ["acq_rel"], "acq_rel": ["acquire", "release"], "acquire": ["relaxed"],
            "release": ["relaxed"], "consume": ["relaxed"]}.get(order, [])


def blank_comments(text: str) -> str:
    """Comments and string/char literals replaced by spaces; offsets and newlines kept."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            if c == "'" and j - i > 4:  # a digit separator (1'000), not a char literal
                i += 1
                continue
            out[i + 1:j - 1] = " " * max(0, j - 1 - (i + 1))
            i = j
        else:
            i += 1
    return "".join(out)


def norm(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Op:
    file: str
    start: int          # offset of the call's name
    end: int            # offset after the closing parenthesis
    line: int
    op: str
    kind: str           # load, store, rmw, cas, fence
    orders: list        # [(offset, length, order)] in argument order
    text: str           # the normalized call statement, comments dropped
    occurrence: int = 0
    function: str = ""
    context: str = ""

    @property
    def key(self) -> str:
        return f"{self.file}::{self.function}::{self.text}#{self.occurrence}"

    legacy_key: str = ""  # file::text#occurrence-in-file, the first runs' key (migrated on load)


@dataclass
class Mutant:
    op: Op
    slot: int           # which order argument (0: the order or success, 1: failure)
    old: str
    new: str
    extra: list = field(default_factory=list)  # [(slot, new)] changed along (CAS failure clamp)

    @property
    def key(self) -> str:
        return f"{self.op.key}::{self.slot}:{self.old}->{self.new}"

    @property
    def legacy_key(self) -> str:
        return f"{self.op.legacy_key}::{self.slot}:{self.old}->{self.new}"

    @property
    def label(self) -> str:
        if self.op.kind == "cas":
            which = "success" if self.slot == 0 else "failure"
            if len(self.op.orders) == 1:
                which = "order"
            return f"{which} {self.old} → {self.new}"
        return f"{self.old} → {self.new}"


def enclosing_function(clean: str, pos: int) -> tuple[str, int, int]:
    """(name, body start, body end) of the outermost non-type brace block around pos."""
    stack = []
    blocks = []
    for i, c in enumerate(clean[:pos]):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            stack.pop()
    for opening in stack:
        head_start = max(clean.rfind(";", 0, opening), clean.rfind("}", 0, opening),
                         clean.rfind("{", 0, opening)) + 1
        head = clean[head_start:opening]
        if re.search(r"\b(namespace|class|struct|union|enum)\b", head) and "(" not in head:
            continue
        if re.search(r"^\s*(template\s*<[^>]*>\s*)?(class|struct|union)\b", head):
            continue
        names = re.findall(r"(~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\(", head)
        name = names[0] if names else "?"
        if name in ("alignas",) and len(names) > 1:
            name = names[1]
        depth, j = 0, opening
        while j < len(clean):
            if clean[j] == "{":
                depth += 1
            elif clean[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        blocks.append((name.split("::")[-1] if name != "?" else "?", opening, j + 1))
        break
    return blocks[0] if blocks else ("(file scope)", max(0, pos - 200), pos + 200)


def discover(root: Path, files: list[str]) -> list[Op]:
    ops: list[Op] = []
    for rel in files:
        path = root / rel
        if not path.exists():
            continue
        text = path.read_text()
        clean = blank_comments(text)
        # preprocessor lines blanked too, for finding the enclosing function
        shape = re.sub(r"(?m)^[ \t]*#.*$", lambda d: " " * len(d.group(0)), clean)
        seen: dict[str, int] = {}
        found = []
        for pattern in (CALL, FENCE):
            for m in pattern.finditer(clean):
                i, depth = m.end(), 1
                while i < len(clean) and depth:
                    depth += clean[i] == "("
                    depth -= clean[i] == ")"
                    i += 1
                args = clean[m.end():i - 1]
                orders = [(m.end() + o.start(), o.end() - o.start(), o.group(1))
                          for o in ORDER.finditer(args)]
                kind = "fence" if pattern is FENCE else kind_of(m.group(1))
                found.append((m, i, kind, orders))
        for m, end, kind, orders in sorted(found, key=lambda f: f[0].start()):
            line_start = clean.rfind("\n", 0, m.start()) + 1
            stmt = norm(clean[line_start:end])
            name, body_start, body_end = enclosing_function(shape, m.start())
            legacy = seen.get(stmt, 0)
            seen[stmt] = legacy + 1
            occurrence = seen.get((name, stmt), 0)
            seen[(name, stmt)] = occurrence + 1
            body = "\n".join(l for l in clean[body_start:body_end].splitlines()
                             if "chaos" not in l.lower())
            op = Op(rel, m.start(), end, clean.count("\n", 0, m.start()) + 1, m.group(1), kind,
                    orders, stmt, occurrence, name,
                    hashlib.sha1(norm(body).encode()).hexdigest()[:16])
            op.legacy_key = f"{rel}::{stmt}#{legacy}"
            ops.append(op)
    return ops


def mutants_of(op: Op) -> list[Mutant]:
    result = []
    if not op.orders:
        return result
    if op.kind == "cas" and len(op.orders) == 2:
        success, failure = op.orders[0][2], op.orders[1][2]
        for new in weaker(success, "rmw"):
            m = Mutant(op, 0, success, new)
            limit = LOAD_PART[new]
            if STRENGTH[failure] > STRENGTH[limit] or (failure == "acquire" and limit == "relaxed"):
                m.extra.append((1, limit))
            result.append(m)
        for new in weaker(failure, "load"):
            result.append(Mutant(op, 1, failure, new))
        return result
    kind = "rmw" if op.kind == "cas" else op.kind
    for new in weaker(op.orders[0][2], kind):
        result.append(Mutant(op, 0, op.orders[0][2], new))
    return result


def mutated_text(text: str, m: Mutant) -> str:
    changes = [(m.slot, m.new)] + list(m.extra)
    edits = []
    for slot, new in changes:
        offset, length, old = m.op.orders[slot]
        token = text[offset:offset + length]
        assert token.endswith(old), (m.key, token)
        edits.append((offset, length, token[:-len(old)] + new))
    for offset, length, token in sorted(edits, reverse=True):
        text = text[:offset] + token + text[offset + length:]
    return text


# --- running -------------------------------------------------------------------------------

class Interrupted(Exception):
    pass


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def run(cmd, cwd, timeout, env=None, log=None):
    """(returncode or None on time-out, seconds, output tail)."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(1, timeout))
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    text = out.decode(errors="replace")
    if log is not None:
        log.write(f"$ {' '.join(map(str, cmd))}\n{text[-20000:]}\n")
        log.flush()
    if len(text) > 8000:
        text = text[:4000] + "\n...\n" + text[-4000:]
    return rc, time.monotonic() - started, text


def reason_of(output: str) -> str:
    relacy = re.search(r"^([A-Z][A-Z_ ]{3,}[A-Z])(?: \(([^)]*)\))?\s*$", output, re.M)
    if relacy and "iteration:" in output:
        return norm(relacy.group(1).replace("_", " ").lower() +
                    (f": {relacy.group(2)}" if relacy.group(2) else ""))[:90]
    for pattern, what in ((r"ThreadSanitizer: data race", "TSan data race"),
                          (r"ThreadSanitizer: (heap-use-after-free|[a-z-]+)", None),
                          (r"watchdog: test case \"([^\"]+)\"", "hang (watchdog): {}"),
                          (r"DEADLOCK", "deadlock"), (r"USER_ASSERT_FAILED|assertion", "assertion"),
                          (r"(ERROR|FAILED|failed)[^\n]*", None)):
        m = re.search(pattern, output)
        if m:
            if what is None:
                return norm(m.group(0))[:80]
            return what.format(*m.groups()) if "{}" in what else what
    return "exit status"


class Sweep:
    def __init__(self, args):
        self.args = args
        self.repo = ROOT
        self.state_dir = ROOT / "build" / "mutants"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if args.snapshot:
            self.src = self.state_dir / "src"
            self.plain = self.state_dir / "plain"
            self.tsan = self.state_dir / "tsan"
        else:
            self.src = ROOT
            self.plain = ROOT / "build" / "mut-plain"
            self.tsan = ROOT / "build" / "mut-tsan"
        self.results_path = Path(args.results) if args.results else self.state_dir / "results.json"
        self.journal = self.state_dir / "applied.json"
        self.log = open(self.state_dir / "sweep.log", "a")
        self.results = {"mutants": {}, "baseline": {}}
        if self.results_path.exists():
            self.results = json.loads(self.results_path.read_text())
        self.deadline = time.monotonic() + args.budget
        self.models_of: dict[str, list[str]] = {}

    # -- bookkeeping
    def save(self):
        tmp = self.results_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.results, indent=1, sort_keys=True))
        tmp.replace(self.results_path)

    def say(self, text):
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        print(f"[{stamp}] {text}", flush=True)
        self.log.write(f"[{stamp}] {text}\n")
        self.log.flush()

    def left(self):
        return self.deadline - time.monotonic()

    # -- the source tree
    def recover(self):
        """Restores a file a killed sweep left mutated (the journal names it)."""
        if not self.journal.exists():
            return
        entry = json.loads(self.journal.read_text())
        path = Path(entry["path"])
        if path.exists() and hashlib.sha1(path.read_bytes()).hexdigest() == entry["mutated_sha1"]:
            path.write_text(entry["original"])
            self.say(f"restored {path} from the journal of an interrupted sweep")
        self.journal.unlink()

    def sync_snapshot(self):
        """Copies the checkout's files (tracked and untracked, not ignored) into build/mutants/src,
        writing only those that differ so the builds stay incremental."""
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=self.repo,
                                check=True, capture_output=True).stdout.decode().split("\0")
        wanted = set()
        for rel in filter(None, listed):
            source = self.repo / rel
            if not source.is_file():
                continue
            wanted.add(rel)
            target = self.src / rel
            data = source.read_bytes()
            if not target.exists() or target.read_bytes() != data:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                shutil.copymode(source, target)
        for path in self.src.rglob("*"):
            rel = path.relative_to(self.src).as_posix()
            if path.is_file() and rel not in wanted:
                path.unlink()

    def check_clean(self, files):
        if self.args.snapshot:
            return
        diff = subprocess.run(["git", "diff", "--name-only", "--", *files], cwd=self.repo,
                              capture_output=True, text=True, check=True).stdout.split()
        if diff:
            sys.exit(f"error: swept files differ from the index (commit or stash first): {diff}")

    def configure(self):
        common = ["--buildtype=debugoptimized", "-Dbench=false", "-Dexamples=false"]
        for build, options in ((self.plain, ["-Db_sanitize=none", "-Dmodels=enabled"]),
                               (self.tsan, ["-Db_sanitize=thread", "-Dmodels=disabled"])):
            if not (build / "build.ninja").exists():
                self.say(f"configuring {build}")
                subprocess.run(["nice", "-n", "19", "meson", "setup", str(build), str(self.src),
                                *common, *options], check=True, stdout=subprocess.DEVNULL)

    def model_map(self, headers):
        """header -> the model executables whose object files include it (ninja's deps)."""
        targets = subprocess.run(["ninja", "-C", str(self.plain), "-t", "targets", "all"],
                                 capture_output=True, text=True, check=True).stdout
        models = sorted(set(re.findall(r"^(test/model/(\w+)_model):", targets, re.M)))
        result = {h: [] for h in headers}
        for target, name in models:
            deps = subprocess.run(["ninja", "-C", str(self.plain), "-t", "deps",
                                   f"{target}.p/{name}_model.cpp.o"],
                                  capture_output=True, text=True).stdout
            if not deps.strip() or "deps not found" in deps:
                # never built: build it once, then ask again
                subprocess.run(["nice", "-n", "19", "ninja", "-C", str(self.plain), target],
                               check=True, stdout=subprocess.DEVNULL)
                deps = subprocess.run(["ninja", "-C", str(self.plain), "-t", "deps",
                                       f"{target}.p/{name}_model.cpp.o"],
                                      capture_output=True, text=True).stdout
            for h in headers:
                if re.search(re.escape(h) + r"\s*$", deps, re.M):
                    result[h].append(name)
        return result

    # -- one mutant
    def build(self, build_dir, targets, timeout):
        rc, secs, out = run(["nice", "-n", "19", "ninja", "-C", str(build_dir),
                             f"-j{self.args.jobs}", *targets], self.src, timeout, log=self.log)
        return rc, secs, out

    def test_env(self, seed):
        env = dict(os.environ)
        env["TSAN_OPTIONS"] = ("halt_on_error=1 second_deadlock_stack=1 suppressions=" +
                               str(self.src / "test" / "tsan.supp"))
        env["MAGPIE_CHAOS"] = str(seed)
        env["MAGPIE_SEED"] = str(seed)
        env["MAGPIE_STRESS_REPEAT"] = str(self.args.repeat)
        env["MAGPIE_TEST_WATCHDOG_S"] = str(self.args.watchdog)
        return env

    def plan(self, m: Mutant):
        models = self.models_of.get(m.op.file, [])
        suites = SUITES.get(m.op.file, ["scheduler"])
        return models, suites

    def evaluate(self, m: Mutant) -> dict:
        """Builds and tests the applied mutant: killed / survived / invalid."""
        cap_end = time.monotonic() + self.args.cap
        until = lambda: min(cap_end, self.deadline) - time.monotonic()
        models, suites = self.plan(m)
        runs = []
        record = {"runs": runs}

        def finish(status, by=""):
            if status == "survived" and by == "cap" and self.left() <= 5:
                status, by = "not run", "budget spent during its tests"
            record.update(status=status, killed_by=by)
            return record

        if models:
            # Only the models' own objects: the library they link holds no template code of
            # theirs, so it stays as the baseline built it (saves recompiling it per mutant).
            targets = [f"test/model/{name}_model.p/{name}_model.cpp.o" for name in models]
            rc, secs, out = self.build(self.plain, targets, until())
            runs.append({"what": "build plain models", "rc": rc, "s": round(secs)})
            if rc is None:
                return finish("not run", "cap during build")
            if rc != 0:
                return finish("invalid", "does not compile: " + reason_of(out))
            for name in models:
                rc, secs, out = run(["sh", "-c", self.link_commands[name]], self.plain, until(),
                                    log=self.log)
                if rc != 0:
                    return finish("not run", "model link failed")
            for name in models:
                if until() <= 0:
                    return finish("survived" if runs else "not run", "cap")
                rc, secs, out = run([str(self.plain / "test" / "model" / f"{name}_model")],
                                    self.src, until(), log=self.log)
                runs.append({"what": f"model {name}", "rc": rc, "s": round(secs)})
                if rc is None:
                    return finish("survived", "cap")
                if rc != 0:
                    return finish("killed", f"model {name} ({reason_of(out)})")
        if self.args.models_only:
            return finish("survived", "models only")
        targets = [f"test/{name}_test" for name in suites]
        rc, secs, out = self.build(self.tsan, targets, until())
        runs.append({"what": "build tsan", "rc": rc, "s": round(secs)})
        if rc is None:
            return finish("not run", "cap during build")
        if rc != 0:
            return finish("invalid", "does not compile (tsan): " + reason_of(out))
        seeds = self.args.seeds
        base = int(hashlib.sha1(m.key.encode()).hexdigest()[:6], 16)
        for round_ in range(seeds):
            seed = 1 + (base + round_ * 7919) % 100000
            for name in suites:
                if until() <= 5:
                    return finish("survived", "cap")
                exe = self.tsan / "test" / f"{name}_test"
                rc, secs, out = run([str(exe), "--no-intro=true"], self.src, until(),
                                    env=self.test_env(seed), log=self.log)
                runs.append({"what": f"tsan {name} chaos={seed}", "rc": rc, "s": round(secs)})
                if rc is None:
                    return finish("survived", "cap")
                if rc != 0:
                    return finish("killed", f"tsan {name}, MAGPIE_CHAOS={seed} ({reason_of(out)})")
        return finish("survived", "")

    def apply_and_evaluate(self, m: Mutant) -> dict:
        path = self.src / m.op.file
        original = path.read_text()
        mutated = mutated_text(original, m)
        self.journal.write_text(json.dumps({
            "path": str(path), "original": original,
            "mutated_sha1": hashlib.sha1(mutated.encode()).hexdigest()}))
        record = {"status": "not run", "killed_by": "interrupted"}
        try:
            path.write_text(mutated)
            record = self.evaluate(m)
        finally:
            if path.read_text() != mutated:
                self.say(f"warning: {path} changed while a mutant was applied; not restoring over it")
                record.update(status="not run", killed_by="source changed under the sweep")
            else:
                path.write_text(original)
            self.journal.unlink(missing_ok=True)
        return record

    # -- the whole sweep
    def baseline(self, files, mutants):
        """Every model and suite must pass unmutated (else a kill means nothing)."""
        models = sorted({x for f in files for x in self.models_of.get(f, [])})
        suites = sorted({x for f in files for x in SUITES.get(f, [])})
        # Each model's and suite's baseline stands while the code under test (include/, lib/,
        # the shared test headers) and its own source are unchanged: a new test case re-runs
        # only its own suite.
        shared = hashlib.sha1()
        for top in ("include", "lib", "test"):
            for path in sorted((self.src / top).rglob("*")):
                rel = path.relative_to(self.src).as_posix()
                if path.is_file() and not re.search(r"_(test|model)\.cpp$", rel):
                    shared.update(rel.encode() + path.read_bytes())
        shared = shared.hexdigest()

        def digest(rel):
            path = self.src / rel
            return hashlib.sha1(shared.encode() + (path.read_bytes() if path.exists() else b"")).hexdigest()

        cached = self.results.get("baseline", {})
        cached.setdefault("models", {})
        cached.setdefault("suites", {})
        for x in list(cached["models"]):
            if cached["models"][x].get("h") != digest(f"test/model/{x}_model.cpp"):
                del cached["models"][x]
        for x in list(cached["suites"]):
            if cached["suites"][x].get("h") != digest(f"test/{x}_test.cpp"):
                del cached["suites"][x]
        cached.pop("tree", None)
        self.results["baseline"] = cached
        todo_models = [x for x in models if x not in cached["models"]]
        todo_suites = [x for x in suites if x not in cached["suites"]]
        if todo_models:
            self.say(f"baseline: building and running models {todo_models}")
            rc, _, out = self.build(self.plain, [f"test/model/{x}_model" for x in todo_models], 7200)
            if rc != 0:
                sys.exit("baseline plain build failed:\n" + out)
            for x in todo_models:
                rc, secs, _ = run([str(self.plain / "test" / "model" / f"{x}_model")], self.src, 1800,
                                  log=self.log)
                cached["models"][x] = {"rc": rc, "s": round(secs), "h": digest(f"test/model/{x}_model.cpp")}
                self.say(f"  model {x}: rc={rc} {secs:.0f}s")
                self.save()
        if todo_suites and not self.args.models_only:
            self.say(f"baseline: building and running tsan suites {todo_suites}")
            rc, _, out = self.build(self.tsan, [f"test/{x}_test" for x in todo_suites], 7200)
            if rc != 0:
                sys.exit("baseline tsan build failed:\n" + out)
            for x in todo_suites:
                rc, secs, out = run([str(self.tsan / "test" / f"{x}_test"), "--no-intro=true"],
                                    self.src, 1800, env=self.test_env(1), log=self.log)
                cached["suites"][x] = {"rc": rc, "s": round(secs), "h": digest(f"test/{x}_test.cpp")}
                self.say(f"  tsan {x}: rc={rc} {secs:.0f}s" + ("" if rc == 0 else "  " + reason_of(out)))
                self.save()
        bad = [f"model {x}" for x, r in cached["models"].items() if r["rc"] != 0]
        bad += [f"tsan {x}" for x, r in cached["suites"].items() if r["rc"] != 0]
        if bad:
            self.say(f"warning: failing unmutated, left out of the sweep: {bad}")
            for f in SUITES:
                SUITES[f] = [x for x in SUITES[f] if f"tsan {x}" not in bad]
            for f in self.models_of:
                self.models_of[f] = [x for x in self.models_of[f] if f"model {x}" not in bad]

    def main(self):
        args = self.args
        signal.signal(signal.SIGTERM, _sigterm)
        if not args.list:
            # one sweep at a time per checkout: the journal and the snapshot are shared
            import fcntl
            self.lock = open(self.state_dir / "lock", "w")
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                sys.exit("error: another sweep is running on this checkout (build/mutants/lock)")
            self.recover()
        files = [f for f in SCOPE if not args.only or any(o in f for o in args.only)]
        if args.snapshot and not args.list and not args.no_sync:
            self.src.mkdir(parents=True, exist_ok=True)
            self.sync_snapshot()
        self.check_clean(files)
        ops = discover(self.src, files)
        mutants = [m for op in ops for m in mutants_of(op)]
        migrate(self.results, [m for op in discover(self.src, SCOPE) for m in mutants_of(op)])
        if args.list:
            for m in mutants:
                print(f"{m.op.file}:{m.op.line} {m.op.function}: {m.op.op} {m.label}")
            print(f"{len(ops)} operations, {len(mutants)} mutants")
            return
        self.configure()
        self.models_of = self.model_map([f for f in files if f.startswith("include/")])
        self.say(f"models per header: {self.models_of}")
        self.link_commands = {}
        for name in sorted({x for f in files for x in self.models_of.get(f, [])}):
            commands = subprocess.run(["ninja", "-C", str(self.plain), "-t", "commands",
                                       f"test/model/{name}_model"], capture_output=True,
                                      text=True, check=True).stdout.strip().splitlines()
            self.link_commands[name] = commands[-1]
        self.baseline(files, mutants)

        def todo(m):
            r = self.results["mutants"].get(m.key)
            if r is None or r.get("context") != m.op.context:
                return True
            if r["status"] == "not run":
                return True
            return args.retest in ("all", r["status"])

        def priority(m):
            group = files.index(m.op.file)
            tsan_blind = m.old == "seq_cst" and not self.models_of.get(m.op.file)
            # a result on an earlier version of the function waits for the never-tested ones
            stale = m.key in self.results["mutants"] and not args.retest in ("all", "survived")
            return (stale, tsan_blind, group, m.op.start, m.slot)

        queue = sorted((m for m in mutants if todo(m)), key=priority)
        self.say(f"{len(mutants)} mutants, {len(queue)} to test, budget {args.budget:.0f}s")
        try:
            for index, m in enumerate(queue):
                if self.left() < 30:
                    self.say("budget spent")
                    break
                started = time.monotonic()
                self.say(f"[{index + 1}/{len(queue)}] {m.op.file}:{m.op.line} {m.op.function} "
                         f"{m.op.op} {m.label}")
                record = self.apply_and_evaluate(m)
                record.update(file=m.op.file, line=m.op.line, function=m.op.function, op=m.op.op,
                              text=m.op.text, label=m.label, old=m.old, new=m.new,
                              context=m.op.context, seconds=round(time.monotonic() - started),
                              when=dt.datetime.now().isoformat(timespec="seconds"),
                              chaos=(self.src / "include" / "magpie" / "chaos.h").exists())
                self.results["mutants"][m.key] = record
                self.save()
                self.say(f"    -> {record['status']} {record['killed_by']} ({record['seconds']}s)")
        except KeyboardInterrupt:
            self.say("interrupted; source restored")
        finally:
            self.save()
        if not args.no_docs:
            write_docs(self.results, discover(self.src, SCOPE))


def migrate(results, mutants):
    """Moves results stored under the first runs' keys (occurrence counted per file) to the
    current ones (per function), so an edit in one function does not re-key another's."""
    stored = results["mutants"]
    for m in mutants:
        if m.key not in stored and m.legacy_key in stored:
            stored[m.key] = stored.pop(m.legacy_key)


# --- the table in docs/testing.md ------------------------------------------------------------

BEGIN = "<!-- order_mutants: begin (generated by tools/order_mutants.py --report; do not edit) -->"
END = "<!-- order_mutants: end -->"


def tally(results, mutants):
    counts = {"killed": 0, "survived": 0, "invalid": 0, "not run": 0, "stale": 0}
    for m in mutants:
        r = results["mutants"].get(m.key)
        status = r["status"] if r else "not run"
        if r and r.get("context") != m.op.context and status in ("killed", "survived", "invalid"):
            counts["stale"] += 1  # counted under its last result, on the function's earlier code
        counts[status] = counts.get(status, 0) + 1
    return counts


def write_docs(results, ops, notes_path=ROOT / "tools" / "order_mutants_notes.json"):
    notes = json.loads(notes_path.read_text()) if notes_path.exists() else {}
    mutants = [m for op in ops for m in mutants_of(op)]
    counts = tally(results, mutants)
    tested = counts["killed"] + counts["survived"]
    rate = f"{100 * counts['killed'] / tested:.0f} %" if tested else "n/a"
    relaxed = {}
    for op in ops:
        if op.orders and not mutants_of(op):
            relaxed[op.file] = relaxed.get(op.file, 0) + 1
    implicit = [op for op in ops if not op.orders]
    lines = [BEGIN, "",
             f"{len(mutants)} mutants of {len(ops) - sum(relaxed.values()) - len(implicit)} operations "
             f"with a non-relaxed order: **{counts['killed']} killed, {counts['survived']} survived**, "
             f"{counts['invalid']} invalid (do not compile), {counts['not run']} not run (budget). "
             f"Kill rate of those tested: **{rate}**. Of the results, {counts['stale']} are on an "
             f"earlier version of their function (marked below), not yet re-run.", ""]
    lines.append("Relaxed operations (nothing weaker to try): " + ", ".join(
        f"`{f}` {n}" for f, n in relaxed.items()) + ".")
    lines.append("Operations with the implicit (seq_cst) order: " +
                 (", ".join(f"`{op.file}:{op.line}` {op.op}" for op in implicit) if implicit else
                  "none — every atomic operation in the swept files names its order.") + "")
    lines += ["", "| file | function (line) | operation | mutant | result | note |",
              "|---|---|---|---|---|---|"]
    for m in mutants:
        r = results["mutants"].get(m.key)
        stale = r is not None and r.get("context") != m.op.context
        if r is None:
            result = "not run"
        elif r["status"] == "killed":
            result = f"killed: {r['killed_by']}"
        elif r["status"] == "survived":
            result = "**survived**"
        elif r["status"] == "invalid":
            result = f"invalid ({r['killed_by']})"
        else:
            result = r["status"]
        if stale and r["status"] in ("killed", "survived", "invalid"):
            result += " (on an earlier version of the function; not re-run since)"
        elif stale:
            result = "not run"
        note = notes.get(m.key) or notes.get(m.op.key) or ""
        if r is not None and r["status"] == "killed" and "new" not in note:
            note = ""  # a note on why a survivor survived says nothing about a killed mutant
        elif r is not None and r["status"] == "survived" and not note:
            note = "open: not analysed yet"
        short = m.op.file.replace("include/magpie/detail/", "detail/")
        lines.append(f"| `{short}` | `{m.op.function}` ({m.op.line}) | `{m.op.op}` | {m.label} | "
                     f"{result} | {note} |")
    lines += ["", END]
    doc = ROOT / "docs" / "testing.md"
    text = doc.read_text()
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text)
    print(f"docs/testing.md: {counts}, kill rate {rate}")


STALE = " (on an earlier version of the function; not re-run since)"


def table_revision():
    """The commit that wrote the table in docs/testing.md as it stands (the oldest of the newest
    run of commits holding it), or None when the table was never committed."""
    def block(text):
        return text[text.index(BEGIN):text.index(END)] if BEGIN in text and END in text else None

    def git(*argv):
        return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True).stdout

    current, found = block((ROOT / "docs" / "testing.md").read_text()), None
    for rev in git("log", "--format=%H", "--", "docs/testing.md").split():
        if block(git("show", f"{rev}:docs/testing.md")) != current:
            break
        found = rev
    return found


def import_table(path: Path):
    """Rebuilds a results file from the table in docs/testing.md. Rows are matched to mutants by
    file, function, operation, mutant and occurrence, as discovered in the code the table was
    generated from (the commit that wrote it; else the checkout), so a result keeps the context
    it was tested on and reads stale once its function has changed since. Rows marked as on an
    earlier version get a context no code has; "not run" rows are left out."""
    import tempfile
    if path.exists():
        sys.exit(f"error: {path} exists; it is a better record than the table (move it away)")
    text = (ROOT / "docs" / "testing.md").read_text()
    if BEGIN not in text or END not in text:
        sys.exit("error: no table in docs/testing.md")
    rev = table_revision()
    with tempfile.TemporaryDirectory() as tmp:
        if rev:
            for rel in SCOPE:
                shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True)
                if shown.returncode == 0:
                    (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
                    (Path(tmp) / rel).write_bytes(shown.stdout)
        ops = discover(Path(tmp) if rev else ROOT, SCOPE)
    print(f"table written at {rev[:12] if rev else 'an uncommitted state'}; "
          f"matching it to the code {'there' if rev else 'in the checkout'}")
    seen, by_row = {}, {}
    for m in (m for op in ops for m in mutants_of(op)):
        row = (m.op.file.replace("include/magpie/detail/", "detail/"), m.op.function, m.op.op, m.label)
        seen[row] = seen.get(row, 0) + 1
        by_row[row + (seen[row],)] = m
    results, counts, seen = {"mutants": {}}, {"imported": 0, "stale": 0, "not run": 0,
                                              "unmatched": 0, "line moved": 0}, {}
    block = text[text.index(BEGIN):text.index(END)]
    for line in block.splitlines():
        cells = line[2:-2].split(" | ", 5)
        where = re.fullmatch(r"`(.+)` \((\d+)\)", cells[1]) if len(cells) == 6 else None
        if not where:
            continue  # the header, its rule, the prose
        row = (cells[0].strip("`"), where.group(1), cells[2].strip("`"), cells[3])
        seen[row] = seen.get(row, 0) + 1
        m = by_row.get(row + (seen[row],))
        result = cells[4]
        stale = result.endswith(STALE)
        result = result[:-len(STALE)] if stale else result
        if m is None:
            counts["unmatched"] += 1
            print(f"  no such mutant: {line}")
            continue
        counts["line moved"] += m.op.line != int(where.group(2))
        if result.startswith("killed: "):
            status, by = "killed", result[len("killed: "):]
        elif result == "**survived**":
            status, by = "survived", ""
        elif result.startswith("invalid (") and result.endswith(")"):
            status, by = "invalid", result[len("invalid ("):-1]
        else:
            counts["not run"] += 1
            continue
        counts["imported"] += 1
        counts["stale"] += stale
        results["mutants"][m.key] = dict(
            status=status, killed_by=by, file=m.op.file, line=m.op.line, function=m.op.function,
            op=m.op.op, text=m.op.text, label=m.label, old=m.old, new=m.new,
            context="(imported as stale)" if stale else m.op.context,
            imported=f"docs/testing.md at {rev or 'the checkout'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"{path}: {counts}")


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
