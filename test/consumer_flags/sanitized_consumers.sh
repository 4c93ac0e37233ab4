#!/usr/bin/env bash
# sanitized_consumers.sh <install prefix> <mode> [compiler...]: builds consumer programs as an
# engine's sanitizer build would — its own translation units sanitized, linked against an
# installed magpie — and runs each with 0, 1, 2, 4 and 16 workers.
#   mode asan   -O2 -fsanitize=address,undefined -fno-sanitize-recover=all; meaningful
#               against any build of the library (a release install included)
#   mode tsan   -O2 -fsanitize=thread; meaningful only against a library built with
#               -Db_sanitize=thread: TSan must see both sides of every synchronisation
#   mode lto    -O2 -flto against a static library built with -Db_lto=true
# The programs: test/install/consumer.cpp, test/consumer_flags/*.cpp, the README's first
# program and examples/ (when CLI11 is installed). Compilers: g++ by default. Each build is
# bounded by MAGPIE_CONSUMER_BUILD_SECONDS (600), each run by 300 seconds.
set -euo pipefail
prefix=$(realpath "$1")
mode=$2
shift 2
compilers=("$@")
[ ${#compilers[@]} -eq 0 ] && compilers=(g++)
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
libdir=$(dirname "$(find "$prefix" -name 'libmagpie.a' -o -name 'libmagpie.so' | head -n 1)")

case $mode in
  asan) flags=(-O2 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer) ;;
  tsan) flags=(-O2 -g -fsanitize=thread) ;;
  lto) flags=(-O2 -flto) ;;
  *) echo "sanitized_consumers: unknown mode '$mode'" >&2; exit 2 ;;
esac
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 suppressions=$prefix/share/magpie/tsan.supp}  # the installed copy

python3 - "$root/README.md" "$scratch/first_program.cpp" <<'PY'
import re, sys
section = open(sys.argv[1]).read().split("## A first program", 1)[1]
open(sys.argv[2], "w").write(re.search(r"```cpp\n(.*?)```", section, re.S).group(1))
PY
# program name, source, then the arguments of one run; {threads} is the thread count.
programs=(
  "consumer|$root/test/install/consumer.cpp|"
  "first_program|$scratch/first_program.cpp|"
  "native_api|$root/test/consumer_flags/native_api.cpp|"
  "compat_api|$root/test/consumer_flags/compat_api.cpp|"
)
if [ -f /usr/include/CLI/CLI.hpp ]; then
  programs+=(
    "fib|$root/examples/fib.cpp|24 --threads {threads} --cutoff 0,12"
    "quicksort|$root/examples/quicksort.cpp|300000 --threads {threads}"
    "nqueens|$root/examples/nqueens.cpp|8 --threads {threads}"
    "matmul|$root/examples/matmul.cpp|96 --threads {threads}"
    "reduce|$root/examples/reduce.cpp|500000 --threads {threads}"
    "engine_frame|$root/examples/engine_frame.cpp|200 20 --threads {threads}"
    "taskgraph_port|$root/examples/taskgraph_port.cpp|2000 3 --threads {threads}"
  )
fi

failed=0
for cxx in "${compilers[@]}"; do
  for entry in "${programs[@]}"; do
    IFS='|' read -r name source arguments <<<"$entry"
    exe=$scratch/$name-$(basename "$cxx")
    # A build that runs past its bound fails like any other (an LTO link compiles the library).
    if ! timeout "${MAGPIE_CONSUMER_BUILD_SECONDS:-600}" "$cxx" -std=c++20 "${flags[@]}" "$source" -o "$exe" \
        -I"$prefix/include" -L"$libdir" -lmagpie -pthread; then
      echo "FAILED: $cxx $mode $name did not build"
      failed=$((failed + 1))
      continue
    fi
    for workers in 0 1 2 4 16; do
      threads=$((workers + 1))
      # shellcheck disable=SC2086
      if ! MAGPIE_NUM_THREADS=$threads timeout 300 "$exe" ${arguments//\{threads\}/$threads} >"$exe.out" 2>&1; then
        echo "FAILED: $cxx $mode $name with $workers workers:"
        tail -n 30 "$exe.out"
        failed=$((failed + 1))
      fi
    done
    echo "$cxx $mode $name: ran with 0 1 2 4 16 workers"
  done
done
[ "$failed" -eq 0 ] || { echo "sanitized_consumers: $failed builds or runs failed" >&2; exit 1; }
echo "sanitized_consumers: ok ($mode; ${compilers[*]})"
