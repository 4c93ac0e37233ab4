// Unbalanced tree search (UTS): a tree generated on the fly, each node's child count drawn
// from a SHA-1 splittable random stream, counted with a task per child. The tree is the
// UTS benchmark's own: a node's state is a SHA-1 digest, the root's the digest of its
// seed (in the last four of twenty zero bytes, big-endian), a child's the digest of its
// parent's state followed by its index (big-endian); a node's random number is the last
// four bytes of its state, big-endian, without the sign bit. Two of the sample trees,
// whose node counts every UTS implementation reproduces:
//   T1  geometric, fixed shape: -t 1 -a 3 -d 10 -b 4 -r 19              4130071 nodes
//   T3  binomial:               -t 0 -b 2000 -q 0.124875 -m 8 -r 42     4112897 nodes
// Nettle provides SHA-1 (one compression per node: the work is the same in every system).
#pragma once

#include <nettle/sha1.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace workloads {

// uts_node is a node of the tree: its random state and its depth (the root's is 0).
struct uts_node {
  std::array<std::uint8_t, SHA1_DIGEST_SIZE> state;
  int height;
};

// uts_tree is the tree's shape: binomial (the root has `root_children`, any other node
// `children` with probability `non_leaf`, else none) or geometric with a fixed shape (a
// geometrically distributed count of mean `root_children` down to `depth_limit`).
struct uts_tree {
  const char* name;
  bool binomial;
  double root_children;  // -b
  int depth_limit;       // -d (geometric)
  double non_leaf;       // -q (binomial)
  int children;          // -m (binomial)
  int root_seed;         // -r
  std::uint64_t published_nodes;
};

inline constexpr uts_tree uts_t1{"T1", false, 4.0, 10, 0.0, 0, 19, 4130071};
inline constexpr uts_tree uts_t3{"T3", true, 2000.0, 0, 0.124875, 8, 42, 4112897};

namespace uts_detail {

inline void put_big_endian(std::uint8_t* out, std::uint32_t value) {
  out[0] = static_cast<std::uint8_t>(value >> 24);
  out[1] = static_cast<std::uint8_t>(value >> 16);
  out[2] = static_cast<std::uint8_t>(value >> 8);
  out[3] = static_cast<std::uint8_t>(value);
}

// probability maps a node's random number (31 bits) onto [0, 1).
inline double probability(const uts_node& node) {
  std::uint32_t bits = (std::uint32_t{node.state[16]} << 24) | (std::uint32_t{node.state[17]} << 16) |
                       (std::uint32_t{node.state[18]} << 8) | std::uint32_t{node.state[19]};
  return static_cast<double>(bits & 0x7fffffffu) / 2147483648.0;
}

inline constexpr int most_children = 100;  // UTS caps every node's count but a binomial root's

}  // namespace uts_detail

inline uts_node uts_root(const uts_tree& tree) {
  std::uint8_t seed[20] = {};
  uts_detail::put_big_endian(seed + 16, static_cast<std::uint32_t>(tree.root_seed));
  sha1_ctx context;
  sha1_init(&context);
  sha1_update(&context, sizeof seed, seed);
  uts_node root{};
  sha1_digest(&context, SHA1_DIGEST_SIZE, root.state.data());
  return root;
}

inline uts_node uts_child(const uts_node& parent, int index) {
  std::uint8_t number[4];
  uts_detail::put_big_endian(number, static_cast<std::uint32_t>(index));
  sha1_ctx context;
  sha1_init(&context);
  sha1_update(&context, SHA1_DIGEST_SIZE, parent.state.data());
  sha1_update(&context, sizeof number, number);
  uts_node child{};
  sha1_digest(&context, SHA1_DIGEST_SIZE, child.state.data());
  child.height = parent.height + 1;
  return child;
}

inline int uts_children(const uts_tree& tree, const uts_node& node) {
  if (tree.binomial) {
    if (node.height == 0) return static_cast<int>(std::floor(tree.root_children));
    return uts_detail::probability(node) < tree.non_leaf ? tree.children : 0;
  }
  double mean = node.height < tree.depth_limit ? tree.root_children : 0.0;
  double p = 1.0 / (1.0 + mean);  // a geometric count of this mean; none when the mean is 0
  int count = static_cast<int>(std::floor(std::log(1.0 - uts_detail::probability(node)) / std::log(1.0 - p)));
  return count < uts_detail::most_children ? count : uts_detail::most_children;
}

// uts counts the nodes under `node` (itself included), a task per child; the parent
// derives each child's state and hands it over by value.
template <class S>
std::uint64_t uts(const uts_tree& tree, const uts_node& node) {
  int children = uts_children(tree, node);
  if (children == 0) return 1;
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(children), 0);
  typename S::group group;
  for (int i = 0; i < children; ++i) {
    group.run([&tree, child = uts_child(node, i), slot = &counts[static_cast<std::size_t>(i)]] {
      *slot = uts<S>(tree, child);
    });
  }
  group.wait();
  std::uint64_t total = 1;
  for (std::uint64_t each : counts) total += each;
  return total;
}

}  // namespace workloads
