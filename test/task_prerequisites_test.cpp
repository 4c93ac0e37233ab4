// Suite "task_prerequisites": what links a task to the tasks it waits for: prerequisites
// as tasks, events and ranges, their release once the task starts (or, for an inline task,
// once the completion that ran it ends), a chain's hops, a prerequisite handed over by
// rvalue (against waiters, other handles, cancellation and its scheduler's end), and
// subsequents linked while their prerequisite completes.
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <ranges>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::no_leaks;

TEST_CASE("task_prerequisites: a task runs only after all its prerequisites, given as tasks, events and ranges") {
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::atomic<int> finished{0};
    std::vector<task<int>> parts;
    for (int i = 0; i < 10; ++i) {
      parts.push_back(pool.launch("part", [&, i] {
        finished.fetch_add(1);
        return i;
      }));
    }
    task_event gate("gate", pool);
    task<> single = pool.launch("single", [&] { finished.fetch_add(1); });
    std::atomic<int> seen_when_run{-1};
    task<int> total = pool.launch("total", [&] {
      seen_when_run.store(finished.load());
      int sum = 0;
      for (auto& part : parts) sum += part.get_result();
      return sum;
    }, parts);
    task<> after = pool.launch("after", [&] { CHECK(total.is_completed()); CHECK(gate.is_completed()); },
                               prerequisites(total, gate, single, task<>()));
    CHECK_FALSE(after.wait(std::chrono::milliseconds(1)));  // the gate is shut
    gate.trigger();
    after.wait();
    CHECK(total.get_result() == 45);
    CHECK(seen_when_run.load() >= 10);
  }
}

