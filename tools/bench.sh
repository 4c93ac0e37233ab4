#!/usr/bin/env bash
# The main job: installs what is missing, builds release, runs every workload on every
# system that was built (magpie; oneTBB; Taskflow, libfork and OpenMP when present; the serial
# baselines), prints the ratio table and writes the chart, runs examples/engine_frame (a
# game frame on the tick manager), then the micro-benchmarks of the lock-free parts. JSON lines go to bench/results/run-<stamp>.jsonl, the chart beside them.
#   tools/bench.sh            full sizes, 3 rounds of 3 timed runs each; the systems take
#                             turns round by round, and the table shows the median round
#   tools/bench.sh --quick    smaller sizes, 1 round of 5 runs
#   tools/bench.sh --rounds N rounds of turns (a busy host slows one round, not a system)
#   tools/bench.sh --threads 1 4 8 16    thread counts other than 1 and all
#   tools/bench.sh --sweep --only fork_join   three sizes per fork-join workload (fib 30–35,
#                                        skynet 10^6–10^8, nqueens 12–14, matmul 512–2048; the
#                                        other suites' shapes: nqueens_board 12–14, integrate
#                                        ~10^7–10^8 calls, matmul_quadrants 128–1024), 3 runs
#                                        each; a size predicted to run over 4 s is skipped
#   FORK_JOIN_ONLY=uts tools/bench.sh --only fork_join   one fork-join workload only (or a comma list)
#   tools/bench.sh --taskflow DIR        also the Taskflow peers, from a Taskflow checkout
#                                        (or TASKFLOW_DIR=DIR; a build set up with one keeps it)
#   tools/bench.sh --libfork DIR         also the libfork peers of the coroutine fib and the
#                                        fork-join rows, from a libfork v3 checkout (or
#                                        LIBFORK_DIR=DIR; kept the same way)
#   tools/bench.sh --only graph          only the named workload folders (repeatable)
#   tools/bench.sh --no-micro            skip the Google Benchmark micro-benchmarks
#   tools/bench.sh --baseline FILE       afterwards, tools/bench_diff.py FILE against this run
#   tools/bench.sh --lto                 build with link-time optimisation (-Db_lto=true)
#   BENCH_BUILD_DIR=build/x tools/bench.sh   build and run in build/x instead of build/release
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh bench

repetitions=5
min_time=0.2
runs=3
rounds=            # --rounds N; else 3, or 1 with --quick or --sweep
default_rounds=3
size_flag=()      # --quick or --sweep
thread_flags=()
taskflow_dir=${TASKFLOW_DIR:-}
libfork_dir=${LIBFORK_DIR:-}
only=()
micro=1
baseline=
lto=false
while [ $# -gt 0 ]; do
  case $1 in
    --quick) repetitions=1; min_time=0.05; size_flag=(--quick); runs=5; default_rounds=1; shift ;;
    --rounds) [ $# -ge 2 ] || { echo "$0: --rounds needs a count" >&2; exit 2; }
              rounds=$2; shift 2 ;;
    --taskflow) [ $# -ge 2 ] || { echo "$0: --taskflow needs a directory" >&2; exit 2; }
                taskflow_dir=$(realpath "$2"); shift 2 ;;
    --libfork) [ $# -ge 2 ] || { echo "$0: --libfork needs a directory" >&2; exit 2; }
               libfork_dir=$(realpath "$2"); shift 2 ;;
    --sweep) runs=3; default_rounds=1; size_flag=(--sweep); shift ;;
    --threads) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do thread_flags+=(--threads "$1"); shift; done ;;
    --only) [ $# -ge 2 ] || { echo "$0: --only needs a workload" >&2; exit 2; }
            only+=("$2"); shift 2 ;;
    --no-micro) micro=0; shift ;;
    --lto) lto=true; shift ;;
    --baseline) [ $# -ge 2 ] || { echo "$0: --baseline needs a file" >&2; exit 2; }
                baseline=$(realpath "$2"); shift 2 ;;
    *) echo "usage: $0 [--quick | --sweep] [--rounds N] [--threads N...] [--taskflow DIR] [--libfork DIR] [--only WORKLOAD]... [--no-micro] [--lto] [--baseline FILE]" >&2
       exit 2 ;;
  esac
done

