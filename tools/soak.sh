#!/usr/bin/env bash
# The soak: for DURATION, round after round, with a new chaos seed each cycle,
#   1. the soak program (test/soak/soak.cpp) in the plain build: every kind of work on the
#      worker matrix 0,1,2,4, outcomes checked, resident memory checked flat;
#   2. the same program under ThreadSanitizer;
#   3. the TSan stress suites under chaos.
# Every failure is kept with its replay line; the summary says how many cycles, which seeds
# and what failed. Nothing hangs: each step has a time limit and its own watchdog.
#   tools/soak.sh 1h          (or 30m, 600s, 2h; default 10m)
#   MAGPIE_CHAOS_RATE=0.1 tools/soak.sh 1h
set -uo pipefail
cd "$(dirname "$0")/.."

duration=${1:-10m}
case $duration in
  *h) seconds=$(( ${duration%h} * 3600 )) ;;
  *m) seconds=$(( ${duration%m} * 60 )) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || { echo "usage: $0 DURATION (e.g. 1h, 30m, 600s)" >&2; exit 2; }
rate=${MAGPIE_CHAOS_RATE:-0.05}

tools/install-deps.sh test >/dev/null
for build in plain tsan; do
  dir=build/test-$build
  if [ ! -f "$dir/build.ninja" ]; then
    case $build in
      plain) meson setup "$dir" --buildtype=debugoptimized -Dmodels=enabled >/dev/null ;;
      tsan) meson setup "$dir" --buildtype=debugoptimized -Db_sanitize=thread -Dmodels=disabled -Dbench=false >/dev/null ;;
    esac
  fi
  meson compile -C "$dir" >/dev/null || { echo "soak: the $build build failed" >&2; exit 1; }
done

mkdir -p build/soak
log=build/soak/soak-$(date -u +%Y%m%dT%H%M%SZ).log
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/test/tsan.supp"
started=$SECONDS
cycle=0
failures=0
seeds=()
step() {  # step <name> <seconds limit> <command...>: runs one step, logs it, counts a failure
  local name=$1 limit=$2; shift 2
  local rc=0
  timeout "$limit" "$@" >>"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "  ok    $name" | tee -a "$log"
  else
    failures=$((failures + 1))
    echo "  FAIL  $name (rc $rc; replay: MAGPIE_CHAOS=$MAGPIE_CHAOS $*)" | tee -a "$log"
  fi
}

echo "soak: ${seconds} s, chaos rate $rate, log $log"
while [ $((SECONDS - started)) -lt "$seconds" ]; do
  cycle=$((cycle + 1))
  seed=$(( (cycle * 2654435761 + ${SOAK_SEED_BASE:-0}) % 4294967296 ))
  seeds+=("$seed")
  export MAGPIE_CHAOS="$seed:$rate"
  echo "cycle $cycle at $((SECONDS - started)) s, MAGPIE_CHAOS=$MAGPIE_CHAOS" | tee -a "$log"
  step "soak program (plain)" 400 build/test-plain/test/soak --seconds 60 --seed "$seed"
  step "soak program (TSan)" 600 build/test-tsan/test/soak --seconds 60 --seed "$seed" --growth-limit-mb 2048
  step "stress suites (TSan)" 1800 meson test -C build/test-tsan --suite stress --num-processes 2 --print-errorlogs
done
echo "soak: $cycle cycles in $((SECONDS - started)) s, $failures failures; seeds: ${seeds[*]}" | tee -a "$log"
[ "$failures" -eq 0 ]
