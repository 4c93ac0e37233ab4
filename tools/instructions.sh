#!/usr/bin/env bash
# Instructions per task of five shapes (one task at a time, a chain hop, a fib call
# forked by a task_group, a fib call forked as a coroutine: fib, coro_fork_fib, a future's
# `next` link: next_chain), counted by callgrind over each shape's `measured_<shape>` function alone
# (bench/per_task/magpie.cpp), beside the native time per task of the same program and the
# serializing instructions per task among them (locked read-modify-writes, xchg with
# memory, mfence: each costs several ns whatever else the path does), named by function.
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
[ ${#shapes[@]} -eq 0 ] && shapes=(one_at_a_time chain fib coro_fork_fib next_chain)
tasks=65536
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# serializing <callgrind file> <program> <calls>: the locked instructions executed per task,
# from callgrind's per-instruction counts and the program's disassembly.
serializing() {
  python3 - "$@" <<'PY'
import re, subprocess, sys
out, program, calls = sys.argv[1], sys.argv[2], float(sys.argv[3])
locked = {}  # address -> (function, mnemonic)
function = None
listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", program], capture_output=True, text=True, check=True)
for line in listing.stdout.splitlines():
    if (named := re.match(r"^[0-9a-f]+ <(.*)>:$", line)):
        function = named.group(1)
    elif (instruction := re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(\S*)", line)):
        address, mnemonic, operand = int(instruction.group(1), 16), instruction.group(2), instruction.group(3)
        if mnemonic == "lock" or mnemonic == "mfence" or (mnemonic.startswith("xchg") and "(" in operand):
            locked[address] = (function, mnemonic if mnemonic != "lock" else "lock " + operand)
executed = {}
after_call = False  # the cost line after calls= is the call's inclusive cost, not an instruction's
for line in open(out):
    if line.startswith("calls="):
        after_call = True
    elif line.startswith("0x"):
        address = int(line.split()[0], 16)
        if not after_call and address in locked:
            executed[address] = executed.get(address, 0) + int(line.split()[-1])
        after_call = False
total = sum(executed.values()) / calls
where = sorted(executed.items(), key=lambda item: -item[1])
def short(function):  # the bare name: no namespaces, template arguments or parameters
    return re.sub(r"[(<].*", "", function.replace("(anonymous namespace)", "anonymous")).split("::")[-1]
named = ", ".join(f"{locked[a][1]} in {short(locked[a][0])}" for a, n in where if n / calls >= 0.1)
print(f"{total:.2f}  {named}")
PY
}

printf '%-14s %8s %11s  %s\n' shape "ns/task" "instr/task" "serializing/task (where)"
for shape in "${shapes[@]}"; do
  native=$("$program" --shape "$shape" --tasks "$tasks" --runs 7 "${flags[@]}")
  ns=$(sed -E 's/.*median ([0-9.]+) ns.*/\1/' <<<"$native")
  ran=$(sed -E 's/.*: ([0-9]+) tasks per run.*/\1/' <<<"$native")
  # Collection is on only inside measured_*: the warm-up and each of the 2 runs count, so
  # the total is over 3 runs (the program's last call, run_once for the count, adds a 4th).
  # coro_fork_fib switches collection on and off itself (symmetric transfer between
  # coroutines leaves callgrind's calls and returns unmatched, which toggle-collect follows).
  collect=(--toggle-collect='*measured_*')
  [ "$shape" = coro_fork_fib ] && collect=(--collect-atstart=no)
  valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
    "${collect[@]}" --callgrind-out-file="$out/$shape" \
    "$program" --shape "$shape" --tasks "$tasks" --runs 2 "${flags[@]}" >/dev/null 2>&1
  total=$(sed -nE 's/^(summary|totals): ([0-9]+).*/\2/p' "$out/$shape" | head -1)
  printf '%-14s %8s %11.0f  %s\n' "$shape" "$ns" "$(echo "$total / (4 * $ran)" | bc -l)" \
    "$(serializing "$out/$shape" "$program" $((4 * ran)))"
done
