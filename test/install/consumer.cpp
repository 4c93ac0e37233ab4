// A first program against magpie, built by tools/install-check.sh through every
// documented route (installed CMake package, pkg-config, meson subproject, CMake
// add_subdirectory and FetchContent); exits 0 when the headers and the library work
// together. It names no language standard itself: the route must carry C++20.
#include <magpie/magpie.h>
#include <magpie/detail/deque.h>

#include <cstdio>

int main() {
  magpie::task<int> answer = magpie::launch("answer", [] { return 41; });
  magpie::task<int> next = magpie::launch("next", [answer] { return answer.get_result() + 1; },
                                          magpie::prerequisites(answer));
  magpie::detail::work_stealing_deque<int> deque;
  deque.push(next.get_result());
  auto item = deque.pop();
  static int reports = 0;
  magpie::set_diagnostic_handler([](const magpie::diagnostic&) { ++reports; });
  magpie::report(magpie::diagnostic_kind::misuse, "consumer check");
  if (!item || *item != 42 || reports != 1) {
    std::puts("consumer: FAILED");
    return 1;
  }
  std::printf("consumer: ok (magpie %s)\n", MAGPIE_VERSION);
  return 0;
}
