// Suite "timer_model": timer_manager's timing wheel across its whole range (milliseconds to
// days, a million live timers) and a property test comparing random operations, callbacks
// that operate on other timers included, with a plain reference model.
#include <magpie/timer_manager.h>

#include "support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

using magpie::timer_handle;
using magpie::timer_manager;
using magpie::timer_params;

namespace {

// splitmix64: a small generator whose sequence is the same on every standard library, so a
// printed seed replays anywhere.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  float between(double low, double high) { return static_cast<float>(low + (high - low) * unit()); }
  bool chance(double p) { return unit() < p; }
};

}  // namespace

TEST_SUITE("timer_model") {

// Every timer fires in the first tick whose clock passes its expiry, however far away it
// is: delays from a millisecond to twelve days reach every level of the wheel.
TEST_CASE("timer: timers from milliseconds to days fire in the tick that passes their expiry") {
  random_source random{42};
  timer_manager timers;
  struct probe {
    double expire;
    int fired_in = -1;
    int fired_count = 0;
  };
  std::vector<probe> probes(3000);
  std::vector<std::size_t> fired_order;
  int tick_number = 0;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    auto delay = static_cast<float>(std::exp2(-10.0 + 30.0 * random.unit()));  // 1 ms .. 12 days
    probes[i].expire = static_cast<double>(delay);
    timer_handle handle;
    timers.set_timer(handle, [&, i] {
      probes[i].fired_in = tick_number;
      ++probes[i].fired_count;
      fired_order.push_back(i);
    }, delay);
  }
  timers.tick(0.f);
  double now = 0;
  std::vector<double> clock{0};
  while (timers.live_timer_count() > 0) {
    float delta = random.chance(0.5) ? random.between(0, 0.1) : static_cast<float>(std::exp2(-5.0 + 25.0 * random.unit()));
    ++tick_number;
    now += static_cast<double>(delta);
    clock.push_back(now);
    timers.tick(delta);
    REQUIRE(tick_number < 100000);
  }
  for (const probe& each : probes) {
    REQUIRE(each.fired_count == 1);
    auto in = static_cast<std::size_t>(each.fired_in);
    CHECK(clock[in] > each.expire);
    CHECK_FALSE(clock[in - 1] > each.expire);
  }
  for (std::size_t i = 1; i < fired_order.size(); ++i) {
    const probe& before = probes[fired_order[i - 1]];
    const probe& after = probes[fired_order[i]];
    CHECK((before.expire < after.expire || (before.expire == after.expire && fired_order[i - 1] < fired_order[i])));
  }
}


// ---------------------------------------------------------------------------------------
// Property test: random sequences of set / clear / pause / unpause / set_timer_for_next_tick
// / clear_all_timers_for_object / tick on many timers, whose callbacks do the same, run on
// the manager and on a reference model — a plain list scanned for the earliest due timer
// before every firing — and compared after every step: fire order, states and times.

