// Suite "held_runs": wait_all takes runs of its handles back off this thread's deque at once
// and runs them here, holding the rest aside, which a body that helps or blocks puts back
// first (lib/tasks/held_runs.h).
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <ranges>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("held_runs: wait_all takes back what this thread launched, in runs, and runs it here") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));
  pool.attach(named_thread::game);  // launches go to this thread's deque
  const std::int64_t before = detail::live_tasks();
  const std::thread::id me = std::this_thread::get_id();

  // With no workers, a wait from a thread running nothing of magpie's runs what that thread
  // queued in launch order (as Unreal's no-threading mode does); beneath a body, the runs
  // come back newest first, straight off the top of the deque.
  constexpr int count = 1000;
  auto launch_parts = [&pool, me](std::vector<int>& order, std::vector<task<int>>& handles) {
    for (int i = 0; i < count; ++i) {
      handles.push_back(pool.launch("part", [&order, i, me] {
        CHECK(std::this_thread::get_id() == me);
        order.push_back(i);
        return i;
      }));
    }
  };
  SUBCASE("every task runs once, here, in launch order, across several runs and batches") {
    std::vector<int> order;
    std::vector<task<int>> handles;
    launch_parts(order, handles);
    CHECK(wait_all(handles));
    REQUIRE(order.size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    for (int i = 0; i < count; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
    handles.clear();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("beneath a body: every task runs once, here, newest first") {
    std::vector<int> order;
    task<> body = pool.launch("launches and waits", [&] {
      std::vector<task<int>> handles;
      launch_parts(order, handles);
      CHECK(wait_all(handles));
      for (int i = 0; i < count; ++i) CHECK(handles[static_cast<std::size_t>(i)].get_result() == i);
    });
    body.wait();
    REQUIRE(order.size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) CHECK(order[static_cast<std::size_t>(i)] == count - 1 - i);
    body = task<>();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("with a timeout: runs are taken back too; false for what cannot complete in time") {
    task_event gate("gate", pool);
    int ran = 0;
    std::vector<task<int>> handles;
    handles.push_back(pool.launch("gated", [] { return -1; }, gate));  // oldest: waited for last
    for (int i = 0; i < 200; ++i) handles.push_back(pool.launch("part", [&ran, i] { return ++ran, i; }));
    // Long enough for the 200 to run here even under a sanitizer on a loaded machine: the
    // deadline stops the runs once it has passed.
    CHECK_FALSE(wait_all(handles, std::chrono::milliseconds(200)));
    CHECK(ran == 200);
    for (std::size_t i = 1; i < handles.size(); ++i) CHECK(handles[i].get_result() == static_cast<int>(i) - 1);
    gate.trigger();
    CHECK(wait_all(handles, std::chrono::seconds(10)));
    CHECK(handles[0].get_result() == -1);
    handles.clear();
    CHECK(detail::live_tasks() == before + 1);  // the gate, until it goes out of scope
  }
  SUBCASE("a body drops one handle still to be waited for and replaces another") {
    task<> below = pool.launch("below", [] {});  // under the run: the whole run comes back at once
    std::vector<task<int>> handles;
    for (int i = 0; i < 10; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
    handles.push_back(pool.launch("meddler", [&handles, &pool] {  // newest: runs first
      handles[0] = task<int>();
      handles[1] = pool.launch("replacement", [] { return 100; });
      return -1;
    }));
    CHECK(wait_all(handles));
    CHECK_FALSE(handles[0].is_valid());
    CHECK(handles[1].get_result() == 100);
    for (std::size_t i = 2; i < handles.size(); ++i) CHECK(handles[i].is_completed());
    handles.clear();
    CHECK(detail::live_tasks() == before + 1);  // `below`: nothing was left behind on the deque
    below.wait();
    below = task<>();
    CHECK(detail::live_tasks() == before);
  }
  SUBCASE("what a run completes keeps its subsequent list open; launches behind it, events, when_any and nesting still see it complete") {
    task<> below = pool.launch("below", [] {});  // under the run: the whole run comes back at once
    std::vector<task<int>> handles;
    for (int i = 0; i < 5; ++i) handles.push_back(pool.launch("part", [i] { return i + 1; }));
    CHECK(wait_all(handles));
    for (auto& each : handles) {
      CHECK(each.is_completed());
      CHECK_FALSE(magpie::detail::task_access::base(each)->subsequents.is_closed());  // completed by its "finished" store alone
    }
    task<int> after = pool.launch("after", [&handles] { return handles[0].get_result() * 10; }, handles[0]);
    CHECK(after.get_result() == 10);
    CHECK(magpie::detail::task_access::base(handles[0])->subsequents.is_closed());  // the launch behind it closed the list
    task_event gate("gate", pool);
    gate.add_prerequisites(handles[1]);
    gate.trigger();
    CHECK(gate.wait(std::chrono::seconds(10)));
    CHECK(when_any(std::vector<task<int>>{handles[2]}).wait(std::chrono::seconds(10)));
    CHECK(wait_any(std::vector<task<int>>{handles[3]}) == std::optional<std::size_t>(0));
    bool parent_ran = false;
    task<> parent = pool.launch("parent", [&handles, &parent_ran] {
      add_nested(handles[4]);
      parent_ran = true;
    });
    CHECK(parent.wait(std::chrono::seconds(10)));
    CHECK(parent_ran);
    int sum = 0;
    for (auto& each : handles) sum += each.get_result();
    CHECK(sum == 15);
    handles.clear();
    after = task<int>();
    parent = task<>();
    below.wait();
    below = task<>();
    CHECK(detail::live_tasks() == before + 1);  // the gate, until it goes out of scope
  }
  SUBCASE("nested tasks, a throwing body, invalid and completed handles in the range") {
    std::atomic<int> inner_done{0};
    std::vector<task<>> handles;
    handles.push_back(task<>());
    handles.push_back(make_completed_task(7));
    for (int i = 0; i < 5; ++i) {
      handles.push_back(pool.launch("outer", [&inner_done] {
        add_nested(magpie::launch("inner", [&inner_done] { inner_done.fetch_add(1); }));
      }));
    }
    handles.push_back(pool.launch("throws", [] { throw std::runtime_error("boom"); }));
    handles.push_back(task<>());
    CHECK(wait_all(handles));
    CHECK(inner_done.load() == 5);
    for (auto& each : handles) CHECK(each.is_completed());
    CHECK(handles[7].has_exception());
    CHECK_THROWS_AS(handles[7].get_result(), std::runtime_error);
    handles.clear();
    CHECK(detail::live_tasks() == before);
  }
  pool.detach();
}

TEST_CASE("held_runs stress: wait_all takes runs back while workers steal from the same deque" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {1u, 2u, 8u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 20'000;
      std::vector<std::atomic<int>> runs(count);
      std::vector<task<>> handles;
      handles.reserve(count);
      for (int i = 0; i < count; ++i) handles.push_back(pool.launch("part", [&runs, i] { runs[static_cast<std::size_t>(i)].fetch_add(1); }));
      CHECK(wait_all(handles));
      int wrong = 0;
      for (auto& each : runs) wrong += each.load() != 1 ? 1 : 0;
      CHECK(wrong == 0);
      // Fork-join from inside tasks on the workers: each waits for its own children.
      std::atomic<long> total{0};
      std::vector<task<>> outer;
      for (int o = 0; o < 8; ++o) {
        outer.push_back(pool.launch("outer", [&total] {
          std::vector<task<long>> children;
          for (long c = 0; c < 500; ++c) children.push_back(magpie::launch("child", [c] { return c; }));
          wait_all(children);
          long sum = 0;
          for (auto& child : children) sum += child.get_result();
          total.fetch_add(sum);
        }));
      }
      CHECK(wait_all(outer));
      CHECK(total.load() == 8L * (499L * 500L / 2));
      handles.clear();
      pool.detach();
    }
  }
}

TEST_CASE("held_runs stress: another thread launches behind and waits for the tasks a run is completing" *
          doctest::test_suite("stress")) {
  for (int repeat = 0; repeat < test::stress_repeat(); ++repeat) {
    for (unsigned workers : {0u, 1u}) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      constexpr int count = 4096;
      std::vector<task<int>> handles;
      handles.reserve(count);
      for (int i = 0; i < count; ++i) handles.push_back(pool.launch("part", [i] { return i; }));
      const std::vector<task<int>> copies = handles;  // the other thread's own handles
      std::atomic<bool> go{false};
      std::atomic<long> behind_sum{0};
      long waited_sum = 0;
      std::thread other([&] {
        while (!go.load()) std::this_thread::yield();
        std::vector<task<>> behind;
        for (int i = count - 1; i >= 0; --i) {  // newest first: close behind the run
          const task<int>& part = copies[static_cast<std::size_t>(i)];
          if (i % 2 == 0) {
            behind.push_back(pool.launch("behind", [&behind_sum, part] { behind_sum.fetch_add(part.get_result()); }, part));
          } else {
            part.wait();  // blocks, or finds it complete
            waited_sum += part.get_result();
          }
        }
        wait_all(behind);  // without workers, this wait runs them
      });
      go.store(true);
      CHECK(wait_all(handles));
      other.join();
      CHECK(behind_sum.load() == (count / 2) * static_cast<long>(count - 2) / 2);
      CHECK(waited_sum == (count / 2) * static_cast<long>(count) / 2);
      handles.clear();
      pool.detach();
    }
  }
}

// What a wait runs in launch order is never hidden from whoever looks for work meanwhile:
// wait_all takes runs of its handles off the deque at once (lib/tasks/held_runs.h), and a body
// that helps or blocks puts the rest back first. Each of these would hang while the rest
// was held aside: a body helping until a later task sets a flag, a join whose
// child lies later in the run, an event a later task triggers, run by a helping thread.
TEST_CASE("held_runs: with no workers, tasks a wait has taken but not begun stay visible to helpers") {
  for (bool all : {false, true}) {
    CAPTURE(all);
    no_leaks leaks;
    scheduler pool(test::options_with(0));
    auto wait_for = [all](std::vector<task<>>& tasks) {
      if (all) {
        CHECK(wait_all(tasks, std::chrono::seconds(30)));
      } else {  // newest first: the first wait runs the rest in launch order
        for (auto each = tasks.rbegin(); each != tasks.rend(); ++each) CHECK(each->wait(std::chrono::seconds(30)));
      }
    };
    SUBCASE("a body helps until a later task sets a flag") {
      std::atomic<bool> flag{false};
      std::atomic<bool> saw_flag{false};
      std::vector<task<>> parts;
      for (int i = 0; i < 8; ++i) {
        parts.push_back(pool.launch("part", [&pool, &flag, &saw_flag, i] {
          auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (i == 1 && !flag.load() && std::chrono::steady_clock::now() < give_up) pool.try_run_one();
          if (i == 1) saw_flag = flag.load();
          if (i == 2) flag = true;
        }));
      }
      wait_for(parts);
      CHECK(saw_flag.load());
    }
    SUBCASE("a body joins a task_group whose child was launched after it") {
      task_group group(pool);
      std::atomic<bool> child_ran{false};
      auto launch_part = [&pool, &group](int i) { return pool.launch("part", [&group, i] { if (i == 3) group.wait(); }); };
      std::vector<task<>> parts;
      for (int i = 0; i < 4; ++i) parts.push_back(launch_part(i));
      group.run([&child_ran] { child_ran = true; });
      for (int i = 4; i < 8; ++i) parts.push_back(launch_part(i));
      wait_for(parts);
      CHECK(child_ran.load());
    }
    SUBCASE("a body waits for an event a later task triggers, which a helping thread runs") {
      task_event event("triggered by a later task", pool);
      std::atomic<bool> waiting{false};
      std::atomic<bool> stop{false};
      std::atomic<bool> saw_trigger{false};
      std::vector<task<>> parts;
      for (int i = 0; i < 8; ++i) {
        parts.push_back(pool.launch("part", [&, i] {
          if (i == 1) {
            waiting = true;
            saw_trigger = event.wait(std::chrono::seconds(30));
          }
          if (i == 2) event.trigger();
        }));
      }
      std::thread helper([&] {
        while (!waiting.load()) std::this_thread::yield();
        while (!stop.load()) {
          if (!pool.try_run_one()) std::this_thread::yield();
        }
      });
      wait_for(parts);
      stop = true;
      helper.join();
      CHECK(saw_trigger.load());
    }
  }
}

// A spill puts the run's rest back below what the body launched since: a join pops its own
// child only while it is the newest entry, and with a later task of the run on top it
// would help that task, nested inside the body the task waits for (o1 would wait for o0,
// beneath it on the stack).
TEST_CASE("held_runs: a body of a wait_all run that spills still joins its own task_group child first") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event unrelated("never triggered", pool);
    task_event first_done("triggered by o0 after its join", pool);
    std::atomic<bool> o1_saw_trigger{true};
    auto launch_part = [&](int i) {
      return pool.launch("part", [&, i] {
        if (i == 0) {
          task_group group(pool);
          group.run([] {});
          CHECK_FALSE(unrelated.wait(std::chrono::milliseconds(1)));  // helps or blocks: spills the run
          group.wait();
          first_done.trigger();
        }
        if (i == 1 && !first_done.wait(std::chrono::seconds(5))) o1_saw_trigger = false;
      });
    };
    std::vector<task<>> parts;
    for (int i = 0; i < 4; ++i) parts.push_back(launch_part(i));
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(o1_saw_trigger.load());
    unrelated.trigger();
  }
}

