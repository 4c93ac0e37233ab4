// A small game loop on magpie: the game thread drives a world (tick groups, timers,
// tickables); a render thread, attached as a named thread, receives one render command per
// frame, in order; thousands of actor components tick with prerequisites — movement before
// animation before render data — some far-away animations only every 0.1 s.
//   examples/engine_frame 2000 300 --threads 2   prints frame time p50/p99 per group and the
//                                                last frame's lower bound and efficiency
//   examples/engine_frame --trace frame.json     also records the last three frames as a trace
//                                                (open it in ui.perfetto.dev, or tools/trace_view.py)
#include "example_options.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using magpie::level_tick;
using magpie::ticking_group;
using clock_type = std::chrono::steady_clock;

// An actor with three components, each a tick function: movement before animation before
// render data. The frame counter lets animation check that movement ran first this frame.
struct actor {
  actor(const magpie::world& game, std::atomic<int>& broken_edges)
      : movement("movement", [this, &game](float dt, level_tick) {
          position += velocity * dt;
          moved_in = game.frame_counter();
        }),
        animation("animation", [this, &game, &broken_edges](float, level_tick) {
          if (moved_in != game.frame_counter()) broken_edges.fetch_add(1);
          pose = position * 0.5f;
        }),
        render_data("render data", [this](float, level_tick) { render_position = pose; }) {}

  float position = 0, velocity = 1, pose = 0, render_position = 0;
  std::uint64_t moved_in = 0;
  magpie::tick_function movement, animation, render_data;
};

// mark records when the game thread reaches a group: a high-priority game-thread tick runs
// first in its group, so the gaps between marks are the groups' times.
struct group_marks {
  static constexpr int count = 6;
  static constexpr const char* names[count] = {"pre+start_physics", "during+end_physics", "post_physics",
                                               "timers+tickables", "post_update_work", "last_demotable"};
  std::vector<clock_type::time_point> now = std::vector<clock_type::time_point>(count + 1);
  std::vector<std::vector<double>> micros = std::vector<std::vector<double>>(count);
};

// hud is a tickable object: it ticks after the timers, on the game thread.
struct hud : magpie::tickable_object {
  hud(magpie::world& owner, group_marks& marks) : tickable_object(owner, magpie::tickable_tick_type::always), marks_(&marks) {}
  void tick(float) override {
    marks_->now[3] = clock_type::now();
    ++frames_shown;
  }
  int frames_shown = 0;

