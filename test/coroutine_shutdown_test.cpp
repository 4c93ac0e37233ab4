// Suite "coroutine_shutdown": coroutine tasks whose scheduler is destroyed while they are
// suspended — reported by name, their captures freed, their tasks completed as never
// resumed, whether they await an event, another scheduler's task or an abandoned
// coroutine's task.
#include "support.h"
#include "task_support.h"

#include <magpie/coroutine.h>
#include <magpie/magpie.h>

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

using namespace magpie;
using test::no_leaks;

TEST_CASE("coroutine: a coroutine whose scheduler went before it could resume is reported by name and freed") {
  test::diagnostic_recorder recorder;
  no_leaks leaks;
  auto captured = std::make_shared<int>(1);
  std::weak_ptr<int> watch = captured;
  task_event gate("gate", default_scheduler());
  task<> stranded;
  {
    scheduler pool(test::options_with(1));
    stranded = pool.launch("stranded coroutine", [gate, captured]() -> coro<> {
      co_await gate;
      ++*captured;
    });
    captured.reset();
    CHECK_FALSE(stranded.wait(std::chrono::milliseconds(1)));  // suspended on the gate
  }  // the pool shuts down with the coroutine suspended
  gate.trigger();  // its resumption becomes ready with nowhere to run
  CHECK(stranded.is_completed());
  CHECK(stranded.has_exception());
  CHECK(watch.expired());
  bool named = false;
  for (const auto& each : recorder.reports()) {
    named = named || each.message.find("stranded coroutine") != std::string::npos;
  }
  CHECK(named);
}

namespace {

// How a coroutine holds the event it awaits, and what becomes of that event after the shutdown.
enum class event_holding {
  handle_in_body,             // its body holds the only handle: body and event keep each other alive
  reference_dropped,          // its body refers to a handle outside, dropped untriggered afterwards
  reference_triggered_later,  // as above, triggered after the scheduler is gone
};

}  // namespace

TEST_CASE("coroutine: destroying its scheduler abandons a coroutine suspended on an event never triggered: "
          "reported by name, its captures freed, its task completed as never resumed") {
  for (unsigned workers : {0u, 1u, 2u}) {
    for (event_holding holding : {event_holding::handle_in_body, event_holding::reference_dropped,
                                  event_holding::reference_triggered_later}) {
      CAPTURE(workers);
      CAPTURE(static_cast<int>(holding));
      test::diagnostic_recorder recorder;
      no_leaks leaks;
      auto captured = std::make_shared<int>(1);
      std::weak_ptr<int> watch = captured;
      std::optional<task_event> outside;  // outlives the scheduler
      task<> stranded;
      {
        scheduler pool(test::options_with(workers));
        task_event never("never triggered", pool);
        if (holding == event_holding::handle_in_body) {
          stranded = pool.launch("stranded on an event", [never, captured]() -> coro<> {
            co_await never;
            ++*captured;
          });
        } else {
          outside.emplace(never);
          stranded = pool.launch("stranded on an event", [&event = *outside, captured]() -> coro<> {
            co_await event;
            ++*captured;
          });
        }
        captured.reset();
        CHECK_FALSE(stranded.wait(std::chrono::milliseconds(1)));  // with no workers, this runs it
      }  // the shutdown finds the coroutine suspended on an event nobody will trigger
      REQUIRE(stranded.is_completed());  // else get_result below would wait for ever
      CHECK_THROWS_AS(stranded.get_result(), task_never_ran);
      CHECK(watch.expired());
      if (holding == event_holding::reference_triggered_later) outside->trigger();  // its resumption does nothing
      outside.reset();
      CHECK(recorder.count_naming("stranded on an event") == 1);
      CHECK(recorder.count() == 1);  // nothing about the event: only abandoned coroutines waited for it
    }
  }
}

TEST_CASE("coroutine: destroying its scheduler abandons a coroutine suspended on another scheduler's task that "
          "has not completed") {
  for (unsigned workers : {0u, 1u, 2u}) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    scheduler other(test::options_with(1));
    task_event gate("gate", other);
    task<int> unfinished = other.launch("behind the gate", [] { return 1; }, prerequisites(gate));
    auto captured = std::make_shared<int>(1);
    std::weak_ptr<int> watch = captured;
    task<int> stranded;
    {
      scheduler pool(test::options_with(workers));
      stranded = pool.launch("stranded on a task", [unfinished, captured]() -> coro<int> {
        co_return co_await unfinished + *captured;
      });
      captured.reset();
      CHECK_FALSE(stranded.wait(std::chrono::milliseconds(1)));
    }
    REQUIRE(stranded.is_completed());
    CHECK_THROWS_AS(stranded.get_result(), task_never_ran);
    CHECK(watch.expired());
    gate.trigger();  // the other scheduler's task completes; the abandoned resumption does nothing
    CHECK(unfinished.get_result() == 1);
    CHECK(recorder.count_naming("stranded on a task") == 1);
    CHECK(recorder.count() == 1);
  }
}

TEST_CASE("coroutine: destroying its scheduler completes a coroutine awaiting an abandoned coroutine's task") {
  for (unsigned workers : {0u, 1u, 2u}) {
    CAPTURE(workers);
    test::diagnostic_recorder recorder;
    no_leaks leaks;
    auto captured = std::make_shared<int>(1);
    std::weak_ptr<int> watch = captured;
    task<int> outer;
    {
      scheduler pool(test::options_with(workers));
      task_event never("never triggered", pool);
      task<int> inner = pool.launch("inner", [never]() -> coro<int> {
        co_await never;
        co_return 1;
      });
      // It awaits inner: abandoned in turn, or resumed to find inner's task_never_ran.
      outer = pool.launch("outer", [inner, captured]() -> coro<int> { co_return co_await inner + *captured; });
      captured.reset();
      CHECK_FALSE(outer.wait(std::chrono::milliseconds(1)));
    }
    REQUIRE(outer.is_completed());
    CHECK_THROWS_AS(outer.get_result(), task_never_ran);
    CHECK(watch.expired());
    CHECK(recorder.count_naming("inner") == 1);
  }
}
