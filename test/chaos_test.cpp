// Suite "chaos": the MAGPIE_CHAOS syntax, replayable per-thread decisions, and delays that
// land at the core's decision points while a scheduler's work still comes out right.
#include <doctest/doctest.h>

#include <magpie/chaos.h>
#include <magpie/pipe.h>
#include <magpie/scheduler.h>
#include <magpie/task.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

namespace {

using magpie::chaos::site;

// restore_chaos_after puts back whatever chaos the process ran with (MAGPIE_CHAOS) when
// the test case that changed it ends.
class restore_chaos_after {
 public:
  restore_chaos_after() : before_(magpie::chaos::current()) {}
  ~restore_chaos_after() {
    if (before_) {
      magpie::chaos::start(*before_);
    } else {
      magpie::chaos::stop();
    }
  }
  restore_chaos_after(const restore_chaos_after&) = delete;
  restore_chaos_after& operator=(const restore_chaos_after&) = delete;

 private:
  std::optional<magpie::chaos::options> before_;
};

std::uint64_t injected_at(site where) { return magpie::chaos::injections()[static_cast<std::size_t>(where)]; }

// decisions_of runs `points` chaos points on a new thread of the given identity and
// returns which of them injected a delay (read off the site's count after each point).
std::vector<bool> decisions_of(magpie::chaos::options chosen, std::uint64_t identity, int points) {
  magpie::chaos::start(chosen);
  std::vector<bool> injected;
  std::thread([&] {
    magpie::chaos::set_thread_identity(identity);
    for (int i = 0; i < points; ++i) {
      std::uint64_t before = injected_at(site::named_queue);
      magpie::detail::chaos::point(site::named_queue);
      injected.push_back(injected_at(site::named_queue) != before);
    }
  }).join();
  return injected;
}

}  // namespace

TEST_CASE("chaos: MAGPIE_CHAOS is seed or seed:rate") {
  auto plain = magpie::chaos::parse("42");
  REQUIRE(plain);
  CHECK(plain->seed == 42);
  CHECK(plain->rate == magpie::chaos::options{}.rate);
  auto with_rate = magpie::chaos::parse("7:0.25");
  REQUIRE(with_rate);
  CHECK(with_rate->seed == 7);
  CHECK(with_rate->rate == 0.25);
  for (const char* malformed : {"", "x", "42:", ":0.1", "42:1.5", "42:-0.1", "42:abc", "42x", "4 2"}) {
    CAPTURE(malformed);
    CHECK_FALSE(magpie::chaos::parse(malformed));
  }
}

TEST_CASE("chaos: start, current, describe and stop") {
  restore_chaos_after restore;
  if (!magpie::chaos::compiled_in) {
    CHECK_FALSE(magpie::chaos::start({.seed = 3, .rate = 0.5}));
    CHECK_FALSE(magpie::chaos::current());
    CHECK(magpie::chaos::describe() == "off");
    return;
  }
  REQUIRE(magpie::chaos::start({.seed = 3, .rate = 0.5}));
  auto now = magpie::chaos::current();
  REQUIRE(now);
  CHECK(now->seed == 3);
  CHECK(now->rate == 0.5);
  CHECK(magpie::chaos::describe() == "MAGPIE_CHAOS=3:0.5");
  magpie::chaos::stop();
  CHECK_FALSE(magpie::chaos::current());
  CHECK(magpie::chaos::describe() == "off");
  CHECK(magpie::chaos::name(site::deque_steal) == "deque_steal");
  CHECK(magpie::chaos::name(site::named_queue) == "named_queue");
}

TEST_CASE("chaos: a seed replays each thread's decisions; another seed or identity draws others") {
  if (!magpie::chaos::compiled_in) return;
  restore_chaos_after restore;
  const magpie::chaos::options chosen{.seed = 1234, .rate = 0.3};
  std::vector<bool> first = decisions_of(chosen, 77, 400);
  std::vector<bool> again = decisions_of(chosen, 77, 400);
  CHECK(first == again);
  CHECK(decisions_of({.seed = 1235, .rate = 0.3}, 77, 400) != first);
  CHECK(decisions_of(chosen, 78, 400) != first);
  // The rate is the share of points that inject: 0.3 of 400 is 120 (σ ≈ 9).
  auto share = std::count(first.begin(), first.end(), true);
  CHECK(share > 70);
  CHECK(share < 170);
  std::vector<bool> none = decisions_of({.seed = 9, .rate = 0.0}, 77, 400);
  CHECK(std::count(none.begin(), none.end(), true) == 0);
  std::vector<bool> all = decisions_of({.seed = 9, .rate = 1.0}, 77, 100);
  CHECK(std::count(all.begin(), all.end(), true) == 100);
}

TEST_CASE("chaos: delays land at the core's decision points and the work still comes out right") {
  if (!magpie::chaos::compiled_in) return;
  restore_chaos_after restore;
  magpie::scheduler_options options;
  options.workers = 2;
  options.chaos = magpie::chaos::options{.seed = 99, .rate = 0.2};
  magpie::scheduler pool(options);
  REQUIRE(magpie::chaos::current());
  CHECK(magpie::chaos::current()->seed == 99);

  constexpr int roots = 200;
  std::atomic<int> ran{0};
  std::vector<int> piped_order;
  magpie::pipe serial("serial", pool);
  std::vector<magpie::task<>> tasks;
  for (int i = 0; i < roots; ++i) {
    // A root that forks children onto its worker's deque, then a subsequent of it, then a
    // piped task: launches, pushes, claims, completions, closes and hand-overs.
    auto root = pool.launch("root", [&] {
      std::vector<magpie::task<>> children;
      for (int child = 0; child < 4; ++child) children.push_back(pool.launch("child", [&] { ran.fetch_add(1); }));
      ran.fetch_add(1);
      for (auto& child : children) child.wait();
    });
    tasks.push_back(pool.launch("after root", [&] { ran.fetch_add(1); }, magpie::prerequisites(root)));
    tasks.push_back(serial.launch("piped", [&piped_order, i] { piped_order.push_back(i); }));
    tasks.push_back(std::move(root));
  }
  for (auto& each : tasks) each.wait();
  CHECK(ran.load() == roots * 6);
  REQUIRE(piped_order.size() == roots);
  for (int i = 0; i < roots; ++i) CHECK(piped_order[static_cast<std::size_t>(i)] == i);

  for (site where : {site::task_launch, site::execution_claim, site::completion, site::deque_push,
                     site::subsequents_close, site::pipe_handover}) {
    CAPTURE(magpie::chaos::name(where));
    CHECK(injected_at(where) > 0);
  }
}
