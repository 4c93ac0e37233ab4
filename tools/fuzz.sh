#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan) and runs each for a while
# on its seed corpus and its kept crash inputs.
#   tools/fuzz.sh                     every target, 60 s each
#   tools/fuzz.sh 300 timer_fuzz      one target, 5 minutes
#   FUZZ_BUILD_DIR=build/x tools/fuzz.sh   another build folder (default build/fuzz)
# New inputs go to <build>/fuzz-corpus/<target>/ (the seeds in test/fuzz/corpus/ stay as
# they are); a crash or oracle mismatch is written to <build>/fuzz-crashes/<target>/. To
# keep one as a regression, minimize it and copy it into test/fuzz/regressions/<target>/:
#   <build>/test/fuzz/<target> -minimize_crash=1 -runs=10000 <crash file>
# Prints one summary line per target (execs, execs/s, coverage, crashes); exit status 1 if
# any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(timer_fuzz task_graph_fuzz tick_fuzz)
dir=${FUZZ_BUILD_DIR:-build/fuzz}

if ! command -v clang++ >/dev/null; then
  echo "error: clang++ not found (tools/install-deps.sh test installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$dir/build.ninja" ]; then
  CXX=clang++ meson setup "$dir" --buildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined \
    -Dcpp_args=-fno-sanitize-recover=all -Dfuzz=enabled -Dtests=false -Dbench=false \
    -Dexamples=false -Dmodels=disabled >/dev/null
fi
# Only the fuzzers: a build that also holds the tests (tools/test.sh's asan build) builds
# those in its own stage.
nice -n 19 meson compile -C "$dir" "${targets[@]}" >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1 abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1 print_stacktrace=1}
status=0
summary=()
for target in "${targets[@]}"; do
  corpus=$dir/fuzz-corpus/$target
  crashes=$dir/fuzz-crashes/$target
  log=$dir/fuzz-logs/$target.log
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  # The first folder receives new inputs; the seeds and regressions are only read.
  if nice -n 19 "$dir/test/fuzz/$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
       -print_final_stats=1 -artifact_prefix="$crashes/" \
       "$corpus" "test/fuzz/corpus/$target" "test/fuzz/regressions/$target" >"$log" 2>&1; then
    verdict=ok
  else
    verdict="FAILED (log $log)"
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  found=$(find "$crashes" -type f | wc -l)
  summary+=("$target: $verdict, ${execs:-?} execs (${rate:-?}/s), ${coverage:-cov: ?}, $found crash inputs in $crashes")
done
printf '%s\n' "${summary[@]}"
exit $status
