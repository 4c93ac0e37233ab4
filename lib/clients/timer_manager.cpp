#include <magpie/config.h>
#include <magpie/diagnostics.h>
#include <magpie/timer_manager.h>
#include <magpie/trace.h>

#include "timing_wheel.h"

#include <atomic>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace magpie {

namespace {

constexpr unsigned index_bits = 24;
constexpr std::uint32_t max_slots = std::uint32_t{1} << index_bits;
constexpr std::uint64_t serial_mask = (std::uint64_t{1} << 40) - 1;
constexpr std::uint32_t no_slot = 0xffffffff;

// One counter for every manager, as UE's, so no two managers ever issue the same handle.
// Each manager takes serials in blocks to keep the shared cache line off the set_timer path.
std::atomic<std::uint64_t> next_serial_block{1};
constexpr std::uint64_t serial_block = 1024;

enum class timer_state : std::uint8_t {
  free,
  pending,    // time = remaining; on the pending list
  active,     // time = expiry; in the wheel, or taken out by the tick that is firing it
  paused,     // time = remaining
  executing,  // time = expiry; its callback is running
  removed,    // cleared while executing: invisible, freed once the callback returns
};

struct timer_slot {
  std::uint64_t handle = 0;  // 0 while free
  double time = 0;
  float rate = 0;
  timer_state state = timer_state::free;
  bool loop = false;
  bool max_once_per_frame = false;
  bool requires_delegate = false;  // bound when set: a looping timer goes once it is not
  std::uint32_t pending_prev = no_slot;
  std::uint32_t pending_next = no_slot;
  std::uint32_t object_prev = no_slot;
  std::uint32_t object_next = no_slot;
  const void* object = nullptr;
  delegate<void()> callback;
};

}  // namespace

struct timer_manager::state {
  // Slots live in fixed pages that never move, so a running callable stays put while its
  // callback sets new timers.
  static constexpr unsigned page_bits = 10;
  static constexpr std::uint32_t page_size = std::uint32_t{1} << page_bits;

  std::vector<std::unique_ptr<timer_slot[]>> pages;
  std::uint32_t slot_count = 0;
  std::vector<std::uint32_t> free_slots;
  std::size_t live = 0;

  detail::timing_wheel wheel;
  std::uint32_t pending_head = no_slot;
  std::uint32_t pending_tail = no_slot;
  std::unordered_map<const void*, std::uint32_t> object_heads;

  double now = 0;
  frame_counter current_frame;
  std::optional<std::uint64_t> last_ticked_frame;
  bool ticking = false;
  std::vector<std::uint32_t> due;
  std::vector<std::uint64_t> due_handles;
  std::uint64_t next_serial = 0;
  std::uint64_t serial_end = 0;

  // The thread the manager belongs to: the first that used it, or the one that claimed it.
  std::atomic<std::thread::id> owner{};

  timer_slot& at(std::uint32_t index) { return pages[index >> page_bits][index & (page_size - 1)]; }

  // check_owner says whether the calling thread owns the manager (the first caller becomes
  // the owner); a call from any other thread is reported, naming both threads, and refused.
  bool check_owner(const char* operation) {
    std::thread::id me = std::this_thread::get_id();
    // relaxed, both: the id is all that is read; a race for ownership is the misuse reported
    std::thread::id current = owner.load(std::memory_order_relaxed);
    if (current == me) return true;
    if (current == std::thread::id{} && owner.compare_exchange_strong(current, me, std::memory_order_relaxed)) return true;
    report_foreign_call(operation, me, current);
    return false;
  }

  // report_foreign_call reports a call of `operation` on `caller`, a thread that is not `owning`.
  [[gnu::cold, gnu::noinline]] static void report_foreign_call(const char* operation, std::thread::id caller,
                                                               std::thread::id owning) {
    std::ostringstream message;
    message << "timer_manager::" << operation << " called on thread " << caller << ", which does not own the manager (thread "
            << owning << " does: the first that used it, or the one that claimed it); refused";
    report(diagnostic_kind::misuse, message.str());
  }

