// One game frame written twice: the way Unreal's TaskGraph code is written (graph tasks,
// a null task gathering the simulation, dont_complete_until, render commands sent to the
// rendering thread in order, an Async with next), ported name by name with
// <magpie/taskgraph.h> and <magpie/async.h>; and the same frame in magpie's native API.
// Both must produce the same frame. See docs/porting-from-unreal.md.
//
//   taskgraph_port 10000 5 --threads 3
#include "example_options.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace magpie::taskgraph;

struct entity {
  double position;
  double velocity;

  bool operator==(const entity&) const = default;  // both versions do the same arithmetic
};

// frame_result is what a frame leaves behind, compared between the two versions.
struct frame_result {
  std::vector<entity> world;
  int collisions = 0;
  std::vector<std::string> render_log;  // what the rendering thread drew, in order
  std::string stats;

  bool operator==(const frame_result&) const = default;
};

constexpr std::size_t chunk_size = 256;
constexpr double floor_height = 0.0;

void simulate(std::vector<entity>& world, std::size_t first, std::size_t last) {
  for (std::size_t i = first; i < last; ++i) {
    world[i].velocity -= 9.81 / 60.0;
    world[i].position += world[i].velocity / 60.0;
  }
}

int bounce(std::vector<entity>& world, std::size_t first, std::size_t last) {
  int bounced = 0;
  for (std::size_t i = first; i < last; ++i) {
    if (world[i].position < floor_height) {
      world[i].position = floor_height - world[i].position;
      world[i].velocity = -0.8 * world[i].velocity;
      ++bounced;
    }
  }
  return bounced;
}

double energy(const std::vector<entity>& world) {
  double total = 0.0;
  for (const entity& each : world) total += 0.5 * each.velocity * each.velocity + 9.81 * each.position;
  return total;
}

std::string draw(const std::vector<entity>& world, std::size_t first, std::size_t last) {
  double highest = 0.0;
  for (std::size_t i = first; i < last; ++i) highest = std::max(highest, world[i].position);
  return "chunk " + std::to_string(first / chunk_size) + " top " + std::to_string(std::lround(highest * 1000));
}

// --- the TaskGraph way ------------------------------------------------------------------