// The same when a body of the run first takes back a task from below where the run was
// taken, and that task launches the child: the child lies below the run's old end, and the
// spill must still put the run's rest beneath it (the deque's low water); otherwise x1 is
// helped inside a's join, inside x0, and waits for a.
TEST_CASE("held_runs: a task taken back below a wait_all's run still joins its own child first when the run spills") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    task_event unrelated("never triggered", pool);
    task_event a_done("triggered by a after its join", pool);
    std::atomic<bool> a_joined{false};
    std::atomic<bool> x1_saw_trigger{true};
    task<> filler = pool.launch("below", [] {});
    task<> a = pool.launch("a", [&] {
      task_group group(pool);
      group.run([] {});
      CHECK_FALSE(unrelated.wait(std::chrono::milliseconds(1)));  // helps or blocks: spills the run
      group.wait();
      a_joined = true;
      a_done.trigger();
    });
    task<> x1 = pool.launch("x1", [&] {
      if (!a_joined.load() && !a_done.wait(std::chrono::seconds(5))) x1_saw_trigger = false;
    });
    task<> x0 = pool.launch("x0", [&a] { a.wait(); });
    std::vector<task<>> parts{x1, x0};  // taken as a run, newest first, above a
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    CHECK(x1_saw_trigger.load());
    unrelated.trigger();
    filler.wait();
  }
}

