// A consumer's translation unit that instantiates magpie's native API — tasks, prerequisites,
// task events, pipes, waits, fork-join, loops, coroutines, cancellation, the concurrency
// limiter, delegates, timers and ticks — so that the warnings of template and inline code
// show under the consumer's flags (check_headers.py compiles it; it runs as a program in the
// consumer sanitizer builds, where it must exit 0).
#include <magpie/magpie.h>
#include <magpie/coroutine_fork.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace {

magpie::coro<long> forked_fib(int n) {
  if (n < 2) co_return n;
  long a = 0;
  long b = 0;
  co_await magpie::fork(a, forked_fib(n - 1));
  co_await magpie::call(b, forked_fib(n - 2));
  co_await magpie::join();
  co_return a + b;
}

long group_fib(int n) {
  if (n < 2) return n;
  long a = 0;
  magpie::task_group group;
  group.run([&a, n] { a = group_fib(n - 1); });
  long b = group_fib(n - 2);
  group.wait();
  return a + b;
}

struct counter {
  int hits = 0;
  void hit(int by) { hits += by; }
};

bool tasks_and_waits() {
  magpie::task<int> left = magpie::launch("left", [] { return 20; });
  magpie::task<int> right = magpie::launch("right", [] { return 22; });
  magpie::task_event ready("ready");
  magpie::task<int> total = magpie::launch(
      "total", [left, right] { return left.get_result() + right.get_result(); },
      magpie::prerequisites(left, right, ready), magpie::priority::high);
  ready.trigger();

  std::vector<int> order;
  magpie::pipe serial("serial");
  std::vector<magpie::task<>> logged;
  for (int i = 0; i < 8; ++i) logged.push_back(serial.launch("log", [&order, i] { order.push_back(i); }));
  magpie::wait_all(logged);
  std::optional<std::size_t> first = magpie::wait_any(logged, std::chrono::milliseconds(100));

  magpie::cancellation_token token;
  token.cancel();
  magpie::task<> skipped = magpie::launch("skipped", [] {}, token);
  skipped.wait();

  magpie::task<long> coroutine = magpie::launch("coroutine", []() -> magpie::coro<long> {
    magpie::task<long> inner = magpie::launch("inner", [] { return forked_fib(12); });
    long value = co_await inner;
    co_return value;
  });

  bool ordered = order.size() == 8;
  for (std::size_t i = 0; i < order.size(); ++i) ordered = ordered && order[i] == static_cast<int>(i);
  return total.get_result() == 42 && ordered && first.has_value() && coroutine.get_result() == 144 &&
         magpie::make_completed_task(7).get_result() == 7;
}

bool fork_join() {
  std::vector<double> values(10'000, 0.5);
  double sum = magpie::parallel_reduce(
      values.size(), 0.0, [&values](std::size_t i) { return values[i]; }, [](double a, double b) { return a + b; });
  std::vector<int> squares(1'000);
  magpie::parallel_for(squares.size(), [&squares](std::size_t i) { squares[i] = static_cast<int>(i * i); });
  std::atomic<int> invoked{0};
  magpie::parallel_invoke([&invoked] { invoked.fetch_add(1); }, [&invoked] { invoked.fetch_add(2); });
  return sum == 5000.0 && squares[999] == 998'001 && invoked.load() == 3 && group_fib(15) == 610;
}

// Threads that are no scheduler's run fork-join inside two schedulers' execute(), each
// group's children executing in the other scheduler: task_group's inline constructor reads
// the context of threads that work for a scheduler only meanwhile.
bool crosswise() {
  magpie::scheduler first(magpie::scheduler_options{.workers = 2});
  magpie::scheduler second(magpie::scheduler_options{.workers = 1});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&first, &second, &wrong, t] {
      magpie::scheduler& outer = t % 2 == 0 ? first : second;
      magpie::scheduler& inner = t % 2 == 0 ? second : first;
      for (int round = 0; round < 5; ++round) {
        long answer = outer.execute([&inner] {
          magpie::task_group group;
          long from_inner = 0;
          group.run([&from_inner, &inner] { from_inner = inner.execute([] { return group_fib(10); }); });
          group.wait();
          return from_inner + group_fib(10);
        });
        if (answer != 110) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& each : threads) each.join();
  return wrong.load() == 0;
}

bool limiter() {
  magpie::task_concurrency_limiter limited(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 16; ++i) limited.push("limited", [&ran](std::uint32_t) { ran.fetch_add(1); });
  return limited.wait(std::chrono::seconds(30)) && ran.load() == 16;
}

bool delegates_and_timers() {
  counter target;
  magpie::delegate<int(int)> twice;
  twice.bind([](int x) { return 2 * x; });
  magpie::multicast_delegate<void(int)> on_hit;
  magpie::delegate_handle handle = on_hit.add(&target, &counter::hit);
  auto shared = std::make_shared<counter>();
  on_hit.add(std::weak_ptr<counter>(shared), &counter::hit);
  on_hit.broadcast(3);
  on_hit.remove(handle);
  on_hit.broadcast(1);

  magpie::timer_manager timers;
  magpie::timer_handle repeating;
  int fired = 0;
  timers.set_timer(repeating, [&fired] { ++fired; }, 0.5f, true);
  for (int frame = 0; frame < 4; ++frame) timers.tick(0.25f);
  timers.clear_timer(repeating);
  return twice.execute(21) == 42 && target.hits == 3 && shared->hits == 4 && fired > 0;
}

bool ticks() {
  magpie::world game;
  int moved = 0;
  magpie::tick_function move("move", [&moved](float, magpie::level_tick) { ++moved; });
  move.register_tick_function(game.ticks());
  for (int frame = 0; frame < 3; ++frame) game.tick(1.f / 60);
  move.unregister_tick_function();
  return moved == 3;
}

}  // namespace

int main() {
  bool ok = true;
  for (auto [part, passes] : {std::pair{"tasks", &tasks_and_waits}, {"fork-join", &fork_join}, {"crosswise", &crosswise}, {"limiter", &limiter},
                              {"delegates and timers", &delegates_and_timers}, {"ticks", &ticks}}) {
    if (!passes()) {
      std::printf("native api: %s FAILED\n", part);
      ok = false;
    }
  }
  std::puts(ok ? "native api: ok" : "native api: FAILED");
  return ok ? 0 : 1;
}
