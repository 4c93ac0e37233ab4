#!/usr/bin/env bash
# Checks the layering (tools/check_layers.py) and that the CMake build lists meson's sources
# (tools/check_cmake_sources.py), then builds and runs the tests: the Relacy models and the
# consumer checks in the plain build (debugoptimized, asserts on); every suite under
# ThreadSanitizer (GCC; its stress suites under a chaos seed), under AddressSanitizer + UBSan
# (clang, so that the suite is built by both compilers) and in release (what users install,
# with its examples and benchmarks); then installs the release build and builds a first
# program through every documented route (tools/install-check.sh: find_package, pkg-config,
# meson subproject, CMake add_subdirectory and FetchContent); then builds the API reference
# (tools/docs.sh), which fails on any Doxygen warning, and compiles every C++ block of the
# README and docs/ (tools/check_doc_snippets.py); then runs each libFuzzer target briefly
# (tools/fuzz.sh, built in the asan build). Every build treats warnings as errors.
#   tools/test.sh                 models tsan asan release docs fuzz
#   tools/test.sh plain           one of: models plain tsan asan release docs fuzz
#   tools/test.sh chaos           the stress suites of the plain and TSan builds under chaos
#                                 mode, once per seed of MAGPIE_CHAOS_SEEDS (default 4 seeds)
#   MAGPIE_FUZZ_SECONDS=60 tools/test.sh fuzz    run each fuzzer longer (default 25 s)
#   MAGPIE_STRESS_REPEAT=20 tools/test.sh tsan    repeat the stress cases
# The TSan build runs its stress suites under chaos mode with one seed taken from the
# commit, so each CI run tries another schedule, and the log says how to replay it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The clients and the compat layer include only public headers: checked first.
python3 tools/check_layers.py --self-test >/dev/null
python3 tools/check_layers.py
python3 tools/check_cmake_sources.py
tools/install-deps.sh test

