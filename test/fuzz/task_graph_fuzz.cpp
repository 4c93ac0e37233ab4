// Fuzz target: magpie's task model (tasks, prerequisites, task events, nested tasks, pipes,
// waits, when_all / when_any, exceptions) on a scheduler of 0–3 workers, against the serial
// reference execution in task_graph_program.h. Every body stamps a global sequence number
// when it starts and ends; afterwards the run must show every body run exactly once, every
// edge respected (a task starts after each prerequisite completed: a task's body and nested
// tasks ended, an event was triggered and its prerequisites completed, when_all's inputs
// all, when_any's at least one), pipes never overlapping and keeping launch order, each
// result equal to the serial one, exceptions held where the documentation says, every
// wait returning with its task complete, no diagnostic, and no task left alive.
#include "input_decoder.h"
#include "oracle.h"
#include "task_graph_program.h"

#include <magpie/detail/task_base.h>
#include <magpie/magpie.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

namespace magpie::fuzz {
namespace {

struct node_failure {
  int node;
  int nested;  // -1: the node's own body
};

// What the run records; written by bodies on any thread, read by the launching thread once
// everything completed (task completion orders the two).
struct run_record {
  explicit run_record(std::size_t count)
      : starts(count), ends(count), runs(count), triggers(count, 0), nested_starts(count), nested_ends(count),
        nested_runs(count), nested(count), results(count), handles(count), events(count) {}

