#include "timer_model.h"

#include <algorithm>
#include <utility>

namespace magpie::fuzz {

timer_model::timer_model(bool with_frame_counter, fire_function fire, std::function<std::uint64_t()> frame)
    : frame_counter_(with_frame_counter), fire_(std::move(fire)), frame_(std::move(frame)) {}

timer_model::timer* timer_model::find(model_handle handle) {
  for (timer& t : timers_) {
    if (t.id == handle.id) return t.state == status::removed ? nullptr : &t;
  }
  return nullptr;
}

const timer_model::timer* timer_model::find(model_handle handle) const {
  return const_cast<timer_model*>(this)->find(handle);
}

// The documented frame rule: with a frame counter, a timer set after this frame's tick is
// active at once; otherwise it waits for the end of the next tick.
bool timer_model::activates_at_once() const {
  return !ticking_ && frame_counter_ && last_ticked_frame_ && *last_ticked_frame_ == frame_();
}

void timer_model::activate(timer& t, double expiry) {
  t.state = status::active;
  t.time = expiry;
  t.order = next_order_++;
  t.due = false;
}

void timer_model::make_pending(timer& t) {
  t.state = status::pending;
  pending_.push_back(t.id);
}

void timer_model::start(timer& t, double delay) {
  if (activates_at_once()) {
    activate(t, now_ + delay);
  } else {
    t.time = delay;
    make_pending(t);
  }
}

void timer_model::erase(std::uint64_t id) {
  std::erase_if(timers_, [id](const timer& t) { return t.id == id; });
  std::erase(pending_, id);
}

void timer_model::clear(timer& t) {
  if (t.state == status::executing) {  // freed once its callback returns; no object any more
    t.state = status::removed;
    t.what.object = -1;
    return;
  }
  erase(t.id);
}

void timer_model::set_timer(model_handle& handle, callback what, float rate, timer_params params) {
  if (timer* existing = find(handle)) clear(*existing);
  if (!(rate > 0)) {
    handle.id = 0;
    return;
  }
  timers_.push_back(timer{next_id_++, status::pending, 0, rate, params.loop, params.max_once_per_frame, what, 0, false});
  handle.id = timers_.back().id;
  start(timers_.back(), params.first_delay >= 0 ? params.first_delay : rate);
}

model_handle timer_model::set_timer_for_next_tick(callback what) {
  timers_.push_back(timer{next_id_++, status::active, 0, 0.f, false, false, what, 0, false});
  activate(timers_.back(), now_);  // due once a later tick moves the clock past now
  return model_handle{timers_.back().id};
}

void timer_model::clear_timer(model_handle& handle) {
  if (timer* t = find(handle)) clear(*t);
  handle.id = 0;
}

void timer_model::clear_all_timers_for_object(int object) {
  std::vector<std::uint64_t> ids;
  for (const timer& t : timers_) {
    if (t.what.object == object && t.state != status::removed) ids.push_back(t.id);
  }
  for (std::uint64_t id : ids) {
    if (timer* t = find(model_handle{id})) clear(*t);
  }
}

void timer_model::pause_timer(model_handle handle) {
  timer* t = find(handle);
  if (t == nullptr) return;
  switch (t->state) {
    case status::pending:
      std::erase(pending_, t->id);
      break;
    case status::active:
      t->time -= now_;
      break;
    case status::executing:
      if (!t->loop) {  // a one-shot timer paused from its own callback is deleted
        clear(*t);
        return;
      }
      t->time -= now_;
      break;
    case status::paused:
    case status::removed:
      return;
  }
  t->state = status::paused;
  t->due = false;
}

void timer_model::unpause_timer(model_handle handle) {
  timer* t = find(handle);
  if (t == nullptr || t->state != status::paused) return;
  if (activates_at_once()) {
    activate(*t, now_ + t->time);
  } else {
    make_pending(*t);
  }
}

bool timer_model::is_timer_active(model_handle handle) const {
  const timer* t = find(handle);
  return t != nullptr && t->state != status::paused;
}

bool timer_model::is_timer_paused(model_handle handle) const {
  const timer* t = find(handle);
  return t != nullptr && t->state == status::paused;
}

bool timer_model::is_timer_pending(model_handle handle) const {
  const timer* t = find(handle);
  return t != nullptr && t->state == status::pending;
}

bool timer_model::timer_exists(model_handle handle) const { return find(handle) != nullptr; }

float timer_model::get_timer_rate(model_handle handle) const {
  const timer* t = find(handle);
  return t != nullptr ? t->rate : -1.f;
}

float timer_model::get_timer_elapsed(model_handle handle) const {
  const timer* t = find(handle);
  if (t == nullptr) return -1.f;
  bool running = t->state == status::active || t->state == status::executing;
  double remaining = running ? t->time - now_ : t->time;
  return static_cast<float>(static_cast<double>(t->rate) - remaining);
}

float timer_model::get_timer_remaining(model_handle handle) const {
  const timer* t = find(handle);
  if (t == nullptr) return -1.f;
  switch (t->state) {
    case status::active: return static_cast<float>(t->time - now_);
    case status::executing: return 0.f;
    default: return static_cast<float>(t->time);
  }
}

bool timer_model::has_been_ticked_this_frame() const {
  return frame_counter_ && last_ticked_frame_ && *last_ticked_frame_ == frame_();
}

std::size_t timer_model::live_timer_count() const { return timers_.size(); }

void timer_model::end_tick() {
  ticking_ = false;
  if (frame_counter_) last_ticked_frame_ = frame_();
  std::vector<std::uint64_t> activating;
  activating.swap(pending_);
  for (std::uint64_t id : activating) {
    timer* t = find(model_handle{id});
    activate(*t, now_ + t->time);
  }
}

// finish re-arms a looping timer by its whole catch-up count (missed periods are dropped
// even if its calls stopped early) or frees it; one its callback paused stays paused.
void timer_model::finish(std::uint64_t id, std::uint64_t calls) {
  auto t = std::find_if(timers_.begin(), timers_.end(), [id](const timer& each) { return each.id == id; });
  if (t == timers_.end()) return;  // paused by its callback, then cleared: gone already
  if (t->state == status::removed) {
    erase(id);
  } else if (t->state == status::executing) {
    if (t->loop) {
      activate(*t, t->time + static_cast<double>(calls) * static_cast<double>(t->rate));
    } else {
      erase(id);
    }
  }
}

// fire looks at a due timer again right before it fires: an earlier callback may have
// cleared, paused or re-set it.
void timer_model::fire(std::uint64_t id) {
  timer* t = find(model_handle{id});
  if (t == nullptr || t->state != status::active) return;
  t->state = status::executing;
  t->due = false;
  std::uint64_t calls = 1;
  if (t->loop) {  // k whole periods behind: k + 1 calls
    double behind = (now_ - t->time) / static_cast<double>(t->rate);
    calls = behind < 1e18 ? static_cast<std::uint64_t>(behind) + 1 : std::uint64_t{1000000000000000000};
  }
  callback what = t->what;
  bool once = t->max_once_per_frame;
  try {
    for (std::uint64_t call = 0; call < calls; ++call) {
      fire_(what);
      // A callback may add timers (the list moves) or pause and then clear this one (it is
      // gone): look it up again by id.
      auto again = std::find_if(timers_.begin(), timers_.end(), [id](const timer& each) { return each.id == id; });
      if (again == timers_.end() || again->state != status::executing || once) break;
    }
  } catch (...) {
    finish(id, calls);
    throw;
  }
  finish(id, calls);
}

bool timer_model::tick(float delta_seconds) {
  if (ticking_) return false;
  if (frame_counter_ && last_ticked_frame_ && *last_ticked_frame_ == frame_()) return true;
  now_ += static_cast<double>(delta_seconds);
  ticking_ = true;
  std::vector<const timer*> due;
  for (timer& t : timers_) {
    if (t.state == status::active && t.time < now_) {
      t.due = true;
      due.push_back(&t);
    }
  }
  std::sort(due.begin(), due.end(), [](const timer* a, const timer* b) {
    return a->time < b->time || (a->time == b->time && a->order < b->order);
  });
  std::vector<std::uint64_t> ids;
  for (const timer* t : due) ids.push_back(t->id);
  std::size_t next = 0;
  try {
    while (next < ids.size()) fire(ids[next++]);
  } catch (...) {
    // The timers still due stay active and fire in the next tick.
    for (std::size_t i = next; i < ids.size(); ++i) {
      timer* t = find(model_handle{ids[i]});
      if (t != nullptr && t->state == status::active && t->due) activate(*t, t->time);
    }
    end_tick();
    throw;
  }
  end_tick();
  return true;
}

}  // namespace magpie::fuzz
