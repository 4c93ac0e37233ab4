#!/usr/bin/env bash
# Instructions per task of issue 30's moonshot shapes (one task at a time, a chain hop, a
# fib call), counted by callgrind over each shape's `measured_<shape>` function alone
# (bench/per_task/magpie.cpp), beside the native time per task of the same program.
# Instruction counts do not depend on a noisy host, so they show what a change to the hot
# paths did when the times cannot.
#   tools/instructions.sh                 every shape, 2^16 tasks
#   tools/instructions.sh chain fib       the named shapes
#   UNATTACHED=1 tools/instructions.sh    from a thread attached to nothing, as a plain main
#   BENCH_BUILD_DIR=build/x tools/instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh bench
command -v valgrind >/dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 1; }

dir=${BENCH_BUILD_DIR:-build/release}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --buildtype=release -Dtests=false -Dbench=true >/dev/null
fi
meson compile -C "$dir" bench/bench_per_task_magpie >/dev/null
program="$dir/bench/bench_per_task_magpie"
flags=()
[ -n "${UNATTACHED:-}" ] && flags=(--unattached)

shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(one_at_a_time chain fib)
tasks=65536
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-14s %12s %14s\n' shape "ns/task" "instr/task"
for shape in "${shapes[@]}"; do
  native=$("$program" --shape "$shape" --tasks "$tasks" --runs 7 "${flags[@]}")
  ns=$(sed -E 's/.*median ([0-9.]+) ns.*/\1/' <<<"$native")
  ran=$(sed -E 's/.*: ([0-9]+) tasks per run.*/\1/' <<<"$native")
  # Collection is on only inside measured_*: the warm-up and each of the 2 runs count, so
  # the total is over 3 runs (the program's last call, run_once for the count, adds a 4th).
  valgrind --tool=callgrind --toggle-collect='*measured_*' --callgrind-out-file="$out/$shape" \
    "$program" --shape "$shape" --tasks "$tasks" --runs 2 "${flags[@]}" >/dev/null 2>&1
  total=$(sed -nE 's/^(summary|totals): ([0-9]+).*/\2/p' "$out/$shape" | head -1)
  printf '%-14s %12s %14.0f\n' "$shape" "$ns" "$(echo "$total / (4 * $ran)" | bc -l)"
done
