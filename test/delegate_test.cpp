// Tests for include/magpie/delegate.h — unicast and multicast delegates.
#include <magpie/delegate.h>

#include "support.h"

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using magpie::delegate;
using magpie::delegate_handle;
using magpie::multicast_delegate;

namespace {
struct counter {
  int total = 0;
  int add(int amount) { return total += amount; }
  void bump() { ++total; }
  void note(std::vector<std::string>* log) { log->push_back("counter"); }
};
}  // namespace

TEST_SUITE("delegate") {

TEST_CASE("delegate: a bound lambda runs and returns its result") {
  delegate<int(int, int)> sum;
  CHECK_FALSE(sum.is_bound());
  sum.bind([](int a, int b) { return a + b; });
  CHECK(sum.is_bound());
  CHECK(sum.execute(2, 3) == 5);
  CHECK(sum.execute_if_bound(4, 4) == std::optional<int>(8));
  CHECK(sum.object() == nullptr);
}

TEST_CASE("delegate: a member function runs on its object") {
  counter target;
  delegate<int(int)> add;
  add.bind(&target, &counter::add);
  CHECK(add.execute(5) == 5);
  CHECK(add.execute(2) == 7);
  CHECK(add.object() == &target);
}

TEST_CASE("delegate: a weakly bound object is called while alive and skipped once gone") {
  auto target = std::make_shared<counter>();
  delegate<void()> bump;
  bump.bind(std::weak_ptr<counter>(target), &counter::bump);
  CHECK(bump.execute_if_bound());
  CHECK(target->total == 1);
  CHECK(bump.object() == target.get());
  target.reset();
  CHECK_FALSE(bump.is_bound());
  CHECK_FALSE(bump.execute_if_bound());
}

TEST_CASE("delegate: execute on an unbound delegate is reported") {
  magpie::test::diagnostic_recorder recorder;
  delegate<void()> nothing;
  nothing.execute();  // void: reported, then returns
  delegate<int()> no_value;
  CHECK_THROWS_AS(no_value.execute(), std::bad_function_call);
  CHECK(no_value.execute_if_bound() == std::nullopt);
  auto reports = recorder.reports();
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == magpie::diagnostic_kind::misuse);
  CHECK(reports[0].message.find("unbound") != std::string::npos);
}

TEST_CASE("delegate: unbind and rebinding replace the callable") {
  delegate<int()> value;
  value.bind([] { return 1; });
  value.bind([] { return 2; });
  CHECK(value.execute() == 2);
  value.unbind();
  CHECK_FALSE(value.is_bound());
}

TEST_CASE("delegate: a callee may rebind, unbind, reassign or destroy its own delegate while it runs") {
  // Each callee reads its by-value captures after replacing itself: they must still be alive
  // (reading them after a free is a heap-use-after-free). The string is too long for small-string
  // storage, so its characters live on the heap too.
  const std::string words = "captured by value, long enough to live on the heap";

  delegate<std::size_t()> rebinding;
  rebinding.bind([&rebinding, words] {
    rebinding.bind([] { return std::size_t{1}; });
    return words.size();
  });
  CHECK(rebinding.execute() == words.size());
  CHECK(rebinding.execute() == 1);  // the new callable from the next call on

  delegate<std::size_t()> unbinding;
  unbinding.bind([&unbinding, words] {
    unbinding.unbind();
    return words.size();
  });
  CHECK(unbinding.execute_if_bound() == std::optional<std::size_t>(words.size()));
  CHECK_FALSE(unbinding.is_bound());

  delegate<std::size_t()> replacement;
  replacement.bind([] { return std::size_t{2}; });
  delegate<std::size_t()> assigned;
  assigned.bind([&assigned, &replacement, words] {
    assigned = replacement;
    std::size_t copied_size = words.size();
    assigned = delegate<std::size_t()>();
    return copied_size + words.size();
  });
  CHECK(assigned.execute() == 2 * words.size());
  CHECK_FALSE(assigned.is_bound());
  assigned = std::move(replacement);
  CHECK(assigned.execute() == 2);

  // Rebound and then called again from inside: the inner call runs the new callable.
  delegate<std::size_t(int)> nested;
  nested.bind([&nested, words](int depth) {
    if (depth > 0) return std::size_t{100};
    nested.bind([](int) { return std::size_t{3}; });
    return nested.execute(depth + 1) + words.size();
  });
  CHECK(nested.execute(0) == 3 + words.size());

  auto owned = std::make_unique<delegate<std::size_t()>>();
  owned->bind([&owned, words] {
    owned.reset();
    return words.size();
  });
  CHECK(owned->execute() == words.size());
  CHECK(owned == nullptr);
}

