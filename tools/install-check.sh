#!/usr/bin/env bash
# install-check.sh <build dir> [route...]: builds and runs test/install/consumer.cpp and the
# README's first program (checking that it prints what the README says) through each
# documented way of using magpie:
#   package          meson install of <build dir> into a scratch prefix, then CMake's
#                    find_package(magpie)
#   pkg-config       the same install, then `c++ $(pkg-config --cflags --libs magpie)`, with
#                    only magpie's own .pc file visible and no -std flag of the consumer's
#   meson-subproject a consumer meson project with subprojects/magpie linked to the checkout
#   add-subdirectory a consumer CMake project with add_subdirectory(<checkout>)
#   fetchcontent     a consumer CMake project with FetchContent from the checkout
# With no route named, all of them.
set -euo pipefail
build=$(realpath "$1"); shift
routes=("$@")
[ ${#routes[@]} -eq 0 ] && routes=(package pkg-config meson-subproject add-subdirectory fetchcontent)
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
jobs=${MAGPIE_INSTALL_CHECK_JOBS:-2}
cmake_launcher=()
if command -v ccache >/dev/null; then
  cmake_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths under the scratch folder hash relative to each build, so the CMake routes' library
  # builds share ccache entries with each other and with earlier runs.
  export CCACHE_BASEDIR=$scratch
fi

# The README's first program and the line it says the program prints.
python3 - "$root/README.md" "$scratch/first_program.cpp" "$scratch/first_program.expected" <<'PY'
import re, sys
readme = open(sys.argv[1]).read()
section = readme.split("## A first program", 1)[1]
program = re.search(r"```cpp\n(.*?)```", section, re.S)
printed = re.search(r"It prints `([^`]*)`", section)
if not program or not printed:
    sys.exit("install check: README.md has no first program, or no 'It prints `...`' after it")
open(sys.argv[2], "w").write(program.group(1))
open(sys.argv[3], "w").write(printed.group(1) + "\n")
PY
first_program_prints() {  # first_program_prints <executable>: runs it, compares with the README
  local printed
  printed=$("$@")
  if [ "$printed" != "$(cat "$scratch/first_program.expected")" ]; then
    echo "install check: the README's first program printed '$printed', not '$(cat "$scratch/first_program.expected")'" >&2
    exit 1
  fi
  echo "first program: $printed"
}

prefix=
install_once() {  # meson install of the build into $scratch/root, once
  [ -n "$prefix" ] && return
  meson install -C "$build" --destdir "$scratch/root" --quiet >/dev/null
  prefix="$scratch/root$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
  libdir=$(dirname "$(find "$prefix" -name 'libmagpie.so' -o -name 'libmagpie.a' | head -n 1)")
  [ -f "$prefix/share/doc/magpie/LICENSE" ] || { echo "install check: LICENSE not installed" >&2; exit 1; }
  [ -f "$prefix/share/magpie/tsan.supp" ] || { echo "install check: share/magpie/tsan.supp not installed" >&2; exit 1; }
}

cmake_consumer() {  # cmake_consumer <route> <cmake args...>
  local route=$1; shift
  cmake -S "$root/test/install" -B "$scratch/cmake-$route" -DCMAKE_BUILD_TYPE=Release \
    "-DMAGPIE_ROUTE=$route" "-DMAGPIE_FIRST_PROGRAM=$scratch/first_program.cpp" "${cmake_launcher[@]}" "$@" >/dev/null
  cmake --build "$scratch/cmake-$route" -j "$jobs" >/dev/null
  "$scratch/cmake-$route/consumer"
  first_program_prints "$scratch/cmake-$route/first_program"
}

for route in "${routes[@]}"; do
  echo "--- install check: $route"
  case $route in
    package)
      install_once
      LD_LIBRARY_PATH="$libdir" cmake_consumer package -DCMAKE_PREFIX_PATH="$prefix" ;;
    pkg-config)
      install_once
      requires=$(PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config --print-requires magpie)
      [ -z "$requires" ] || { echo "install check: magpie.pc requires $requires" >&2; exit 1; }
      # shellcheck disable=SC2046
      c++ "$root/test/install/consumer.cpp" -o "$scratch/pkg-consumer" \
        $(PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config --define-variable=prefix="$prefix" \
          --cflags --libs magpie)
      LD_LIBRARY_PATH="$libdir" "$scratch/pkg-consumer"
      # shellcheck disable=SC2046
      c++ "$scratch/first_program.cpp" -o "$scratch/pkg-first-program" \
        $(PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config --define-variable=prefix="$prefix" \
          --cflags --libs magpie)
      first_program_prints "$scratch/pkg-first-program" ;;
    meson-subproject)
      consumer=$scratch/meson-consumer
      mkdir -p "$consumer/subprojects"
      cp "$root/test/install/meson_subproject/meson.build" "$root/test/install/consumer.cpp" \
        "$scratch/first_program.cpp" "$consumer/"
      ln -s "$root" "$consumer/subprojects/magpie"
      meson setup "$consumer/build" "$consumer" --buildtype=release >/dev/null
      # Plain ninja, as a consumer runs it: builds magpie's library and nothing else of it.
      ninja -C "$consumer/build" -j "$jobs" >/dev/null
      if [ -n "$(find "$consumer/build/subprojects" -path '*/test/*' -o -path '*/bench/*' -o -path '*/examples/*' | head -n 1)" ]; then
        echo "install check: the subproject built magpie's tests, benchmarks or examples" >&2; exit 1
      fi
      "$consumer/build/consumer"
      first_program_prints "$consumer/build/first_program" ;;
    add-subdirectory)
      cmake_consumer add_subdirectory -DMAGPIE_SOURCE_DIR="$root" ;;
    fetchcontent)
      cmake_consumer fetchcontent -DMAGPIE_SOURCE_DIR="$root" ;;
    *) echo "install check: unknown route '$route'" >&2; exit 2 ;;
  esac
done
echo "install check: ok (${routes[*]})"
