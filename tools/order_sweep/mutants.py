"""Finds the atomic operations with an explicit memory order in a source file and makes the
mutants of each: one per one-step weakening of an order."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

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