TEST_CASE("task_prerequisites: prerequisites from a range that makes its handles as it is read are kept until linked") {
  // Each handle such a range yields is a temporary: without the buffer keeping it, a
  // prerequisite that completed meanwhile could be freed before the launch linked to it.
  for (unsigned workers : {0u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    for (int round = 0; round < 200; ++round) {
      std::atomic<int> finished{0};
      test::made_while_read launched(16, [&](std::size_t) {
        return pool.launch("made while read", [&finished] { finished.fetch_add(1); });
      });
      int seen = -1;
      pool.launch("after", [&] { seen = finished.load(); }, launched).wait();
      CHECK(seen == 16);
    }
  }
}

TEST_CASE("task_prerequisites: prerequisites are released once the task starts") {
  no_leaks leaks;
  scheduler pool(test::options_with(0));  // one thread: deterministic
  std::int64_t before = detail::live_tasks();
  std::int64_t during = -1;
  task<> starts;
  {
    task_event gate("gate", pool);
    starts = pool.launch("starts", [&] { during = detail::live_tasks(); }, gate);
    gate.trigger();
  }  // the gate now lives only through `starts`'s reference to it
  CHECK(detail::live_tasks() == before + 2);
  starts.wait();
  CHECK(during == before + 1);  // the gate was released before the body ran
}

TEST_CASE("task_prerequisites: a chain runs hop by hop, whether or not anything else holds the hops") {
  // Each hop begins as its prerequisite's completion removes its last lock, and the runner
  // drops both its references to the finished hop at once (lib/tasks/task.cpp, run_queued):
  // the last ones, or not, when the caller or the next body keeps a handle to it.
  enum class holders { none, caller, next_body };
  for (unsigned workers : {0u, 2u}) {
    for (holders held : {holders::none, holders::caller, holders::next_body}) {
      CAPTURE(workers);
      CAPTURE(static_cast<int>(held));
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr int hops = 5000;
      std::vector<task<int>> kept;
      std::vector<int> order;
      task_event gate("gate", pool);
      task<int> last = pool.launch("first", [&order] {
        order.push_back(0);
        return 0;
      }, gate);
      for (int i = 1; i < hops; ++i) {
        if (held == holders::caller) kept.push_back(last);
        if (held == holders::next_body) {
          last = pool.launch("hop", [&order, before = last, i] {
            order.push_back(i);
            return before.get_result() + 1;
          }, last);
        } else {
          last = pool.launch("hop", [&order, i] {
            order.push_back(i);
            return i;
          }, last);
        }
      }
      gate.trigger();
      CHECK(last.get_result() == hops - 1);
      REQUIRE(order.size() == static_cast<std::size_t>(hops));
      for (int i = 0; i < hops; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
      for (std::size_t i = 0; i < kept.size(); ++i) CHECK(kept[i].get_result() == static_cast<int>(i));
    }
  }
}

TEST_CASE("task_prerequisites: a prerequisite handed over by rvalue empties the handle; the task still runs after it") {
  // The link keeps the handle's reference (lib/tasks/task_launch.cpp, link_only_prerequisite)
  // when it is the prerequisite's only handle; else, or when the prerequisite is complete
  // already, the launch holds the handle until it returns and then lets it go.
  for (unsigned workers : test::worker_counts) {
    for (placement where : {placement(), run_inline}) {
      CAPTURE(workers);
      CAPTURE(where.kind() == detail::task_kind::inline_run);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      std::atomic<int> step{0};
      task_event gate("gate", pool);
      task<int> first = pool.launch("first", [&step] { return step.fetch_add(1) == 0 ? 5 : -1; }, gate);
      task<int> second = pool.launch("second", [&step] { return step.fetch_add(1) == 1 ? 6 : -1; }, std::move(first), where);
      CHECK_FALSE(first.is_valid());  // NOLINT(bugprone-use-after-move): emptied by the launch
      CHECK_FALSE(second.is_completed());
      // A prerequisite with another handle: the launch takes the moved one, the copy stays.
      task<int> shared = pool.launch("shared", [] { return 7; }, gate);
      task<int> copy = shared;
      task<int> third = pool.launch("third", [&copy] { return copy.get_result() + 1; }, std::move(shared), where);
      CHECK_FALSE(shared.is_valid());  // NOLINT(bugprone-use-after-move)
      CHECK(copy.is_valid());
      gate.trigger();
      CHECK(second.get_result() == 6);
      CHECK(third.get_result() == 8);
      CHECK(copy.get_result() == 7);
      // Complete already, or invalid: the task runs at once (inline) or soon (queued).
      task<int> done = make_completed_task(3);
      task<int> after_done = pool.launch("after done", [] { return 4; }, std::move(done), where);
      CHECK_FALSE(done.is_valid());  // NOLINT(bugprone-use-after-move)
      CHECK(after_done.get_result() == 4);
      task<int> nothing;
      CHECK(pool.launch("after nothing", [] { return 9; }, std::move(nothing), where).get_result() == 9);
    }
  }
}

TEST_CASE("task_prerequisites: an inline task's one prerequisite is freed once the completion that ran the task ends") {
  // The completer takes over the task's reference to the prerequisite and drops it with its
  // own (lib/tasks/task.cpp, release_subsequents): nothing of the prerequisite is left after.
  for (unsigned workers : test::worker_counts) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    std::int64_t before = detail::live_tasks();
    task<> last;
    {
      task_event gate("gate", pool);
      task<int> first = pool.launch("first", [] { return 1; }, gate);
      last = pool.launch("inline", [] {}, first, run_inline);
      gate.trigger();
    }  // the gate's and first's handles go: only `last`'s reference holds first now
    last.wait();
    // first and the gate go with their completions (the gate's at once, first's at the end of
    // the completion that ran `last`, on whichever thread ran first).
    for (int i = 0; i < 10000 && detail::live_tasks() != before + 1; ++i) std::this_thread::yield();
    CHECK(detail::live_tasks() == before + 1);
  }
}

TEST_CASE("task_prerequisites stress: a subsequent launched just before the prerequisite's last handle goes always runs" *
          doctest::test_suite("stress")) {
  // A task with no handle left is closed without a locked exchange (lib/tasks/task.cpp,
  // close_subsequents). Here the prerequisite completes on a worker while this
  // thread pushes a subsequent through its last handle and drops it: an edge lost to a
  // close that ignored the push would leave its subsequent waiting for good. The window
  // between the close's load and store is too narrow to hit reliably here; the model
  // test/model/task_close_model.cpp explores it exhaustively.
  for (unsigned workers : {1u, 2u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 20000 * test::stress_repeat();
    std::atomic<int> ran{0};
    std::vector<task<>> subsequents;
    subsequents.reserve(static_cast<std::size_t>(rounds));
    std::vector<std::atomic<bool>> go(static_cast<std::size_t>(rounds));
    for (std::size_t i = 0; i < go.size(); ++i) {
      // The body ends as the push begins, so that the completion's close races the push.
      task<> prerequisite = pool.launch("prerequisite", [&flag = go[i]] {
        while (!flag.load()) detail::cpu_relax();
      });
      go[i].store(true);
      subsequents.push_back(pool.launch("subsequent", [&ran] { ran.fetch_add(1); }, prerequisite));
    }  // each prerequisite's last handle goes here, as it completes
    CHECK(wait_all(subsequents, std::chrono::seconds(30)));
    CHECK(ran.load() == rounds);
  }
}

TEST_CASE("task_prerequisites stress: a prerequisite handed over by rvalue while it completes on a worker is freed once" *
          doctest::test_suite("stress")) {
  // The launch links first and uncounts the handle after (task_base.h, "Who frees a task"):
  // meanwhile the prerequisite may complete on a worker, run the inline subsequent and let
  // go of the link's reference. Whichever of the two leaves the count at zero frees it,
  // once (ASan: no use after free; no_leaks: nothing left).
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 20000 * test::stress_repeat();
    std::atomic<int> ran{0};
    std::vector<task<int>> subsequents;
    subsequents.reserve(static_cast<std::size_t>(rounds));
    std::vector<std::atomic<bool>> go(static_cast<std::size_t>(rounds));
    for (std::size_t i = 0; i < go.size(); ++i) {
      task<int> prerequisite = pool.launch("prerequisite", [&flag = go[i], i] {
        while (!flag.load()) detail::cpu_relax();
        return static_cast<int>(i);
      });
      go[i].store(true);
      subsequents.push_back(pool.launch("subsequent", [&ran] { return ran.fetch_add(1) >= 0 ? 1 : 0; },
                                        std::move(prerequisite), i % 2 == 0 ? run_inline : placement()));
      CHECK_FALSE(prerequisite.is_valid());  // NOLINT(bugprone-use-after-move)
    }
    CHECK(wait_all(subsequents, std::chrono::seconds(30)));
    CHECK(ran.load() == rounds);
  }
}

namespace {

// long_text is a result whose characters live on the heap (past the small-string buffer):
// read after its task is freed, ASan reports it.
std::string long_text(std::size_t i) { return std::string(48, 'p') + std::to_string(i); }

// borrowed_length is the length of the result of `prior`, read through no reference of the
// reader's own (as future::next reads it): an inline task whose one prerequisite is `prior`
// may do so, the completion that runs it (or the launch that finds it complete) holding it.
std::size_t borrowed_length(detail::task_base* prior) {
  detail::rethrow_if_failed(prior);
  return static_cast<detail::task_with_result<std::string>*>(prior)->result().size();
}

}  // namespace

TEST_CASE("task_prerequisites stress: an inline task's handed prerequisite stays alive for its body while waiters take back the task" *
          doctest::test_suite("stress")) {
  // Each borrower is an inline task whose one prerequisite, the value, was handed over by
  // rvalue (its edge keeps the value's only reference) and whose body reads the value with
  // no reference of its own. Two threads wait for each borrower as soon as it is launched:
  // a wait claims the borrower's prerequisites (to retract them: it may run the value
  // itself) and drops the edge's reference, while the value completes on a worker or a
  // waiter, whose completion then finds the borrower's word moved by the claim and begins
  // it by remove_locks and try_begin instead of one CAS. Whoever runs the borrower, the
  // value must outlive its body (ASan: no use after free), and each is freed once. An inline
  // value's completion instead may take the borrower's reference over, unless a wait
  // claimed it first.
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : test::wide_worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      constexpr std::size_t count = 1500;
      std::vector<task<std::size_t>> borrowers(count);
      std::atomic<std::size_t> published{0};
      std::atomic<int> timed_out{0};
      auto waiter = [&](std::size_t first) {
        for (std::size_t i = first; i < count; i += 1) {
          // acquire: pairs with the publishing store
          while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
          if (!borrowers[i].wait(std::chrono::seconds(30))) timed_out.fetch_add(1);
        }
      };
      std::thread first_waiter(waiter, 0);
      std::thread second_waiter(waiter, 0);
      for (std::size_t i = 0; i < count; ++i) {
        // Every other value is itself inline, behind a queued source: its completion, run in
        // the source's, takes over the borrower's reference to it (drain_queued drops it).
        task<std::string> value = i % 2 == 0 ? pool.launch("value", [i] { return long_text(i); })
                                             : pool.launch("value", [i] { return long_text(i); },
                                                           pool.launch("source", [] {}), run_inline);
        detail::task_base* borrowed = detail::task_access::base(value);
        borrowers[i] = pool.launch("borrower", [borrowed] { return borrowed_length(borrowed); }, std::move(value),
                                   run_inline);
        published.store(i + 1, std::memory_order_release);  // release: the handle is written before the waiters read it
      }
      first_waiter.join();
      second_waiter.join();
      CHECK(timed_out.load() == 0);
      for (std::size_t i = 0; i < count; ++i) CHECK(borrowers[i].get_result() == long_text(i).size());
    }
  }
}

