// Layer 5 — timer manager: UE's FTimerManager semantics on an exact hierarchical timing
// wheel, built only on the standard library and magpie's delegates and diagnostics.
//
//   magpie::timer_manager timers;
//   magpie::timer_handle respawn;
//   timers.set_timer(respawn, &player, &player_type::respawn, 3.f);        // once, in 3 s
//   magpie::timer_handle regen;
//   timers.set_timer(regen, [&] { hp += 1; }, 0.5f, /*loop=*/true);          // every 0.5 s
//   timers.pause_timer(regen);
//   ...
//   timers.tick(delta_seconds);                                              // once a frame
//
// Time. The manager's clock starts at 0 and moves only in tick(delta). Rates and delays
// are float seconds in the API and double inside. A timer fires in the first tick whose
// new time is strictly after its expiry; a looping timer that fell k periods behind fires
// k + 1 times back to back in that tick (once with max_once_per_frame, which still skips
// the missed periods so the timer keeps its phase).
//
// Pending timers. A timer set (or unpaused) outside tick() is pending: the next tick()
// activates it at its very end, so that tick's delta never counts towards it — a timer
// never counts the frame in which it was set. Timers set or unpaused from a callback are
// pending the same way and become active at the end of the current tick. With a frame
// counter given to the constructor, a timer set or unpaused after the manager ticked in
// the current frame is active at once (UE's HasBeenTickedThisFrame), and a second tick()
// in the same frame does nothing. set_timer_for_next_tick is always active at once, with
// its expiry the current time: it fires in the next tick() with a positive delta.
//
// Order. Timers due in one tick fire in expiry order; equal expiries fire in the order the
// timers became active (FIFO; UE's heap leaves ties unordered). Each timer is looked at
// again right before it fires, so an earlier callback of the same tick may clear, pause or
// re-set it. A looping timer fires at most its catch-up count per tick (UE could fire one
// again in the same tick if rounding left its new expiry behind the clock).
//
// Callbacks may set, clear, pause or unpause any timer, their own included, and clear all
// timers of an object. Clearing or re-setting the running timer ends its catch-up calls;
// its callable is destroyed only after it returns. Pausing a one-shot timer from its own
// callback deletes it (as UE does); pausing a looping one keeps its remaining time, which
// may be negative: it then fires in the first tick after it is unpaused.
//
// Objects. Timers set with an object pointer (set_timer(handle, object, method, ...)) or
// with a delegate bound to an object are cleared by clear_all_timers_for_object(object);
// lambdas are not tracked. A looping timer bound to an object held by std::weak_ptr is
// removed once the object is gone (UE: a looping timer whose delegate was bound when set is
// removed when it no longer is).
//
// Exceptions. If a callback throws, tick() first makes the manager consistent and then lets
// the exception propagate: the throwing timer counts as fired (a looping one is re-armed, a
// one-shot removed), timers still due in that tick stay active and fire in the next tick,
// and pending timers are activated as at the end of any tick.
//
// Handles are 64 bits: a 24-bit slot index and a 40-bit serial drawn from one counter shared
// by every timer manager, so a stale handle, or one issued by another manager, names no
// timer here: queries answer false or -1, clear/pause do nothing, set_timer sets a new timer.
//
// Thread-safety: a timer manager belongs to one thread (the first one that uses it, or the one
// that claimed it: claim_for_this_thread); every member function, tick() included, must be
// called from it. A call from another thread is reported, naming both threads, and refused:
// it changes nothing, and a query answers as for a handle that names no timer (false, -1;
// live_timer_count 0). Distinct managers may be used on distinct threads at the same time, and handles
// are plain values that may be copied anywhere. Callbacks run on the owning thread, inside
// tick(). The frame counter is called on the owning thread.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/delegate.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace magpie {

// timer_handle names one timer of a timer_manager; default-constructed it names none.
class timer_handle {
 public:
  timer_handle() = default;

  // is_valid says whether the handle was issued by a manager (the timer may be gone since).
  bool is_valid() const noexcept { return value_ != 0; }

  // invalidate makes the handle name no timer.
  void invalidate() noexcept { value_ = 0; }

  // value is the raw 64 bits: serial << 24 | slot index; 0 when invalid.
  std::uint64_t value() const noexcept { return value_; }

