#!/usr/bin/env bash
# The scaling table in one run: the rows that show how magpie scales, at 1, 4, 8 and 16
# threads, beside oneTBB and Taskflow, on the bench executables tools/bench.sh builds.
#   tasks      task_empty_one_at_a_time, task_empty_batch, task_empty_batch_unattached
#   graph      binary_tree, chain, wavefront, random_dag
#   fork_join  fib, skynet, nqueens, matmul, reduce, skewed_head, skewed_tail
#   tick       tick_frame (100k tick functions), tick_frame_1m (a million)
#   coroutine  limiter_n* (the concurrency limiter)
#   scheduler  wake_latency_p50, wake_latency_p99
# Sized to finish inside 8 minutes on a 16-core machine, build excluded: one round of 3 timed
# runs per row, each executable run once per thread count so every row (the million-tick
# frame included) is measured at every count, the systems taking turns.
#   tools/scaling.sh                         1 4 8 16 threads, full sizes
#   tools/scaling.sh --threads 1 2           other thread counts
#   tools/scaling.sh --quick --threads 1 2   small sizes (the executables' --quick), to try it out
#   tools/scaling.sh --taskflow DIR          the Taskflow peers from a checkout (or TASKFLOW_DIR=DIR)
#   tools/scaling.sh --runs N                timed runs per row (default 3)
#   BENCH_BUILD_DIR=build/x tools/scaling.sh    build and run in build/x instead of build/release
#   tools/scaling.sh --out DIR               leave the results in DIR instead of bench/results
# For a machine that can build nothing (no compiler, no packages, no network), build here and
# carry the executables there:
#   tools/scaling.sh --pack build/scaling-pack       build, then copy the executables and every
#                                                    shared library they load (the dynamic
#                                                    loader too) into the folder; measures nothing
#   tools/scaling.sh --packed build/scaling-pack     on the other machine: run the pack's
#                                                    executables through its own loader
# Output: the table (magpie beside the best peer of each row, tools/bench_table.py
# --best-peer) and, in bench/results/, scaling-<stamp>.jsonl (the measurements, for
# tools/bench_table.py and tools/bench_diff.py) and scaling-<stamp>.json (the same with the
# commit, nproc, the CPU model and the options). See docs/benchmarks.md, "Scaling".
set -euo pipefail
cd "$(dirname "$0")/.."