TEST_CASE("task_prerequisites stress: a handed prerequisite whose other handle goes on another thread meanwhile is freed once" *
          doctest::test_suite("stress")) {
  // The launch hands the moved handle's reference to its edge only when that handle is the
  // value's only one. Here a second handle goes on another thread as the launch looks: that
  // thread waits for the value through it first (and may run it), then drops it; the value
  // may also be canceled meanwhile (its body skipped: the borrower rethrows task_canceled).
  // Either way the value is freed once, after the borrower's body (ASan, no_leaks).
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : test::wide_worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      test::diagnostic_recorder recorder;
      scheduler pool(test::options_with(workers));
      constexpr std::size_t count = 1500;
      std::vector<task<std::string>> copies(count);
      std::vector<cancellation_token> tokens(count);
      std::vector<task<std::size_t>> borrowers(count);
      std::atomic<std::size_t> published{0};
      std::thread dropper([&] {
        for (std::size_t i = 0; i < count; ++i) {
          // acquire: pairs with the publishing store
          while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
          if (i % 3 == 0) tokens[i].cancel();
          if (i % 2 == 0) copies[i].wait();
          copies[i] = task<std::string>();  // its handle goes as the launch below looks at the count
        }
      });
      for (std::size_t i = 0; i < count; ++i) {
        task<std::string> value = pool.launch("value", [i] { return long_text(i); }, tokens[i]);
        copies[i] = value;
        detail::task_base* borrowed = detail::task_access::base(value);
        published.store(i + 1, std::memory_order_release);  // release: the copy is written before the dropper reads it
        borrowers[i] = pool.launch("borrower", [borrowed] { return borrowed_length(borrowed); }, std::move(value),
                                   run_inline);
      }
      dropper.join();
      std::size_t canceled = 0;
      for (std::size_t i = 0; i < count; ++i) {
        try {
          const std::size_t length = borrowers[i].get_result();
          CHECK(length == long_text(i).size());
        } catch (const task_canceled&) {
          ++canceled;
          CHECK(i % 3 == 0);  // only a canceled value's body is skipped
        }
      }
      CHECK(canceled <= (count + 2) / 3);
      CHECK(recorder.count() == 0);  // every value's cancellation was asked for, by its borrower
    }
  }
}