namespace property {

constexpr int per_group = 8;  // timers L = 8 g + m are set on object g with method m

enum class action_kind { none, clear, pause, unpause, set, next_tick, clear_object };

// action is what a timer's callback does to timer `target` (itself included) each call.
struct action {
  action_kind kind = action_kind::none;
  int target = 0;
};

struct set_args {
  float rate;
  timer_params params;
  bool on_object;
  action then;
};

action draw_action(random_source& random, int self, int count) {
  if (random.chance(0.6)) return {};
  return {static_cast<action_kind>(1 + random.below(6)), random.chance(0.3) ? self : random.below(count)};
}

float draw_rate(random_source& random) {
  switch (random.below(4)) {
    case 0: return 0.05f * static_cast<float>(1 + random.below(4));
    case 1: return static_cast<float>(1 + random.below(30)) / 60.f;  // equal expiries abound
    case 2: return 0.25f * static_cast<float>(1 + random.below(16));
    default: return random.between(10, 5000);
  }
}

set_args draw_set(random_source& random, int self, int count) {
  set_args args{};
  args.rate = random.chance(0.03) ? (random.chance(0.5) ? 0.f : -1.f) : draw_rate(random);
  args.params.loop = random.chance(0.4);
  args.params.max_once_per_frame = args.params.loop && random.chance(0.25);
  int delay = random.below(10);
  args.params.first_delay = delay < 5 ? -1.f : delay < 7 ? 0.f : draw_rate(random);
  args.on_object = random.chance(0.5);
  args.then = draw_action(random, self, count);
  return args;
}

float draw_delta(random_source& random) {
  int roll = random.below(1000);
  if (roll < 100) return 0.f;
  if (roll < 600) return 1.f / 60;
  if (roll < 800) return random.between(0, 0.5);
  if (roll < 950) return random.between(0.5, 5);
  if (roll < 995) return random.between(5, 60);
  return random.between(60, 300);
}

// perform runs one callback's action on either side; both draw from their own copy of the
// same random stream, so they draw alike as long as they behave alike.
template <class Side>
void perform(Side& side, action what, random_source& random) {
  switch (what.kind) {
    case action_kind::none: break;
    case action_kind::clear: side.clear(what.target); break;
    case action_kind::pause: side.pause(what.target); break;
    case action_kind::unpause: side.unpause(what.target); break;
    case action_kind::set: side.set(what.target, draw_set(random, what.target, side.count())); break;
    case action_kind::next_tick: side.next_tick(what.target, draw_action(random, what.target, side.count())); break;
    case action_kind::clear_object: side.clear_object(what.target / per_group); break;
  }
}

struct real_side {
  struct group {
    real_side* side;
    int index;
    template <int M>
    void fire() { side->on_fire(index * per_group + M); }
  };
  using method = void (group::*)();
  static constexpr method methods[per_group] = {&group::fire<0>, &group::fire<1>, &group::fire<2>, &group::fire<3>,
                                                &group::fire<4>, &group::fire<5>, &group::fire<6>, &group::fire<7>};

  real_side(int count, const std::uint64_t* frame, std::uint64_t seed)
      : timers(frame != nullptr ? timer_manager::frame_counter([frame] { return *frame; }) : timer_manager::frame_counter()),
        handles(static_cast<std::size_t>(count)),
        actions(static_cast<std::size_t>(count)),
        random{seed} {
    for (int g = 0; g < count / per_group; ++g) groups.push_back({this, g});
  }

  int count() const { return static_cast<int>(handles.size()); }
  timer_handle& handle(int logical) { return handles[static_cast<std::size_t>(logical)]; }

  void on_fire(int logical) {
    log.push_back(logical);
    perform(*this, actions[static_cast<std::size_t>(logical)], random);
  }
  void set(int logical, const set_args& args) {
    actions[static_cast<std::size_t>(logical)] = args.then;
    if (args.on_object) {
      timers.set_timer(handle(logical), &groups[static_cast<std::size_t>(logical / per_group)], methods[logical % per_group],
                       args.rate, args.params);
    } else {
      timers.set_timer(handle(logical), [this, logical] { on_fire(logical); }, args.rate, args.params);
    }
  }
  void next_tick(int logical, action then) {
    timers.clear_timer(handle(logical));
    actions[static_cast<std::size_t>(logical)] = then;
    handle(logical) = timers.set_timer_for_next_tick([this, logical] { on_fire(logical); });
  }
  void clear(int logical) { timers.clear_timer(handle(logical)); }
  void pause(int logical) { timers.pause_timer(handle(logical)); }
  void unpause(int logical) { timers.unpause_timer(handle(logical)); }
  void clear_object(int g) { timers.clear_all_timers_for_object(&groups[static_cast<std::size_t>(g)]); }
  void tick(float delta) { timers.tick(delta); }

  timer_manager timers;
  std::vector<timer_handle> handles;
  std::vector<action> actions;
  std::vector<group> groups;
  std::vector<int> log;
  random_source random;
};

struct model_side {
  enum class status { pending, active, paused, executing, removed, dead };
  struct timer {
    int logical;
    status state;
    double time;  // expiry when active or executing, remaining when pending or paused
    float rate;
    bool loop;
    bool max_once_per_frame;
    int group;  // -1: not set on an object
    std::uint64_t sequence = 0;
  };

