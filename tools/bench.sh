#!/usr/bin/env bash
# The main job: builds release and runs the benchmarks, saving JSON under bench/results/.
# Until the benchmark suite lands (issue: benchmark suite beside oneTBB), these are the
# micro-benchmarks of the lock-free parts: deque push+pop and steal, event-count costs.
#   tools/bench.sh            all micro-benchmarks, 5 repetitions each (medians printed)
#   tools/bench.sh --quick    one short repetition each
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh bench

repetitions=5
min_time=0.2
if [ "${1:-}" = --quick ]; then repetitions=1; min_time=0.05; fi

dir=build/release
if [ -f "$dir/build.ninja" ]; then
  meson setup --reconfigure "$dir" --buildtype=release -Dtests=false -Dbench=true >/dev/null
else
  meson setup "$dir" --buildtype=release -Dtests=false -Dbench=true >/dev/null
fi
meson compile -C "$dir" >/dev/null

mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
for workload in deque event_count; do
  echo "=== $workload (magpie), median of $repetitions"
  "$dir/bench/bench_${workload}_magpie" \
    --benchmark_repetitions=$repetitions \
    --benchmark_report_aggregates_only=true \
    --benchmark_min_time=$min_time \
    --benchmark_out="bench/results/${workload}-${stamp}.json" \
    --benchmark_out_format=json 2>&1 | grep -vE "_(mean|stddev|cv)\b"
done
echo "results: bench/results/*-${stamp}.json"