TEST_CASE("task_prerequisites: a handed prerequisite its launcher ran through the handle keeps the reference left to that handle") {
  // A wait that takes the task back off this thread's deque and runs it leaves the queue's
  // reference to the task's handles (the last one to go drops it). Handed over afterwards,
  // the handle's reference and that one must both go: the launch keeps the handle until it
  // returns and takes a reference of its own for the edge.
  for (unsigned workers : test::worker_counts) {
    for (placement where : {placement(), run_inline}) {
      CAPTURE(workers);
      CAPTURE(where.kind() == detail::task_kind::inline_run);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      pool.attach(named_thread::game);
      for (std::size_t i = 0; i < 200; ++i) {
        task<std::string> value = launch("value", [i] { return long_text(i); });
        value.wait();
        detail::task_base* borrowed = detail::task_access::base(value);
        // Only an inline task may borrow: a queued one lets go of its prerequisites as it begins.
        const bool borrows = where.kind() == detail::task_kind::inline_run;
        task<std::size_t> after = launch(
            "after", [borrowed, borrows, i] { return borrows ? borrowed_length(borrowed) : long_text(i).size(); },
            std::move(value), where);
        CHECK_FALSE(value.is_valid());  // NOLINT(bugprone-use-after-move): emptied by the launch
        CHECK(after.get_result() == long_text(i).size());
      }
      pool.detach();
    }
  }
}

