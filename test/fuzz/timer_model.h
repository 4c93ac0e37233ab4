// The reference model of magpie::timer_manager for the timer fuzz target: the documented
// semantics (include/magpie/timer_manager.h, docs/timers.md) written as plainly as they can
// be — a list of timers searched linearly, the due ones sorted by expiry each tick — with
// none of the implementation's machinery (no wheel, no slots, no handle bits).
//
// It keeps the implementation's arithmetic (expiries in double seconds, rates and delays
// given as float), since the documented rules name those types, so that every query can be
// compared for exact equality.
#pragma once

#include <magpie/timer_manager.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace magpie::fuzz {

// model_handle names a model timer by its id; 0 names none (an invalid handle).
struct model_handle {
  std::uint64_t id = 0;
  bool is_valid() const { return id != 0; }
};

class timer_model {
 public:
  // What a timer calls: `token` identifies it in the observation log, `object` is the object
  // it is tracked for (-1: none).
  struct callback {
    int token = 0;
    int script = 0;
    int object = -1;
  };
  using fire_function = std::function<void(const callback&)>;

  timer_model(bool with_frame_counter, fire_function fire, std::function<std::uint64_t()> frame);

  void set_timer(model_handle& handle, callback what, float rate, timer_params params);
  model_handle set_timer_for_next_tick(callback what);
  void clear_timer(model_handle& handle);
  void clear_all_timers_for_object(int object);
  void pause_timer(model_handle handle);
  void unpause_timer(model_handle handle);

  bool is_timer_active(model_handle handle) const;
  bool is_timer_paused(model_handle handle) const;
  bool is_timer_pending(model_handle handle) const;
  bool timer_exists(model_handle handle) const;
  float get_timer_rate(model_handle handle) const;
  float get_timer_elapsed(model_handle handle) const;
  float get_timer_remaining(model_handle handle) const;
  bool has_been_ticked_this_frame() const;
  std::size_t live_timer_count() const;

  // tick returns false where the manager reports it as misuse (from a callback) and ignores it.
  bool tick(float delta_seconds);

 private:
  enum class status { pending, active, paused, executing, removed };
  struct timer {
    std::uint64_t id;
    status state;
    double time;          // expiry while active or executing, else the remaining time
    float rate;
    bool loop;
    bool max_once_per_frame;
    callback what;
    std::uint64_t order;  // when it last became active: ties fire in this order
    bool due;             // taken out by the tick firing it, not re-armed yet
  };

  timer* find(model_handle handle);
  const timer* find(model_handle handle) const;
  void start(timer& t, double delay);
  void activate(timer& t, double expiry);
  void make_pending(timer& t);
  void erase(std::uint64_t id);
  void clear(timer& t);
  void fire(std::uint64_t id);
  void finish(std::uint64_t id, std::uint64_t calls);
  void end_tick();
  bool activates_at_once() const;

  std::vector<timer> timers_;          // in creation order; searched linearly
  std::vector<std::uint64_t> pending_; // ids, in the order they became pending
  std::uint64_t next_id_ = 1;
  std::uint64_t next_order_ = 0;
  double now_ = 0;
  bool ticking_ = false;
  bool frame_counter_;
  std::optional<std::uint64_t> last_ticked_frame_;
  fire_function fire_;
  std::function<std::uint64_t()> frame_;
};

}  // namespace magpie::fuzz
