// Tests for include/magpie/detail/subsequent_list.h — the closable lock-free list.
#include <magpie/detail/subsequent_list.h>

#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using magpie::detail::subsequent_list;
using magpie::detail::subsequent_list_hook;

namespace {
struct node {
  subsequent_list_hook<node> hook;
  int value = 0;
};

std::vector<int> values_of(node* first) {
  std::vector<int> values;
  for (node* each = first; each != nullptr; each = subsequent_list<node>::next_of(each)) values.push_back(each->value);
  return values;
}
}  // namespace

TEST_SUITE("subsequent_list") {

TEST_CASE("subsequent_list: close returns every pushed node, newest first") {
  subsequent_list<node> list;
  node nodes[3];
  for (int i = 0; i < 3; ++i) {
    nodes[i].value = i;
    CHECK(list.push_if_not_closed(&nodes[i]));
  }
  CHECK_FALSE(list.is_closed());
  CHECK(values_of(list.close()) == std::vector<int>{2, 1, 0});
  CHECK(list.is_closed());
}

TEST_CASE("subsequent_list: a push after close fails and leaves the node alone") {
  subsequent_list<node> list;
  CHECK(list.close() == nullptr);
  node late;
  late.value = 7;
  CHECK_FALSE(list.push_if_not_closed(&late));
  CHECK(late.hook.next.load() == nullptr);
  CHECK(list.close() == nullptr);  // closing twice hands nothing back the second time
}

TEST_CASE("subsequent_list: close_unshared hands back the same nodes and closes the list as close does") {
  subsequent_list<node> list;
  node nodes[3];
  for (int i = 0; i < 3; ++i) {
    nodes[i].value = i;
    CHECK(list.push_if_not_closed(&nodes[i]));
  }
  CHECK(values_of(list.close_unshared()) == std::vector<int>{2, 1, 0});
  CHECK(list.is_closed());
  node late;
  CHECK_FALSE(list.push_if_not_closed(&late));
  CHECK(list.close_unshared() == nullptr);
  subsequent_list<node> empty;
  CHECK(empty.close_unshared() == nullptr);
  CHECK(empty.is_closed());
}

TEST_CASE("subsequent_list: a tagged push tags the list until the next push or clear_tag, and no walk sees the tag") {
  subsequent_list<node> list;
  node nodes[4];
  for (int i = 0; i < 4; ++i) nodes[i].value = i;
  CHECK_FALSE(list.newest_is_tagged());
  CHECK(list.push_if_not_closed(&nodes[0], true));
  CHECK(list.newest_is_tagged());
  CHECK(list.newest_while_open() == &nodes[0]);
  // The hint may keep the tag: it stays within the node's first bytes, and its cache line.
  const auto hint_offset = static_cast<const char*>(list.newest_hint()) - reinterpret_cast<const char*>(&nodes[0]);
  CHECK((hint_offset >= 0 && hint_offset < 4));
  CHECK(list.push_if_not_closed(&nodes[1]));  // a plain push clears it
  CHECK_FALSE(list.newest_is_tagged());
  list.clear_tag(&nodes[1]);  // not a tagged push: nothing changes
  CHECK(list.newest_while_open() == &nodes[1]);
  CHECK(list.push_if_not_closed(&nodes[2], true));
  list.clear_tag(&nodes[1]);  // no longer the newest: nothing changes
  CHECK(list.newest_is_tagged());
  list.clear_tag(&nodes[2]);
  CHECK_FALSE(list.newest_is_tagged());
  CHECK(list.newest_while_open() == &nodes[2]);
  CHECK(list.push_if_not_closed(&nodes[3], true));
  CHECK(values_of(list.newest_while_open()) == std::vector<int>{3, 2, 1, 0});
  node* taken = nullptr;
  CHECK(list.try_close_tagged_unshared(taken));
  CHECK(values_of(taken) == std::vector<int>{3, 2, 1, 0});
  CHECK(list.is_closed());
  CHECK(list.newest_hint() == nullptr);
  subsequent_list<node> shared;
  CHECK(shared.push_if_not_closed(&nodes[0]));
  CHECK(shared.push_if_not_closed(&nodes[1], true));
  CHECK(shared.push_if_not_closed(&nodes[2]));
  CHECK_FALSE(shared.try_close_tagged_unshared(taken));  // untagged: left open
  CHECK_FALSE(shared.is_closed());
  CHECK(values_of(shared.close()) == std::vector<int>{2, 1, 0});
}

}  // TEST_SUITE("subsequent_list")

TEST_CASE("subsequent_list: racing pushers and a closer — every successful push is handed back once" *
          doctest::test_suite("stress")) {
  constexpr int pushers = 4;
  constexpr int per_pusher = 2000;
  for (int repeat = 0; repeat < 50 * magpie::test::stress_repeat(); ++repeat) {
    subsequent_list<node> list;
    std::vector<node> nodes(pushers * per_pusher);
    std::vector<char> accepted(nodes.size(), 0);
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < pushers; ++p) {
      threads.emplace_back([&, p] {
        started.fetch_add(1);
        for (int i = 0; i < per_pusher; ++i) {
          std::size_t index = static_cast<std::size_t>(p * per_pusher + i);
          nodes[index].value = static_cast<int>(index);
          accepted[index] = list.push_if_not_closed(&nodes[index]) ? 1 : 0;
        }
      });
    }
    while (started.load() < pushers) std::this_thread::yield();
    std::vector<int> handed_back = values_of(list.close());
    for (auto& thread : threads) thread.join();
    std::sort(handed_back.begin(), handed_back.end());
    std::vector<int> expected;
    for (std::size_t i = 0; i < accepted.size(); ++i) {
      if (accepted[i] != 0) expected.push_back(static_cast<int>(i));
    }
    REQUIRE(handed_back == expected);
  }
}
