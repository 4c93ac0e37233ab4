#!/usr/bin/env python3
"""Layer check: lib/ is a stack of layers, one folder each, and no file reaches up.

The core's folders, lowest first (a file may include lib-private headers of its own folder
and of the folders below it, never of one above):
  1. lib/primitives/  the lock-free parts, the atomics under them, chaos and diagnostics
  2. lib/scheduler/   workers, deques lent to threads, named threads, parking and waking
  3. lib/tasks/       the task state machine, launch, waits, events, pipes, cancellation
  4. lib/forkjoin/    task_group, parallel_for, coroutines
lib/trace/ records what every layer reports: any core folder may include it, and it
includes nothing of theirs above lib/primitives/. Where a lower layer must act for a higher
one (a shutdown drain, a before-block callback), the higher one installs a hook.

The clients (lib/clients/) and the compatibility layer (lib/compat/) are built on magpie's
public headers alone, as any user's code would be. A file in one of those folders fails the
check when it includes
  * a private header of the public tree:   <magpie/detail/...> or "magpie/detail/..."
  * anything from lib/ outside its own folder: "../task_internal.h", <lib/...>, or a
    quoted name that is not a file beside it (such a name can only be found on an include
    path that reaches into lib/).
A source file directly in lib/, outside every layer folder, fails too.

  tools/check_layers.py [ROOT]     check the tree at ROOT (default: this repository)
  tools/check_layers.py --self-test  check that the checker catches each kind of violation

Exit status 0 when clean, 1 with one line per violation (file:line: what), 2 on bad usage.
Python standard library only.
"""
import os
import re
import sys
import tempfile

LAYER_FOLDERS = ("lib/clients", "lib/compat")
# Core folders by rank: a file may include lib-private headers of a rank no higher than its own.
CORE_RANKS = {"primitives": 1, "scheduler": 2, "tasks": 3, "forkjoin": 4}
TRACE_FOLDER = "trace"  # included from any core folder; includes only primitives/ itself
SOURCE_SUFFIXES = (".h", ".hpp", ".inl", ".ipp", ".cpp", ".cc", ".cxx")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def violations_in(path, layer_root, lib_root):
    """Yields (line number, message) for each forbidden include in `path`."""
    with open(path, encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, start=1):
            match = INCLUDE.match(line)
            if not match:
                continue
            quote, name = match.groups()
            normal = name.replace("\\", "/")
            if normal.startswith("magpie/detail/") or "/magpie/detail/" in normal:
                yield number, f"includes {quote}{name} — magpie/detail/ is private to the core; use the public headers"
                continue
            if normal.startswith("lib/") or "/lib/" in normal:
                yield number, f"includes {quote}{name} — a lib/ header; clients see only include/magpie/"
                continue
            if quote == "<":
                continue
            beside = os.path.realpath(os.path.join(os.path.dirname(path), normal))
            inside_own_folder = os.path.commonpath([beside, layer_root]) == layer_root
            if os.path.isfile(beside) and inside_own_folder:
                continue
            if os.path.isfile(beside) and os.path.commonpath([beside, lib_root]) == lib_root:
                yield number, f'includes "{name}" — a lib/ header outside {os.path.relpath(layer_root, os.path.dirname(lib_root))}/'
            else:
                yield number, (f'includes "{name}", which is not a file in its own folder — a quoted name found '
                               f'only on lib/\'s include path is a lib-private header; public headers are <magpie/...>')


def resolve_private(name, path, lib_root):
    """The lib/ file a quoted include names: beside the including file, else from lib/."""
    for base in (os.path.dirname(path), lib_root):
        candidate = os.path.realpath(os.path.join(base, name))
        if os.path.isfile(candidate) and os.path.commonpath([candidate, lib_root]) == lib_root:
            return candidate
    return None


def core_folder_of(path, lib_root):
    """The first folder below lib/ that holds `path`, or None for a file directly in lib/."""
    parts = os.path.relpath(path, lib_root).split(os.sep)
    return parts[0] if len(parts) > 1 else None


def core_violations_in(path, lib_root):
    """Yields (line number, message) for each include in a core file that reaches up."""
    own = core_folder_of(path, lib_root)
    own_rank = CORE_RANKS.get(own)
    with open(path, encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, start=1):
            match = INCLUDE.match(line)
            if not match or match.group(1) != '"':
                continue
            target = resolve_private(match.group(2).replace("\\", "/"), path, lib_root)
            if target is None:
                continue
            theirs = core_folder_of(target, lib_root)
            if theirs == own:
                continue
            if own == TRACE_FOLDER:
                if theirs != "primitives":
                    yield number, f'includes "{match.group(2)}" — lib/trace/ may include only lib/primitives/'
                continue
            if theirs == TRACE_FOLDER:
                continue
            their_rank = CORE_RANKS.get(theirs)
            if their_rank is None:
                yield number, f'includes "{match.group(2)}" from lib/{theirs}/, which the core may not include'
            elif their_rank > own_rank:
                yield number, (f'includes "{match.group(2)}" — lib/{own}/ (layer {own_rank}) reaches up into '
                               f"lib/{theirs}/ (layer {their_rank}); install a hook instead")