threads=(1 4 8 16)
quick=()
runs=3
taskflow_dir=${TASKFLOW_DIR:-}
pack=
packed=
out=bench/results
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=(--quick); shift ;;
    --pack|--packed|--out)
      [ $# -ge 2 ] || { echo "$0: $1 needs a folder" >&2; exit 2; }
      case $1 in --pack) pack=$2 ;; --packed) packed=$(realpath "$2") ;; --out) out=$2 ;; esac
      shift 2 ;;
    --runs) [ $# -ge 2 ] || { echo "$0: --runs needs a count" >&2; exit 2; }
            runs=$2; shift 2 ;;
    --taskflow) [ $# -ge 2 ] || { echo "$0: --taskflow needs a directory" >&2; exit 2; }
                taskflow_dir=$(realpath "$2"); shift 2 ;;
    --threads) shift; threads=()
               while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do threads+=("$1"); shift; done
               [ ${#threads[@]} -gt 0 ] || { echo "$0: --threads needs counts" >&2; exit 2; } ;;
    *) echo "usage: $0 [--quick] [--threads N...] [--runs N] [--taskflow DIR] [--out DIR] [--pack DIR | --packed DIR]" >&2
       exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --runs needs a positive count" >&2; exit 2; }
for count in "${threads[@]}"; do
  [[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "$0: a thread count must be a positive number, not '$count'" >&2; exit 2; }
done
# workload folder → the systems measured and the rows kept
folders=(tasks graph fork_join tick coroutine scheduler)
systems=(magpie tbb taskflow)

if [ -n "$packed" ]; then
  # A pack holds bin/<executable>, lib/ (the libraries and the loader) and `commit`.
  [ -f "$packed/commit" ] || { echo "$0: $packed is no pack of tools/scaling.sh --pack" >&2; exit 2; }
  binary_of() { echo "$packed/bin/bench_$1_$2"; }
  run_binary() { "$packed/lib/ld-linux-x86-64.so.2" --library-path "$packed/lib" "$@"; }
  git=$(cat "$packed/commit")
else
  [ -n "$taskflow_dir" ] || echo "note: no Taskflow checkout (--taskflow DIR or TASKFLOW_DIR): oneTBB is the only peer" >&2
  tools/install-deps.sh bench

  # The same build as tools/bench.sh's (one folder serves both), only the executables used here.
  dir=${BENCH_BUILD_DIR:-build/release}
  setup_flags=(--buildtype=release -Dwerror=true -Dtests=false -Dbench=true -Db_lto=false)
  if [ -n "$taskflow_dir" ]; then setup_flags+=("-Dtaskflow_dir=$taskflow_dir"); fi
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "${setup_flags[@]}" >/dev/null  # not `setup --reconfigure`: meson 1.0's drops b_* options
  else
    meson setup "$dir" "${setup_flags[@]}" >/dev/null
  fi
  binary_of() {  # binary_of WORKLOAD SYSTEM: the executable's path in the build (a folder with its own meson.build nests)
    if [ "$1" = tick ]; then echo "$dir/bench/tick/bench_tick_$2"; else echo "$dir/bench/bench_$1_$2"; fi
  }
  run_binary() { "$@"; }
  targets=()
  known=$(ninja -C "$dir" -t targets all 2>/dev/null | cut -d: -f1)  # a peer whose library is missing has no target
  for folder in "${folders[@]}"; do
    for system in "${systems[@]}"; do
      target=$(binary_of "$folder" "$system" | sed "s|^$dir/||")
      if grep -qx "$target" <<<"$known"; then targets+=("$target"); fi
    done
  done
  if ! build_log=$(meson compile -C "$dir" "${targets[@]}" 2>&1); then
    echo "$build_log" | grep -E "FAILED|error" | head -20 >&2
    echo "$0: the build in $dir failed (above); nothing measured" >&2
    exit 1
  fi
  git=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || git="$git-dirty"
fi

if [ -n "$pack" ]; then
  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib"
  for target in "${targets[@]}"; do
    binary="$dir/$target"
    cp "$binary" "$pack/bin/"
    # Every library the executable loads, found by the loader here, and the loader itself:
    # the other machine's own C library may be older than the one these were linked against.
    ldd "$binary" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]*ld-linux/ { print $1 }' |
      while read -r library; do cp -L -n "$library" "$pack/lib/"; done
  done
  [ -f "$pack/lib/ld-linux-x86-64.so.2" ] || { echo "$0: no x86-64 dynamic loader found for the pack" >&2; exit 1; }
  echo "$git" >"$pack/commit"
  echo "packed ${#targets[@]} executables of commit $git into $pack ($(du -sh "$pack" | cut -f1)):"
  echo "  run them elsewhere with tools/scaling.sh --packed $pack [--out DIR] (the checkout's tools/ and python3 needed)"
  exit 0
fi

mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
# The raw records stay in the output folder while the run lasts, so that a run stopped
# part-way still leaves what it measured; a finished run removes them.
raw="$out/.raw-$stamp"
mkdir -p "$raw"
jsonl="$out/scaling-${stamp}.jsonl"
summary="$out/scaling-${stamp}.json"
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
started=$SECONDS
# Only the rows of the table: the fork-join executables skip the others themselves; the
# tick executables measure the plain schedule only.
export FORK_JOIN_ONLY=fib,skynet,nqueens,matmul,reduce,skewed_head,skewed_tail
export MAGPIE_TICK_VARIANT=
for count in "${threads[@]}"; do
  for folder in "${folders[@]}"; do
    for system in "${systems[@]}"; do
      binary=$(binary_of "$folder" "$system")
      [ -x "$binary" ] || continue
      echo "=== $folder ($system), $count thread(s)"
      run_binary "$binary" --threads "$count" --runs "$runs" "${quick[@]}" --json "$raw/$folder.jsonl" --git "$git" >/dev/null
    done
  done
done
elapsed=$((SECONDS - started))

python3 - "$raw" "$jsonl" "$summary" "$git" "$cpu_model" "$elapsed" "${#quick[@]}" "$runs" "${threads[@]}" <<'PY'
import json, os, re, sys
raw, jsonl, summary, git, cpu, elapsed, quick, runs, *threads = sys.argv[1:]
# The rows of the scaling table, per workload folder; every other row the executables print
# is left out (the coroutine folder has a task_empty_batch of its own, for one).
rows = {"tasks": r"task_empty_one_at_a_time|task_empty_batch(_unattached)?",
        "graph": r"binary_tree|chain|wavefront|random_dag",
        "fork_join": r"fib|skynet|nqueens|matmul|reduce|skewed_head|skewed_tail",
        "tick": r"tick_frame(_1m)?",
        "coroutine": r"limiter_n\d+",
        "scheduler": r"wake_latency_p(50|99)"}
kept = []
for folder, pattern in rows.items():
    path = os.path.join(raw, folder + ".jsonl")
    if not os.path.exists(path):
        continue
    records = [json.loads(line) for line in open(path) if line.strip()]
    kept += [record for record in records if re.fullmatch(pattern, record["workload"])]
with open(jsonl, "w") as out:
    for record in kept:
        out.write(json.dumps(record) + "\n")
with open(summary, "w") as out:
    json.dump({"commit": git, "nproc": os.cpu_count(), "cpu_model": cpu, "threads": [int(t) for t in threads],
               "quick": quick != "0", "runs": int(runs), "seconds": int(elapsed), "measurements": kept}, out, indent=1)
PY
rm -rf "$raw"
echo
echo "=== scaling table ($(nproc) hardware threads, $cpu_model, commit $git, $(date -u +%Y-%m-%d), $runs runs a row, ${elapsed} s)"
python3 tools/bench_table.py --best-peer "$jsonl"
echo "JSON: $jsonl (measurements), $summary (with the machine and the commit)"