  model_side(int count, const std::uint64_t* frame, std::uint64_t seed)
      : current(static_cast<std::size_t>(count), -1), actions(static_cast<std::size_t>(count)), random{seed}, frame(frame) {}

  int count() const { return static_cast<int>(current.size()); }
  int& current_of(int logical) { return current[static_cast<std::size_t>(logical)]; }
  timer& at(int id) { return timers[static_cast<std::size_t>(id)]; }
  bool alive(int id) const {
    if (id < 0) return false;
    status state = timers[static_cast<std::size_t>(id)].state;
    return state != status::removed && state != status::dead;
  }
  const timer* find(int logical) const {
    int id = current[static_cast<std::size_t>(logical)];
    return alive(id) ? &timers[static_cast<std::size_t>(id)] : nullptr;
  }
  std::size_t live() const {
    std::size_t n = 0;
    for (int id : current) n += alive(id) ? 1 : 0;
    return n;
  }
  bool at_once() const { return frame != nullptr && !ticking && last_ticked && *last_ticked == *frame; }

  void activate(int id, double expire) {
    at(id).time = expire;
    at(id).state = status::active;
    at(id).sequence = sequence++;
  }
  void make_pending(int id) {
    at(id).state = status::pending;
    pending.push_back(id);
  }
  void kill(int id) {
    if (at(id).state == status::pending) pending.erase(std::find(pending.begin(), pending.end(), id));
    at(id).state = at(id).state == status::executing ? status::removed : status::dead;
  }
  int add(int logical, float rate, bool loop, bool max_once, int group) {
    if (alive(current_of(logical))) kill(current_of(logical));
    timers.push_back({logical, status::dead, 0, rate, loop, max_once, group});
    current_of(logical) = static_cast<int>(timers.size()) - 1;
    return current_of(logical);
  }

  void on_fire(int logical) {
    log.push_back(logical);
    perform(*this, actions[static_cast<std::size_t>(logical)], random);
  }
  void set(int logical, const set_args& args) {
    actions[static_cast<std::size_t>(logical)] = args.then;
    if (!(args.rate > 0)) {
      if (alive(current_of(logical))) kill(current_of(logical));
      current_of(logical) = -1;
      return;
    }
    int id = add(logical, args.rate, args.params.loop, args.params.max_once_per_frame,
                 args.on_object ? logical / per_group : -1);
    double delay = args.params.first_delay >= 0 ? args.params.first_delay : args.rate;
    if (at_once()) {
      activate(id, now + delay);
    } else {
      at(id).time = delay;
      make_pending(id);
    }
  }
  void next_tick(int logical, action then) {
    actions[static_cast<std::size_t>(logical)] = then;
    activate(add(logical, 0.f, false, false, -1), now);
  }
  void clear(int logical) {
    if (alive(current_of(logical))) kill(current_of(logical));
    current_of(logical) = -1;
  }
  void pause(int logical) {
    int id = current_of(logical);
    if (!alive(id)) return;
    timer& t = at(id);
    switch (t.state) {
      case status::pending: pending.erase(std::find(pending.begin(), pending.end(), id)); break;
      case status::active: t.time -= now; break;
      case status::executing:
        if (!t.loop) {
          kill(id);
          return;
        }
        t.time -= now;
        break;
      default: return;
    }
    t.state = status::paused;
  }
  void unpause(int logical) {
    int id = current_of(logical);
    if (!alive(id) || at(id).state != status::paused) return;
    if (at_once()) {
      activate(id, now + at(id).time);
    } else {
      make_pending(id);
    }
  }
  void clear_object(int g) {
    for (int id : current) {
      if (alive(id) && at(id).group == g) kill(id);
    }
  }
  void tick(float delta) {
    if (frame != nullptr && last_ticked && *last_ticked == *frame) return;
    now += static_cast<double>(delta);
    ticking = true;
    std::uint64_t tick_start = sequence;  // timers activated during this tick wait for the next
    for (;;) {
      int best = -1;
      for (int id : current) {
        if (!alive(id)) continue;
        const timer& t = at(id);
        if (t.state != status::active || !(t.time < now) || t.sequence >= tick_start) continue;
        if (best < 0 || t.time < at(best).time || (t.time == at(best).time && t.sequence < at(best).sequence)) best = id;
      }
      if (best < 0) break;
      fire(best);
    }
    ticking = false;
    if (frame != nullptr) last_ticked = *frame;
    std::vector<int> waiting;
    waiting.swap(pending);
    for (int id : waiting) activate(id, now + at(id).time);
  }
  void fire(int id) {
    at(id).state = status::executing;
    std::uint64_t calls = at(id).loop ? static_cast<std::uint64_t>((now - at(id).time) / at(id).rate) + 1 : 1;
    for (std::uint64_t call = 0; call < calls; ++call) {
      on_fire(at(id).logical);
      if (at(id).state != status::executing || at(id).max_once_per_frame) break;
    }
    timer& t = at(id);
    if (t.state == status::removed) {
      t.state = status::dead;
    } else if (t.state == status::executing) {
      if (t.loop) {
        activate(id, t.time + static_cast<double>(calls) * static_cast<double>(t.rate));
      } else {
        t.state = status::dead;
      }
    }
  }