  friend bool operator==(const timer_handle&, const timer_handle&) = default;

 private:
  friend class timer_manager;
  explicit timer_handle(std::uint64_t value) noexcept : value_(value) {}

  std::uint64_t value_ = 0;
};
static_assert(sizeof(timer_handle) == 8);

// timer_params are the options of a timer (UE's FTimerManagerTimerParameters).
struct timer_params {
  bool loop = false;                // fire every `rate` seconds until cleared
  bool max_once_per_frame = false;  // a late looping timer fires once per tick, keeping phase
  float first_delay = -1.f;         // delay before the first firing; negative: `rate`
};

namespace detail {
template <class Callback>
concept timer_callback = std::same_as<std::remove_cvref_t<Callback>, delegate<void()>> ||
                         std::invocable<std::remove_cvref_t<Callback>&>;
}  // namespace detail

// timer_manager runs callbacks after delays, once or looping, as time advances in tick().
class timer_manager {
 public:
  // frame_counter returns the number of the current frame (e.g. the engine's frame count).
  using frame_counter = std::function<std::uint64_t()>;

  // timer_manager without a frame counter: every timer set outside tick() is pending.
  timer_manager();
  // timer_manager with a frame counter: timers set after this frame's tick are active at once.
  explicit timer_manager(frame_counter current_frame);
  ~timer_manager();
  timer_manager(const timer_manager&) = delete;
  timer_manager& operator=(const timer_manager&) = delete;

  // claim_for_this_thread makes the calling thread the manager's owner, before any other
  // thread uses it (a world's manager is claimed by its game thread as the world is made).
  // Called while another thread is using the manager, it is that misuse.
  void claim_for_this_thread();

  // set_timer (re)starts the timer `handle` names, running `callback` (any callable, or a
  // delegate<void()>: a delegate bound to an object is tracked for that object) after
  // first_delay (negative: after `rate`) and then, if `loop`, every `rate` seconds. A timer
  // the handle already names is cleared first; `handle` then names the new timer. A rate
  // <= 0 only clears it and invalidates `handle`. An unbound delegate makes a countdown
  // that calls nothing but can be queried.
  template <detail::timer_callback Callback>
  void set_timer(timer_handle& handle, Callback&& callback, float rate, bool loop = false,
                 float first_delay = -1.f) {
    set_timer(handle, std::forward<Callback>(callback), rate, timer_params{loop, false, first_delay});
  }

  // set_timer with timer_params: the only form that sets max_once_per_frame.
  template <detail::timer_callback Callback>
  void set_timer(timer_handle& handle, Callback&& callback, float rate, timer_params params) {
    set_timer_with(handle, &bind_into<Callback>, erase(callback), nullptr, rate, params);
  }

  // set_timer calls `method` on `object`, which must outlive the timer or be cleared with
  // clear_all_timers_for_object(object) before it goes.
  template <class T, class Method>
    requires std::is_member_function_pointer_v<Method> && std::invocable<Method, T*>
  void set_timer(timer_handle& handle, T* object, Method method, float rate, bool loop = false,
                 float first_delay = -1.f) {
    set_timer(handle, object, method, rate, timer_params{loop, false, first_delay});
  }

  // set_timer on an object and method, with timer_params.
  template <class T, class Method>
    requires std::is_member_function_pointer_v<Method> && std::invocable<Method, T*>
  void set_timer(timer_handle& handle, T* object, Method method, float rate, timer_params params) {
    if (!accept_object(object, "set_timer")) return;
    auto call = [object, method] { std::invoke(method, object); };
    set_timer_with(handle, &bind_into<decltype(call)>, erase(call), object, rate, params);
  }

  // set_timer calls `method` on a weakly held object; once the object is gone the call is
  // skipped and a looping timer is removed.
  template <class T>
  void set_timer(timer_handle& handle, std::weak_ptr<T> object, void (T::*method)(), float rate,
                 bool loop = false, float first_delay = -1.f) {
    set_timer(handle, std::move(object), method, rate, timer_params{loop, false, first_delay});
  }

  // set_timer on a weakly held object, with timer_params.
  template <class T>
  void set_timer(timer_handle& handle, std::weak_ptr<T> object, void (T::*method)(), float rate,
                 timer_params params) {
    delegate<void()> bound;
    bound.bind(std::move(object), method);
    set_timer(handle, std::move(bound), rate, params);
  }