TEST_CASE("task_prerequisites stress: handed prerequisites whose scheduler goes pass their value or task_never_ran on" *
          doctest::test_suite("stress")) {
  // Values on a scheduler that is destroyed while its workers run them; their borrowers,
  // inline on a scheduler that stays, were handed the values' only handles. Half the values
  // wait behind a gate opened before the destruction: they run then, and each borrower runs
  // in its value's completion, on a worker or the destroying thread. The other half wait
  // behind a gate opened after it: each becomes ready with its scheduler gone (reported),
  // is completed as never run, and its borrower reads task_never_ran in that completion.
  // Either way the borrower reads its value while the completion holds it (ASan), and the
  // value is freed once, with the reference the completion took over (no_leaks).
  for (int round = 0; round < test::stress_repeat(); ++round) {
    for (unsigned workers : test::wide_worker_counts) {
      CAPTURE(workers);
      no_leaks leaks;
      test::diagnostic_recorder recorder;
      scheduler staying(test::options_with(1));
      constexpr std::size_t count = 400;
      std::vector<task<std::size_t>> borrowers(count);
      std::atomic<int> values_ran{0};
      task_event late_gate("late gate", staying);
      {
        scheduler going(test::options_with(workers));
        task_event early_gate("early gate", going);
        for (std::size_t i = 0; i < count; ++i) {
          auto body = [i, &values_ran] {
            values_ran.fetch_add(1);
            return long_text(i);
          };
          task<std::string> value = i % 2 == 0 ? going.launch("value", body, early_gate)
                                               : going.launch("value", body, late_gate);
          detail::task_base* borrowed = detail::task_access::base(value);
          borrowers[i] = staying.launch("borrower", [borrowed] { return borrowed_length(borrowed); }, std::move(value),
                                        run_inline);
        }
        early_gate.trigger();
      }  // destroyed as its workers run the early values (and their borrowers, inline)
      late_gate.trigger();
      std::size_t never_ran = 0;
      for (std::size_t i = 0; i < count; ++i) {
        try {
          const std::size_t length = borrowers[i].get_result();
          CHECK(length == long_text(i).size());
          CHECK(i % 2 == 0);
        } catch (const task_never_ran&) {
          ++never_ran;
          CHECK(i % 2 == 1);
        }
      }
      CHECK(never_ran == count / 2);
      CHECK(values_ran.load() == static_cast<int>(count / 2));
      // Each late value is reported as never run; nothing else is (each task_never_ran was
      // asked for, by its borrower).
      CHECK(recorder.count_naming("became ready after its scheduler was destroyed") == count / 2);
      CHECK(recorder.count() == count / 2);
    }
  }
}
TEST_CASE("task_prerequisites: an inline prerequisite's handle kept by the edge goes as a handle, whoever lets go of it") {
  // Handed the only handle of an inline task, the edge keeps it as a handle
  // (task_edge::holds_handle). Whoever lets go of the edge's hold drops a handle: the
  // completion that runs the subsequent (a chain's link), the subsequent's own start (a
  // queued one), or a wait for the subsequent that claims its prerequisites before the
  // prerequisite completed. Dropped as a plain reference, the handle would stay counted and
  // the prerequisite would never be freed (no_leaks, live_tasks).
  for (unsigned workers : test::worker_counts) {
    for (placement where : {placement(), run_inline}) {
      CAPTURE(workers);
      CAPTURE(where.kind() == detail::task_kind::inline_run);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      const std::int64_t before = detail::live_tasks();
      {
        task_event gate("gate", pool);
        task<int> value = pool.launch("value", [] { return 5; }, gate, run_inline);
        task<int> after = pool.launch("after", [] { return 6; }, std::move(value), where);
        CHECK_FALSE(value.is_valid());  // NOLINT(bugprone-use-after-move): the edge keeps it
        // The wait claims after's prerequisites (the value cannot run: its gate is shut) and
        // lets go of the edge's handle before the value completes.
        CHECK_FALSE(after.wait(std::chrono::milliseconds(1)));
        gate.trigger();
        CHECK(after.get_result() == 6);
      }
      {
        task_event gate("gate", pool);
        task<int> link = pool.launch("link", [] { return 1; }, gate, run_inline);
        for (int i = 0; i < 50; ++i) {
          link = pool.launch("link", [] { return 1; }, std::move(link), i % 5 == 4 ? where : run_inline);
        }
        gate.trigger();
        CHECK(link.get_result() == 1);
      }
      for (int i = 0; i < 10000 && detail::live_tasks() != before; ++i) std::this_thread::yield();
      CHECK(detail::live_tasks() == before);
    }
  }
}

