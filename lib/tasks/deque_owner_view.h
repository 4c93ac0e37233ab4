// Private to lib/: the owner-side looks a waiting thread makes at its own deque, beyond push,
// pop and steal. A wait takes its task back where the deque's owner can reach it at once: the
// newest entry (a launch followed by its wait), the oldest (waits in launch order), or a run
// of the newest (wait_all). Each compares slots with the entries it expects without
// dereferencing them (a slot may hold an entry a thief already took and freed), then takes
// through the deque's own racing operations.
//
//   if (deque_owner_view(*context.deque).take_back(task)) run(task);   // the newest, else the oldest entry
#pragma once

#include <magpie/detail/deque.h>

#include <cstdint>

namespace magpie::detail {

// deque_owner_view gives the owner thread of a work_stealing_deque the looks its waits need.
// Owner thread only, as everything it calls.
template <class Deque>
class deque_owner_view {
 public:
  // deque_owner_view views `deque`, which the calling thread owns.
  explicit deque_owner_view(Deque& deque) noexcept : deque_(deque) {}

  // pop_if pops the newest item only if it is `expected` (a thread about to run an item it
  // has just pushed takes it back, leaving no stale entry).
  template <class T>
  bool pop_if(T expected) {
    deque_.check_owner("pop_if");
    std::int64_t b = deque_.bottom_.load(std::memory_order_relaxed) - 1;  // relaxed: only the owner writes bottom
    auto* r = deque_.current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    if (b < 0 || r->get(b) != expected) return false;  // the owner wrote that slot itself
    return deque_.pop_at(b, r).has_value();  // a thief may have taken it meanwhile: pop settles that
  }

  // take_back takes `expected` back if it is the newest item (pop_if) or, failing that, the
  // oldest (steal_if). When the newest slot holds it, the oldest end is not looked at: the
  // item is taken from there or a thief has it, and top's cache line is the thieves'.
  template <class T>
  bool take_back(T expected) {
    deque_.check_owner("take_back");
    std::int64_t b = deque_.bottom_.load(std::memory_order_relaxed) - 1;  // relaxed: only the owner writes bottom
    auto* r = deque_.current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    if (b >= 0 && r->get(b) == expected) return deque_.pop_at(b, r).has_value();  // a thief may have it: pop settles that
    return deque_.steal_if(expected);
  }

  // oldest_is says whether the oldest item is `expected` (a range waited for oldest first
  // starts there).
  template <class T>
  bool oldest_is(T expected) const {
    std::int64_t t = deque_.top_.load(std::memory_order_relaxed);  // relaxed: a guess; a take that acts on it settles it with its CAS
    std::int64_t b = deque_.bottom_.load(std::memory_order_relaxed);  // relaxed: only the owner writes bottom
    return t < b && deque_.current_.load(std::memory_order_relaxed)->get(t) == expected;  // relaxed: only the owner replaces the ring
  }

  // newest_matching counts how many of the newest items are expected(0), expected(1), …
  // (newest first), up to `count`, asking for each only after the one before matched; it
  // stops where a thief may have reached (the deque's last look at top), so that a run it
  // counts is one pop_newest can take.
  template <class Expected>
  std::int64_t newest_matching(Expected&& expected, std::int64_t count) const {
    std::int64_t b = deque_.bottom_.load(std::memory_order_relaxed);  // relaxed: only the owner writes bottom
    auto* r = deque_.current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    std::int64_t matched = 0;
    while (matched < count && b - 1 - matched >= deque_.top_seen_ && r->get(b - 1 - matched) == expected(matched)) ++matched;
    return matched;
  }

 private:
  Deque& deque_;
};

template <class Deque>
deque_owner_view(Deque&) -> deque_owner_view<Deque>;

}  // namespace magpie::detail