  // find is the slot `handle` names, or nullptr for invalid, stale and foreign handles.
  timer_slot* find(timer_handle handle) {
    std::uint64_t value = handle.value();
    if (value == 0) return nullptr;
    auto index = static_cast<std::uint32_t>(value & (max_slots - 1));
    if (index >= slot_count) return nullptr;
    timer_slot& slot = at(index);
    if (slot.handle != value || slot.state == timer_state::removed) return nullptr;
    return &slot;
  }

  static std::uint32_t index_of(std::uint64_t handle) {
    return static_cast<std::uint32_t>(handle & (max_slots - 1));
  }

  std::uint64_t take_serial() {
    for (;;) {
      if (next_serial == serial_end) {
        // relaxed: only uniqueness matters
        next_serial = next_serial_block.fetch_add(serial_block, std::memory_order_relaxed);
        serial_end = next_serial + serial_block;
      }
      std::uint64_t serial = next_serial++ & serial_mask;
      if (serial != 0) return serial;  // wrapped after 2^40 serials, as UE: skip 0
    }
  }

  std::uint32_t allocate(const char* operation) {
    std::uint32_t index;
    if (!free_slots.empty()) {
      index = free_slots.back();
      free_slots.pop_back();
    } else {
      index = grow(operation);
      if (index == no_slot) return no_slot;
    }
    at(index).handle = (take_serial() << index_bits) | index;
    ++live;
    return index;
  }

  // grow makes a never-used slot, with a new page when needed (the cold path of allocate).
  [[gnu::noinline]] std::uint32_t grow(const char* operation) {
    if (slot_count == max_slots) {
      std::string message = "timer_manager::";
      message.append(operation).append(
          ": 16,777,216 live timers (the handle's 24-bit index) reached; the timer is not set");
      report(diagnostic_kind::limit_reached, message);
      return no_slot;
    }
    std::uint32_t index = slot_count++;
    if ((index >> page_bits) == pages.size()) {
      pages.push_back(std::make_unique<timer_slot[]>(page_size));
      wheel.reserve(static_cast<std::uint32_t>(pages.size()) * page_size);
    }
    return index;
  }

  // release frees a slot. The callable is destroyed last, after the manager is consistent,
  // since its captures' destructors may call back into the manager.
  void release(std::uint32_t index) {
    timer_slot& slot = at(index);
    unlink_object(index);
    delegate<void()> doomed = std::move(slot.callback);
    slot.callback.unbind();
    slot.handle = 0;
    slot.state = timer_state::free;
    free_slots.push_back(index);
    --live;
  }

  bool activates_at_once() const {
    return !ticking && current_frame && last_ticked_frame && *last_ticked_frame == current_frame();
  }

  void activate(std::uint32_t index, double expire) {
    timer_slot& slot = at(index);
    slot.time = expire;
    slot.state = timer_state::active;
    wheel.insert(index, expire);
  }

  // make_pending puts a slot whose time holds its remaining time on the pending list.
  void make_pending(std::uint32_t index) {
    timer_slot& slot = at(index);
    slot.state = timer_state::pending;
    slot.pending_next = no_slot;
    slot.pending_prev = pending_tail;
    if (pending_tail != no_slot) {
      at(pending_tail).pending_next = index;
    } else {
      pending_head = index;
    }
    pending_tail = index;
  }

  void unlink_pending(std::uint32_t index) {
    timer_slot& slot = at(index);
    if (slot.pending_prev != no_slot) {
      at(slot.pending_prev).pending_next = slot.pending_next;
    } else {
      pending_head = slot.pending_next;
    }
    if (slot.pending_next != no_slot) {
      at(slot.pending_next).pending_prev = slot.pending_prev;
    } else {
      pending_tail = slot.pending_prev;
    }
  }

  // start makes a slot active now (expiry now + delay) or pending, by the frame rule.
  void start(std::uint32_t index, double delay) {
    if (activates_at_once()) {
      activate(index, now + delay);
    } else {
      at(index).time = delay;
      make_pending(index);
    }
  }

  void link_object(std::uint32_t index, const void* object) {
    timer_slot& slot = at(index);
    slot.object = object;
    slot.object_prev = no_slot;
    slot.object_next = no_slot;
    if (object == nullptr) return;
    auto [head, inserted] = object_heads.try_emplace(object, index);
    if (!inserted) {
      slot.object_next = head->second;
      at(head->second).object_prev = index;
      head->second = index;
    }
  }

