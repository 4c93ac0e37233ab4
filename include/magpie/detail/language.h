// What magpie's headers need from the compiler, checked first by every public header, so
// that a build without it stops with one line saying what to change rather than with
// errors from deep inside.
#pragma once

#if __cplusplus < 202002L
#error "magpie needs C++20 or later: compile with -std=c++20 (docs/building.md)"
#endif

// A task's failure is an exception, carried from the thread that ran the work to whoever
// waits (a task's result, a group's join, a future): without exceptions there is nothing
// to carry it.
#if !defined(__cpp_exceptions)
#error "magpie needs C++ exceptions: compile with -fexceptions (docs/building.md)"
#endif
