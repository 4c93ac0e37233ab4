"""Runs the sweep: applies one mutant at a time, builds what it affects, runs the models and
the ThreadSanitizer suites that guard its file, and records whether it was killed."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .mutants import Mutant, discover, mutants_of, mutated_text, norm
from .report import write_docs
from .sites import ROOT, SCOPE, SUITES

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
