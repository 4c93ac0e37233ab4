#!/usr/bin/env bash
# install-check.sh <build dir>: installs that build into a scratch prefix and builds two
# small consumers against it — one with CMake's find_package(magpie), one with pkg-config.
set -euo pipefail
build=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

meson install -C "$build" --destdir "$scratch/root" --quiet >/dev/null
prefix="$scratch/root$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
libdir=$(dirname "$(find "$prefix" -name 'libmagpie.so' -o -name 'libmagpie.a' | head -n 1)")

cmake -S "$root/test/install" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/cmake" >/dev/null
LD_LIBRARY_PATH="$libdir" "$scratch/cmake/consumer"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
c++ -std=c++20 "$root/test/install/consumer.cpp" -o "$scratch/pkg-consumer" \
  $(pkg-config --define-variable=prefix="$prefix" --cflags --libs magpie)
LD_LIBRARY_PATH="$libdir" "$scratch/pkg-consumer"
echo "install check: ok"