builds=("$@")
# The default run builds the plain configuration only for what no other build checks (the
# Relacy models and the consumer checks): every suite runs under both sanitizers and in
# release. `tools/test.sh plain` runs the whole suite there too.
[ ${#builds[@]} -eq 0 ] && builds=(models tsan asan release docs fuzz)

configure() {  # configure <dir> <gcc|clang> <meson options...>
  local dir=$1 compiler=$2; shift 2
  # A folder set up with these very options is left alone: meson configure rewrites
  # config.h even when nothing changed, and every object would build again.
  local options="$compiler $*"
  if [ -f "$dir/build.ninja" ] && [ "$(cat "$dir/test-sh-options" 2>/dev/null)" = "$options" ]; then
    return
  fi
  if [ -f "$dir/build.ninja" ] && [ "$(meson introspect "$dir" --compilers |
       python3 -c 'import json, sys; print(json.load(sys.stdin)["host"]["cpp"]["id"])')" != "$compiler" ]; then
    rm -rf "$dir"  # meson cannot switch a folder's compiler
  fi
  if [ -f "$dir/build.ninja" ]; then
    # `meson configure`, not `setup --reconfigure`: meson 1.0's reconfigure drops b_* options
    meson configure "$dir" "$@" >/dev/null
  else
    local cxx=g++
    [ "$compiler" = clang ] && cxx=clang++
    CXX=$cxx meson setup "$dir" "$@" >/dev/null
  fi
  echo "$options" > "$dir/test-sh-options"
}

passed=0
failed=0
count_results() {  # count_results <build dir>: add meson's per-test results to the totals
  local counts
  counts=$(python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    result = json.loads(line)["result"]
    if result in ("OK", "EXPECTEDFAIL", "SKIP"):
        ok += 1
    else:
        bad += 1
print(ok, bad)
PY
)
  passed=$((passed + ${counts% *}))
  failed=$((failed + ${counts#* }))
}

# The test builds keep line tables only (-g1): sanitizer reports and backtraces still name
# every frame, inlined ones included, and the builds take about a third less time. The
# benchmarks build once, in the release configuration they are measured in.
configure_build() {  # configure_build <build>: set up build/test-<build>
  local dir=build/test-$1
  case $1 in
    plain) configure "$dir" gcc -Dwerror=true --buildtype=debugoptimized -Db_sanitize=none -Dmodels=enabled \
             -Dbench=false -Dcpp_args=-g1 ;;
    tsan) configure "$dir" gcc -Dwerror=true --buildtype=debugoptimized -Db_sanitize=thread \
            -Dmodels=disabled -Dbench=false -Dcpp_args=-g1 ;;
    # Clang, at -O1: the second compiler of the test suite, and less than half GCC's time
    # to build with AddressSanitizer and UBSan. The fuzzers build here too (stage fuzz).
    asan) configure "$dir" clang -Dwerror=true --buildtype=debugoptimized -Doptimization=1 \
            -Db_sanitize=address,undefined "-Dcpp_args=['-g1', '-fno-sanitize-recover=all']" \
            -Dmodels=disabled -Dbench=false -Dfuzz=enabled ;;
    # What `meson install` gives users (-O3, NDEBUG, debug checks and chaos points compiled
    # out), with its tests, examples and benchmarks: other warnings show at -O3.
    release) configure "$dir" gcc -Dwerror=true --buildtype=release -Db_sanitize=none \
               -Dmodels=disabled -Dbench=auto ;;
  esac
}

# run_chaos <build> <seed...>: the stress suites of build/test-<build>, once per seed, with
# MAGPIE_CHAOS=<seed>:<rate> (MAGPIE_CHAOS_RATE, default 0.05).
run_chaos() {
  local build=$1; shift
  local dir=build/test-$build
  configure_build "$build"
  echo "=== chaos ($build): build"
  meson compile -C "$dir"
  for seed in "$@"; do
    local chaos="$seed:${MAGPIE_CHAOS_RATE:-0.05}"
    echo "=== chaos ($build): stress suites with MAGPIE_CHAOS=$chaos"
    MAGPIE_CHAOS=$chaos meson test -C "$dir" --suite stress --print-errorlogs --num-processes 2 \
      --timeout-multiplier "${MAGPIE_STRESS_REPEAT:-1}" || {
      status=1
      echo "chaos: a failure above; replay it with MAGPIE_CHAOS=$chaos meson test -C $dir --suite stress" >&2
    }
    count_results "$dir"
  done
}

# commit_seed is a chaos seed from the commit: another schedule each CI run, the same one on
# a rerun.
commit_seed() {
  local commit
  commit=$(git rev-parse --short=8 HEAD 2>/dev/null || echo 1)
  echo "$((16#$commit))"
}

status=0
for build in "${builds[@]}"; do
  dir=build/test-$build
  case $build in
    plain|tsan|asan|release) configure_build "$build" ;;
    models)
      configure_build plain
      echo "=== models: the Relacy models and the consumer checks (build/test-plain)"
      # meson test builds only what the chosen suites run.
      meson test -C build/test-plain --print-errorlogs --num-processes 2 --suite model \
        --suite consumer_flags || status=1
      count_results build/test-plain
      continue ;;
    docs)
      echo "=== docs: the API reference (tools/docs.sh), warnings are errors"
      if tools/docs.sh >/dev/null; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
      # Every C++ block of the README and docs/ compiles (config.h from the plain build's
      # configuration), and the trace viewer's own checks pass.
      echo "=== docs: every C++ block of README.md and docs/ (tools/check_doc_snippets.py)"
      configure_build plain
      if python3 tools/check_doc_snippets.py --self-test >/dev/null &&
         python3 tools/check_doc_snippets.py --build-dir build/test-plain; then
        passed=$((passed + 1))
      else
        failed=$((failed + 1)); status=1
      fi
      echo "=== docs: tools/trace_view.py --self-test"
      if python3 tools/trace_view.py --self-test; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
      continue ;;
    fuzz)
      # Each fuzzer for a short time (a pass each), then the fuzzers replay the seed corpora
      # and kept crash inputs once (suite fuzz_replay).
      # MAGPIE_FUZZ_TARGETS picks some of them.
      # They are built in the asan build, beside the suite they share its instrumentation with.
      configure_build asan
      dir=build/test-asan
      read -r -a fuzz_targets <<< "${MAGPIE_FUZZ_TARGETS:-timer_fuzz task_graph_fuzz tick_fuzz}"
      echo "=== fuzz: build and run ${fuzz_targets[*]} for ${MAGPIE_FUZZ_SECONDS:-25} s each"
      for target in "${fuzz_targets[@]}"; do
        if FUZZ_BUILD_DIR=$dir tools/fuzz.sh "${MAGPIE_FUZZ_SECONDS:-25}" "$target"; then
          passed=$((passed + 1))
        else
          failed=$((failed + 1)); status=1
        fi
      done
      meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --suite fuzz_replay || status=1
      count_results "$dir"
      continue ;;
    chaos)
      read -r -a seeds <<< "${MAGPIE_CHAOS_SEEDS:-1 2 3 4}"
      run_chaos plain "${seeds[@]}"
      run_chaos tsan "${seeds[@]}"
      continue ;;
    chaos-short)
      run_chaos tsan "$(commit_seed)"
      continue ;;
    *) echo "unknown build '$build' (models, plain, tsan, asan, release, docs, fuzz, chaos, chaos-short)" >&2; exit 2 ;;
  esac
  echo "=== $build: build"
  meson compile -C "$dir"
  echo "=== $build: test"
  # TSan runs its stress suites under chaos mode (below), the other builds as they are.
  no_stress=()
  [ "$build" = tsan ] && no_stress=(--no-suite stress)
  # Repeated stress cases run that many times longer: so may meson's time-outs.
  meson test -C "$dir" --print-errorlogs --num-processes 2 "${no_stress[@]}" \
    --timeout-multiplier "${MAGPIE_STRESS_REPEAT:-1}" || status=1
  count_results "$dir"
  [ "$build" = tsan ] && run_chaos tsan "$(commit_seed)"

  if [ "$build" = release ]; then
    echo "=== release: install, and build a first program through every documented route"
    if tools/install-check.sh "$dir"; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
  fi
done

echo "summary: $passed passed, $failed failed"
exit $status
