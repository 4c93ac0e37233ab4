// Dependency cycles: a task that waits, directly or through others, for something that
// waits for it can never complete. Prerequisites are fixed at launch, so a cycle can only
// be closed later: by adding prerequisites to an event, by add_nested, or by waiting
// inside a running task for a task downstream of it. Each of those asks depends_on first.
#include "task_internal.h"

#include <magpie/config.h>
#include <magpie/diagnostics.h>

#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

namespace magpie::detail {

namespace {

// max_edges_walked bounds the walk, so that adding to an event many tasks wait for costs
// at most this much. A cycle through more edges than this goes unreported in a release
// build; a build with debug checks walks 64 times further, each task once (diamonds are not
// walked again), and says when even that was not enough (a warning: the edge may or may
// not close a cycle).
constexpr std::size_t max_edges_walked = MAGPIE_DEBUG_CHECKS ? 64 * 1024 : 1024;

// blocks_completion says whether an edge's subsequent cannot complete before the edge's
// prerequisite has: every kind but when_any's, which another input may trigger.
bool blocks_completion(const task_edge& edge) noexcept { return edge.kind != edge_kind::any; }

// waits_for_nothing says, from a snapshot, that `task` waits for no other task: it is
// ready, its body is done with no nested task left, or it is an event whose only lock is
// its own trigger (a new event, say: building a chain of events backwards stays cheap).
bool waits_for_nothing(const task_base* task) noexcept {
  std::uint32_t word = task->state.raw() & ~task_state<>::marks;
  if (word == 0 || word == task_state<>::execution_flag) return true;
  return word == 1 && task->kind() == task_kind::event && !task->has_flag(triggered);
}

}  // namespace

bool depends_on(const task_base* later, const task_base* earlier) noexcept {
  if (later == earlier) return true;
  if (later->is_completed() || waits_for_nothing(later)) return false;
  if (earlier->subsequents.newest_while_open() == nullptr) return false;  // nothing waits for it
  // Walk forward from `earlier` through the tasks waiting for it. None of them can
  // complete (or free itself) while `earlier` has not, and the caller knows it has not:
  // its body is running on this thread, or it is an event not yet triggered. So every
  // list on the way is open and only grows at its head.
  std::vector<const task_base*> unexpanded{earlier};
  std::unordered_set<const task_base*> expanded;  // debug checks only
  std::size_t budget = max_edges_walked;
  while (!unexpanded.empty()) {
    const task_base* task = unexpanded.back();
    unexpanded.pop_back();
    if (MAGPIE_DEBUG_CHECKS && !expanded.insert(task).second) continue;
    for (task_edge* edge = task->subsequents.newest_while_open(); edge != nullptr;
         edge = subsequent_list<task_edge>::next_of(edge)) {
      if (budget-- == 0) {
        if (MAGPIE_DEBUG_CHECKS) {
          report(diagnostic_kind::limit_reached,
                 std::string("dependency cycle check: gave up after ") + std::to_string(max_edges_walked) +
                     " edges downstream of '" + earlier->name + "'; a cycle through more edges would go unreported",
                 severity::warning);
        }
        return false;
      }
      if (!blocks_completion(*edge)) continue;
      if (edge->subsequent == later) return true;
      unexpanded.push_back(edge->subsequent);
    }
  }
  return false;
}

}  // namespace magpie::detail
