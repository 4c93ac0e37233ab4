// The timer manager's index of active timers: an exact hierarchical timing wheel
// (Varghese & Lauck, scheme 7). Private to lib/clients/.
//
// Each node keeps its exact expiry (double seconds); the wheel only files it under a tick
// of 1/1024 s, so buckets narrow down which nodes to look at and never decide whether one is
// due. 11 levels of 64 buckets cover every 64-bit tick: a node sits on the level of the
// highest 6-bit digit in which its tick differs from the wheel's current tick, and moves to
// a lower level (cascades) when the wheel reaches its bucket. Insert and remove are O(1);
// collecting the k nodes due in a tick costs O(k log k) for the sort plus the amortised
// cascading, never a scan of the nodes that are not due.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

namespace magpie::detail {

class timing_wheel {
 public:
  timing_wheel();

  // reserve makes room for node ids below `count`.
  void reserve(std::uint32_t count);

  // insert files node `id`, which must not be in the wheel, to expire at `expire`
  // seconds. Nodes with equal expiries come out in the order they were inserted.
  void insert(std::uint32_t id, double expire);

  // remove takes node `id`, which must be in the wheel, out of it.
  void remove(std::uint32_t id);

  // contains says whether node `id` is in the wheel.
  bool contains(std::uint32_t id) const { return id < nodes_.size() && nodes_[id].bucket != no_bucket; }

  // collect_due takes every node whose expiry is strictly before `now` out of the wheel and
  // writes their ids to `due`, by expiry and then insertion order. `now` never decreases.
  void collect_due(double now, std::vector<std::uint32_t>& due);

  // size is the number of nodes in the wheel.
  std::size_t size() const { return size_; }

 private:
  static constexpr unsigned digit_bits = 6;
  static constexpr unsigned slots = 1u << digit_bits;
  static constexpr unsigned levels = 11;  // 11 * 6 >= 64: every tick has a level
  static constexpr std::uint16_t no_bucket = 0xffff;
  static constexpr std::uint32_t no_node = 0xffffffff;

  struct node {
    double expire = 0;
    std::uint64_t sequence = 0;  // insertion order, for ties
    std::uint32_t next = no_node;
    std::uint32_t prev = no_node;
    std::uint16_t bucket = no_bucket;
  };

  struct candidate {
    double expire;
    std::uint64_t sequence;
    std::uint32_t id;
  };

  static std::uint64_t to_tick(double seconds);
  void link(std::uint32_t id);
  std::uint32_t take_bucket(unsigned bucket);
  std::uint64_t bucket_start(unsigned level, unsigned slot) const;
  void advance(std::uint64_t target);

  std::vector<node> nodes_;
  std::array<std::uint32_t, levels * slots> heads_;
  std::array<std::uint64_t, levels> occupied_{};  // bit s: bucket s of that level is not empty
  std::uint32_t occupied_levels_ = 0;              // bit l: level l has a non-empty bucket
  std::uint64_t current_ = 0;                      // every node's tick is at or after it
  std::uint64_t next_sequence_ = 0;
  std::size_t size_ = 0;
  std::vector<candidate> candidates_;  // scratch for collect_due
};

// Insert and remove sit on the timer manager's set, clear and pause paths: inline.

// to_tick is floor(seconds * 1024), clamped to [0, 2^62]. Scaling by a power of two is
// exact, so the map is monotone: a node filed under an earlier tick than the clock's is
// strictly before it, and only the clock's own tick needs the exact comparison.
inline std::uint64_t timing_wheel::to_tick(double seconds) {
  if (!(seconds > 0)) return 0;
  double scaled = seconds * 1024.0;
  constexpr double ceiling = 4611686018427387904.0;  // 2^62
  if (!(scaled < ceiling)) return std::uint64_t{1} << 62;
  return static_cast<std::uint64_t>(scaled);
}

inline void timing_wheel::insert(std::uint32_t id, double expire) {
  node& n = nodes_[id];
  n.expire = expire;
  n.sequence = next_sequence_++;
  link(id);
  ++size_;
}

inline void timing_wheel::link(std::uint32_t id) {
  node& n = nodes_[id];
  // An expiry already behind the wheel waits in the current bucket: the next collect_due
  // reaches it and the exact comparison decides.
  std::uint64_t tick = std::max(to_tick(n.expire), current_);
  std::uint64_t differing = tick ^ current_;
  unsigned level = differing < slots ? 0 : (static_cast<unsigned>(std::bit_width(differing)) - 1) / digit_bits;
  unsigned slot = static_cast<unsigned>(tick >> (level * digit_bits)) & (slots - 1);
  unsigned bucket = level * slots + slot;
  n.bucket = static_cast<std::uint16_t>(bucket);
  n.prev = no_node;
  n.next = heads_[bucket];
  if (n.next != no_node) nodes_[n.next].prev = id;
  heads_[bucket] = id;
  occupied_[level] |= std::uint64_t{1} << slot;
  occupied_levels_ |= 1u << level;
}

inline void timing_wheel::remove(std::uint32_t id) {
  node& n = nodes_[id];
  unsigned bucket = n.bucket;
  if (n.prev != no_node) {
    nodes_[n.prev].next = n.next;
  } else {
    heads_[bucket] = n.next;
  }
  if (n.next != no_node) nodes_[n.next].prev = n.prev;
  if (heads_[bucket] == no_node) {
    unsigned level = bucket / slots;
    occupied_[level] &= ~(std::uint64_t{1} << (bucket % slots));
    if (occupied_[level] == 0) occupied_levels_ &= ~(1u << level);
  }
  n.bucket = no_bucket;
  --size_;
}

}  // namespace magpie::detail
