// Built against an installed magpie by tools/install-check.sh; exits 0 when the headers
// and the library work together.
#include <magpie/magpie.h>
#include <magpie/detail/deque.h>

#include <cstdio>

int main() {
  magpie::detail::work_stealing_deque<int> deque;
  deque.push(41);
  auto item = deque.pop();
  static int reports = 0;
  magpie::set_diagnostic_handler([](const magpie::diagnostic&) { ++reports; });
  magpie::report(magpie::diagnostic_kind::misuse, "consumer check");
  if (!item || *item != 41 || reports != 1) {
    std::puts("consumer: FAILED");
    return 1;
  }
  std::printf("consumer: ok (magpie %s)\n", MAGPIE_VERSION);
  return 0;
}
