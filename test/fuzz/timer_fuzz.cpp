// Fuzz target: magpie::timer_manager against the list-based reference model in
// timer_model.h. The input decodes to a program — a sequence of set / set-for-next-tick /
// clear / pause / unpause / clear-by-object / tick / next-frame steps, and a few callback
// scripts that do the same from inside callbacks (and throw, and tick, which is misuse) —
// that runs on both. Each records what it observes: which callbacks fired in which order,
// every query on every handle, the diagnostics; the two records must be equal after
// every step.
#include "input_decoder.h"
#include "oracle.h"
#include "timer_model.h"

#include <magpie/timer_manager.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace magpie::fuzz {
namespace {

constexpr int handle_count = 6;
constexpr int script_count = 4;
constexpr int object_count = 2;
constexpr int max_steps = 64;
constexpr int max_script_actions = 3;
constexpr int object_token_base = 1000;
// Callbacks that each set two timers for the next tick would double the work every tick;
// past this many timers set, callbacks set no more (the same in both worlds).
constexpr int max_sets = 96;

enum class action_kind : std::uint8_t {
  set,
  set_on_object,
  set_for_next_tick,
  set_for_next_tick_on_object,
  clear,
  pause,
  unpause,
  clear_object,
  query,
  tick,        // from a callback: misuse, reported and ignored
  next_frame,  // top level only
  throw_now,   // callbacks only
};

struct action {
  action_kind kind = action_kind::query;
  std::uint8_t handle = 0;
  std::uint8_t script = 0;
  std::uint8_t object = 0;
  float rate = 0;
  timer_params params;
  float delta = 0;
};

struct program {
  bool frame_counter = false;
  std::array<std::vector<action>, script_count> scripts;
  std::array<std::uint8_t, object_count> object_script{};
  std::vector<action> steps;
};

// Values chosen so that periods line up (ties, exact catch-up counts) and also do not
// (0.3, 0.1), with catch-up bounded: at most 4 / (1/16) + 1 calls per timer per tick.
action decode_action(input_decoder& in, bool in_callback) {
  action a;
  static constexpr action_kind top[] = {
      action_kind::set,   action_kind::set,          action_kind::set_on_object, action_kind::set_for_next_tick,
      action_kind::set_for_next_tick_on_object, action_kind::clear, action_kind::pause, action_kind::unpause,
      action_kind::clear_object, action_kind::query, action_kind::tick, action_kind::tick, action_kind::tick,
      action_kind::next_frame};
  static constexpr action_kind inner[] = {
      action_kind::set,   action_kind::set_on_object, action_kind::set_for_next_tick, action_kind::clear,
      action_kind::pause, action_kind::unpause,       action_kind::clear_object,      action_kind::query,
      action_kind::tick,  action_kind::throw_now};
  a.kind = in_callback ? inner[in.below(std::size(inner))] : top[in.below(std::size(top))];
  a.handle = static_cast<std::uint8_t>(in.below(handle_count));
  switch (a.kind) {
    case action_kind::set:
    case action_kind::set_on_object:
      a.script = static_cast<std::uint8_t>(in.below(script_count));
      a.object = static_cast<std::uint8_t>(in.below(object_count));
      a.rate = in.pick({0.5f, 1.f, 0.25f, 0.0625f, 0.3f, 1.5f, 2.75f, 0.f, -1.f});
      a.params.loop = in.flag();
      a.params.max_once_per_frame = in.chance(64);
      a.params.first_delay = in.pick({-1.f, -1.f, 0.f, 0.1f, 0.25f, 0.5f, 1.f, 3.f});
      break;
    case action_kind::set_for_next_tick:
    case action_kind::set_for_next_tick_on_object:
      a.script = static_cast<std::uint8_t>(in.below(script_count));
      a.object = static_cast<std::uint8_t>(in.below(object_count));
      break;
    case action_kind::clear_object:
      a.object = static_cast<std::uint8_t>(in.below(object_count));
      break;
    case action_kind::tick:
      a.delta = in.pick({0.25f, 0.5f, 0.1f, 1.f, 0.f, 0.0625f, 1.7f, 4.f});
      break;
    default:
      break;
  }
  return a;
}

program decode(input_decoder& in) {
  program p;
  p.frame_counter = in.chance(64);
  for (auto& script : p.scripts) {
    unsigned length = in.below(max_script_actions + 1);
    for (unsigned i = 0; i < length; ++i) script.push_back(decode_action(in, true));
  }
  for (auto& script : p.object_script) script = static_cast<std::uint8_t>(in.below(script_count));
  while (!in.empty() && p.steps.size() < max_steps) p.steps.push_back(decode_action(in, false));
  return p;
}

struct callback_threw {
  int token;
};

std::string format(const char* pattern, auto... values) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

// world_base holds what both worlds share: the program, the log and the frame number.
struct world_base {
  explicit world_base(const program& code) : code(code) {}
  const program& code;
  std::vector<std::string> log;
  std::uint64_t frame = 1;
  int next_token = 0;
  int depth = 0;  // callbacks running (0 or 1: a callback cannot tick)
  int sets = 0;   // timers set so far: callbacks stop setting more at max_sets
};

// The real manager, its handles and the objects timers may be set on.
struct real_world : world_base {
  struct target {
    real_world* world;
    int index;
    void fire() { world->fired(timer_model::callback{object_token_base + index, world->code.object_script[static_cast<std::size_t>(index)], index}); }
  };

