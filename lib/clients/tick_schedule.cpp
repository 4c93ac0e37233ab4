// The tick manager's schedule: placement (demotion), the build that caches it, the per-frame
// placement of ticks that wait for interval ticks, newly spawned ticks, and the cooldowns.
#include <magpie/diagnostics.h>
#include <magpie/tick_manager.h>

#include "tick_state.h"

#include <algorithm>
#include <array>
#include <string>

namespace magpie {

using ticks::none;
using ticks::tick_slot;
using ticks::unit;

namespace {

constexpr ticking_group next(ticking_group group) { return static_cast<ticking_group>(static_cast<int>(group) + 1); }

// demotable says whether a tick pushed later by its prerequisites may land in `group`.
constexpr bool demotable(ticking_group group) {
  return group != ticking_group::start_physics && group != ticking_group::end_physics;
}

ticking_group skip_undemotable(ticking_group group) {
  while (!demotable(group)) group = next(group);
  return group;
}

// Chunks that wait for prerequisites: small enough that each waits only for the
// prerequisites of a few ticks, big enough that a task's cost spreads thin: at most
// largest_linked_chunk ticks. Any-thread ones take at most a quarter of the group's free
// any-thread chunk (at least smallest_linked_chunk), so that the last of a group, which often
// waits for most of the others, leaves the other threads a short tail.
constexpr std::size_t smallest_linked_chunk = 4;
constexpr std::size_t largest_linked_chunk = 128;

// Free any-thread chunks: a group's any-thread ticks are cut into about this many chunks per
// worker, so that each worker takes a few (the last ones balance the load, and the game
// thread takes back those left when its own ticks are done), but no more, so that the
// workers do not contend for many small tasks; and no chunk is smaller than smallest_chunk.
constexpr std::size_t chunks_per_worker = 4;
constexpr std::size_t smallest_chunk = 16;

}  // namespace

// ---- cooldowns -------------------------------------------------------------------------

// heap_fix restores the heap's order around `slot`, whose expiry may have changed.
void tick_manager::state::heap_fix(tick_slot* slot) {
  auto& heap = cooldown_heap;
  std::uint32_t at = slot->heap_position;
  heap[at].expiry = slot->expiry;
  auto swap_entries = [&](std::uint32_t to, std::uint32_t from) {
    std::swap(heap[to], heap[from]);
    heap[to].slot->heap_position = to;
    heap[from].slot->heap_position = from;
  };
  while (at > 0) {  // up
    std::uint32_t parent = (at - 1) / 2;
    if (!(heap[at] < heap[parent])) break;
    swap_entries(at, parent);
    at = parent;
  }
  for (;;) {  // down
    std::uint32_t smallest = at;
    for (std::uint32_t child = 2 * at + 1; child <= 2 * at + 2 && child < heap.size(); ++child) {
      if (heap[child] < heap[smallest]) smallest = child;
    }
    if (smallest == at) break;
    swap_entries(at, smallest);
    at = smallest;
  }
}

void tick_manager::state::heap_push(tick_slot* slot) {
  slot->heap_position = static_cast<std::uint32_t>(cooldown_heap.size());
  cooldown_heap.push_back({slot->expiry, slot->index, slot});
  heap_fix(slot);
}

// heap_remove takes a tick out of the cooldowns in O(log n) (Unreal walks a list: O(n)).
void tick_manager::state::heap_remove(tick_slot* slot) {
  std::uint32_t at = slot->heap_position;
  if (at == none) return;
  ticks::cooldown last = cooldown_heap.back();
  cooldown_heap.pop_back();
  slot->heap_position = none;
  if (last.slot != slot) {
    cooldown_heap[at] = last;
    last.slot->heap_position = at;
    heap_fix(last.slot);
  }
}

// mark_running makes an interval tick run this frame: its delta is the time since it last
// ran (the frame's delta the first time) and its next expiry keeps its phase — the overrun
// is credited — but it runs at most once per frame.
void tick_manager::state::mark_running(tick_slot& slot) {
  tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread, its own store
  float interval = tick_access::interval(*tick);
  slot.due_frame = frame;
  slot.delta = slot.has_run ? static_cast<float>(now - slot.last_run) : frame_delta;
  slot.last_run = now;
  slot.has_run = true;
  slot.expiry = slot.expiry == ticks::run_at_next_visit ? now + interval : slot.expiry + interval;
}

// take_due_cooldowns marks every interval tick whose remaining cooldown is strictly below
// this frame's delta (expiry < end of frame) as running this frame.
void tick_manager::state::take_due_cooldowns() {
  std::vector<tick_slot*>& still_due = still_due_scratch;
  still_due.clear();
  while (!cooldown_heap.empty() && cooldown_heap.front().expiry < now) {
    tick_slot* slot = cooldown_heap.front().slot;
    mark_running(*slot);
    if (slot->expiry < now) {  // far behind: out until this frame's pass is over (once per frame)
      heap_remove(slot);
      still_due.push_back(slot);
    } else {
      heap_fix(slot);  // its new expiry, in place: one sift instead of a pop and a push
    }
  }
  for (tick_slot* slot : still_due) heap_push(slot);
}

// ---- placement ---------------------------------------------------------------------------

// place computes a tick's groups and thread from its own settings, the group being run
// (`context`) and the prerequisites that tick this frame (`before`).
void tick_manager::state::place(tick_slot& slot, ticking_group context, const std::vector<tick_slot*>& before) {
  tick_function& tick = *slot.function.load(std::memory_order_relaxed);  // relaxed: game thread's own store
  ticking_group own = tick_access::group(tick);
  ticking_group start = std::max(own, context);
  for (const tick_slot* each : before) start = std::max(start, each->start);
  if (start != own) start = skip_undemotable(start);
  ticking_group asked_end = std::max(tick_access::end_group(tick), own);
  ticking_group end = std::max(asked_end, start);
  for (const tick_slot* each : before) end = std::max(end, each->end);
  if (end != asked_end) end = skip_undemotable(end);
  slot.start = start;
  slot.end = end;
  slot.game_thread = !(tick_access::any_thread(tick) && options.allow_async_ticks && pool->worker_count() > 0 &&
                       start == own);
  tick_access::set_actual(tick, start, end);
}

// needed_edge says whether `after` must wait for `before`'s unit: not when the group order
// already guarantees it (before completes in a blocking group earlier than after starts).
bool tick_manager::state::needed_edge(const tick_slot& before, const tick_slot& after) const {
  if (before.end >= after.start) return true;
  return before.end == ticking_group::during_physics && after.start == ticking_group::end_physics;
}

// runs_this_frame says whether a prerequisite ticks in the current frame.
bool tick_manager::state::runs_this_frame(const tick_slot& slot) const {
  if (!slot.registered) return false;
  if (slot.placed_frame == frame) return true;
  return slot.in_schedule && !slot.dynamic && (!slot.interval || slot.due_frame == frame);
}

// ---- the build -----------------------------------------------------------------------------

namespace {

struct unit_key {
  ticking_group start, end;
  bool game_thread, high_priority, batch, linked;
  std::size_t index() const {
    std::size_t groups = static_cast<std::size_t>(start) * ticking_group_count + static_cast<std::size_t>(end);
    return groups * 16 + (game_thread ? 8 : 0) + (high_priority ? 4 : 0) + (batch ? 2 : 0) + (linked ? 1 : 0);
  }
};
static_assert(ticks::unit_key_count == ticking_group_count * ticking_group_count * 16);

}  // namespace

// file puts a placed tick into a unit: of the cached schedule, or (for_frame) of this frame
// only. A unit waits only for units made before it, so a tick joins an open unit only when
// everything it waits for is older than that unit (or inside it: a unit runs its ticks in the
// order they joined, which is prerequisite order). Free ticks share chunks; so do ticks with
// prerequisites to wait for (chunks of their own, so that free chunks never wait, and
// bounded, so that one chunk does not wait for everything), unless their prerequisites all
// sit in the open free chunk of their kind: then they join it, and wait for nothing.
void tick_manager::state::file(tick_slot& slot, std::array<std::uint32_t, ticks::unit_key_count>& open, bool for_frame) {
  tick_function& tick = *slot.function.load(std::memory_order_relaxed);  // relaxed: game thread's own store
  waits_scratch.clear();
  for (tick_slot* before : slot.kept) {
    if (for_frame && !runs_this_frame(*before)) continue;
    if (needed_edge(*before, slot) &&
        std::find(waits_scratch.begin(), waits_scratch.end(), before->unit) == waits_scratch.end()) {
      waits_scratch.push_back(before->unit);
    }
  }
  bool high = tick_access::high(tick);
  bool batch = options.allow_batching && tick_access::batching(tick) && !high && slot.game_thread &&
               slot.start == slot.end;
  bool linked = !waits_scratch.empty() && !batch;
  unit_key key{slot.start, slot.end, slot.game_thread, high, batch, linked};
  std::uint32_t& candidate = open[key.index()];
  auto new_unit = [&] {
    auto index = static_cast<std::uint32_t>(units.size());
    unit& made = units.emplace_back();
    made.start = key.start;
    made.end = key.end;
    made.game_thread = key.game_thread;
    made.high_priority = key.high_priority;
    made.batch = key.batch;
    (for_frame ? frame_by_start : static_by_start)[ticks::group_index(key.start)].push_back(index);
    return index;
  };
  // A tick whose prerequisites all run in the open free chunk of its kind joins that chunk:
  // the chunk runs them first, so the edges cost no task and no wait.
  unit_key free_key = key;
  free_key.linked = false;
  std::uint32_t free_chunk = open[free_key.index()];
  std::size_t free_limit = free_chunk_limit[ticks::group_index(key.start)];
  bool inside_free_chunk =
      linked && free_chunk != none && (slot.game_thread || units[free_chunk].members.size() < free_limit) &&
      std::all_of(waits_scratch.begin(), waits_scratch.end(), [&](std::uint32_t w) { return w == free_chunk; });
  std::uint32_t chosen = none;
  if (inside_free_chunk) {
    chosen = free_chunk;
  } else {
    std::size_t limit = !linked          ? free_limit
                        : slot.game_thread ? largest_linked_chunk
                                           : std::clamp(free_limit / 4, smallest_linked_chunk, largest_linked_chunk);
    bool fits = candidate != none && (batch || (slot.game_thread && !linked) || units[candidate].members.size() < limit) &&
                std::all_of(waits_scratch.begin(), waits_scratch.end(), [&](std::uint32_t w) { return w <= candidate; });
    if (!fits) candidate = new_unit();
    chosen = candidate;
  }
  unit& into = units[chosen];
  for (std::uint32_t w : waits_scratch) {
    if (w != chosen && std::find(into.prerequisites.begin(), into.prerequisites.end(), w) == into.prerequisites.end()) {
      into.prerequisites.push_back(w);
    }
  }
  slot.unit = chosen;
  slot.member = static_cast<std::uint32_t>(into.members.size());
  into.members.emplace_back(slot, tick, tick_access::enabled(tick));
  if (for_frame) slot.placed_frame = frame;
  (for_frame ? frame_filed : static_filed).push_back(&slot);
}

// size_chunks sets how many ticks a free any-thread chunk takes in each start group: the
// group's any-thread ticks (counted in their own group: demoted ones run on the game
// thread) over chunks_per_worker chunks per worker, at least smallest_chunk.
void tick_manager::state::size_chunks() {
  std::array<std::size_t, ticking_group_count> any_thread{};
  unsigned workers = pool->worker_count();
  if (options.allow_async_ticks && workers > 0) {
    for (const tick_slot& slot : slots) {
      if (!slot.in_schedule) continue;
      const tick_function& tick = *slot.function.load(std::memory_order_relaxed);  // relaxed: game thread's own store
      if (tick_access::any_thread(tick)) ++any_thread[ticks::group_index(tick_access::group(tick))];
    }
  }
  std::size_t chunks = std::max<std::size_t>(workers, 1) * chunks_per_worker;
  for (std::size_t group = 0; group < ticking_group_count; ++group) {
    free_chunk_limit[group] = std::max(smallest_chunk, (any_thread[group] + chunks - 1) / chunks);
  }
}

// build places every registered, enabled tick in prerequisite order (depth first, high
// priority roots first) and files it into a unit; cycles are broken at the edge that closes
// them and reported once per change.
void tick_manager::state::build() {
  // Slots unregistered since the last build are no longer in any unit: free to reuse.
  for (std::uint32_t index : retired_slots) free_slots.push_back(index);
  retired_slots.clear();
  units.clear();
  for (auto& list : static_by_start) list.clear();
  dynamic_order.clear();
  cycles.clear();
  static_filed.clear();
  static_demoted = 0;
  static_cycles = 0;
  ++build_mark;
  for (tick_slot& slot : slots) {
    slot.unit = none;
    slot.member = none;
    slot.dynamic = false;
    slot.on_stack = false;
    slot.kept.clear();
    tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread's own store
    slot.in_schedule = slot.registered && tick != nullptr && tick_access::enabled(*tick);
    if (slot.in_schedule) slot.interval = tick_access::interval(*tick) > 0;
  }
  size_chunks();

  std::array<std::uint32_t, ticks::unit_key_count> open;
  open.fill(none);

  // Iterative depth-first search: prerequisite chains of any length, no deep recursion.
  struct frame_entry {
    tick_slot* slot;
    std::size_t next;
  };
  std::vector<frame_entry> stack;
  auto visit = [&](tick_slot& root) {
    if (root.visit_mark == build_mark) return;
    root.visit_mark = build_mark;
    root.on_stack = true;
    stack.push_back({&root, 0});
    while (!stack.empty()) {
      frame_entry& top = stack.back();
      tick_function& tick = *top.slot->function.load(std::memory_order_relaxed);  // relaxed: game thread
      const auto& before = tick.prerequisites();
      if (top.next < before.size()) {
        tick_function* prerequisite = before[top.next++];
        if (tick_access::manager(*prerequisite) == nullptr) continue;
        tick_slot& other = *static_cast<tick_slot*>(tick_access::slot(*prerequisite));
        // Another manager's tick or one not ticking: ignored, as Unreal ignores it.
        if (&tick_access::state_of(*tick_access::manager(*prerequisite)) != this || !other.in_schedule) continue;
        if (other.on_stack) {
          ++static_cycles;
          std::string text = "tick prerequisite cycle: ";
          auto from = std::find_if(stack.begin(), stack.end(), [&](const frame_entry& e) { return e.slot == &other; });
          for (auto each = from; each != stack.end(); ++each) {
            text.append("'").append(ticks::name_of(*each->slot)).append("' waits for ");
          }
          text.append("'").append(ticks::name_of(other)).append("'; '");
          text.append(tick.name()).append("' no longer waits for '").append(prerequisite->name());
          text.append("' (that edge is dropped; every tick still runs)");
          cycles.push_back({std::move(text)});
          continue;
        }
        top.slot->kept.push_back(&other);
        if (other.visit_mark != build_mark) {
          other.visit_mark = build_mark;
          other.on_stack = true;
          stack.push_back({&other, 0});
        }
        continue;
      }
      tick_slot& done = *top.slot;
      stack.pop_back();
      done.on_stack = false;
      for (const tick_slot* before_slot : done.kept) {
        if (before_slot->interval || before_slot->dynamic) done.dynamic = true;
      }
      if (done.dynamic) {
        dynamic_order.push_back(&done);
        continue;
      }
      place(done, ticking_group::pre_physics, done.kept);
      if (done.start != tick_access::group(*done.function.load(std::memory_order_relaxed))) ++static_demoted;  // relaxed: game thread
      file(done, open, false);
    }
  };
  for (int pass = 0; pass < 2; ++pass) {  // high-priority ticks (and what they wait for) first
    for (tick_slot& slot : slots) {
      if (!slot.in_schedule) continue;
      bool high = tick_access::high(*slot.function.load(std::memory_order_relaxed));  // relaxed: game thread
      if (high == (pass == 0)) visit(slot);
    }
  }
  static_units = units.size();
  dirty = false;
  if (!cycles.empty() && cycles_reported_version != change_version) {
    cycles_reported_version = change_version;
    for (const auto& cycle : cycles) report(diagnostic_kind::misuse, cycle.text, severity::warning);
  }
}

// add_frame_unit gives a tick placed for this frame only a unit of its own.
std::uint32_t tick_manager::state::add_frame_unit(tick_slot& slot) {
  auto index = static_cast<std::uint32_t>(units.size());
  unit& made = units.emplace_back();
  made.start = slot.start;
  made.end = slot.end;
  made.game_thread = slot.game_thread;
  made.high_priority = tick_access::high(*slot.function.load(std::memory_order_relaxed));  // relaxed: game thread
  made.single = true;
  tick_function& tick = *slot.function.load(std::memory_order_relaxed);  // relaxed: game thread's own store
  made.members.emplace_back(slot, tick, tick_access::enabled(tick));
  for (const tick_slot* before : slot.kept) {
    if (!runs_this_frame(*before) || !needed_edge(*before, slot)) continue;
    if (std::find(made.prerequisites.begin(), made.prerequisites.end(), before->unit) == made.prerequisites.end()) {
      made.prerequisites.push_back(before->unit);
    }
  }
  slot.unit = index;
  slot.member = 0;
  slot.placed_frame = frame;
  frame_by_start[ticks::group_index(slot.start)].push_back(index);
  frame_filed.push_back(&slot);
  return index;
}

// place_dynamic places, for this frame, the ticks that wait for interval ticks: a
// prerequisite cooling down this frame is ignored, so their groups may change frame by frame
// while the rest of the schedule stands.
void tick_manager::state::place_dynamic() {
  std::vector<tick_slot*>& ticking = ticking_scratch;
  frame_open.fill(none);
  for (tick_slot* slot : dynamic_order) {
    if (slot->interval && slot->due_frame != frame) continue;
    ticking.clear();
    for (tick_slot* before : slot->kept) {
      if (runs_this_frame(*before)) ticking.push_back(before);
    }
    place(*slot, ticking_group::pre_physics, ticking);
    if (slot->start != tick_access::group(*slot->function.load(std::memory_order_relaxed))) ++stats.demoted;  // relaxed: game thread
    file(*slot, frame_open, true);  // frame units: chunked and batched as the cached ones
  }
}

// queue_newly_spawned places the ticks registered (or enabled) during the frame, no earlier
// than `context`, each in a unit of its own; prerequisites among them first.
void tick_manager::state::queue_newly_spawned(ticking_group context) {
  if (newly_spawned.empty()) return;
  drain_orphans();
  std::lock_guard guard(off_thread_guard);  // units are added and slots placed
  std::vector<tick_slot*> spawned;
  spawned.swap(newly_spawned);
  std::vector<tick_slot*> ticking;
  auto place_one = [&](tick_slot& slot, auto& self) -> void {
    if (!slot.queued_new) return;
    slot.queued_new = false;
    tick_function* tick = slot.function.load(std::memory_order_relaxed);  // relaxed: game thread
    if (tick == nullptr || !tick_access::enabled(*tick)) return;
    slot.kept.clear();
    for (tick_function* prerequisite : tick->prerequisites()) {
      if (tick_access::manager(*prerequisite) == nullptr ||
          &tick_access::state_of(*tick_access::manager(*prerequisite)) != this) {
        continue;
      }
      tick_slot& other = *static_cast<tick_slot*>(tick_access::slot(*prerequisite));
      if (other.queued_new) self(other, self);  // a cycle among them finds it unqueued: ignored
      if (runs_this_frame(other)) slot.kept.push_back(&other);
    }
    if (slot.interval = tick_access::interval(*tick) > 0; slot.interval) {
      heap_remove(&slot);
      slot.expiry = ticks::run_at_next_visit;
      mark_running(slot);
      heap_push(&slot);
    }
    place(slot, context, slot.kept);
    if (slot.start != tick_access::group(*tick)) ++stats.demoted;
    add_frame_unit(slot);
  };
  for (tick_slot* slot : spawned) place_one(*slot, place_one);
}

}  // namespace magpie
