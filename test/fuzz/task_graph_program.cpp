#include "task_graph_program.h"

#include <cstdio>
#include <sstream>

namespace magpie::fuzz {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

graph_node decode_node(input_decoder& in, const std::vector<graph_node>& earlier, int index) {
  graph_node node;
  int count = static_cast<int>(earlier.size());
  node.kind = count == 0 ? in.pick({node_kind::task, node_kind::piped_task, node_kind::event})
                         : in.pick({node_kind::task, node_kind::task, node_kind::task, node_kind::task,
                                    node_kind::piped_task, node_kind::piped_task, node_kind::event,
                                    node_kind::when_all, node_kind::when_any});
  bool gathers = node.kind == node_kind::when_all || node.kind == node_kind::when_any;
  unsigned wanted = count == 0 ? 0 : gathers ? 1 + in.below(3) : in.below(4);
  for (unsigned i = 0; i < wanted; ++i) node.prerequisites.push_back(static_cast<int>(in.below(static_cast<unsigned>(count))));
  if (has_body(node)) {
    node.pipe = static_cast<int>(in.below(pipe_count));
    node.placement = node.kind == node_kind::piped_task
                         ? in.pick({node_placement::normal, node_placement::high})
                         : in.pick({node_placement::normal, node_placement::normal, node_placement::high,
                                    node_placement::inline_run});
    node.throws = in.chance(40);
    if (node.placement != node_placement::inline_run) {
      // Waits inside bodies only for plain tasks on plain tasks: no event, pipe or inline
      // task behind them, which a waiting body could not run itself.
      std::vector<int> waitable;
      for (int i = 0; i < count; ++i) {
        if (earlier[static_cast<std::size_t>(i)].inside_waitable) waitable.push_back(i);
      }
      if (!waitable.empty() && in.chance(80)) {
        node.waits_for = waitable[in.below(static_cast<unsigned>(waitable.size()))];
      }
      unsigned nested = in.chance(80) ? 1 + in.below(max_nested) : 0;
      for (unsigned i = 0; i < nested; ++i) node.nested_throws.push_back(in.chance(40));
    }
  }
  node.inside_waitable = node.kind == node_kind::task && node.placement != node_placement::inline_run;
  for (int p : node.prerequisites) {
    const graph_node& before = earlier[static_cast<std::size_t>(p)];
    node.events |= before.events;
    node.inside_waitable = node.inside_waitable && before.inside_waitable;
  }
  if (node.waits_for >= 0) node.events |= earlier[static_cast<std::size_t>(node.waits_for)].events;
  if (node.kind == node_kind::event) node.events.set(static_cast<std::size_t>(index));
  if (node.kind == node_kind::piped_task) {  // it may queue behind any earlier task of its pipe
    for (const graph_node& before : earlier) {
      if (before.kind == node_kind::piped_task && before.pipe == node.pipe) node.events |= before.events;
    }
  }
  return node;
}

}  // namespace

graph_program decode_graph(input_decoder& in) {
  graph_program program;
  program.workers = in.below(4);
  std::bitset<max_graph_nodes> triggered;
  while (!in.empty() && program.nodes.size() < max_graph_nodes) {
    unsigned choice = in.below(12);
    // What the launching thread may wait for now without waiting forever.
    std::vector<int> ready;
    for (std::size_t i = 0; i < program.nodes.size(); ++i) {
      if ((program.nodes[i].events & ~triggered).none()) ready.push_back(static_cast<int>(i));
    }
    std::vector<int> untriggered;
    for (std::size_t i = 0; i < program.nodes.size(); ++i) {
      if (program.nodes[i].kind == node_kind::event && !triggered.test(i)) untriggered.push_back(static_cast<int>(i));
    }
    if (choice < 8 || (choice < 10 && ready.empty()) || (choice >= 10 && untriggered.empty())) {
      int index = static_cast<int>(program.nodes.size());
      program.nodes.push_back(decode_node(in, program.nodes, index));
      program.steps.push_back({graph_step::kind::launch, {index}});
    } else if (choice < 10) {
      graph_step step{in.pick({graph_step::kind::wait, graph_step::kind::wait_all, graph_step::kind::wait_any}), {}};
      unsigned count = step.what == graph_step::kind::wait ? 1 : 1 + in.below(3);
      for (unsigned i = 0; i < count; ++i) step.nodes.push_back(ready[in.below(static_cast<unsigned>(ready.size()))]);
      program.steps.push_back(step);
    } else {
      int event = untriggered[in.below(static_cast<unsigned>(untriggered.size()))];
      triggered.set(static_cast<std::size_t>(event));
      program.steps.push_back({graph_step::kind::trigger, {event}});
    }
  }
  return program;
}

bool fails(const graph_node& node) {
  if (node.throws) return true;
  for (bool nested : node.nested_throws) {
    if (nested) return true;
  }
  return false;
}

std::uint64_t body_value(int index, const std::vector<std::uint64_t>& contributions) {
  std::uint64_t value = mix(static_cast<std::uint64_t>(index));
  for (std::uint64_t each : contributions) value = mix(value ^ each);
  return value;
}

std::uint64_t contribution(const graph_program& program, int prerequisite, const std::vector<std::uint64_t>& values) {
  const graph_node& node = program.nodes[static_cast<std::size_t>(prerequisite)];
  if (!has_body(node)) return static_cast<std::uint64_t>(prerequisite);
  return fails(node) ? failed_contribution : values[static_cast<std::size_t>(prerequisite)];
}

std::vector<std::uint64_t> serial_values(const graph_program& program) {
  std::vector<std::uint64_t> values(program.nodes.size(), 0);
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const graph_node& node = program.nodes[i];
    if (!has_body(node)) continue;
    std::vector<std::uint64_t> contributions;
    for (int p : node.prerequisites) contributions.push_back(contribution(program, p, values));
    values[i] = body_value(static_cast<int>(i), contributions);
  }
  return values;
}

std::string describe(const graph_program& program) {
  static const char* const kinds[] = {"task", "piped", "event", "when_all", "when_any"};
  static const char* const steps[] = {"launch", "trigger", "wait", "wait_all", "wait_any"};
  std::ostringstream text;
  text << "workers " << program.workers << "\n";
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const graph_node& node = program.nodes[i];
    text << "  node " << i << " " << kinds[static_cast<int>(node.kind)] << " after";
    for (int p : node.prerequisites) text << " " << p;
    if (node.kind == node_kind::piped_task) text << " pipe " << node.pipe;
    if (has_body(node)) {
      text << " placement " << static_cast<int>(node.placement);
      if (node.throws) text << " throws";
      if (node.waits_for >= 0) text << " waits for " << node.waits_for;
      for (bool nested : node.nested_throws) text << (nested ? " nested(throws)" : " nested");
    }
    text << "\n";
  }
  for (const graph_step& step : program.steps) {
    text << "  step " << steps[static_cast<int>(step.what)];
    for (int n : step.nodes) text << " " << n;
    text << "\n";
  }
  return text.str();
}

}  // namespace magpie::fuzz