 private:
  group_marks* marks_;
};

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p / 100 * static_cast<double>(values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int actor_count = 2000;
  int frame_count = 300;
  std::string trace_path;
  unsigned threads = example::default_threads();
  CLI::App app{"a game loop on magpie: tick groups, timers, a render thread, thousands of ticking components"};
  app.add_option("actors", actor_count, "actors, three tick functions each (default 2000)")->check(CLI::Range(0, 1'000'000));
  app.add_option("frames", frame_count, "frames to run (default 300)")->check(CLI::Range(1, 1'000'000));
  example::add_threads_option(app, threads);
  app.add_option("--trace", trace_path, "record the last three frames into this file (Chrome trace-event JSON)");
  CLI11_PARSE(app, argc, argv);
  const char* trace_file = trace_path.empty() ? nullptr : trace_path.c_str();
  auto scheduler = example::make_scheduler(threads);  // this thread, the game thread, is one of them
  magpie::scheduler& pool = *scheduler;
  magpie::world game(pool, {.measure_tick_times = true});  // each frame's lower bound and efficiency

  // The render thread: attached as named_thread::render, it runs what the game sends it.
  std::atomic<std::uint64_t> last_drawn{0};
  std::atomic<int> out_of_order{0};
  std::thread render([&] {
    pool.attach(magpie::named_thread::render);
    pool.process_until_request_return(magpie::named_thread::render);
    pool.detach();
  });

  std::atomic<int> broken_edges{0};
  std::vector<std::unique_ptr<actor>> actors;
  for (int i = 0; i < actor_count; ++i) {
    actor& a = *actors.emplace_back(std::make_unique<actor>(game, broken_edges));
    a.velocity = 1.f + static_cast<float>(i % 7);
    a.movement.set_run_on_any_thread(true);
    a.animation.set_run_on_any_thread(true);
    a.animation.set_tick_group(ticking_group::during_physics);
    a.animation.set_end_tick_group(ticking_group::end_physics);
    if (i % 4 == 3) a.animation.set_tick_interval(0.1f);  // far away: animated ten times a second
    a.render_data.set_tick_group(ticking_group::post_physics);
    a.render_data.set_allow_tick_batching(true);  // game thread, cheap: one task for all of them
    a.animation.add_prerequisite(a.movement);
    a.render_data.add_prerequisite(a.animation);
    for (magpie::tick_function* component : {&a.movement, &a.animation, &a.render_data}) {
      component->register_tick_function(game.ticks());
    }
  }

  group_marks marks;
  constexpr ticking_group marked[] = {ticking_group::pre_physics, ticking_group::during_physics,
                                      ticking_group::post_physics, ticking_group::post_update_work,
                                      ticking_group::last_demotable};
  constexpr int mark_slot[] = {0, 1, 2, 4, 5};
  std::vector<std::unique_ptr<magpie::tick_function>> markers;
  for (int m = 0; m < 5; ++m) {
    int slot = mark_slot[m];
    auto& marker = *markers.emplace_back(std::make_unique<magpie::tick_function>(
        "mark", [&marks, slot](float, level_tick) { marks.now[static_cast<std::size_t>(slot)] = clock_type::now(); }));
    marker.set_tick_group(marked[m]);
    marker.set_end_tick_group(marked[m]);
    marker.set_high_priority(true);
    marker.register_tick_function(game.ticks());
  }

  // The frame's last game-thread tick sends the render thread its command for the frame.
  magpie::tick_function submit("submit frame", [&](float, level_tick) {
    float sum = 0;
    for (const auto& a : actors) sum += a->render_position;
    std::uint64_t frame = game.frame_counter();
    pool.launch("draw frame", [&, frame, sum] {
      if (frame != last_drawn.load() + 1) out_of_order.fetch_add(1);
      last_drawn.store(frame);
      volatile float drawn = sum;  // stands in for the draw calls
      (void)drawn;
    }, magpie::on_thread(magpie::named_thread::render));
  });
  submit.set_tick_group(ticking_group::post_update_work);
  submit.register_tick_function(game.ticks());

  int waves = 0, thoughts = 0;
  magpie::timer_handle spawn_timer, think_timer;
  game.timers().set_timer(spawn_timer, [&] { ++waves; }, 1.f, /*loop=*/true);
  game.timers().set_timer(think_timer, [&] { ++thoughts; }, 0.25f, /*loop=*/true);
  hud overlay(game, marks);

  auto started = std::chrono::steady_clock::now();
  std::vector<double> frame_micros;
  magpie::trace::name_this_thread("game thread");
  for (int frame = 0; frame < frame_count; ++frame) {
    if (trace_file != nullptr && frame == std::max(frame_count - 3, 0)) magpie::trace::start();
    clock_type::time_point start = clock_type::now();
    game.tick(1.f / 60);
    clock_type::time_point end = clock_type::now();
    marks.now[group_marks::count] = end;
    frame_micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    for (int g = 0; g < group_marks::count; ++g) {
      marks.micros[static_cast<std::size_t>(g)].push_back(std::chrono::duration<double, std::micro>(
          marks.now[static_cast<std::size_t>(g + 1)] - marks.now[static_cast<std::size_t>(g)]).count());
    }
  }
  while (last_drawn.load() != static_cast<std::uint64_t>(frame_count)) std::this_thread::yield();
  pool.request_return(magpie::named_thread::render);
  render.join();
  if (trace_file != nullptr) {
    std::printf("trace of the last frames: %zu events in %s\n", magpie::trace::write_chrome_json(trace_file), trace_file);
  }

  auto stats = game.ticks().last_frame_stats();
  std::size_t tick_functions = game.ticks().registered_count();
  std::printf("%d actor%s, %zu tick function%s, %d frame%s on %u worker%s + the game thread: %.3f ms\n", actor_count,
              example::plural_suffix(actor_count), tick_functions, example::plural_suffix(static_cast<long long>(tick_functions)),
              frame_count, example::plural_suffix(frame_count), pool.worker_count(), example::plural_suffix(pool.worker_count()),
              example::seconds_since(started) * 1e3);
  std::printf("last frame: %zu tick%s in %zu task%s (%zu batch%s), schedule %s\n", stats.ticks_run,
              example::plural_suffix(static_cast<long long>(stats.ticks_run)), stats.tasks_launched,
              example::plural_suffix(static_cast<long long>(stats.tasks_launched)), stats.batches,
              stats.batches == 1 ? "" : "es", stats.schedule_rebuilt ? "rebuilt" : "reused");
  std::printf("last frame: %.1f us, lower bound %.1f us (game thread %.1f us, any thread %.1f us): efficiency %.2f\n",
              stats.frame_seconds * 1e6, stats.lower_bound_seconds * 1e6, stats.game_thread_seconds * 1e6,
              stats.any_thread_seconds * 1e6, stats.efficiency);
  std::printf("%-20s %10s %10s\n", "group", "p50 us", "p99 us");
  for (int g = 0; g < group_marks::count; ++g) {
    const auto& times = marks.micros[static_cast<std::size_t>(g)];
    std::printf("%-20s %10.1f %10.1f\n", group_marks::names[g], percentile(times, 50), percentile(times, 99));
  }
  std::printf("%-20s %10.1f %10.1f\n", "whole frame", percentile(frame_micros, 50), percentile(frame_micros, 99));
  std::printf("timers: %d waves, %d thoughts; hud showed %d frames; render drew %llu frames\n", waves, thoughts,
              overlay.frames_shown, static_cast<unsigned long long>(last_drawn.load()));
  // A timer set before the first frame counts from the end of it: one period fewer, at most.
  bool ok = broken_edges.load() == 0 && out_of_order.load() == 0 && overlay.frames_shown == frame_count &&
            waves >= frame_count / 60 - 1 && thoughts >= frame_count / 15 - 1;
  if (!ok) std::printf("FAILED: %d broken edges, %d frames drawn out of order\n", broken_edges.load(), out_of_order.load());
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