  void unlink_object(std::uint32_t index) {
    timer_slot& slot = at(index);
    if (slot.object == nullptr) return;
    if (slot.object_next != no_slot) at(slot.object_next).object_prev = slot.object_prev;
    if (slot.object_prev != no_slot) {
      at(slot.object_prev).object_next = slot.object_next;
    } else if (slot.object_next != no_slot) {
      object_heads[slot.object] = slot.object_next;
    } else {
      object_heads.erase(slot.object);
    }
    slot.object = nullptr;
  }

  // clear removes a live timer in any state; a running one is freed when its callback returns.
  void clear(std::uint32_t index) {
    timer_slot& slot = at(index);
    switch (slot.state) {
      case timer_state::pending:
        unlink_pending(index);
        break;
      case timer_state::active:
        if (wheel.contains(index)) wheel.remove(index);  // else the firing tick skips it
        break;
      case timer_state::executing:
        slot.state = timer_state::removed;
        unlink_object(index);
        return;
      case timer_state::paused:
      case timer_state::free:
      case timer_state::removed:
        break;
    }
    release(index);
  }

  void pause(std::uint32_t index) {
    timer_slot& slot = at(index);
    switch (slot.state) {
      case timer_state::pending:
        unlink_pending(index);
        break;
      case timer_state::active:
        if (wheel.contains(index)) wheel.remove(index);
        slot.time -= now;
        break;
      case timer_state::executing:
        if (!slot.loop) {  // UE: a one-shot timer paused by its own callback is deleted
          clear(index);
          return;
        }
        slot.time -= now;
        break;
      case timer_state::paused:
      case timer_state::free:
      case timer_state::removed:
        return;
    }
    slot.state = timer_state::paused;
  }

  // fire runs one due timer's callback its catch-up number of times, then re-arms or frees it.
  void fire(std::uint32_t index, std::uint64_t handle) {
    timer_slot& slot = at(index);  // pages never move: valid across the callbacks
    if (slot.handle != handle || slot.state != timer_state::active) return;
    slot.state = timer_state::executing;
    trace::client_scope traced("timer", handle);
    std::uint64_t calls = 1;
    if (slot.loop) {
      double behind = (now - slot.time) / static_cast<double>(slot.rate);
      calls = behind < 1e18 ? static_cast<std::uint64_t>(behind) + 1 : std::uint64_t{1000000000000000000};
    }
    try {
      for (std::uint64_t call = 0; call < calls; ++call) {
        slot.callback.execute_if_bound();
        if (slot.state != timer_state::executing || slot.max_once_per_frame) break;
      }
    } catch (...) {
      finish(index, calls);
      throw;
    }
    finish(index, calls);
  }

  void finish(std::uint32_t index, std::uint64_t calls) {
    timer_slot& slot = at(index);
    if (slot.state == timer_state::removed) {
      release(index);
    } else if (slot.state == timer_state::executing) {
      if (slot.loop && (!slot.requires_delegate || slot.callback.is_bound())) {
        // The full count even if the calls stopped early: missed periods are dropped.
        activate(index, slot.time + static_cast<double>(calls) * static_cast<double>(slot.rate));
      } else {
        release(index);
      }
    }
    // Otherwise its callback paused it, or paused and unpaused it: it stays as it is now.
  }

  // end_tick marks the frame as ticked and activates the pending timers, in the order they
  // were set: their expiry counts from the time after this tick's delta.
  void end_tick() {
    ticking = false;
    if (current_frame) last_ticked_frame = current_frame();
    std::uint32_t index = pending_head;
    pending_head = no_slot;
    pending_tail = no_slot;
    while (index != no_slot) {
      std::uint32_t next = at(index).pending_next;
      activate(index, now + at(index).time);
      index = next;
    }
  }

  // abandon_due puts the due timers not fired yet back in the wheel (a callback threw).
  void abandon_due(std::size_t from) {
    for (std::size_t i = from; i < due.size(); ++i) {
      timer_slot& slot = at(due[i]);
      if (slot.handle == due_handles[i] && slot.state == timer_state::active && !wheel.contains(due[i])) {
        wheel.insert(due[i], slot.time);
      }
    }
  }
};

timer_manager::timer_manager() : state_(std::make_unique<state>()) {}

