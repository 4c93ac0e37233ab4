// tick_function: settings, registration and prerequisite edges. Every change that alters
// the schedule marks the manager's cached schedule stale (tick_manager::state::mark_changed).
#include <magpie/diagnostics.h>
#include <magpie/tick_manager.h>

#include "tick_state.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace magpie {

namespace {

void report_misuse(const tick_function& tick, const char* operation, const char* problem) {
  std::string message = "tick_function::";
  message.append(operation).append(" on '").append(tick.name()).append("': ").append(problem);
  report(diagnostic_kind::misuse, message);
}

// off_game_thread names the calling thread in a refusal.
std::string off_game_thread() {
  std::ostringstream text;
  text << "called on thread " << std::this_thread::get_id() << ", not its tick manager's game thread; refused";
  return text.str();
}

void erase_one(std::vector<tick_function*>& list, tick_function* value) {
  auto found = std::find(list.begin(), list.end(), value);
  if (found != list.end()) list.erase(found);
}

// edge_guard holds the guards of the managers the two ends of an edge are registered with,
// against a tick at either end being destroyed off the game thread meanwhile.
class edge_guard {
 public:
  edge_guard(tick_function& one, tick_function& other) {
    std::mutex* first = guard_of(one);
    std::mutex* second = guard_of(other);
    if (first == second) second = nullptr;
    if (first == nullptr) std::swap(first, second);
    if (second != nullptr && std::less<std::mutex*>()(second, first)) std::swap(first, second);  // one order
    if (first != nullptr) first_ = std::unique_lock(*first);
    if (second != nullptr) second_ = std::unique_lock(*second);
  }

 private:
  static std::mutex* guard_of(tick_function& tick) {
    tick_manager* manager = tick_access::manager(tick);
    return manager != nullptr ? &tick_access::state_of(*manager).off_thread_guard : nullptr;
  }
  std::unique_lock<std::mutex> first_, second_;
};

}  // namespace

struct tick_function::links {
  std::string name;
  std::function<void(float, level_tick)> body;
  std::vector<tick_function*> prerequisites;
  std::vector<tick_function*> dependents;  // who lists it, so destruction unlinks both ways
};

tick_function::tick_function() = default;

tick_function::tick_function(std::string name, std::function<void(float, level_tick)> body)
    : links_(std::make_unique<links>(links{std::move(name), std::move(body), {}, {}})) {}

tick_function::~tick_function() {
  // The manager it is registered with, or was unregistered from this frame while a run of it
  // went on, forgets it and waits for such a run on another thread (off the game thread, the
  // game thread retires its slot later). The manager's guard orders the edges' removal
  // against a game thread reading them.
  tick_manager::state* owner = nullptr;
  if (tick_manager* manager = tick_access::manager(*this); manager != nullptr) {
    owner = &tick_access::state_of(*manager);
  } else {
    owner = static_cast<tick_manager::state*>(tick_access::slot(*this));  // null, or unregistered while it ran
  }
  if (owner != nullptr) owner->forget(*this);
  if (!links_) return;
  std::unique_lock<std::mutex> guard;
  if (owner != nullptr) guard = std::unique_lock(owner->off_thread_guard);
  bool game_thread = owner == nullptr || owner->on_game_thread();
  // Edges both ways go with it: nobody is left holding a pointer to a destroyed tick. (A
  // tick at either end of an edge has its links: adding the edge made them.)
  for (tick_function* before : links_->prerequisites) erase_one(before->links_->dependents, this);
  for (tick_function* after : links_->dependents) {
    erase_one(after->links_->prerequisites, this);
    // Off the game thread the retired slot marks the schedule changed (drain_orphans).
    if (game_thread) after->changed_schedule();
  }
}

tick_function::links& tick_function::own_links() {
  if (!links_) links_ = std::make_unique<links>();
  return *links_;
}

void tick_function::execute_tick(float delta_seconds, level_tick tick_type) {
  if (links_ && links_->body) links_->body(delta_seconds, tick_type);
}

// may_change says whether a setting may change now: a registered tick belongs to its
// manager's game thread.
bool tick_function::may_change(const char* operation) {
  tick_manager* manager = tick_access::manager(*this);
  if (manager == nullptr || tick_access::state_of(*manager).on_game_thread()) return true;
  report_misuse(*this, operation, off_game_thread().c_str());
  return false;
}

void tick_function::changed_schedule() {
  if (tick_manager* manager = tick_access::manager(*this); manager != nullptr) tick_access::state_of(*manager).mark_changed();
}

void tick_function::register_tick_function(tick_manager& manager) {
  tick_manager::state& target = tick_access::state_of(manager);
  tick_manager* current = tick_access::manager(*this);
  if (current == &manager) return;
  if (current != nullptr) {
    report_misuse(*this, "register_tick_function", "already registered with another tick manager; refused");
    return;
  }
  if (!target.on_game_thread()) {
    report_misuse(*this, "register_tick_function", off_game_thread().c_str());
    return;
  }
  // Unregistered from `previous` this frame while a run of it went on: that manager lets go
  // of it first, once the run is over.
  if (auto* previous = static_cast<tick_manager::state*>(tick_access::slot(*this)); previous != nullptr) {
    if (previous != &target) previous->forget(*this);
  }
  target.add(*this);
}

