// The task graph fuzz target's program: a random DAG of tasks, piped tasks, task events,
// when_all / when_any nodes, nested tasks, waits inside bodies and from the launching
// thread, and bodies that throw — decoded from the input so that it cannot deadlock by
// construction (every wait is for something whose events are already triggered), and its
// serial reference execution: what every task returns when the graph runs one node at a
// time in index order, which is a topological order (prerequisites are earlier nodes).
#pragma once

#include "input_decoder.h"

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace magpie::fuzz {

inline constexpr std::size_t max_graph_nodes = 48;
inline constexpr std::size_t max_nested = 2;
inline constexpr int pipe_count = 2;

enum class node_kind : std::uint8_t { task, piped_task, event, when_all, when_any };
enum class node_placement : std::uint8_t { normal, high, inline_run };

struct graph_node {
  node_kind kind = node_kind::task;
  std::vector<int> prerequisites;  // earlier nodes: prerequisites, or the inputs of when_*
  node_placement placement = node_placement::normal;
  int pipe = 0;
  bool throws = false;                 // the body throws after doing its work
  int waits_for = -1;                  // a node the body waits for, or -1
  std::vector<bool> nested_throws;     // one entry per nested task the body launches
  bool inside_waitable = false;        // a body may wait for it (see decode)
  std::bitset<max_graph_nodes> events; // the events it depends on, through anything
};

// A step of the launching thread.
struct graph_step {
  enum class kind : std::uint8_t { launch, trigger, wait, wait_all, wait_any } what = kind::launch;
  std::vector<int> nodes;  // launch: the node; trigger: the event; waits: what is waited for
};

struct graph_program {
  unsigned workers = 0;
  std::vector<graph_node> nodes;
  std::vector<graph_step> steps;
};

graph_program decode_graph(input_decoder& in);

// has_body says whether the node runs a body (and so returns a value).
inline bool has_body(const graph_node& node) {
  return node.kind == node_kind::task || node.kind == node_kind::piped_task;
}

// fails says whether the node's task completes holding an exception: its body threw, or
// one of its nested tasks did.
bool fails(const graph_node& node);

// body_value is what a body returns from its index and its prerequisites' contributions.
std::uint64_t body_value(int index, const std::vector<std::uint64_t>& contributions);

// failed_contribution is what a prerequisite that holds an exception contributes.
inline constexpr std::uint64_t failed_contribution = 0xdeadbeefcafef00dull;

// contribution is what a finished prerequisite adds to a body's value: its result, the
// marker above if it failed, its index if it has no result (events, when_*).
std::uint64_t contribution(const graph_program& program, int prerequisite, const std::vector<std::uint64_t>& values);

// serial_values runs the graph one node at a time in index order: each body's value.
std::vector<std::uint64_t> serial_values(const graph_program& program);

std::string describe(const graph_program& program);

}  // namespace magpie::fuzz
