#!/usr/bin/env python3
"""Checks that the root CMakeLists.txt builds what meson builds.

The library's sources (lib/meson.build, lib/clients/meson.build, lib/compat/meson.build)
must be the ones CMakeLists.txt lists, and the macros of the generated magpie/config.h
(meson.build's configuration) the ones CMakeLists.txt writes, so that the two builds
cannot drift apart. Exits 1 and names each difference.
  tools/check_cmake_sources.py [--self-test]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MESON_SOURCE_FILES = ["lib/meson.build", "lib/clients/meson.build", "lib/compat/meson.build"]


def strip_comments(text, marker):
    return "\n".join(line.split(marker, 1)[0] for line in text.splitlines())


def meson_sources(root):
    """meson_sources returns the .cpp files the library's meson.build files name."""
    sources = set()
    for name in MESON_SOURCE_FILES:
        folder = Path(name).parent
        text = strip_comments((root / name).read_text(), "#")
        for source in re.findall(r"'([^'\s]+\.cpp)'", text):
            sources.add((folder / source).as_posix())
    return sources


def cmake_sources(text):
    """cmake_sources returns the lib/ .cpp files a CMakeLists.txt names."""
    return set(re.findall(r"(?<![\w/])(lib/[\w/]+\.cpp)\b", strip_comments(text, "#")))


def meson_config_macros(text):
    """meson_config_macros returns the macros meson.build's configuration sets."""
    return set(re.findall(r"config\.set\w*\(\s*'(MAGPIE_\w+)'", strip_comments(text, "#")))


def cmake_config_macros(text):
    """cmake_config_macros returns the macros the CMakeLists.txt config header defines."""
    return set(re.findall(r"#define\s+(MAGPIE_\w+)", text))


def differences(root):
    """differences returns one line per disagreement between the two builds."""
    cmake_text = (root / "CMakeLists.txt").read_text()
    found = []
    meson_set, cmake_set = meson_sources(root), cmake_sources(cmake_text)
    found += [f"{s}: built by meson, missing from CMakeLists.txt" for s in sorted(meson_set - cmake_set)]
    found += [f"{s}: in CMakeLists.txt, not built by meson" for s in sorted(cmake_set - meson_set)]
    meson_macros = meson_config_macros((root / "meson.build").read_text())
    cmake_macros = cmake_config_macros(cmake_text)
    found += [f"config.h macro {m}: set by meson.build, missing from CMakeLists.txt"
              for m in sorted(meson_macros - cmake_macros)]
    found += [f"config.h macro {m}: in CMakeLists.txt, not set by meson.build"
              for m in sorted(cmake_macros - meson_macros)]
    for source in sorted(cmake_set):
        if not (root / source).is_file():
            found.append(f"{source}: named by CMakeLists.txt, no such file")
    return found


def self_test():
    """self_test checks the parsers on small texts: a drift must be seen."""
    meson = "x = library('x',\n  'a.cpp',  # 'old.cpp'\n  'b.cpp')\n"
    assert set(re.findall(r"'([^'\s]+\.cpp)'", strip_comments(meson, "#"))) == {"a.cpp", "b.cpp"}
    cmake = "add_library(x\n  lib/a.cpp\n  # lib/gone.cpp\n  lib/clients/b.cpp)\n"
    assert cmake_sources(cmake) == {"lib/a.cpp", "lib/clients/b.cpp"}
    assert meson_config_macros("config.set10('MAGPIE_A', x)\nconfig.set_quoted('MAGPIE_B', v)") == {
        "MAGPIE_A", "MAGPIE_B"}
    assert cmake_config_macros('#define MAGPIE_A ${a}\n#define MAGPIE_B "1"') == {"MAGPIE_A", "MAGPIE_B"}


def main():
    self_test()
    if "--self-test" in sys.argv[1:]:
        return 0
    found = differences(ROOT)
    for line in found:
        print(f"check_cmake_sources: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
