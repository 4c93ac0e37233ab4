// Helpers for the tick manager and world suites: a frame driver, an event log that any
// thread may write, and tick functions that log what they saw.
#pragma once

#include <magpie/scheduler.h>
#include <magpie/tick_manager.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace magpie::test {

inline scheduler_options tick_pool(unsigned workers = 1) {
  scheduler_options options;
  options.workers = workers;
  options.background_workers = 0;
  return options;
}

// numbered is `prefix` followed by `index`, e.g. "t3". Built by appending: GCC 12's
// -Wrestrict misfires, in release builds, on `"literal" + std::to_string(i)`.
template <class Index>
std::string numbered(std::string_view prefix, Index index) {
  std::string name(prefix);
  name += std::to_string(index);
  return name;
}

// the frame's groups, in order, and whether run_tick_group blocks for each
inline constexpr std::pair<ticking_group, bool> frame_groups[] = {
    {ticking_group::pre_physics, true},      {ticking_group::start_physics, true},
    {ticking_group::during_physics, false},  {ticking_group::end_physics, true},
    {ticking_group::post_physics, true},     {ticking_group::post_update_work, true},
    {ticking_group::last_demotable, true},
};

// run_frame runs one whole frame on `manager`, as world::tick does without timers.
inline void run_frame(tick_manager& manager, float delta = 1.f / 60) {
  manager.start_frame(delta);
  for (auto [group, block] : frame_groups) manager.run_tick_group(group, block);
  manager.end_frame();
}

// spin_for keeps the calling thread busy for `length`: a tick body of a known length.
inline void spin_for(std::chrono::microseconds length) {
  auto until = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// event_log records strings from any thread, in the order they arrive.
class event_log {
 public:
  void add(std::string event) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(events_, {});
  }
  // index_of is the position of `event`, or -1.
  static int index_of(const std::vector<std::string>& events, const std::string& event) {
    auto found = std::find(events.begin(), events.end(), event);
    return found == events.end() ? -1 : static_cast<int>(found - events.begin());
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> events_;
};

// logged_tick logs its name, the delta it got and where it ran each time it ticks.
class logged_tick : public tick_function {
 public:
  logged_tick(std::string name, event_log& log) : tick_function(std::move(name), {}), log_(&log) {}

  std::atomic<int> runs{0};
  std::atomic<float> last_delta{0};
  std::atomic<level_tick> last_type{level_tick::all};
  std::thread::id last_thread;  // written by the tick, read after the frame
  ticking_group seen_start = ticking_group::pre_physics;

 protected:
  void execute_tick(float delta_seconds, level_tick tick_type) override {
    last_thread = std::this_thread::get_id();
    seen_start = actual_start_tick_group();
    last_delta.store(delta_seconds);
    last_type.store(tick_type);
    runs.fetch_add(1);
    log_->add(name());
  }

 private:
  event_log* log_;
};

}  // namespace magpie::test
