// Fuzz target: magpie::tick_manager against the rebuild-every-frame model in tick_model.h.
// Each frame the run must show: every tick the model says ticks ran exactly once (those a
// mid-frame change may have caught at most once, those it stopped not at all), in the
// groups the model computes (actual_start/end_tick_group, the group being run when it
// started, done by its end group), after every prerequisite that ticked, with the delta the
// model computes; pause frames run the right ticks in registration order; thrown ticks and
// refused changes are reported, nothing else is.
#include "input_decoder.h"
#include "oracle.h"
#include "tick_model.h"

#include <magpie/scheduler.h>
#include <magpie/tick_manager.h>

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace magpie::fuzz {
namespace {

constexpr std::pair<ticking_group, bool> frame_groups[] = {
    {ticking_group::pre_physics, true},     {ticking_group::start_physics, true},
    {ticking_group::during_physics, false}, {ticking_group::end_physics, true},
    {ticking_group::post_physics, true},    {ticking_group::post_update_work, true},
    {ticking_group::last_demotable, true},
};

// What one frame's ticks record, from whichever thread runs them; read by the game thread
// after end_frame (the frame's completion orders the two).
struct frame_record {
  std::atomic<std::uint64_t> clock{1};
  std::atomic<int> group_running{0};  // index of the group run_tick_group is releasing
  std::array<std::atomic<int>, max_ticks> runs{};
  std::array<std::atomic<std::uint64_t>, max_ticks> starts{}, ends{};
  std::array<std::atomic<int>, max_ticks> groups_seen{};
  std::array<std::atomic<float>, max_ticks> deltas{};
  std::array<std::atomic<level_tick>, max_ticks> types{};
  std::array<std::uint64_t, 8> group_done{};  // stamp taken when each run_tick_group returned
  std::vector<int> order;                      // pause frames: who ran, in order (game thread only)
  mid_frame_change during;                     // the change the actor makes, if active this frame

  void reset() {
    for (int i = 0; i < max_ticks; ++i) {
      runs[static_cast<std::size_t>(i)] = 0;
      starts[static_cast<std::size_t>(i)] = 0;
      ends[static_cast<std::size_t>(i)] = 0;
    }
    order.clear();
    during = {};
  }
};

struct tick_run {
  tick_run(const tick_program& program, scheduler& pool)
      : program(program),
        manager(pool, tick_manager_options{program.cache_schedule, program.allow_batching, true, 101}) {
    for (std::size_t i = 0; i < program.ticks.size(); ++i) ticks.push_back(make_tick(static_cast<int>(i), program.ticks[i]));
    for (std::size_t i = 0; i < program.ticks.size(); ++i) {
      for (int p : program.ticks[i].prerequisites) ticks[i]->add_prerequisite(*ticks[static_cast<std::size_t>(p)]);
    }
    for (std::size_t i = 0; i < program.ticks.size(); ++i) {
      if (program.ticks[i].registered) ticks[i]->register_tick_function(manager);
    }
  }

  // make_tick makes tick `index`, unregistered and without edges, with `s`'s settings.
  std::unique_ptr<tick_function> make_tick(int index, const tick_settings& s) {
    std::string name = "t";  // appended, not "t" + ...: GCC 12's -Wrestrict misfires on that at -O3
    name += std::to_string(index);
    auto made = std::make_unique<tick_function>(name, [this, index](float dt, level_tick type) {
      body(index, dt, type);  // the last thing: the body may destroy this tick function
    });
    made->set_tick_group(s.group);
    made->set_end_tick_group(s.end_group);
    made->set_tick_interval(s.interval);
    made->set_tick_function_enable(s.enabled);
    made->set_high_priority(s.high_priority);
    made->set_run_on_any_thread(s.any_thread);
    made->set_allow_tick_batching(s.batching);
    made->set_tick_even_when_paused(s.when_paused);
    return made;
  }

  void body(int index, float dt, level_tick type) {
    auto at = static_cast<std::size_t>(index);
    record.starts[at] = record.clock.fetch_add(1);
    record.runs[at].fetch_add(1);
    record.groups_seen[at] = record.group_running.load();
    record.deltas[at] = dt;
    record.types[at] = type;
    if (type == level_tick::pause_tick) record.order.push_back(index);  // pause frames: game thread only
    if (record.during.actor == index) {
      tick_function& target = *ticks[static_cast<std::size_t>(record.during.target)];
      switch (record.during.what) {
        case mid_frame_change::kind::disable: target.set_tick_function_enable(false); break;
        case mid_frame_change::kind::enable: target.set_tick_function_enable(true); break;
        case mid_frame_change::kind::unregister: target.unregister_tick_function(); break;
        case mid_frame_change::kind::register_again: target.register_tick_function(manager); break;
        case mid_frame_change::kind::disable_and_enable:
          target.set_tick_function_enable(false);
          target.set_tick_function_enable(true);
          break;
        case mid_frame_change::kind::unregister_and_register:
          target.unregister_tick_function();
          target.register_tick_function(manager);
          break;
        case mid_frame_change::kind::destroy_self: ticks[at].reset(); break;  // on a worker, if it runs there
      }
    }
    record.ends[at] = record.clock.fetch_add(1);
    if (program.ticks[at].throws) throw std::runtime_error("fuzz tick throws");
  }

  void change(const tick_change& what) {
    tick_function& t = *ticks[static_cast<std::size_t>(what.tick)];
    tick_function& other = *ticks[static_cast<std::size_t>(what.other)];
    switch (what.kind) {
      case tick_change_kind::toggle_enabled: t.set_tick_function_enable(!t.is_tick_function_enabled()); break;
      case tick_change_kind::toggle_registered:
        if (t.is_tick_function_registered()) {
          t.unregister_tick_function();
        } else {
          t.register_tick_function(manager);
        }
        break;
      case tick_change_kind::set_group: t.set_tick_group(what.group); break;
      case tick_change_kind::set_end_group: t.set_end_tick_group(what.group); break;
      case tick_change_kind::set_interval: t.set_tick_interval(what.interval); break;
      case tick_change_kind::update_interval_and_cool_down: t.update_tick_interval_and_cool_down(what.interval); break;
      case tick_change_kind::add_prerequisite:
        if (what.tick > 0) t.add_prerequisite(other);
        break;
      case tick_change_kind::remove_prerequisite: t.remove_prerequisite(other); break;
      case tick_change_kind::add_self_prerequisite: t.add_prerequisite(t); break;
      case tick_change_kind::toggle_when_paused: t.set_tick_even_when_paused(!t.ticks_even_when_paused()); break;
      case tick_change_kind::toggle_any_thread: t.set_run_on_any_thread(!t.runs_on_any_thread()); break;
    }
  }

  const tick_program& program;
  tick_manager manager;
  std::vector<std::unique_ptr<tick_function>> ticks;
  frame_record record;
};

// done_by is the group whose blocking run a tick ending in `end` has completed by.
std::size_t done_by(ticking_group end) {
  return end == ticking_group::during_physics ? static_cast<std::size_t>(ticking_group::end_physics) : static_cast<std::size_t>(end);
}

void check_normal_frame(const tick_program& program, tick_model& model, tick_run& run, const std::vector<tick_expectation>& expected,
                        level_tick type, std::size_t frame_index, std::size_t reports_expected_misuse, std::vector<diagnostic_capture::entry>& reports) {
  const frame_record& record = run.record;
  std::string where = "frame " + std::to_string(frame_index) + ": ";
  std::size_t ran = 0, thrown = 0;
  for (std::size_t i = 0; i < program.ticks.size(); ++i) {
    const tick_expectation& want = expected[i];
    int runs = record.runs[i].load();
    ran += static_cast<std::size_t>(runs);
    if (runs > 0 && program.ticks[i].throws) ++thrown;
    std::string tick = where + "tick " + std::to_string(i) + ": ";
    switch (want.run) {
      case run_expectation::must_run: expect(runs == 1, tick + "ran " + std::to_string(runs) + " times, expected once\n" + describe(program)); break;
      case run_expectation::must_not_run: expect(runs == 0, tick + "ran " + std::to_string(runs) + " times, expected not at all\n" + describe(program)); break;
      case run_expectation::may_run: expect(runs <= 1, tick + "ran " + std::to_string(runs) + " times, expected at most once\n" + describe(program)); break;
    }
    if (runs == 0) continue;
    expect(record.types[i].load() == type, tick + "got the wrong level_tick\n" + describe(program));
    if (!want.scheduled) {
      if (record.during.actor >= 0) {
        expect(record.starts[i].load() > record.starts[static_cast<std::size_t>(record.during.actor)].load(),
               tick + "added mid-frame but ran before the change\n" + describe(program));
      }
      continue;
    }
    expect(record.deltas[i].load() == want.delta, tick + "delta " + std::to_string(record.deltas[i].load()) + ", model " +
                                                     std::to_string(want.delta) + "\n" + describe(program));
    expect(record.groups_seen[i].load() >= static_cast<int>(want.start), tick + "started before its start group\n" + describe(program));
    expect(record.ends[i].load() < record.group_done[done_by(want.end)], tick + "not done by its end group\n" + describe(program));
    for (int p : program.ticks.empty() ? std::vector<int>{} : model.settings(static_cast<int>(i)).prerequisites) {
      auto before = static_cast<std::size_t>(p);
      if (!model.waits_for(static_cast<int>(i), p, expected) || record.runs[before].load() == 0) continue;
      expect(record.ends[before].load() < record.starts[i].load(),
             tick + "started before its prerequisite " + std::to_string(p) + " ended\n" + describe(program));
    }
  }
  expect(run.manager.last_frame_stats().ticks_run == ran, where + "last_frame_stats().ticks_run differs\n" + describe(program));
  std::size_t exceptions = 0, misuse = 0;
  for (const auto& report : reports) {
    if (report.kind == diagnostic_kind::unhandled_exception) {
      ++exceptions;
    } else if (report.kind == diagnostic_kind::misuse) {
      ++misuse;
    } else {
      mismatch(where + "unexpected diagnostic: " + report.message + "\n" + describe(program));
    }
  }
  expect(exceptions == thrown, where + std::to_string(thrown) + " ticks threw, " + std::to_string(exceptions) + " reported\n" + describe(program));
  expect(misuse == reports_expected_misuse, where + "misuse reports: " + std::to_string(misuse) + ", expected " +
                                                std::to_string(reports_expected_misuse) + "\n" + describe(program));
}

void run_program(const tick_program& program) {
  scheduler& pool = scheduler_with(program.workers);
  diagnostic_capture diagnostics;
  tick_run run(program, pool);
  tick_model model(program);
  for (std::size_t f = 0; f < program.frames.size(); ++f) {
    const tick_frame& frame = program.frames[f];
    std::size_t refused = 0;
    for (const tick_change& change : frame.before) {
      run.change(change);
      if (!model.change(change)) ++refused;
    }
    run.record.reset();
    if (frame.paused) {
      run.manager.run_pause_frame(frame.delta);
      std::vector<int> expected = model.pause_frame();
      expect(run.record.order == expected, "pause frame " + std::to_string(f) + " ran the wrong ticks or order\n" + describe(program));
      for (int i : expected) {
        expect(run.record.deltas[static_cast<std::size_t>(i)].load() == frame.delta, "pause frame delta differs\n" + describe(program));
      }
      auto reports = diagnostics.take();
      std::size_t thrown = 0, misuse = 0;
      for (int i : expected) thrown += program.ticks[static_cast<std::size_t>(i)].throws ? 1 : 0;
      for (const auto& report : reports) misuse += report.kind == diagnostic_kind::misuse ? 1 : 0;
      expect(misuse == refused && reports.size() == refused + thrown, "pause frame " + std::to_string(f) + ": wrong diagnostics\n" + describe(program));
      continue;
    }
    level_tick type = frame.time_only ? level_tick::time_only : level_tick::all;
    run.manager.start_frame(frame.delta, type);
    std::vector<tick_expectation> expected = model.start_frame(frame);
    for (std::size_t i = 0; i < program.ticks.size(); ++i) {
      if (!expected[i].scheduled) continue;
      expect(run.ticks[i]->actual_start_tick_group() == expected[i].start && run.ticks[i]->actual_end_tick_group() == expected[i].end,
             "frame " + std::to_string(f) + " tick " + std::to_string(i) + ": actual groups " +
                 std::string(to_string(run.ticks[i]->actual_start_tick_group())) + ".." +
                 std::string(to_string(run.ticks[i]->actual_end_tick_group())) + ", model " +
                 std::string(to_string(expected[i].start)) + ".." + std::string(to_string(expected[i].end)) + "\n" + describe(program));
    }
    // The actor changes something only if it surely runs on the game thread this frame:
    // changes from other threads are refused. Destroying itself, any thread will do.
    int actor = frame.during.actor;
    if (actor >= 0) {
      const tick_settings& s = model.settings(actor);
      auto at = static_cast<std::size_t>(actor);
      bool on_game_thread = !(s.any_thread && program.workers > 0 && expected[at].start == s.group);
      bool any_thread_will_do = frame.during.what == mid_frame_change::kind::destroy_self;
      if (expected[at].run == run_expectation::must_run && (on_game_thread || any_thread_will_do)) {
        run.record.during = frame.during;
        model.mid_frame(frame, expected);
      }
    }
    for (auto [group, block] : frame_groups) {
      run.record.group_running = static_cast<int>(group);
      run.manager.run_tick_group(group, block);
      run.record.group_done[static_cast<std::size_t>(group)] = run.record.clock.fetch_add(1);
    }
    run.manager.end_frame();
    auto reports = diagnostics.take();
    check_normal_frame(program, model, run, expected, type, f, refused, reports);
    for (std::size_t i = 0; i < run.ticks.size(); ++i) {  // a tick that destroyed itself comes back, unregistered
      if (!run.ticks[i]) run.ticks[i] = run.make_tick(static_cast<int>(i), model.settings(static_cast<int>(i)));
    }
    expect(run.manager.registered_count() == model.registered_count(), "registered_count differs\n" + describe(program));
  }
}

}  // namespace
}  // namespace magpie::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  magpie::fuzz::input_decoder in(data, size);
  magpie::fuzz::run_program(magpie::fuzz::decode_ticks(in));
  return 0;
}
