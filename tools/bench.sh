#!/usr/bin/env bash
# The main job: builds release, runs the workloads beside oneTBB and prints the ratio
# table, then the micro-benchmarks of the lock-free parts. JSON goes to bench/results/.
#   tools/bench.sh            full sizes, 5 timed runs each (medians)
#   tools/bench.sh --quick    smaller sizes, 3 runs
#   tools/bench.sh --threads 1 4 8 16    thread counts other than 1 and all
#   tools/bench.sh --taskflow DIR        also the Taskflow peers, from a Taskflow checkout
#                                        (or TASKFLOW_DIR=DIR; a build set up with one keeps it)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh bench

repetitions=5
min_time=0.2
harness_flags=(--runs 5)
taskflow_dir=${TASKFLOW_DIR:-}
while [ $# -gt 0 ]; do
  case $1 in
    --quick) repetitions=1; min_time=0.05; harness_flags=(--runs 3 --quick); shift ;;
    --taskflow) [ $# -ge 2 ] || { echo "$0: --taskflow needs a directory" >&2; exit 2; }
                taskflow_dir=$(realpath "$2"); shift 2 ;;
    --threads) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do harness_flags+=(--threads "$1"); shift; done ;;
    *) echo "usage: $0 [--quick] [--threads N...] [--taskflow DIR]" >&2; exit 2 ;;
  esac
done

dir=build/release
setup_flags=(--buildtype=release -Dtests=false -Dbench=true)
if [ -n "$taskflow_dir" ]; then setup_flags+=("-Dtaskflow_dir=$taskflow_dir"); fi
if [ -f "$dir/build.ninja" ]; then
  meson setup --reconfigure "$dir" "${setup_flags[@]}" >/dev/null
else
  meson setup "$dir" "${setup_flags[@]}" >/dev/null
fi
meson compile -C "$dir" >/dev/null

mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
run_json="bench/results/run-${stamp}.jsonl"
git=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
for workload in scheduler tasks fork_join; do
  for system in magpie tbb taskflow serial; do
    binary="$dir/bench/bench_${workload}_${system}"
    [ -x "$binary" ] || continue
    echo "=== $workload ($system)"
    "$binary" "${harness_flags[@]}" --json "$run_json" --git "$git"
  done
done
echo
echo "=== table ($(nproc) hardware threads, $(uname -m), $(date -u +%Y-%m-%d)); JSON: $run_json"
python3 tools/bench_table.py "$run_json"
echo
for workload in deque event_count delegate; do
  echo "=== $workload (magpie), median of $repetitions"
  "$dir/bench/bench_${workload}_magpie" \
    --benchmark_repetitions=$repetitions \
    --benchmark_report_aggregates_only=true \
    --benchmark_min_time=$min_time \
    --benchmark_out="bench/results/${workload}-${stamp}.json" \
    --benchmark_out_format=json 2>&1 | grep -vE "_(mean|stddev|cv)\b"
done
echo "results: bench/results/*-${stamp}.json"
