#!/usr/bin/env python3
"""Compiles every C++ code block of README.md and docs/*.md against include/.

A fenced block whose info string starts with `cpp` is compiled; any other info string
(`sh`, `text`, `unreal`, none) is prose and left alone. Each compiled block is one
translation unit that starts with `#include <magpie/magpie.h>`:

  ```cpp        a fragment: its `#include` lines go to the top of the file and the rest
                becomes the body of a function, so it may declare variables and local
                types, call functions it declares (`int read_level();`) and use
                statements. Unused names are allowed in fragments.
  ```cpp file   a whole source file at namespace scope: function definitions, types,
                templates. A block that defines `main` is always compiled this way.

Everything a block uses that magpie does not provide is declared in the block itself, so
what a reader sees is all the compiler sees. Blocks are checked with the flags magpie's
own build uses (C++20, -Wall -Wextra -Wpedantic -Werror), -fsyntax-only.

  tools/check_doc_snippets.py [--build-dir build/test-plain] [--cxx g++] [FILE.md ...]
  tools/check_doc_snippets.py --self-test

--build-dir names a configured meson build directory of magpie: the generated
<build>/include/magpie/config.h comes from there (`meson setup` writes it).
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)\s*(.*)$")
MAIN = re.compile(r"^\s*(int|auto)\s+main\s*\(", re.MULTILINE)
INCLUDE = re.compile(r"^\s*#\s*include\b")
BASE_FLAGS = ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
FRAGMENT_FLAGS = ["-Wno-unused-variable", "-Wno-unused-but-set-variable",
                  "-Wno-unused-parameter", "-Wno-unused-local-typedefs",
                  "-Wno-unused-function", "-Wno-vexing-parse"]


class Block:
    """Block is one fenced code block: where it is, its info string and its text."""

    def __init__(self, path, line, language, attributes, text):
        self.path = path
        self.line = line
        self.language = language
        self.attributes = attributes
        self.text = text

    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"

    def line_directive(self):
        """line_directive makes the compiler name the Markdown file and line."""
        return f'#line {self.line + 1} "{os.path.relpath(self.path, ROOT)}"\n'

    def is_file(self):
        return "file" in self.attributes or bool(MAIN.search(self.text))


def extract_blocks(path, text):
    """extract_blocks returns the fenced blocks of a Markdown text, in order."""
    blocks = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence, language, rest = match.groups()
        start = index + 1
        index = start
        body = []
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(fence[0] * len(fence)) and set(closing) <= {fence[0]}:
                break
            line = lines[index]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            index += 1
        else:
            raise SystemExit(f"{os.path.relpath(path, ROOT)}:{start}: unclosed code block")
        blocks.append(Block(path, start, language, rest.split(), "\n".join(body) + "\n"))
        index += 1
    return blocks


def translation_unit(block):
    """translation_unit returns the source the compiler sees for a block."""
    if block.is_file():
        return "#include <magpie/magpie.h>\n" + block.line_directive() + block.text
    includes = [line for line in block.text.splitlines() if INCLUDE.match(line)]
    body = "\n".join("" if INCLUDE.match(line) else line
                     for line in block.text.splitlines())
    return ("#include <magpie/magpie.h>\n" + "\n".join(includes) +
            "\nvoid magpie_doc_snippet() {\n" + block.line_directive() + body + "\n}\n")


def compile_block(block, cxx, include_dirs):
    """compile_block returns None when the block compiles, else the compiler's output."""
    flags = list(BASE_FLAGS)
    if not block.is_file():
        flags += FRAGMENT_FLAGS
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "snippet.cpp")
        with open(source, "w", encoding="utf-8") as out:
            out.write(translation_unit(block))
        command = [cxx, *flags] + [f"-I{d}" for d in include_dirs] + [source]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode == 0:
        return None
    return result.stdout + result.stderr


def checked_blocks(paths):
    """checked_blocks returns the blocks of the given files that are compiled."""
    blocks = []
    for path in paths:
        with open(path, encoding="utf-8") as source:
            for block in extract_blocks(path, source.read()):
                if block.language in ("c++", "C++", "cxx", "cc"):
                    raise SystemExit(f"{block.where()}: write ```cpp (compiled) or another "
                                     f"info string such as ```text or ```unreal (not compiled)")
                if block.language == "cpp":
                    blocks.append(block)
    return blocks


def default_paths():
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))


def check(paths, cxx, build_dir, jobs):
    config = os.path.join(build_dir, "include", "magpie", "config.h")
    if not os.path.isfile(config):
        raise SystemExit(f"{config} is missing: configure a build first "
                         f"(meson setup {os.path.relpath(build_dir, ROOT)})")
    include_dirs = [os.path.join(ROOT, "include"), os.path.join(build_dir, "include")]
    blocks = checked_blocks(paths)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda b: compile_block(b, cxx, include_dirs), blocks))
    failures = 0
    for block, output in zip(blocks, results):
        if output is not None:
            failures += 1
            print(f"=== {block.where()}: does not compile ({'file' if block.is_file() else 'fragment'})")
            print(output.rstrip())
    print(f"check_doc_snippets: {len(blocks) - failures} of {len(blocks)} C++ blocks compile")
    return failures == 0


SELF_TEST = """\
# sample

```cpp
#include <vector>
int read_level();
magpie::task<int> load = magpie::launch("load", [] { return read_level(); });
std::vector<int> v{load.get_result()};
```

```cpp file
int twice(int x) { return 2 * x; }
```

```text
this is not C++ {
```

```cpp
undeclared_function();
```

   ```cpp
   int indented = 0;
   ```
"""


def self_test(cxx, build_dir):
    """self_test checks the extraction and that a broken block fails."""
    blocks = checked_blocks_from_text(SELF_TEST)
    assert [b.language for b in extract_blocks("self-test.md", SELF_TEST)] == \
        ["cpp", "cpp", "text", "cpp", "cpp"], "extraction"
    assert [b.is_file() for b in blocks] == [False, True, False, False], "modes"
    assert blocks[3].text == "int indented = 0;\n", "indentation"
    include_dirs = [os.path.join(ROOT, "include"), os.path.join(build_dir, "include")]
    outcomes = [compile_block(b, cxx, include_dirs) is None for b in blocks]
    assert outcomes == [True, True, False, True], f"compile outcomes {outcomes}"
    print("check_doc_snippets: self-test passed")
    return True


def checked_blocks_from_text(text):
    return [b for b in extract_blocks(os.path.join(ROOT, "self-test.md"), text)
            if b.language == "cpp"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="Markdown files (default: README.md docs/*.md)")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "test-plain"))
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    if args.self_test:
        return 0 if self_test(args.cxx, build_dir) else 1
    paths = [os.path.abspath(p) for p in args.files] or default_paths()
    return 0 if check(paths, args.cxx, build_dir, args.jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