def check(root):
    """Returns the list of violation lines for the tree at `root`."""
    root = os.path.realpath(root)
    lib_root = os.path.join(root, "lib")
    found = []
    for folder in LAYER_FOLDERS:
        layer_root = os.path.join(root, folder)
        if not os.path.isdir(layer_root):
            continue  # lib/compat/ arrives with the TaskGraph layer
        for directory, _, files in os.walk(layer_root):
            for file in sorted(files):
                if not file.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(directory, file)
                for number, message in violations_in(path, layer_root, lib_root):
                    found.append(f"{os.path.relpath(path, root)}:{number}: {message}")
    if not os.path.isdir(lib_root):
        return found
    for entry in sorted(os.listdir(lib_root)):
        path = os.path.join(lib_root, entry)
        if os.path.isfile(path) and entry.endswith(SOURCE_SUFFIXES):
            found.append(f"lib/{entry}:1: lies directly in lib/; every source belongs to a layer folder")
    for folder in (*CORE_RANKS, TRACE_FOLDER):
        for directory, _, files in os.walk(os.path.join(lib_root, folder)):
            for file in sorted(files):
                if file.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(directory, file)
                    for number, message in core_violations_in(path, lib_root):
                        found.append(f"{os.path.relpath(path, root)}:{number}: {message}")
    return found


def self_test():
    """Builds a scratch tree with one violation of each kind and checks each is caught."""
    cases = {
        "lib/clients/bad_detail.cpp": "#include <magpie/detail/task_base.h>\n",
        "lib/clients/bad_quoted_detail.cpp": '#include "magpie/detail/deque.h"\n',
        "lib/clients/bad_parent.cpp": '#include "../task_internal.h"\n',
        "lib/clients/bad_private_name.cpp": '#include "scheduler_impl.h"\n',
        "lib/compat/bad_lib_path.h": "#include <lib/task_internal.h>\n",
        "lib/scheduler/bad_upward.cpp": '#include "tasks/task_internal.h"\n',
        "lib/primitives/bad_upward_relative.cpp": '#include "../scheduler/scheduler_impl.h"\n',
        "lib/tasks/bad_forkjoin.cpp": '#include "forkjoin/group_internal.h"\n',
        "lib/trace/bad_trace.cpp": '#include "scheduler/scheduler_impl.h"\n',
        "lib/tasks/bad_client.cpp": '#include "clients/tick_state.h"\n',
        "lib/loose.cpp": "int x;\n",
    }
    clean = {
        "lib/clients/good.cpp": '#include <magpie/task.h>\n#include "own.h"\n#include <vector>\n',
        "lib/clients/own.h": "#pragma once\n",
        "lib/clients/tick_state.h": "#pragma once\n",
        "lib/tasks/task_internal.h": '#pragma once\n#include "scheduler/scheduler_impl.h"\n#include "trace/trace_buffers.h"\n',
        "lib/tasks/good.cpp": '#include "task_internal.h"\n#include "primitives/chaos_internal.h"\n',
        "lib/scheduler/scheduler_impl.h": '#pragma once\n#include "../primitives/chaos_internal.h"\n',
        "lib/primitives/chaos_internal.h": "#pragma once\n",
        "lib/forkjoin/group_internal.h": '#pragma once\n#include "tasks/task_internal.h"\n',
        "lib/trace/trace_buffers.h": '#pragma once\n#include "primitives/chaos_internal.h"\n',
    }
    with tempfile.TemporaryDirectory() as scratch:
        for relative, text in {**cases, **clean}.items():
            path = os.path.join(scratch, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
        found = check(scratch)
    caught = {line.split(":")[0] for line in found}
    missed = sorted(set(cases) - caught)
    wrongly = sorted(caught - set(cases))
    if missed or wrongly or len(found) != len(cases):
        print(f"check_layers self-test FAILED: missed {missed}, wrongly flagged {wrongly}", file=sys.stderr)
        return 1
    print(f"check_layers self-test: all {len(cases)} kinds of violation caught, clean files pass")
    return 0


def main(argv):
    if len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = check(root)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"layer check FAILED: {len(found)} violation(s) ({', '.join(LAYER_FOLDERS)} may include only "
              "<magpie/...> public headers, the standard library and files in their own folder; a core "
              "folder only its own and lower layers' headers)", file=sys.stderr)
        return 1
    folders = [*LAYER_FOLDERS, *(f"lib/{f}" for f in (*CORE_RANKS, TRACE_FOLDER))]
    print("layer check: ok (" + ", ".join(f for f in folders if os.path.isdir(os.path.join(root, f))) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
