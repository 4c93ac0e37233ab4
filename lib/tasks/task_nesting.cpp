// Nested tasks: tasks a running body adds, which its task completes after; their exceptions
// handed on to it, and the holds that keep its nested list while a waiter walks it.
#include "task_internal.h"

#include <magpie/diagnostics.h>

#include <string>

namespace magpie::detail {

namespace {
using tracing::event_kind;
}  // namespace

void add_nested(task_base* nested) noexcept {
  task_base* parent = current_task_inline();
  if (parent == nullptr) {
    report(diagnostic_kind::misuse, std::string("add_nested('") + nested->name +
                                        "') called outside a running task; ignored");
    return;
  }
  if ((parent->tag & task_base::resumes_coroutine) != 0) [[unlikely]] {
    nest_in_coroutine(parent, nested);  // lib/forkjoin/coroutine.cpp: the coroutine's task waits for it
    return;
  }
  if (parent == nested) {
    report(diagnostic_kind::misuse, std::string("task '") + parent->name + "' added itself as nested; ignored");
    return;
  }
  if (depends_on(nested, parent)) {
    report(diagnostic_kind::misuse, std::string("task '") + parent->name + "' added '" + nested->name +
                                        "' as nested, which waits for it: a dependency cycle; ignored");
    return;
  }
  edge_group* group = create_edge_group_inline(1);
  task_edge* edge = new (group->edges()) task_edge();
  edge->subsequent = parent;
  edge->prerequisite = nested;
  edge->kind = edge_kind::nested;
  add_reference_inline(nested);  // for retraction, until the parent's nested list goes (drop_nested_hold)
  add_reference_inline(parent);  // the edge's: the parent may complete after its body returns
  parent->state.add_nested_part();
  tracing::trace_point(tracing::task, event_kind::task_edge, parent, nullptr, reinterpret_cast<std::uintptr_t>(nested),
                       static_cast<std::uint32_t>(edge_kind::nested));
  task_extras& extras = ensure_extras_inline(parent);
  group->next = extras.nested;
  extras.nested = group;
  if (!push_subsequent(nested, edge)) {
    hand_on_exception(nested, parent);
    static_cast<void>(parent->state.end_part());  // parts_remain: the body still holds its part
    drop_reference_inline(parent);
  }
}

void hand_on_exception(task_base* nested, task_base* parent) noexcept {
  if (!nested->has_flag(has_exception)) return;  // its completion, which we follow, published it
  nested->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: read by its destroy after the last release
  // relaxed: only which nested task wins matters; the release below publishes what it wrote
  if ((parent->flags.fetch_or(nested_exception_claimed, std::memory_order_relaxed) & nested_exception_claimed) != 0) return;
  parent->extras->nested_exception = body_failure(nested);
  parent->flags.fetch_or(nested_exception, std::memory_order_release);  // release: pairs with has_flag's acquire
}

bool try_hold_nested(task_extras& extras) noexcept {
  std::uint32_t holds = extras.nested_holds.load(std::memory_order_acquire);  // acquire: as the CAS
  while (holds != 0) {
    // acquire: the list stays as the body left it until this hold goes
    if (extras.nested_holds.compare_exchange_weak(holds, holds + 1, std::memory_order_acquire,
                                                  std::memory_order_acquire)) {  // acquire: as above, on a retry
      return true;
    }
  }
  return false;
}

void drop_nested_hold(task_extras& extras) noexcept {
  // acq_rel: the last holder sees every other holder's reads done before it frees the list
  if (extras.nested_holds.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (edge_group* group = extras.nested; group != nullptr;) {  // every nested task has completed
    edge_group* next = group->next;
    drop_reference_inline(group->edges()->prerequisite);
    destroy_edge_group_inline(group);
    group = next;
  }
  extras.nested = nullptr;
}

}  // namespace magpie::detail