timer_manager::timer_manager(frame_counter current_frame) : state_(std::make_unique<state>()) {
  state_->current_frame = std::move(current_frame);
}

void timer_manager::claim_for_this_thread() {
  state_->owner.store(std::this_thread::get_id(), std::memory_order_relaxed);  // relaxed: see state::check_owner
}

timer_manager::~timer_manager() {
  if (state_->ticking) {
    report(diagnostic_kind::misuse, "timer_manager destroyed by one of its own callbacks");
  }
}

bool timer_manager::accept_object(const void* object, const char* operation) {
  if (object != nullptr) return true;
  std::string message = "timer_manager::";
  message.append(operation).append(": null object; no timer set");
  report(diagnostic_kind::misuse, message);
  return false;
}

// bind_callback binds a new timer's callable and says whether it is bound; if it throws,
// the caller frees the slot again.
static bool bind_callback(timer_slot& slot, void (*bind)(delegate<void()>&, void*), void* callback) {
  bind(slot.callback, callback);
  return slot.callback.is_bound();
}

void timer_manager::set_timer_with(timer_handle& handle, binder bind, void* callback, const void* object,
                                   float rate, timer_params params) {
  state& s = *state_;
  if (!s.check_owner("set_timer")) return;
  if (std::isnan(rate) || std::isnan(params.first_delay)) {
    report(diagnostic_kind::misuse, "timer_manager::set_timer: rate or first_delay is NaN; no timer set");
    return;
  }
  if (timer_slot* existing = s.find(handle)) s.clear(state::index_of(existing->handle));
  if (!(rate > 0)) {
    handle.invalidate();
    return;
  }
  std::uint32_t index = s.allocate("set_timer");
  if (index == no_slot) {
    handle.invalidate();
    return;
  }
  timer_slot& slot = s.at(index);
  try {
    slot.requires_delegate = bind_callback(slot, bind, callback);
  } catch (...) {
    s.release(index);
    handle.invalidate();
    throw;
  }
  slot.rate = rate;
  slot.loop = params.loop;
  slot.max_once_per_frame = params.max_once_per_frame;
  s.link_object(index, object != nullptr ? object : slot.callback.object());
  s.start(index, params.first_delay >= 0 ? params.first_delay : rate);
  handle = timer_handle(slot.handle);
}

timer_handle timer_manager::set_timer_for_next_tick_with(binder bind, void* callback, const void* object) {
  state& s = *state_;
  if (!s.check_owner("set_timer_for_next_tick")) return {};
  std::uint32_t index = s.allocate("set_timer_for_next_tick");
  if (index == no_slot) return {};
  timer_slot& slot = s.at(index);
  try {
    bind_callback(slot, bind, callback);
  } catch (...) {
    s.release(index);
    throw;
  }
  slot.rate = 0;
  slot.loop = false;
  slot.max_once_per_frame = false;
  slot.requires_delegate = true;
  s.link_object(index, object != nullptr ? object : slot.callback.object());
  s.activate(index, s.now);  // strictly after `now` only once a later tick moved the clock
  return timer_handle(slot.handle);
}

void timer_manager::clear_timer(timer_handle& handle) {
  state& s = *state_;
  if (!s.check_owner("clear_timer")) return;
  if (timer_slot* slot = s.find(handle)) s.clear(state::index_of(slot->handle));
  handle.invalidate();
}

void timer_manager::clear_all_timers_for_object(const void* object) {
  state& s = *state_;
  if (!s.check_owner("clear_all_timers_for_object")) return;
  if (object == nullptr) return;
  auto head = s.object_heads.find(object);
  if (head == s.object_heads.end()) return;
  // Handles first: clearing destroys callables, whose destructors may change the list.
  std::vector<std::uint64_t> handles;
  for (std::uint32_t index = head->second; index != no_slot; index = s.at(index).object_next) {
    handles.push_back(s.at(index).handle);
  }
  for (std::uint64_t handle : handles) {
    if (timer_slot* slot = s.find(timer_handle(handle))) s.clear(state::index_of(slot->handle));
  }
}

void timer_manager::pause_timer(timer_handle handle) {
  state& s = *state_;
  if (!s.check_owner("pause_timer")) return;
  if (timer_slot* slot = s.find(handle)) s.pause(state::index_of(slot->handle));
}