  // set_timer_for_next_tick runs `callback` once, in the next tick() with a positive delta
  // (the current one, if called from a callback, never counts), and returns its handle.
  template <detail::timer_callback Callback>
  timer_handle set_timer_for_next_tick(Callback&& callback) {
    return set_timer_for_next_tick_with(&bind_into<Callback>, erase(callback), nullptr);
  }

  // set_timer_for_next_tick on an object and method.
  template <class T, class Method>
    requires std::is_member_function_pointer_v<Method> && std::invocable<Method, T*>
  timer_handle set_timer_for_next_tick(T* object, Method method) {
    if (!accept_object(object, "set_timer_for_next_tick")) return {};
    auto call = [object, method] { std::invoke(method, object); };
    return set_timer_for_next_tick_with(&bind_into<decltype(call)>, erase(call), object);
  }

  // clear_timer removes the timer `handle` names, if any, and always invalidates `handle`.
  // From the timer's own callback it ends the remaining catch-up calls.
  void clear_timer(timer_handle& handle);

  // clear_all_timers_for_object removes every timer set with `object` (or a delegate bound
  // to it); nullptr does nothing.
  void clear_all_timers_for_object(const void* object);

  // pause_timer freezes the timer's remaining time; a paused timer does not fire.
  void pause_timer(timer_handle handle);

  // unpause_timer resumes a paused timer with the time it had left; like a new timer it is
  // pending until the end of the next tick unless this frame's tick already ran.
  void unpause_timer(timer_handle handle);

  // is_timer_active says whether the timer exists and is not paused (pending counts).
  bool is_timer_active(timer_handle handle) const;

  // is_timer_paused says whether the timer exists and is paused.
  bool is_timer_paused(timer_handle handle) const;

  // is_timer_pending says whether the timer waits for the end of a tick to become active.
  bool is_timer_pending(timer_handle handle) const;

  // timer_exists says whether `handle` names a timer of this manager.
  bool timer_exists(timer_handle handle) const;

  // get_timer_rate is the timer's rate; -1 if there is no such timer.
  float get_timer_rate(timer_handle handle) const;

  // get_timer_elapsed is rate minus remaining time (more than the rate while a late timer
  // runs, negative before a first_delay longer than the rate ran out); -1 if no such timer.
  float get_timer_elapsed(timer_handle handle) const;

  // get_timer_remaining is the time until the timer fires (0 while its callback runs,
  // negative for a late one); -1 if there is no such timer.
  float get_timer_remaining(timer_handle handle) const;

  // tick advances time by `delta_seconds` (finite, >= 0), fires every timer that came due,
  // then activates the pending timers. Never from a callback.
  void tick(float delta_seconds);

  // has_been_ticked_this_frame says whether tick() ran in the frame the frame counter names
  // now; always false without a frame counter.
  bool has_been_ticked_this_frame() const;

  // live_timer_count is how many timers exist (pending, active, paused or running).
  std::size_t live_timer_count() const;

 private:
  struct state;

  // A binder stores the callable `callback` points to in a timer's delegate: the callable is
  // bound straight into the timer's slot, with no delegate built and moved on the way.
  using binder = void (*)(delegate<void()>& into, void* callback);

  template <class Callback>
  static void bind_into(delegate<void()>& into, void* callback) {
    auto& source = *static_cast<std::remove_reference_t<Callback>*>(callback);
    if constexpr (std::same_as<std::remove_cvref_t<Callback>, delegate<void()>>) {
      into = std::forward<Callback>(source);
    } else {
      into.bind(std::forward<Callback>(source));
    }
  }

  template <class Callback>
  static void* erase(Callback& callback) {
    return const_cast<void*>(static_cast<const void*>(std::addressof(callback)));
  }

  // set_timer_with binds the callback into a new timer's slot; `object` is the object the
  // timer is tracked for, or nullptr to take the bound delegate's object.
  void set_timer_with(timer_handle& handle, binder bind, void* callback, const void* object, float rate,
                      timer_params params);
  timer_handle set_timer_for_next_tick_with(binder bind, void* callback, const void* object);
  static bool accept_object(const void* object, const char* operation);

  std::unique_ptr<state> state_;
};

}  // namespace magpie