  std::vector<timer> timers;  // every timer ever set; each live one is some logical timer's current
  std::vector<int> current;   // logical timer -> its timer, or -1
  std::vector<int> pending;
  std::vector<action> actions;
  std::vector<int> log;
  random_source random;
  const std::uint64_t* frame;
  std::optional<std::uint64_t> last_ticked;
  double now = 0;
  bool ticking = false;
  std::uint64_t sequence = 0;
};

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int each : values) text += std::to_string(each) + ' ';
  return text;
}

// mismatch describes the first difference between the manager and the model, or is empty.
std::string mismatch(real_side& real, const model_side& model) {
  if (real.log != model.log) return "fired " + join(real.log) + "/ model fired " + join(model.log);
  if (real.timers.live_timer_count() != model.live()) {
    return "live timers " + std::to_string(real.timers.live_timer_count()) + ", model " + std::to_string(model.live());
  }
  for (int logical = 0; logical < real.count(); ++logical) {
    timer_handle handle = real.handle(logical);
    const model_side::timer* expected = model.find(logical);
    std::string name = "timer " + std::to_string(logical) + ": ";
    if (real.timers.timer_exists(handle) != (expected != nullptr)) return name + "exists differs";
    if (expected == nullptr) continue;
    using status = model_side::status;
    bool active = expected->state == status::active;
    double remaining = active ? expected->time - model.now : expected->time;
    if (real.timers.is_timer_paused(handle) != (expected->state == status::paused)) return name + "paused differs";
    if (real.timers.is_timer_pending(handle) != (expected->state == status::pending)) return name + "pending differs";
    if (real.timers.is_timer_active(handle) != (expected->state != status::paused)) return name + "active differs";
    if (real.timers.get_timer_rate(handle) != expected->rate) return name + "rate differs";
    if (real.timers.get_timer_remaining(handle) != static_cast<float>(remaining)) {
      return name + "remaining " + std::to_string(real.timers.get_timer_remaining(handle)) + ", model " +
             std::to_string(remaining);
    }
    if (real.timers.get_timer_elapsed(handle) != static_cast<float>(static_cast<double>(expected->rate) - remaining)) {
      return name + "elapsed differs";
    }
  }
  return {};
}