rounds=${rounds:-$default_rounds}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --rounds needs a positive count" >&2; exit 2; }

dir=${BENCH_BUILD_DIR:-build/release}  # BENCH_BUILD_DIR: another build folder (it gets the same options)
setup_flags=(--buildtype=release -Dwerror=true -Dtests=false -Dbench=true "-Db_lto=$lto")
if [ -n "$taskflow_dir" ]; then setup_flags+=("-Dtaskflow_dir=$taskflow_dir"); fi
if [ -n "$libfork_dir" ]; then setup_flags+=("-Dlibfork_dir=$(realpath "$libfork_dir")"); fi
if [ -f "$dir/build.ninja" ]; then
  # `meson configure`, not `setup --reconfigure`: meson 1.0's reconfigure drops b_* options
  meson configure "$dir" "${setup_flags[@]}" >/dev/null
else
  meson setup "$dir" "${setup_flags[@]}" >/dev/null
fi
if ! build_log=$(meson compile -C "$dir" 2>&1); then
  echo "$build_log" | grep -E "FAILED|error" | head -20 >&2
  echo "$0: the build in $dir failed (above); nothing measured" >&2
  exit 1
fi

# The chart needs matplotlib: Debian's python3-matplotlib lives in /usr/bin/python3, which
# a python3 earlier on PATH (pyenv, a venv) may not see.
python=python3
if ! "$python" -c "import matplotlib" 2>/dev/null && [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; fi

mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
run_json="bench/results/run-${stamp}.jsonl"
git=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
started=$SECONDS
workloads=(scheduler tasks fork_join graph coroutine timers tick taskgraph)
[ ${#only[@]} -gt 0 ] && workloads=("${only[@]}")
# Round by round, every system of a workload takes its turn: a slow spell of a shared host
# then costs one round of whichever systems ran in it, and the table's median round drops it.
for workload in "${workloads[@]}"; do
  for ((round = 1; round <= rounds; round++)); do
    for system in magpie tbb taskflow libfork omp heap std serial; do
      binary="$dir/bench/bench_${workload}_${system}"
      [ -x "$binary" ] || binary="$dir/bench/$workload/bench_${workload}_${system}"  # a workload with its own meson.build
      [ -x "$binary" ] || continue
      echo "=== $workload ($system)$([ "$rounds" -gt 1 ] && echo ", round $round of $rounds")"
      "$binary" --runs "$runs" "${size_flag[@]}" "${thread_flags[@]}" --json "$run_json" --git "$git"
    done
  done
done
echo
echo "=== table ($(nproc) hardware threads, $(uname -m), $(date -u +%Y-%m-%d), $rounds round(s) of $runs runs, $((SECONDS - started)) s); JSON: $run_json"
"$python" tools/bench_table.py "$run_json"
echo "(peak memory per measurement: tools/bench_table.py --memory $run_json)"
"$python" tools/bench_chart.py "$run_json" ||
  echo "no chart: python3-matplotlib missing for $python (tools/install-deps.sh bench)"
# The tick manager's example: a game loop on a world, frame time per group.
if [ -x "$dir/examples/engine_frame" ] && { [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" tick "* ]]; }; then
  echo
  echo "=== examples/engine_frame: a game thread driving a world, a render thread, 2000 actors"
  "$dir/examples/engine_frame" || echo "engine_frame FAILED (above)"
fi
if [ -n "$baseline" ]; then
  echo
  echo "=== regression check against $baseline"
  "$python" tools/bench_diff.py "$baseline" "$run_json" || echo "magpie regressed beyond the threshold (see above)"
fi
[ "$micro" = 1 ] || exit 0
echo
for workload in deque event_count delegate; do
  [ -x "$dir/bench/bench_${workload}_magpie" ] || continue
  echo "=== $workload (magpie), median of $repetitions"
  "$dir/bench/bench_${workload}_magpie" \
    --benchmark_repetitions=$repetitions \
    --benchmark_report_aggregates_only=true \
    --benchmark_min_time=$min_time \
    --benchmark_out="bench/results/${workload}-${stamp}.json" \
    --benchmark_out_format=json 2>&1 | grep -vE "_(mean|stddev|cv)\b"
done
echo "results: bench/results/*-${stamp}.json*; total $((SECONDS - started)) s"
