// The coroutine fib's size and answer, shared by bench/coroutine/magpie.cpp and its libfork
// peer (bench/coroutine/libfork.cpp), so both record the same coro_fib row: same n, same
// count of calls.
#pragma once

#include <cstdint>

namespace bench::coro_fib {

// size is the n of fib(n) that the coro_fib and task_group_fib rows run.
inline int size(bool quick) { return quick ? 18 : 22; }

// serial is fib(n) without tasks: the answer each run checks.
inline long serial(int n) { return n < 2 ? n : serial(n - 1) + serial(n - 2); }

// calls is the number of fib calls, each one task: the rows' task count.
inline std::uint64_t calls(int n) { return n < 2 ? 1 : 1 + calls(n - 1) + calls(n - 2); }

}  // namespace bench::coro_fib