  real_world(const program& code, diagnostic_capture& diagnostics)
      : world_base(code),
        manager(code.frame_counter ? timer_manager([this] { return frame; }) : timer_manager()),
        diagnostics(diagnostics) {
    for (int i = 0; i < object_count; ++i) objects[static_cast<std::size_t>(i)] = target{this, i};
  }

  void fired(const timer_model::callback& what);

  timer_handle& handle(int index) { return handles[static_cast<std::size_t>(index)]; }
  void set(int h, timer_model::callback what, float rate, timer_params params) {
    manager.set_timer(handle(h), [this, what] { fired(what); }, rate, params);
  }
  void set_on_object(int h, int object, float rate, timer_params params) {
    manager.set_timer(handle(h), &objects[static_cast<std::size_t>(object)], &target::fire, rate, params);
  }
  void set_for_next_tick(int h, timer_model::callback what) {
    handle(h) = manager.set_timer_for_next_tick([this, what] { fired(what); });
  }
  void set_for_next_tick_on_object(int h, int object) {
    handle(h) = manager.set_timer_for_next_tick(&objects[static_cast<std::size_t>(object)], &target::fire);
  }
  void clear(int h) { manager.clear_timer(handle(h)); }
  void pause(int h) { manager.pause_timer(handle(h)); }
  void unpause(int h) { manager.unpause_timer(handle(h)); }
  void clear_object(int object) { manager.clear_all_timers_for_object(&objects[static_cast<std::size_t>(object)]); }
  void tick(float delta) {
    manager.tick(delta);
    for (const auto& report : diagnostics.take()) log.push_back(format("diagnostic %d", static_cast<int>(report.kind)));
  }
  void query_all() {
    for (int h = 0; h < handle_count; ++h) {
      timer_handle one = handle(h);
      log.push_back(format("h%d valid=%d exists=%d active=%d paused=%d pending=%d rate=%a elapsed=%a remaining=%a", h,
                           one.is_valid(), manager.timer_exists(one), manager.is_timer_active(one),
                           manager.is_timer_paused(one), manager.is_timer_pending(one),
                           static_cast<double>(manager.get_timer_rate(one)),
                           static_cast<double>(manager.get_timer_elapsed(one)),
                           static_cast<double>(manager.get_timer_remaining(one))));
    }
    log.push_back(format("live=%zu ticked=%d", manager.live_timer_count(), manager.has_been_ticked_this_frame()));
  }

  timer_manager manager;
  std::array<timer_handle, handle_count> handles;
  std::array<target, object_count> objects{};
  diagnostic_capture& diagnostics;
};

// The reference model with the same interface.
struct model_world : world_base {
  explicit model_world(const program& code)
      : world_base(code),
        model(code.frame_counter, [this](const timer_model::callback& what) { fired(what); },
              [this] { return frame; }) {}

  void fired(const timer_model::callback& what);

  model_handle& handle(int index) { return handles[static_cast<std::size_t>(index)]; }
  void set(int h, timer_model::callback what, float rate, timer_params params) {
    model.set_timer(handle(h), what, rate, params);
  }
  void set_on_object(int h, int object, float rate, timer_params params) {
    model.set_timer(handle(h), object_callback(object), rate, params);
  }
  void set_for_next_tick(int h, timer_model::callback what) { handle(h) = model.set_timer_for_next_tick(what); }
  void set_for_next_tick_on_object(int h, int object) {
    handle(h) = model.set_timer_for_next_tick(object_callback(object));
  }
  void clear(int h) { model.clear_timer(handle(h)); }
  void pause(int h) { model.pause_timer(handle(h)); }
  void unpause(int h) { model.unpause_timer(handle(h)); }
  void clear_object(int object) { model.clear_all_timers_for_object(object); }
  void tick(float delta) {
    if (!model.tick(delta)) log.push_back(format("diagnostic %d", static_cast<int>(diagnostic_kind::misuse)));
  }
  void query_all() {
    for (int h = 0; h < handle_count; ++h) {
      model_handle one = handle(h);
      log.push_back(format("h%d valid=%d exists=%d active=%d paused=%d pending=%d rate=%a elapsed=%a remaining=%a", h,
                           one.is_valid(), model.timer_exists(one), model.is_timer_active(one),
                           model.is_timer_paused(one), model.is_timer_pending(one),
                           static_cast<double>(model.get_timer_rate(one)),
                           static_cast<double>(model.get_timer_elapsed(one)),
                           static_cast<double>(model.get_timer_remaining(one))));
    }
    log.push_back(format("live=%zu ticked=%d", model.live_timer_count(), model.has_been_ticked_this_frame()));
  }
  timer_model::callback object_callback(int object) const {
    return {object_token_base + object, code.object_script[static_cast<std::size_t>(object)], object};
  }