void timer_manager::unpause_timer(timer_handle handle) {
  state& s = *state_;
  if (!s.check_owner("unpause_timer")) return;
  timer_slot* slot = s.find(handle);
  if (slot == nullptr || slot->state != timer_state::paused) return;
  std::uint32_t index = state::index_of(slot->handle);
  if (s.activates_at_once()) {
    s.activate(index, s.now + slot->time);
  } else {
    s.make_pending(index);
  }
}

bool timer_manager::is_timer_active(timer_handle handle) const {
  if (!state_->check_owner("is_timer_active")) return false;
  const timer_slot* slot = state_->find(handle);
  return slot != nullptr && slot->state != timer_state::paused;
}

bool timer_manager::is_timer_paused(timer_handle handle) const {
  if (!state_->check_owner("is_timer_paused")) return false;
  const timer_slot* slot = state_->find(handle);
  return slot != nullptr && slot->state == timer_state::paused;
}

bool timer_manager::is_timer_pending(timer_handle handle) const {
  if (!state_->check_owner("is_timer_pending")) return false;
  const timer_slot* slot = state_->find(handle);
  return slot != nullptr && slot->state == timer_state::pending;
}

bool timer_manager::timer_exists(timer_handle handle) const {
  if (!state_->check_owner("timer_exists")) return false;
  return state_->find(handle) != nullptr;
}

float timer_manager::get_timer_rate(timer_handle handle) const {
  if (!state_->check_owner("get_timer_rate")) return -1.f;
  const timer_slot* slot = state_->find(handle);
  return slot != nullptr ? slot->rate : -1.f;
}

float timer_manager::get_timer_elapsed(timer_handle handle) const {
  if (!state_->check_owner("get_timer_elapsed")) return -1.f;
  const timer_slot* slot = state_->find(handle);
  if (slot == nullptr) return -1.f;
  bool running = slot->state == timer_state::active || slot->state == timer_state::executing;
  double remaining = running ? slot->time - state_->now : slot->time;
  return static_cast<float>(static_cast<double>(slot->rate) - remaining);
}

float timer_manager::get_timer_remaining(timer_handle handle) const {
  if (!state_->check_owner("get_timer_remaining")) return -1.f;
  const timer_slot* slot = state_->find(handle);
  if (slot == nullptr) return -1.f;
  switch (slot->state) {
    case timer_state::active: return static_cast<float>(slot->time - state_->now);
    case timer_state::executing: return 0.f;
    default: return static_cast<float>(slot->time);
  }
}

void timer_manager::tick(float delta_seconds) {
  state& s = *state_;
  if (!s.check_owner("tick")) return;
  if (s.ticking) {
    report(diagnostic_kind::misuse, "timer_manager::tick called from a timer callback; ignored");
    return;
  }
  if (!(delta_seconds >= 0) || std::isinf(delta_seconds)) {
    report(diagnostic_kind::misuse, "timer_manager::tick: delta_seconds must be finite and >= 0; tick ignored");
    return;
  }
  if (s.current_frame && s.last_ticked_frame && *s.last_ticked_frame == s.current_frame()) return;
  s.now += static_cast<double>(delta_seconds);
  s.ticking = true;
  s.wheel.collect_due(s.now, s.due);
  // Handles now, before any callback runs: a slot cleared and reused meanwhile is skipped.
  s.due_handles.clear();
  for (std::uint32_t index : s.due) s.due_handles.push_back(s.at(index).handle);
  std::size_t next = 0;
  try {
    while (next < s.due.size()) {
      std::size_t current = next++;
      s.fire(s.due[current], s.due_handles[current]);
    }
  } catch (...) {
    s.abandon_due(next);
    s.end_tick();
    throw;
  }
  s.end_tick();
}

bool timer_manager::has_been_ticked_this_frame() const {
  if (!state_->check_owner("has_been_ticked_this_frame")) return false;
  return state_->current_frame && state_->last_ticked_frame &&
         *state_->last_ticked_frame == state_->current_frame();
}

std::size_t timer_manager::live_timer_count() const {
  if (!state_->check_owner("live_timer_count")) return 0;
  return state_->live;
}

}  // namespace magpie