TEST_CASE("task_prerequisites stress: an inline prerequisite handed to its edge while it completes on a worker is freed once" *
          doctest::test_suite("stress")) {
  // The edge keeps an inline prerequisite's only handle, and the launch does not look at the
  // prerequisite after pushing the edge: from then on a worker may complete it, close its
  // list with a plain store (the one handle being the newest edge's), run the subsequent
  // and free the prerequisite, all while the launch returns. Each subsequent runs once, each
  // prerequisite is freed once (ASan: nothing read after the free; no_leaks). A plain push
  // by another handle meanwhile (every third round keeps a copy, pushed through on this
  // thread) must not be lost to that store: the copy makes two handles.
  for (unsigned workers : {1u, 2u, 8u}) {
    CAPTURE(workers);
    no_leaks leaks;
    scheduler pool(test::options_with(workers));
    const int rounds = 20000 * test::stress_repeat();
    std::atomic<int> ran{0};
    std::vector<task<int>> subsequents;
    subsequents.reserve(static_cast<std::size_t>(rounds) * 2);
    std::vector<std::atomic<bool>> go(static_cast<std::size_t>(rounds));
    for (std::size_t i = 0; i < go.size(); ++i) {
      task<> source = pool.launch("source", [&flag = go[i]] {
        while (!flag.load()) detail::cpu_relax();
      });
      task<int> prerequisite = pool.launch("prerequisite", [i] { return static_cast<int>(i); }, source, run_inline);
      task<int> copy = i % 3 == 0 ? prerequisite : task<int>();
      go[i].store(true);  // the source ends, and the prerequisite completes on the worker, as we link
      subsequents.push_back(pool.launch("subsequent", [&ran] { return ran.fetch_add(1) >= 0 ? 1 : 0; },
                                        std::move(prerequisite), i % 2 == 0 ? run_inline : placement()));
      if (copy.is_valid()) {
        subsequents.push_back(pool.launch("through copy", [&ran] { return ran.fetch_add(1) >= 0 ? 1 : 0; }, copy));
      }
    }
    CHECK(wait_all(subsequents, std::chrono::seconds(30)));
    CHECK(ran.load() == static_cast<int>(subsequents.size()));
  }
}

TEST_CASE("task_prerequisites: a wait that lets go of an edge's handle before its prerequisite completed clears the list's tag") {
  // The launch that keeps an inline prerequisite's only handle in its edge tags the
  // prerequisite's subsequent list; while the tag stands, the completer takes its one
  // handle for the edge's and closes the list without the exchange. A waiter that lets go
  // of that handle early (it claims the subsequent's prerequisites) clears the tag first:
  // left standing, a handle made afterwards by the prerequisite's own body (this_task())
  // could push while the completer closes with a plain store, and its edge would be lost.
  for (unsigned workers : test::worker_counts) {
    for (placement where : {placement(), run_inline}) {
      CAPTURE(workers);
      CAPTURE(where.kind() == detail::task_kind::inline_run);
      no_leaks leaks;
      scheduler pool(test::options_with(workers));
      task_event gate("gate", pool);
      task<int> value = pool.launch("value", [] { return 5; }, gate, run_inline);
      // Held by the system until it completes (its gate is shut): safe to look at.
      const detail::task_base* raw = detail::task_access::base(value);
      task<int> after = pool.launch("after", [] { return 6; }, std::move(value), where);
      CHECK(raw->subsequents.newest_is_tagged());
      CHECK_FALSE(after.wait(std::chrono::milliseconds(1)));  // claims after's prerequisites
      CHECK_FALSE(raw->subsequents.newest_is_tagged());
      gate.trigger();
      CHECK(after.get_result() == 6);
    }
  }
}