// collide is a graph task as Unreal code writes one: it splits its work into one nested
// task per half and completes only when both are done (DontCompleteUntil).
class collide_task {
 public:
  collide_task(std::vector<entity>* world, std::vector<int>* bounced) : world_(world), bounced_(bounced) {}
  named_threads::type get_desired_thread() const { return named_threads::any_hi_pri_thread_normal_task; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  const char* get_debug_name() const { return "collide"; }
  void do_task(named_threads::type, const graph_event_ref& my_completion_event) {
    std::size_t half = world_->size() / 2;
    std::vector<entity>* world = world_;
    std::vector<int>* bounced = bounced_;
    my_completion_event->dont_complete_until(function_graph_task::create_and_dispatch_when_ready(
        [world, bounced, half] { (*bounced)[1] = bounce(*world, half, world->size()); }, "collide upper half"));
    (*bounced)[0] = bounce(*world, 0, half);
  }

 private:
  std::vector<entity>* world_;
  std::vector<int>* bounced_;
};

frame_result taskgraph_frame(task_graph_interface& graph, std::vector<entity> world) {
  frame_result result;
  std::vector<int> bounced(2, 0);

  // Simulation in chunks, gathered into one event by a null task.
  graph_event_array chunks;
  for (std::size_t first = 0; first < world.size(); first += chunk_size) {
    std::size_t last = std::min(first + chunk_size, world.size());
    chunks.add(function_graph_task::create_and_dispatch_when_ready([&world, first, last] { simulate(world, first, last); },
                                                                   "simulate"));
  }
  graph_event_ref simulated =
      graph_task<null_graph_task>::create_task(&chunks).construct_and_dispatch_when_ready("simulated");
  graph_event_array after_simulation{simulated};
  graph_event_ref collided =
      graph_task<collide_task>::create_task(&after_simulation).construct_and_dispatch_when_ready(&world, &bounced);
  graph.wait_until_task_completes(collided, named_threads::game_thread);
  result.collisions = bounced[0] + bounced[1];

  // Render commands from the game thread, run by the rendering thread in the order sent.
  graph_event_ref last_command;
  for (std::size_t first = 0; first < world.size(); first += chunk_size) {
    std::size_t last = std::min(first + chunk_size, world.size());
    last_command = function_graph_task::create_and_dispatch_when_ready(
        [&result, &world, first, last] { result.render_log.push_back(draw(world, first, last)); }, "render command",
        nullptr, named_threads::get_render_thread());
  }

  // Statistics off the game thread, formatted by a continuation.
  magpie::future<std::string> stats =
      magpie::async(magpie::async_execution::task_graph, [&world] { return energy(world); }).next([](double total) {
        return "energy " + std::to_string(std::lround(total));
      });
  result.stats = stats.consume();
  graph.wait_until_task_completes(last_command, named_threads::game_thread);  // the render fence
  result.world = std::move(world);
  return result;
}

// --- the native way ---------------------------------------------------------------------

frame_result native_frame(std::vector<entity> world) {
  frame_result result;
  std::vector<int> bounced(2, 0);

  std::vector<magpie::task<>> chunks;
  for (std::size_t first = 0; first < world.size(); first += chunk_size) {
    std::size_t last = std::min(first + chunk_size, world.size());
    chunks.push_back(magpie::launch("simulate", [&world, first, last] { simulate(world, first, last); }));
  }
  magpie::task<> collided = magpie::launch(
      "collide",
      [&world, &bounced] {
        std::size_t half = world.size() / 2;
        magpie::add_nested(magpie::launch("collide upper half",
                                          [&world, &bounced, half] { bounced[1] = bounce(world, half, world.size()); }));
        bounced[0] = bounce(world, 0, half);
      },
      magpie::when_all(chunks), magpie::priority::high);
  collided.wait();
  result.collisions = bounced[0] + bounced[1];

  magpie::task<> last_command;
  for (std::size_t first = 0; first < world.size(); first += chunk_size) {
    std::size_t last = std::min(first + chunk_size, world.size());
    last_command = magpie::launch(
        "render command", [&result, &world, first, last] { result.render_log.push_back(draw(world, first, last)); },
        magpie::on_thread(magpie::named_thread::render));
  }

  magpie::task<double> total = magpie::launch("energy", [&world] { return energy(world); });
  magpie::task<std::string> stats = magpie::launch(
      "format", [total] { return "energy " + std::to_string(std::lround(total.get_result())); }, total,
      magpie::run_inline);
  result.stats = stats.get_result();
  last_command.wait();
  result.world = std::move(world);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t entities = 10000;
  int frames = 5;
  unsigned threads = 3;
  CLI::App app{"one game frame as Unreal's TaskGraph code writes it, and natively; both must agree"};
  app.add_option("entities", entities, "simulated entities (default 10000)");
  app.add_option("frames", frames, "frames to run (default 5)")->check(CLI::Range(1, 1'000'000));
  example::add_threads_option(app, threads);
  CLI11_PARSE(app, argc, argv);
  auto scheduler = example::make_scheduler(threads);  // the game thread is one of them; the render thread is extra
  magpie::scheduler& pool = *scheduler;
  task_graph_interface graph(pool);
  graph.attach_to_thread(named_threads::game_thread);

  // The rendering thread, as Unreal's RenderingThreadMain: attach, serve, detach.
  std::atomic<bool> rendering{false};
  std::thread render([&] {
    graph.attach_to_thread(named_threads::actual_rendering_thread);
    named_threads::set_render_thread(named_threads::actual_rendering_thread);
    rendering = true;
    graph.process_thread_until_request_return(named_threads::actual_rendering_thread);
    named_threads::set_render_thread(named_threads::game_thread);
    pool.detach();
  });
  while (!rendering.load()) std::this_thread::yield();

  std::vector<entity> world(entities);
  for (std::size_t i = 0; i < entities; ++i) {
    world[i] = {static_cast<double>(i % 97) * 0.01, -static_cast<double>(i % 13) * 0.2};
  }

  int collisions = 0;
  auto started = std::chrono::steady_clock::now();
  for (int frame = 0; frame < frames; ++frame) {
    frame_result ported = taskgraph_frame(graph, world);
    frame_result native = native_frame(world);
    if (!(ported == native)) {
      std::fprintf(stderr, "frame %d: the TaskGraph port and the native frame differ\n", frame);
      return 1;
    }
    collisions += ported.collisions;
    world = std::move(ported.world);
  }
  graph.request_return(named_threads::actual_rendering_thread);
  render.join();
  pool.detach();
  std::printf("%d frame%s of %zu entit%s: both versions agree (%d bounce%s, energy %ld): %.3f ms on %u thread%s + the render thread\n",
              frames, example::plural_suffix(frames), entities, entities == 1 ? "y" : "ies", collisions, example::plural_suffix(collisions),
              std::lround(energy(world)), example::seconds_since(started) * 1e3, threads, example::plural_suffix(threads));
  return 0;
}
