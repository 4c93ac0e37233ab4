#!/usr/bin/env python3
"""Compiles magpie's public headers the way an engine's build would: strict warnings as errors.

  check_headers.py --cxx g++ --other-cxx clang++-14 --include include --include build/include
                   --consumer test/consumer_flags/native_api.cpp ... [--jobs 2]

What it compiles, each with CONSUMER_WARNINGS and -Werror:
  * every header under <first include dir>/magpie alone, one translation unit each, with
    --cxx and -std=c++20, -fsyntax-only: each must be self-contained and warn about nothing;
  * every --consumer translation unit, and one that includes every header, with each compiler
    found (--cxx, then --other-cxx when it exists; a missing one is said and skipped), at
    -O2 (flow-based warnings such as -Wnull-dereference need the optimiser), once with
    -std=c++20 and once with the newest standard and -fno-rtti;
  * <magpie/magpie.h> with -fno-exceptions, which must fail and say that magpie needs
    exceptions (magpie/detail/language.h checks it) rather than fail somewhere inside;
  * every public header (magpie/*.h) alone with -std=c++17, with each compiler, which must
    fail with, as its first error, the line saying that magpie needs C++20: each includes
    magpie/detail/language.h first.

It exits 0 when all of that holds, else prints each failing command and what it printed.
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

# What a strict engine build turns on. -Werror is added to every compile.
CONSUMER_WARNINGS = [
    "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wconversion", "-Wsign-conversion",
    "-Wold-style-cast", "-Wnon-virtual-dtor", "-Woverloaded-virtual", "-Wundef", "-Wcast-align",
    "-Wnull-dereference", "-Wdouble-promotion",
]

# The messages magpie/detail/language.h gives a build without exceptions, or before C++20.
NO_EXCEPTIONS_MESSAGE = "magpie needs C++ exceptions"
OLD_STANDARD_MESSAGE = "magpie needs C++20 or later"


def newest_standard(compiler):
    """The newest -std the compiler (a command: a launcher such as ccache may lead it) knows
    of C++23's two spellings."""
    for flag in ("-std=c++23", "-std=c++2b"):
        probe = subprocess.run(compiler + [flag, "-x", "c++", "-fsyntax-only", "-"], input="", capture_output=True, text=True)
        if probe.returncode == 0:
            return flag
    return "-std=c++20"


def compile_one(command):
    """Runs one compile: (command, return code, what it printed)."""
    result = subprocess.run(command, capture_output=True, text=True)
    return command, result.returncode, result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cxx", required=True, help="the project's C++ compiler")
    parser.add_argument("--other-cxx", default="", help="a second compiler, used when it exists")
    parser.add_argument("--include", action="append", required=True,
                        help="an include directory: the first holds magpie/, a later one config.h")
    parser.add_argument("--consumer", action="append", default=[], help="a consumer translation unit")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    header_root = os.path.join(args.include[0], "magpie")
    headers = sorted(os.path.relpath(os.path.join(folder, name), args.include[0])
                     for folder, _, names in os.walk(header_root) for name in names if name.endswith(".h"))
    if not headers:
        sys.exit(f"check_headers: no headers under {header_root}")
    include_flags = [flag for folder in args.include for flag in ("-I", os.path.abspath(folder))]

    compilers = [args.cxx.split()]
    if args.other_cxx:
        other = args.other_cxx.split()
        if shutil.which(other[0]):
            compilers.append(other)
        else:
            print(f"check_headers: {other[0]} not found: checked with {args.cxx} only")

    with tempfile.TemporaryDirectory() as scratch:
        def source(name, text):
            path = os.path.join(scratch, name)
            with open(path, "w") as out:
                out.write(text)
            return path

        strict = CONSUMER_WARNINGS + ["-Werror"] + include_flags
        commands = []
        for header in headers:
            alone = source(header.replace("/", "_") + ".cpp", f"#include <{header}>\n")
            commands.append(compilers[0] + ["-std=c++20", "-fsyntax-only"] + strict + [alone])
        every_header = source("every_header.cpp", "".join(f"#include <{h}>\n" for h in headers))
        consumers = [every_header] + [os.path.abspath(path) for path in args.consumer]
        for compiler in compilers:
            newest = newest_standard(compiler)
            print(f"check_headers: {' '.join(compiler)}: C++20 and {newest}")
            for flags in (["-std=c++20"], [newest, "-fno-rtti"]):
                for tu in consumers:
                    commands.append(compiler + flags + ["-O2", "-c", "-o", os.devnull] + strict + [tu])

        failures = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for command, code, printed in pool.map(compile_one, commands):
                if code != 0:
                    failures.append((command, printed))

        no_exceptions = source("no_exceptions.cpp", "#include <magpie/magpie.h>\n")
        for compiler in compilers:
            command = compiler + ["-std=c++20", "-fno-exceptions", "-fsyntax-only"] + include_flags + [no_exceptions]
            _, code, printed = compile_one(command)
            if code == 0 or NO_EXCEPTIONS_MESSAGE not in printed:
                failures.append((command, f"expected a failure naming '{NO_EXCEPTIONS_MESSAGE}'; got:\n{printed}"))

        public_headers = [h for h in headers if "/" not in h[len("magpie/"):]]
        old_standard = [compiler + ["-std=c++17", "-fsyntax-only"] + include_flags
                        + [source("old_" + h.replace("/", "_") + ".cpp", f"#include <{h}>\n")]
                        for compiler in compilers for h in public_headers]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for command, code, printed in pool.map(compile_one, old_standard):
                errors = [line for line in printed.splitlines() if " error: " in line]
                if code == 0 or not errors or OLD_STANDARD_MESSAGE not in errors[0]:
                    failures.append((command, f"expected a first error naming '{OLD_STANDARD_MESSAGE}'; got:\n{printed}"))

    for command, printed in failures:
        print("FAILED: " + " ".join(command))
        print(printed.rstrip())
    checked = len(commands) + len(compilers) + len(old_standard)
    print(f"check_headers: {checked - len(failures)} of {checked} compiles as expected "
          f"({len(headers)} headers alone; compilers: {'; '.join(' '.join(c) for c in compilers)})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
