// Layer 2 — the unit the scheduler queues.
//
// The scheduler runs `work_item`s and knows nothing else about them: the task model
// (layer 3) derives its tasks from this struct. A work item is handed to the scheduler
// once per scheduling and comes back through its handler exactly once — to run, or, when
// the scheduler shuts down with the item stranded (e.g. in the queue of a named thread
// that no longer processes it), to be discarded without running.
#pragma once

#include <magpie/detail/language.h>

#include <cstdint>

namespace magpie::detail {

// work_action tells a work item's handler what the scheduler wants.
enum class work_action : std::uint8_t {
  run,      // execute the work now, on this thread
  discard,  // the work can never run: release it without running
  run_joined,  // task_group children only: run, for a joining thread that counts it itself
  // From here on, the item type's own operations (the task layer's task_op): one function
  // pointer per item serves the scheduler and the item's type, so neither needs a second.
  item_specific = 16,
};

// work_item is an intrusive header: derive from it and set `handler`.
struct work_item {
  // handler runs or discards `self`; it must not throw. It returns whether it did
  // something: false only when the work already ran another way (a task a waiting thread
  // retracted), so that there is nothing to report, or to count as run.
  using handler_fn = bool (*)(work_item* self, work_action action) noexcept;

  // is_task, in `tag`: the item is a task (layer 3's task_base), whoever finds it in a
  // queue may read it as one. Every other item leaves it clear.
  static constexpr std::uint8_t is_task = 1u << 7;

  // work_item's constructor is declared (not written) so that the type is not a plain
  // aggregate: a derived type may then place its first small fields in the padding after
  // `tag` (task_base does, and stays 48 bytes).
  work_item() noexcept = default;

  handler_fn handler = nullptr;
  const char* name = "";  // for diagnostics; must outlive the item
  // tag says what the item is: is_task (bit 7); the other bits are the item type's own
  // (a task keeps its kind and priority there).
  std::uint8_t tag = 0;
};

// is_task_item says whether `item` is a task (work_item::is_task).
constexpr bool is_task_item(const work_item* item) noexcept { return (item->tag & work_item::is_task) != 0; }

}  // namespace magpie::detail