TEST_CASE("multicast_delegate: listeners run in registration order with distinct valid handles") {
  multicast_delegate<void(std::vector<std::string>*)> event;
  CHECK_FALSE(event.is_bound());
  std::vector<std::string> log;
  counter target;
  delegate_handle first = event.add([](std::vector<std::string>* out) { out->push_back("first"); });
  delegate_handle second = event.add(&target, &counter::note);
  delegate_handle third = event.add([](std::vector<std::string>* out) { out->push_back("third"); });
  CHECK(first.is_valid());
  CHECK_FALSE(first == second);
  CHECK_FALSE(second == third);
  CHECK_FALSE(delegate_handle().is_valid());
  CHECK(event.is_bound());
  event.broadcast(&log);
  CHECK(log == std::vector<std::string>{"first", "counter", "third"});
}

TEST_CASE("multicast_delegate: remove by handle, and remove_all by object") {
  multicast_delegate<void()> event;
  counter a;
  counter b;
  int lambda_calls = 0;
  event.add(&a, &counter::bump);
  event.add(&a, &counter::bump);
  delegate_handle lambda = event.add([&] { ++lambda_calls; });
  event.add(&b, &counter::bump);
  CHECK(event.remove_all(&a) == 2);
  CHECK(event.remove(lambda));
  CHECK_FALSE(event.remove(lambda));
  CHECK_FALSE(event.remove(delegate_handle()));
  event.broadcast();
  CHECK(a.total == 0);
  CHECK(lambda_calls == 0);
  CHECK(b.total == 1);
}

TEST_CASE("multicast_delegate: a listener added during a broadcast runs from the next one") {
  multicast_delegate<void()> event;
  int late_calls = 0;
  bool added = false;
  event.add([&] {
    if (!added) {
      added = true;
      event.add([&] { ++late_calls; });
    }
  });
  event.broadcast();
  CHECK(late_calls == 0);
  event.broadcast();
  CHECK(late_calls == 1);
}

TEST_CASE("multicast_delegate: a listener removed during a broadcast is not called afterwards") {
  multicast_delegate<void()> event;
  int victim_calls = 0;
  delegate_handle victim;
  event.add([&] { event.remove(victim); });
  victim = event.add([&] { ++victim_calls; });
  event.broadcast();
  CHECK(victim_calls == 0);
  CHECK_FALSE(event.remove(victim));
}

TEST_CASE("multicast_delegate: a listener that removes itself keeps its captures until the broadcast returns") {
  multicast_delegate<void()> event;
  delegate_handle self;
  std::string seen;
  auto words = std::make_shared<std::string>("still here");
  self = event.add([&event, &self, &seen, words] {
    event.remove(self);
    seen = *words;  // captures must still be alive (ASan checks this)
  });
  words.reset();
  event.broadcast();
  CHECK(seen == "still here");
  CHECK_FALSE(event.is_bound());
}

TEST_CASE("multicast_delegate: listeners on expired weak objects are skipped") {
  multicast_delegate<void()> event;
  auto alive = std::make_shared<counter>();
  auto doomed = std::make_shared<counter>();
  event.add(std::weak_ptr<counter>(alive), &counter::bump);
  event.add(std::weak_ptr<counter>(doomed), &counter::bump);
  doomed.reset();
  event.broadcast();
  CHECK(alive->total == 1);
  alive.reset();
  CHECK_FALSE(event.is_bound());
}

TEST_CASE("multicast_delegate: a broadcast may re-enter itself") {
  multicast_delegate<void(int)> event;
  std::vector<int> depths;
  event.add([&](int depth) {
    depths.push_back(depth);
    if (depth < 2) event.broadcast(depth + 1);
  });
  event.broadcast(0);
  CHECK(depths == std::vector<int>{0, 1, 2});
}

TEST_CASE("multicast_delegate: a listener that throws leaves removal and later broadcasts working") {
  // Once the throw left the broadcast depth raised: removed listeners were never freed again.
  multicast_delegate<void()> event;
  bool thrown = false;
  int later_calls = 0;
  delegate_handle removed_while_throwing;
  event.add([&] {
    if (thrown) return;
    thrown = true;
    event.remove(removed_while_throwing);
    throw std::runtime_error("listener failed");
  });
  removed_while_throwing = event.add([] {});
  event.add([&] { ++later_calls; });
  REQUIRE(event.slot_count() == 3);
  CHECK_THROWS_AS(event.broadcast(), std::runtime_error);  // the caller sees the exception
  CHECK(later_calls == 0);                                 // it ended that broadcast
  CHECK(event.slot_count() == 2);  // the listener removed during it is freed on the way out

  for (int pair = 0; pair < 1000; ++pair) CHECK(event.remove(event.add([] {})));
  CHECK(event.slot_count() == 2);

  event.broadcast();
  CHECK(later_calls == 1);
  std::vector<int> depths;  // re-entry still defers and then frees removals
  delegate_handle reentrant = event.add([&] {
    depths.push_back(static_cast<int>(depths.size()));
    if (depths.size() < 2) event.broadcast();
  });
  event.broadcast();
  CHECK(depths == std::vector<int>{0, 1});
  CHECK(event.remove(reentrant));
  CHECK(event.slot_count() == 2);
}

}  // TEST_SUITE("delegate")