  std::atomic<std::uint64_t> clock{1};
  std::vector<std::atomic<std::uint64_t>> starts, ends, runs;
  std::vector<std::uint64_t> triggers;
  std::vector<std::array<std::atomic<std::uint64_t>, max_nested>> nested_starts, nested_ends, nested_runs;
  std::vector<std::array<task<>, max_nested>> nested;
  std::vector<task<std::uint64_t>> results;  // the nodes with a body
  std::vector<task<>> handles;               // every node
  std::vector<std::unique_ptr<task_event>> events;
};

// completed_by is a sequence number the node's completion came after: the latest thing it
// waited for (the earliest input for when_any), or 0 while something it waits for has not
// happened yet.
std::uint64_t completed_by(const graph_program& program, const run_record& record, int index) {
  const graph_node& node = program.nodes[static_cast<std::size_t>(index)];
  auto at = static_cast<std::size_t>(index);
  auto latest = [](std::uint64_t a, std::uint64_t b) { return a == 0 || b == 0 ? 0 : std::max(a, b); };
  switch (node.kind) {
    case node_kind::task:
    case node_kind::piped_task: {
      std::uint64_t last = record.ends[at].load();
      for (std::size_t n = 0; n < node.nested_throws.size(); ++n) last = latest(last, record.nested_ends[at][n].load());
      return last;
    }
    case node_kind::event: {
      std::uint64_t last = record.triggers[at];
      for (int p : node.prerequisites) last = latest(last, completed_by(program, record, p));
      return last;
    }
    case node_kind::when_all: {
      std::uint64_t last = 1;  // stamps start at 1
      for (int p : node.prerequisites) last = latest(last, completed_by(program, record, p));
      return last;
    }
    case node_kind::when_any: {
      std::uint64_t first = 0;
      for (int p : node.prerequisites) {
        std::uint64_t one = completed_by(program, record, p);
        if (one != 0 && (first == 0 || one < first)) first = one;
      }
      return first;
    }
  }
  return 0;
}

// has_completed says whether everything the node's completion depends on has been stamped.
bool has_completed(const graph_program& program, const run_record& record, int index) {
  std::uint64_t by = completed_by(program, record, index);
  return by != 0 && by < record.clock.load();
}

std::vector<task<>> handles_of(const run_record& record, const std::vector<int>& nodes) {
  std::vector<task<>> handles;
  for (int n : nodes) handles.push_back(record.handles[static_cast<std::size_t>(n)]);
  return handles;
}

void check_waited(const graph_program& program, const run_record& record, int index, const char* how) {
  expect(record.handles[static_cast<std::size_t>(index)].is_completed() && has_completed(program, record, index),
         std::string(how) + " returned before node " + std::to_string(index) + " completed\n" + describe(program));
}

void launch_node(const graph_program& program, run_record& record, scheduler& pool, std::array<pipe*, pipe_count> pipes,
                 int index) {
  const graph_node& node = program.nodes[static_cast<std::size_t>(index)];
  auto at = static_cast<std::size_t>(index);
  std::vector<task<>> before = handles_of(record, node.prerequisites);
  switch (node.kind) {
    case node_kind::event: {
      record.events[at] = std::make_unique<task_event>("fuzz event", pool);
      record.events[at]->add_prerequisites(before);
      record.handles[at] = *record.events[at];
      return;
    }
    case node_kind::when_all: record.handles[at] = when_all(before); return;
    case node_kind::when_any: record.handles[at] = when_any(before); return;
    case node_kind::task:
    case node_kind::piped_task: break;
  }
  auto body = [&program, &record, index]() -> std::uint64_t {
    const graph_node& self = program.nodes[static_cast<std::size_t>(index)];
    auto me = static_cast<std::size_t>(index);
    record.starts[me] = record.clock.fetch_add(1);
    record.runs[me].fetch_add(1);
    std::vector<std::uint64_t> contributions;
    for (int p : self.prerequisites) {
      const graph_node& prerequisite = program.nodes[static_cast<std::size_t>(p)];
      if (!has_body(prerequisite)) {
        contributions.push_back(static_cast<std::uint64_t>(p));
        continue;
      }
      const task<std::uint64_t>& result = record.results[static_cast<std::size_t>(p)];
      contributions.push_back(result.has_exception() ? failed_contribution : result.get_result());
    }
    if (self.waits_for >= 0) {
      record.handles[static_cast<std::size_t>(self.waits_for)].wait();
      check_waited(program, record, self.waits_for, "a wait inside a body");
    }
    for (std::size_t n = 0; n < self.nested_throws.size(); ++n) {
      task<> child = launch("fuzz nested", [&record, me, n, throws = self.nested_throws[n], index] {
        record.nested_starts[me][n] = record.clock.fetch_add(1);
        record.nested_runs[me][n].fetch_add(1);
        record.nested_ends[me][n] = record.clock.fetch_add(1);
        if (throws) throw node_failure{index, static_cast<int>(n)};
      });
      record.nested[me][n] = child;
      add_nested(child);
    }
    record.ends[me] = record.clock.fetch_add(1);
    if (self.throws) throw node_failure{index, -1};
    return body_value(index, contributions);
  };
  placement where = node.placement == node_placement::high         ? placement(priority::high)
                    : node.placement == node_placement::inline_run ? run_inline
                                                                   : placement(priority::normal);
  task<std::uint64_t> launched = node.kind == node_kind::piped_task
                                     ? pipes[static_cast<std::size_t>(node.pipe)]->launch("fuzz piped", body, before, where)
                                     : pool.launch("fuzz task", body, before, where);
  record.results[at] = launched;
  record.handles[at] = launched;
}

void run_step(const graph_program& program, run_record& record, scheduler& pool, std::array<pipe*, pipe_count> pipes,
              const graph_step& step) {
  switch (step.what) {
    case graph_step::kind::launch: launch_node(program, record, pool, pipes, step.nodes[0]); break;
    case graph_step::kind::trigger: {
      auto at = static_cast<std::size_t>(step.nodes[0]);
      record.triggers[at] = record.clock.fetch_add(1);
      record.events[at]->trigger();
      break;
    }
    case graph_step::kind::wait:
      record.handles[static_cast<std::size_t>(step.nodes[0])].wait();
      check_waited(program, record, step.nodes[0], "wait");
      break;
    case graph_step::kind::wait_all:
      wait_all(handles_of(record, step.nodes));
      for (int n : step.nodes) check_waited(program, record, n, "wait_all");
      break;
    case graph_step::kind::wait_any: {
      std::optional<std::size_t> first = wait_any(handles_of(record, step.nodes));
      expect(first.has_value() && *first < step.nodes.size(), "wait_any returned no index\n" + describe(program));
      check_waited(program, record, step.nodes[*first], "wait_any");
      break;
    }
  }
}

// check_exception looks at what a task with a body holds, as the documentation says: its
// own body's exception, else one of its nested tasks', else none.
void check_exception(const graph_program& program, const run_record& record, int index, std::uint64_t expected) {
  const graph_node& node = program.nodes[static_cast<std::size_t>(index)];
  const task<std::uint64_t>& result = record.results[static_cast<std::size_t>(index)];
  std::string where = "node " + std::to_string(index) + ": ";
  expect(result.has_exception() == fails(node), where + "has_exception() disagrees\n" + describe(program));
  try {
    std::uint64_t value = result.get_result();
    expect(!fails(node), where + "get_result() returned instead of rethrowing\n" + describe(program));
    expect(value == expected, where + "result differs from the serial execution\n" + describe(program));
  } catch (const node_failure& failure) {
    bool own = node.throws && failure.node == index && failure.nested == -1;
    bool nested = !node.throws && failure.node == index && failure.nested >= 0 &&
                  static_cast<std::size_t>(failure.nested) < node.nested_throws.size() &&
                  node.nested_throws[static_cast<std::size_t>(failure.nested)];
    expect(own || nested, where + "get_result() rethrew the wrong exception\n" + describe(program));
  }
}

void check_run(const graph_program& program, const run_record& record) {
  std::vector<std::uint64_t> expected = serial_values(program);
  for (std::size_t i = 0; i < program.nodes.size(); ++i) {
    const graph_node& node = program.nodes[i];
    auto index = static_cast<int>(i);
    std::string where = "node " + std::to_string(i) + ": ";
    expect(record.handles[i].is_completed(), where + "not completed after wait_all\n" + describe(program));
    if (!has_body(node)) {
      record.handles[i].has_exception();  // looked at, so never reported as unhandled
      continue;
    }
    expect(record.runs[i].load() == 1, where + "body ran " + std::to_string(record.runs[i].load()) + " times\n" + describe(program));
    for (std::size_t n = 0; n < node.nested_throws.size(); ++n) {
      expect(record.nested_runs[i][n].load() == 1, where + "a nested task did not run exactly once\n" + describe(program));
      expect(record.nested_starts[i][n].load() > record.starts[i].load(), where + "nested task ran before its parent\n" + describe(program));
    }
    check_exception(program, record, index, expected[i]);
    for (int p : node.prerequisites) {
      expect(record.starts[i].load() > completed_by(program, record, p),
             where + "started before its prerequisite " + std::to_string(p) + " completed\n" + describe(program));
    }
  }
  // Pipes: never two at once (a task occupies its pipe until its nested tasks completed),
  // and tasks launched without prerequisites start in launch order.
  for (int pipe_index = 0; pipe_index < pipe_count; ++pipe_index) {
    std::vector<int> piped;
    for (std::size_t i = 0; i < program.nodes.size(); ++i) {
      if (program.nodes[i].kind == node_kind::piped_task && program.nodes[i].pipe == pipe_index) piped.push_back(static_cast<int>(i));
    }
    for (std::size_t a = 0; a < piped.size(); ++a) {
      for (std::size_t b = a + 1; b < piped.size(); ++b) {
        auto first = static_cast<std::size_t>(piped[a]), second = static_cast<std::size_t>(piped[b]);
        bool apart = completed_by(program, record, piped[a]) < record.starts[second].load() ||
                     completed_by(program, record, piped[b]) < record.starts[first].load();
        expect(apart, "piped nodes " + std::to_string(first) + " and " + std::to_string(second) + " overlapped\n" + describe(program));
        if (program.nodes[first].prerequisites.empty() && program.nodes[second].prerequisites.empty()) {
          expect(record.starts[first].load() < record.starts[second].load(),
                 "piped nodes " + std::to_string(first) + " and " + std::to_string(second) + " ran out of launch order\n" + describe(program));
        }
      }
    }
  }
}

}  // namespace
}  // namespace magpie::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace magpie;
  using namespace magpie::fuzz;
  input_decoder in(data, size);
  graph_program program = decode_graph(in);
  if (std::getenv("MAGPIE_FUZZ_PRINT") != nullptr) std::fprintf(stderr, "%s", describe(program).c_str());  // replaying one input
  scheduler& pool = scheduler_with(program.workers);
  std::int64_t live_before = detail::live_tasks();
  diagnostic_capture diagnostics;
  {
    run_record record(program.nodes.size());
    magpie::pipe first("fuzz pipe 0", pool);
    magpie::pipe second("fuzz pipe 1", pool);
    std::array<magpie::pipe*, pipe_count> pipes{&first, &second};
    for (const graph_step& step : program.steps) run_step(program, record, pool, pipes, step);
    for (std::size_t i = 0; i < program.nodes.size(); ++i) {
      if (program.nodes[i].kind == node_kind::event && record.triggers[i] == 0) {
        record.triggers[i] = record.clock.fetch_add(1);
        record.events[i]->trigger();
      }
    }
    wait_all(record.handles);
    for (const auto& nested : record.nested) wait_all(nested);
    check_run(program, record);
  }
  // Bodies that wait block their workers; reaching the standby cap then is reported, as
  // documented (limit_reached). Anything else is not expected.
  for (const auto& report : diagnostics.take()) {
    expect(report.kind == diagnostic_kind::limit_reached, "unexpected diagnostic: " + report.message + "\n" + describe(program));
  }
  // Tasks are released by the threads that complete them, just after: give them a moment.
  // A task a waiter took back and ran may still sit in a queue (holding a reference) until
  // the queue is drained; with no workers only this thread drains it.
  while (pool.try_run_one()) {
  }
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (detail::live_tasks() != live_before && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  expect(detail::live_tasks() == live_before, "tasks left alive after the run\n" + describe(program));
  return 0;
}