void run(std::uint64_t seed, int steps, int count, bool with_frames) {
  INFO("replay with MAGPIE_TIMER_SEED=" << seed << (with_frames ? " (with a frame counter)" : ""));
  std::uint64_t frame = 0;
  const std::uint64_t* frames = with_frames ? &frame : nullptr;
  real_side real(count, frames, seed);
  model_side model(count, frames, seed);
  random_source driver{seed ^ 0xd1b54a32d192ed03ull};
  for (int step = 0; step < steps; ++step) {
    int roll = driver.below(100);
    int logical = driver.below(count);
    if (roll < 35) {
      set_args args = draw_set(driver, logical, count);
      real.set(logical, args);
      model.set(logical, args);
    } else if (roll < 45) {
      real.clear(logical);
      model.clear(logical);
    } else if (roll < 55) {
      real.pause(logical);
      model.pause(logical);
    } else if (roll < 65) {
      real.unpause(logical);
      model.unpause(logical);
    } else if (roll < 70) {
      action then = draw_action(driver, logical, count);
      real.next_tick(logical, then);
      model.next_tick(logical, then);
    } else if (roll < 73) {
      real.clear_object(logical / per_group);
      model.clear_object(logical / per_group);
    } else {
      float delta = draw_delta(driver);
      real.tick(delta);
      model.tick(delta);
      if (driver.chance(0.7)) ++frame;
    }
    if (driver.chance(0.05)) ++frame;
    std::string difference = mismatch(real, model);
    REQUIRE_MESSAGE(difference.empty(), "step " << step << ": " << difference);
    real.log.clear();
    model.log.clear();
  }
}

// first_seed is MAGPIE_TIMER_SEED when set (to replay a failure), else a fresh one.
std::uint64_t first_seed() {
  if (const char* text = std::getenv("MAGPIE_TIMER_SEED")) return std::strtoull(text, nullptr, 10);
  return (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

}  // namespace property

TEST_CASE("timer: random operations match a reference model (printed seed replays)") {
  std::uint64_t seed = property::first_seed();
  MESSAGE("timer property seed " << seed << " (MAGPIE_TIMER_SEED=" << seed << " replays it)");
  for (bool with_frames : {false, true}) property::run(seed, 1500, 64, with_frames);
}

TEST_CASE("timer: random operations match a reference model, many seeds" * doctest::test_suite("stress")) {
  std::uint64_t seed = property::first_seed();
  MESSAGE("timer stress seed " << seed << " (seeds " << seed << " .. +" << 40 * magpie::test::stress_repeat() - 1 << ")");
  for (int i = 0; i < 40 * magpie::test::stress_repeat(); ++i) {
    property::run(seed + static_cast<std::uint64_t>(i), 3000, 128, i % 2 == 1);
  }
}

// A million live timers: each fires exactly once, in the first tick past its expiry, in
// expiry order with ties in the order set.
TEST_CASE("timer: a million one-shot timers each fire once, on time, in order" * doctest::test_suite("stress")) {
  constexpr std::size_t count = 1000000;
  random_source random{7};
  timer_manager timers;
  std::vector<double> expire(count);
  std::vector<int> fired_in(count, -1);
  std::vector<std::uint32_t> order;
  order.reserve(count);
  int tick_number = 0;
  std::size_t fired_twice = 0;
  timer_handle handle;
  for (std::size_t i = 0; i < count; ++i) {
    float delay = random.between(0.1, 10);
    expire[i] = static_cast<double>(delay);
    timers.set_timer(handle, [&, i] {
      if (fired_in[i] != -1) ++fired_twice;
      fired_in[i] = tick_number;
      order.push_back(static_cast<std::uint32_t>(i));
    }, delay);
    handle.invalidate();
  }
  CHECK(timers.live_timer_count() == count);
  timers.tick(0.f);
  std::vector<double> clock{0};
  while (timers.live_timer_count() > 0 && tick_number < 1000) {
    ++tick_number;
    timers.tick(1.f / 60);
    clock.push_back(clock.back() + static_cast<double>(1.f / 60));
  }
  REQUIRE(order.size() == count);
  CHECK(fired_twice == 0);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    auto in = static_cast<std::size_t>(fired_in[i]);
    if (!(clock[in] > expire[i]) || clock[in - 1] > expire[i]) ++wrong;
  }
  CHECK(wrong == 0);
  std::size_t out_of_order = 0;
  for (std::size_t i = 1; i < count; ++i) {
    double before = expire[order[i - 1]];
    double after = expire[order[i]];
    if (before > after || (before == after && order[i - 1] > order[i])) ++out_of_order;
  }
  CHECK(out_of_order == 0);
}

}  // TEST_SUITE("timer_model")