void tick_function::unregister_tick_function() {
  tick_manager* manager = tick_access::manager(*this);
  if (manager == nullptr) return;
  tick_manager::state& owner = tick_access::state_of(*manager);
  if (!owner.on_game_thread()) {
    report_misuse(*this, "unregister_tick_function", off_game_thread().c_str());
    return;
  }
  owner.remove(*this);
}

bool tick_function::is_tick_function_registered() const { return tick_access::manager(*this) != nullptr; }

void tick_function::set_tick_function_enable(bool enabled) {
  if (enabled == enabled_ || !may_change("set_tick_function_enable")) return;
  enabled_ = enabled;
  if (tick_manager* manager = tick_access::manager(*this); manager != nullptr) {
    tick_access::state_of(*manager).enable_changed(*this);
  }
}

bool tick_function::is_tick_function_enabled() const { return enabled_; }

void tick_function::set_tick_group(ticking_group group) {
  if (group == ticking_group::newly_spawned) {
    report_misuse(*this, "set_tick_group", "newly_spawned is not a group a tick can ask for; refused");
    return;
  }
  if (group == group_ || !may_change("set_tick_group")) return;
  group_ = group;
  changed_schedule();
}

ticking_group tick_function::tick_group() const { return group_; }

void tick_function::set_end_tick_group(ticking_group group) {
  if (group == ticking_group::newly_spawned) {
    report_misuse(*this, "set_end_tick_group", "newly_spawned is not a group a tick can ask for; refused");
    return;
  }
  if (group == end_group_ || !may_change("set_end_tick_group")) return;
  end_group_ = group;
  changed_schedule();
}

ticking_group tick_function::end_tick_group() const { return end_group_; }

void tick_function::set_tick_interval(float seconds) {
  if (std::isnan(seconds)) {
    report_misuse(*this, "set_tick_interval", "NaN interval; refused");
    return;
  }
  if (seconds == interval_ || !may_change("set_tick_interval")) return;
  interval_ = seconds;
  if (tick_manager* manager = tick_access::manager(*this); manager != nullptr) {
    tick_access::state_of(*manager).interval_changed(*this, false);
  }
}

float tick_function::tick_interval() const { return interval_; }

void tick_function::update_tick_interval_and_cool_down(float seconds) {
  if (std::isnan(seconds)) {
    report_misuse(*this, "update_tick_interval_and_cool_down", "NaN interval; refused");
    return;
  }
  if (!may_change("update_tick_interval_and_cool_down")) return;
  interval_ = seconds;
  if (tick_manager* manager = tick_access::manager(*this); manager != nullptr) {
    tick_access::state_of(*manager).interval_changed(*this, true);
  }
}

void tick_function::set_high_priority(bool high_priority) {
  if (high_priority == high_priority_ || !may_change("set_high_priority")) return;
  high_priority_ = high_priority;
  changed_schedule();
}

void tick_function::set_run_on_any_thread(bool any_thread) {
  if (any_thread == any_thread_ || !may_change("set_run_on_any_thread")) return;
  any_thread_ = any_thread;
  changed_schedule();
}

void tick_function::set_allow_tick_batching(bool allow) {
  if (allow == allow_batching_ || !may_change("set_allow_tick_batching")) return;
  allow_batching_ = allow;
  changed_schedule();
}

void tick_function::set_tick_even_when_paused(bool tick_when_paused) {
  if (!may_change("set_tick_even_when_paused")) return;
  tick_when_paused_ = tick_when_paused;  // read by pause frames only: the schedule stands
}

bool tick_function::is_high_priority() const { return high_priority_; }
bool tick_function::runs_on_any_thread() const { return any_thread_; }
bool tick_function::allows_tick_batching() const { return allow_batching_; }
bool tick_function::ticks_even_when_paused() const { return tick_when_paused_; }

void tick_function::add_prerequisite(tick_function& prerequisite) {
  if (&prerequisite == this) {
    report_misuse(*this, "add_prerequisite", "a tick function cannot be its own prerequisite; refused");
    return;
  }
  if (!may_change("add_prerequisite") || !prerequisite.may_change("add_prerequisite")) return;
  edge_guard guard(*this, prerequisite);
  std::vector<tick_function*>& before = own_links().prerequisites;
  if (std::find(before.begin(), before.end(), &prerequisite) != before.end()) return;
  before.push_back(&prerequisite);
  prerequisite.own_links().dependents.push_back(this);
  changed_schedule();
  prerequisite.changed_schedule();
}

void tick_function::remove_prerequisite(tick_function& prerequisite) {
  if (!may_change("remove_prerequisite") || !links_) return;
  edge_guard guard(*this, prerequisite);
  std::vector<tick_function*>& before = links_->prerequisites;
  auto found = std::find(before.begin(), before.end(), &prerequisite);
  if (found == before.end()) return;
  before.erase(found);
  erase_one(prerequisite.links_->dependents, this);
  changed_schedule();
}

ticking_group tick_function::actual_start_tick_group() const { return actual_start_; }
ticking_group tick_function::actual_end_tick_group() const { return actual_end_; }

const std::vector<tick_function*>& tick_function::prerequisites() const {
  static const std::vector<tick_function*> none;
  return links_ ? links_->prerequisites : none;
}

const std::string& tick_function::name() const {
  static const std::string unnamed;
  return links_ ? links_->name : unnamed;
}

void tick_function::set_name(std::string name) { own_links().name = std::move(name); }

}  // namespace magpie
