#!/usr/bin/env bash
# Contention in counts: builds the counting build (meson -Dcounting=enabled, a release build
# in build/contention) and prints, at 2, 4, 8 and 16 threads, the read-modify-writes on
# shared atomics, the fences and the cache-line moves between threads per call site,
# normalised per task, per tick, per parallel_for loop, per coroutine call and per limited
# piece, for an empty-task batch (attached and not), one-at-a-time launches, a tick frame, a
# parallel_for, a coroutine fork-join and the concurrency limiter's throughput rows
# (bench/contention/magpie.cpp). Counts, not times: a machine with fewer cores runs the
# threads oversubscribed and counts the same operations, save what idle threads do while
# they search. See docs/scheduler.md, "Contention".
#   tools/contention.sh                     2 4 8 16 threads, full sizes (about a minute on 2 cores)
#   tools/contention.sh --threads 2 4       other thread counts
#   tools/contention.sh --quick             smaller sizes
#   CONTENTION_BUILD_DIR=build/x tools/contention.sh   build and run in build/x
# The output also goes to bench/results/contention-<stamp>.txt, headed by the commit and the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=(2 4 8 16)
quick=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=(--quick); shift ;;
    --threads) shift; threads=()
               while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do threads+=("$1"); shift; done
               [ ${#threads[@]} -gt 0 ] || { echo "$0: --threads needs counts" >&2; exit 2; } ;;
    *) echo "usage: $0 [--quick] [--threads N...]" >&2; exit 2 ;;
  esac
done

dir=${CONTENTION_BUILD_DIR:-build/contention}
setup_flags=(--buildtype=release -Dwerror=true -Dcounting=enabled -Dtests=false -Dbench=true -Dexamples=false)
if [ -f "$dir/build.ninja" ]; then
  meson configure "$dir" "${setup_flags[@]}" >/dev/null  # not `setup --reconfigure`: meson 1.0's drops b_* options
else
  meson setup "$dir" "${setup_flags[@]}" >/dev/null
fi
if ! build_log=$(meson compile -C "$dir" bench/bench_contention_magpie 2>&1); then
  echo "$build_log" | grep -E "FAILED|error" | head -20 >&2
  echo "$0: the counting build in $dir failed (above)" >&2
  exit 1
fi

mkdir -p bench/results
out="bench/results/contention-$(date -u +%Y%m%dT%H%M%SZ).txt"
git=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || git="$git-dirty"
{
  echo "contention counts: commit $git, $(nproc) hardware threads, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(date -u +%Y-%m-%d)"
  "$dir/bench/bench_contention_magpie" --threads "${threads[@]}" "${quick[@]}" 2>/dev/null
} | tee "$out"
echo "saved: $out"