// A join that finds another task on top puts it back; that look takes nothing, so a spill
// must not lift that task, older than the run, above the run's rest (the join would then
// run it nested inside the body it waits for, before the run's own h1). Once h1 has run,
// the join may still help with the older task while the child's count has not yet dropped:
// that is not lifting.
TEST_CASE("held_runs: a join's look at an older task does not lift it above a wait_all's run when the run spills") {
  for (unsigned workers : {0u, 1u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler_options options;
    options.workers = workers;
    options.background_workers = 0;
    scheduler pool(options);
    std::atomic<std::thread::id> h0_thread{};
    std::atomic<bool> h0_joining{false};
    std::atomic<bool> flag{false};
    std::atomic<bool> child_started{false};
    std::atomic<bool> child_finished{false};
    std::atomic<bool> older_lifted{false};
    std::thread helper;
    task<> filler = pool.launch("below", [] {});
    task<> older = pool.launch("older than the run", [&] {
      // Nested in h0's join, before the run's h1: lifted above it.
      if (h0_joining.load() && h0_thread.load() == std::this_thread::get_id() && !flag.load()) older_lifted = true;
    });
    task<> h1 = pool.launch("h1", [&] {
      flag = true;
      while (!child_finished.load()) std::this_thread::yield();
    });
    task<> h0 = pool.launch("h0", [&] {
      h0_thread = std::this_thread::get_id();
      task_group group(pool);
      // Another thread runs the child (this helper, or a worker that takes it first): the
      // join finds only "older" on top.
      helper = std::thread([&] {
        group.run([&] {
          child_started = true;
          while (!flag.load()) std::this_thread::yield();
          child_finished = true;
        });
        while (!child_finished.load()) {
          if (!pool.try_run_one()) std::this_thread::yield();
        }
      });
      while (!child_started.load()) std::this_thread::yield();
      h0_joining = true;
      group.wait();  // puts "older" back after looking at it, then helps: spills
      h0_joining = false;
    });
    std::vector<task<>> parts{h1, h0};
    CHECK(wait_all(parts, std::chrono::seconds(30)));
    older.wait();
    filler.wait();
    helper.join();
    CHECK_FALSE(older_lifted.load());
  }
}

// A body of a run wait_all takes back empties the handle that starts its next run: the next
// look must not read through it (newest first and oldest first).
TEST_CASE("held_runs: wait_all goes on past a handle a body emptied at the start of the next run") {
  for (int mode = 0; mode < 3; ++mode) {  // plain main, attached, beneath a worker's body
    CAPTURE(mode);
    no_leaks leaks;
    // Before the pool: the emptied handle's task is not waited for, and the pool's end runs it.
    std::atomic<int> ran{0};
    scheduler_options options = test::options_with(mode == 2 ? 1 : 0);
    options.background_workers = 0;  // one pool thread at most: the bodies touch `handles`
    scheduler pool(options);
    if (mode == 1) pool.attach(named_thread::game);
    auto waits_for_batch = [&pool, &ran] {
      std::vector<task<>> handles(4);
      handles[0] = pool.launch("empties a later handle", [&handles, &ran] { ++ran, handles[2] = task<>(); });
      handles[1] = pool.launch("b", [&ran] { ++ran; });
      task<> between = pool.launch("not waited for", [] {});  // ends the run
      handles[2] = pool.launch("c", [&ran] { ++ran; });
      handles[3] = pool.launch("d", [&ran] { ++ran; });
      CHECK(wait_all(handles));
      CHECK_FALSE(handles[2].is_valid());
      between.wait();
      wait_all(std::vector<task<>>{between});
    };
    if (mode == 2) {
      // On the worker alone: this thread waits only once the worker has taken it (a wait
      // before would take it back and run it here, beside the worker).
      std::atomic<bool> started{false};
      task<> outer = pool.launch("outer", [&] {
        started.store(true);
        waits_for_batch();
      });
      while (!started.load()) std::this_thread::yield();
      outer.wait();
    } else {
      waits_for_batch();
    }
    CHECK(ran >= 3);
    if (mode == 1) pool.detach();
  }
}