  timer_model model;
  std::array<model_handle, handle_count> handles;
};

// perform runs one action on either world, recording what the program can observe.
template <class World>
void perform(World& world, const action& a) {
  auto new_callback = [&] { return timer_model::callback{world.next_token++, a.script, -1}; };
  bool sets = a.kind == action_kind::set || a.kind == action_kind::set_on_object ||
              a.kind == action_kind::set_for_next_tick || a.kind == action_kind::set_for_next_tick_on_object;
  if (sets && world.sets++ >= max_sets && world.depth > 0) return;
  switch (a.kind) {
    case action_kind::set: world.set(a.handle, new_callback(), a.rate, a.params); break;
    case action_kind::set_on_object: world.set_on_object(a.handle, a.object, a.rate, a.params); break;
    case action_kind::set_for_next_tick: world.set_for_next_tick(a.handle, new_callback()); break;
    case action_kind::set_for_next_tick_on_object: world.set_for_next_tick_on_object(a.handle, a.object); break;
    case action_kind::clear: world.clear(a.handle); break;
    case action_kind::pause: world.pause(a.handle); break;
    case action_kind::unpause: world.unpause(a.handle); break;
    case action_kind::clear_object: world.clear_object(a.object); break;
    case action_kind::query: world.query_all(); break;
    case action_kind::tick:
      if (world.depth > 0) {
        world.tick(a.delta);
        break;
      }
      try {
        world.tick(a.delta);
      } catch (const callback_threw& thrown) {
        world.log.push_back(format("tick threw %d", thrown.token));
      }
      world.log.push_back(format("ticked %a", static_cast<double>(a.delta)));
      world.query_all();
      break;
    case action_kind::next_frame: ++world.frame; break;
    case action_kind::throw_now: world.log.push_back("throwing"); break;
  }
}

// run_callback is every timer's callback in both worlds: record the call, run its script.
template <class World>
void run_callback(World& world, const timer_model::callback& what) {
  world.log.push_back(format("fired %d", what.token));
  ++world.depth;
  struct leave {
    int& depth;
    ~leave() { --depth; }
  } on_exit{world.depth};
  for (const action& a : world.code.scripts[static_cast<std::size_t>(what.script)]) {
    perform(world, a);
    if (a.kind == action_kind::throw_now) throw callback_threw{what.token};
  }
}

void real_world::fired(const timer_model::callback& what) { run_callback(*this, what); }
void model_world::fired(const timer_model::callback& what) { run_callback(*this, what); }

std::string describe(const program& p) {
  std::string text = format("frame_counter=%d\n", p.frame_counter);
  auto one = [](const action& a) {
    return format("  kind=%d handle=%d script=%d object=%d rate=%a loop=%d once=%d first=%a delta=%a\n",
                  static_cast<int>(a.kind), a.handle, a.script, a.object, static_cast<double>(a.rate),
                  a.params.loop, a.params.max_once_per_frame, static_cast<double>(a.params.first_delay),
                  static_cast<double>(a.delta));
  };
  for (std::size_t s = 0; s < p.scripts.size(); ++s) {
    text += format("script %zu:\n", s);
    for (const action& a : p.scripts[s]) text += one(a);
  }
  text += format("objects run scripts %d %d\nsteps:\n", p.object_script[0], p.object_script[1]);
  for (const action& a : p.steps) text += one(a);
  return text;
}

void compare(const program& p, const real_world& real, const model_world& model, std::size_t step) {
  if (real.log == model.log) return;
  std::size_t first = 0;
  while (first < real.log.size() && first < model.log.size() && real.log[first] == model.log[first]) ++first;
  std::string text = format("after step %zu the logs differ at entry %zu\n", step, first);
  text += describe(p);
  for (std::size_t i = first >= 6 ? first - 6 : 0; i < std::max(real.log.size(), model.log.size()); ++i) {
    text += format("%3zu real : ", i) + (i < real.log.size() ? real.log[i] : "-") + "\n";
    text += format("%3zu model: ", i) + (i < model.log.size() ? model.log[i] : "-") + "\n";
  }
  mismatch(text);
}

}  // namespace
}  // namespace magpie::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace magpie::fuzz;
  input_decoder in(data, size);
  program code = decode(in);
  diagnostic_capture diagnostics;
  real_world real(code, diagnostics);
  model_world model(code);
  for (std::size_t step = 0; step < code.steps.size(); ++step) {
    perform(real, code.steps[step]);
    perform(model, code.steps[step]);
    compare(code, real, model, step);
  }
  real.query_all();
  model.query_all();
  compare(code, real, model, code.steps.size());
  return 0;
}
