#include "timing_wheel.h"

#include <algorithm>

namespace magpie::detail {

// Invariant, with c the current tick and t a node's (clamped) tick, both split into 6-bit
// digits: a node on level 0 has t >= c in the same 64-tick block as c; a node on level
// l > 0 agrees with c on every digit above l and has a larger digit l. So every node on
// level l comes before every node on level l + 1, and within a level the lowest occupied
// bucket is the earliest.

timing_wheel::timing_wheel() { heads_.fill(no_node); }

void timing_wheel::reserve(std::uint32_t count) {
  if (count > nodes_.size()) nodes_.resize(count);
}

// take_bucket empties a bucket and returns its former list (still linked through next).
std::uint32_t timing_wheel::take_bucket(unsigned bucket) {
  std::uint32_t first = heads_[bucket];
  heads_[bucket] = no_node;
  unsigned level = bucket / slots;
  occupied_[level] &= ~(std::uint64_t{1} << (bucket % slots));
  if (occupied_[level] == 0) occupied_levels_ &= ~(1u << level);
  return first;
}

std::uint64_t timing_wheel::bucket_start(unsigned level, unsigned slot) const {
  unsigned above = (level + 1) * digit_bits;
  std::uint64_t upper = above >= 64 ? 0 : (current_ >> above) << above;
  return upper | (std::uint64_t{slot} << (level * digit_bits));
}

// advance moves the clock to `target`, cascading every higher-level bucket it reaches and
// moving the nodes of every level-0 bucket at or before `target` to candidates_.
void timing_wheel::advance(std::uint64_t target) {
  while (occupied_levels_ != 0) {
    unsigned level = static_cast<unsigned>(std::countr_zero(occupied_levels_));
    unsigned slot = static_cast<unsigned>(std::countr_zero(occupied_[level]));
    std::uint64_t start = bucket_start(level, slot);
    if (start > target) break;
    current_ = start;
    std::uint32_t id = take_bucket(level * slots + slot);
    while (id != no_node) {
      node& n = nodes_[id];
      std::uint32_t next = n.next;
      if (level == 0) {
        n.bucket = no_bucket;
        candidates_.push_back({n.expire, n.sequence, id});
        --size_;
      } else {
        link(id);  // lands on a lower level: it now agrees with the clock on digit `level`
      }
      id = next;
    }
  }
  current_ = target;
}

void timing_wheel::collect_due(double now, std::vector<std::uint32_t>& due) {
  due.clear();
  candidates_.clear();
  advance(to_tick(now));
  // Candidates from the clock's own tick may still be ahead of `now`; they go back with
  // their original sequence, so ties keep their order.
  std::size_t kept = 0;
  for (const candidate& each : candidates_) {
    if (each.expire < now) {
      candidates_[kept++] = each;
    } else {
      link(each.id);
      ++size_;
    }
  }
  candidates_.resize(kept);
  std::sort(candidates_.begin(), candidates_.end(), [](const candidate& a, const candidate& b) {
    return a.expire < b.expire || (a.expire == b.expire && a.sequence < b.sequence);
  });
  due.reserve(kept);
  for (const candidate& each : candidates_) due.push_back(each.id);
}

}  // namespace magpie::detail
