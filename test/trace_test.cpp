// Tracing (magpie/trace.h): known graphs recorded, the file read back as JSON and checked
// for what the viewer relies on — valid trace-event objects, slices nested per thread,
// every started task finished, arrows whose ends are the right tasks' slices.
#include "../lib/trace/trace_buffers.h"
#include "support.h"
#include "task_support.h"

#include <magpie/magpie.h>
#include <magpie/trace.h>
#include <magpie/world.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;
namespace trace = magpie::trace;

std::filesystem::path scratch_file(const char* name) {
  return std::filesystem::temp_directory_path() /
         (std::string("magpie-trace-") + name + "-" + std::to_string(::getpid()) + ".json");
}

// written writes what was recorded and reads it back.
json written(const char* name) {
  auto path = scratch_file(name);
  std::size_t count = trace::write_chrome_json(path);
  std::ifstream file(path);
  json read = json::parse(file);
  std::filesystem::remove(path);
  REQUIRE(read.contains("traceEvents"));
  CHECK(read["traceEvents"].size() == count);
  return read["traceEvents"];
}

// check_well_formed checks every event has the fields its phase needs, and that on each
// thread every "E" closes an open "B" (none left open). One CHECK each, not one per event.
void check_well_formed(const json& events) {
  std::map<int, int> open;
  std::size_t malformed = 0;
  std::size_t unmatched_ends = 0;
  for (const json& e : events) {
    if (!e.contains("ph") || !e["pid"].is_number()) {
      ++malformed;
      continue;
    }
    std::string phase = e["ph"];
    if (phase == "M") continue;
    // Counters belong to the process; everything else to a thread.
    if (!e.contains("ts") || !e["ts"].is_number() || (phase != "C" && !(e.contains("tid") && e["tid"].is_number()))) {
      ++malformed;
      continue;
    }
    if (phase == "C") continue;
    if (phase == "B") ++open[e["tid"].get<int>()];
    if (phase == "E" && open[e["tid"].get<int>()]-- <= 0) ++unmatched_ends;
  }
  CHECK(malformed == 0);
  CHECK(unmatched_ends == 0);
  std::size_t left_open = 0;
  for (auto [tid, depth] : open) left_open += depth > 0 ? 1 : 0;
  CHECK(left_open == 0);
}

std::vector<json> named(const json& events, const std::string& phase, const std::string& name) {
  std::vector<json> found;
  for (const json& e : events) {
    if (e["ph"] == phase && e.value("name", "") == name) found.push_back(e);
  }
  return found;
}

// ends_of gives, per flow id, its start and finish events.
std::map<std::uint64_t, std::pair<json, json>> flows(const json& events, const std::string& name) {
  std::map<std::uint64_t, std::pair<json, json>> found;
  for (const json& e : events) {
    if (e.value("name", "") != name) continue;
    if (e["ph"] == "s") found[e["id"]].first = e;
    if (e["ph"] == "f") found[e["id"]].second = e;
  }
  return found;
}

magpie::scheduler_options workers(unsigned count) {
  magpie::scheduler_options options;
  options.workers = count;
  options.background_workers = 0;
  return options;
}

}  // namespace

TEST_CASE("trace: a diamond's slices, one per task, and an arrow along each edge") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  trace::start();
  auto a = pool.launch("a", [] {});
  auto b = pool.launch("b", [] {}, a);
  auto c = pool.launch("c", [] {}, a);
  auto d = pool.launch("d", [] {}, magpie::prerequisites(b, c));
  d.wait();
  trace::stop();
  json events = written("diamond");
  check_well_formed(events);
  std::map<std::string, json> slice;
  for (const char* name : {"a", "b", "c", "d"}) {
    auto found = named(events, "B", name);
    REQUIRE(found.size() == 1);
    slice[name] = found[0];
  }
  // Each prerequisite arrow starts at its prerequisite's slice and ends at its subsequent's.
  std::set<std::pair<std::string, std::string>> edges;
  for (auto& [id, ends] : flows(events, "prerequisite")) {
    REQUIRE(!ends.first.is_null());
    REQUIRE(!ends.second.is_null());
    std::string from, to;
    for (auto& [name, begin] : slice) {
      if (begin["ts"] == ends.first["ts"] && begin["tid"] == ends.first["tid"]) from = name;
      if (begin["ts"] == ends.second["ts"] && begin["tid"] == ends.second["tid"]) to = name;
    }
    edges.insert({from, to});
  }
  CHECK(edges == std::set<std::pair<std::string, std::string>>{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}});
  // And each launch has an arrow to the task's slice.
  CHECK(flows(events, "launch").size() == 4);
  // The ready-tasks counter rises as tasks are queued and is back at 0 once all started.
  auto ready = named(events, "C", "ready tasks");
  REQUIRE(!ready.empty());
  CHECK(ready.back()["args"]["queued"] == 0);
  CHECK(named(events, "i", "launch d").size() == 1);
}

TEST_CASE("trace: a task a waiter retracts is marked so, on the waiter's thread") {
  trace::clear();
  magpie::scheduler pool(workers(0));
  trace::start();
  pool.launch("taken back", [] {}).wait();
  trace::stop();
  json events = written("retracted");
  check_well_formed(events);
  auto found = named(events, "B", "taken back");
  REQUIRE(found.size() == 1);
  CHECK(found[0]["args"]["retracted"] == true);
}

TEST_CASE("trace: a body that throws ends its slice marked with the exception") {
  trace::clear();
  magpie::scheduler pool(workers(0));
  trace::start();
  auto failing = pool.launch("thrower", []() -> int { throw std::runtime_error("expected"); });
  CHECK_THROWS(failing.get_result());
  trace::stop();
  json events = written("exception");
  check_well_formed(events);
  bool marked = false;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    if (events[i]["ph"] == "B" && events[i]["name"] == "thrower") {
      for (std::size_t j = i + 1; j < events.size(); ++j) {
        if (events[j]["ph"] == "E" && events[j]["tid"] == events[i]["tid"]) {
          marked = events[j].contains("args") && events[j]["args"].value("exception", false);
          break;
        }
      }
    }
  }
  CHECK(marked);
}

TEST_CASE("trace: a nested task's arrow ends at its parent's completion") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  trace::start();
  magpie::task_event gate("gate", pool);
  auto parent = pool.launch("parent", [&] {
    magpie::add_nested(pool.launch("child", [] {}, gate));
    gate.trigger();
  });
  parent.wait();
  trace::stop();
  json events = written("nested");
  check_well_formed(events);
  auto arrows = flows(events, "nested");
  REQUIRE(arrows.size() == 1);
  auto child = named(events, "B", "child");
  auto parent_done = named(events, "i", "complete parent");
  REQUIRE(child.size() == 1);
  REQUIRE(parent_done.size() == 1);
  CHECK(arrows.begin()->second.first["ts"] == child[0]["ts"]);
  CHECK(arrows.begin()->second.second["ts"] == parent_done[0]["ts"]);
}

TEST_CASE("trace: a blocking wait is a slice naming the task waited for") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  trace::start();
  auto slow = pool.launch("slow", [&] {
    started = true;
    while (!release.load()) std::this_thread::yield();
  });
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  // The worker must have it: a wait that finds it still queued runs it instead of blocking.
  while (!started.load()) std::this_thread::yield();
  slow.wait();
  releaser.join();
  trace::stop();
  json events = written("wait");
  check_well_formed(events);
  bool found = false;
  for (const json& e : named(events, "B", "wait")) found = found || e["args"]["task"] == "slow";
  CHECK(found);
}

TEST_CASE("trace: pipe tasks are slices one after another") {
  trace::clear();
  magpie::scheduler pool(workers(2));
  magpie::pipe in_order("order", pool);
  trace::start();
  std::vector<magpie::task<>> runs;
  for (int i = 0; i < 20; ++i) runs.push_back(in_order.launch("piped", [] {}));
  magpie::wait_all(runs);
  trace::stop();
  json events = written("pipe");
  check_well_formed(events);
  auto begins = named(events, "B", "piped");
  CHECK(begins.size() == 20);
  // Their slices never overlap: pair each B with its E (same thread, next E at that depth).
  std::vector<std::pair<double, double>> spans;
  std::map<int, std::vector<std::pair<std::string, double>>> open;
  for (const json& e : events) {
    if (e["ph"] == "B") open[e["tid"]].push_back({e["name"], e["ts"].get<double>()});
    if (e["ph"] == "E") {
      auto [name, start] = open[e["tid"]].back();
      open[e["tid"]].pop_back();
      if (name == "piped") spans.push_back({start, e["ts"].get<double>()});
    }
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1].second <= spans[i].first);
}

TEST_CASE("trace: user slices, instants and counters; threads are named") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  trace::start();
  {
    trace::scope frame("frame");
    trace::instant("marker");
    trace::counter("queue depth", 3.5);
    pool.launch("on a worker", [] {}).wait();
  }
  trace::stop();
  json events = written("user");
  check_well_formed(events);
  CHECK(named(events, "B", "frame").size() == 1);
  CHECK(named(events, "i", "marker").size() == 1);
  auto values = named(events, "C", "queue depth");
  REQUIRE(values.size() == 1);
  CHECK(values[0]["args"]["value"] == 3.5);
  std::set<std::string> thread_names;
  for (const json& e : named(events, "M", "thread_name")) thread_names.insert(e["args"]["name"]);
  CHECK(thread_names.size() >= 1);
}

TEST_CASE("trace: a worker's track is named, and shows it parking and the count of parked workers") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  trace::start();
  pool.launch("wakes the worker", [] {});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it runs the task, spins, parks
  trace::stop();
  json events = written("parking");
  check_well_formed(events);
  int worker_tid = -1;
  for (const json& e : named(events, "M", "thread_name")) {
    if (e["args"]["name"] == "worker 0") worker_tid = e["tid"];
  }
  REQUIRE(worker_tid != -1);
  bool parked = false;
  for (const json& e : named(events, "B", "parked")) parked = parked || e["tid"] == worker_tid;
  CHECK(parked);
  CHECK(!named(events, "C", "parked workers").empty());
}

TEST_CASE("trace: a world's frame shows its tick groups on the game thread with each tick inside") {
  trace::clear();
  magpie::scheduler pool(workers(1));
  magpie::world game(pool);
  int ran = 0;
  magpie::tick_function early("early tick", [&](float, magpie::level_tick) { ++ran; });
  magpie::tick_function late("late tick", [&](float, magpie::level_tick) { ++ran; });
  late.set_tick_group(magpie::ticking_group::post_physics);
  early.register_tick_function(game.ticks());
  late.register_tick_function(game.ticks());
  magpie::timer_handle timer;
  game.timers().set_timer(timer, [] {}, 0.001f, false);
  game.tick(1.f / 60);  // the first frame builds the schedule; the traced one reuses it
  trace::start();
  game.tick(1.f / 60);
  trace::stop();
  CHECK(ran == 4);
  json events = written("frame");
  check_well_formed(events);
  // On the game thread, in order: the frame, inside it pre_physics holding "early tick",
  // post_physics holding "late tick". Walk the thread's slices with a stack of names.
  auto frames = named(events, "B", "frame");
  REQUIRE(frames.size() == 1);
  int game_thread = frames[0]["tid"];
  std::vector<std::string> open;
  std::map<std::string, std::vector<std::string>> inside;  // tick → the slices open around it
  for (const json& e : events) {
    if (e.value("tid", -1) != game_thread) continue;  // counters have none
    if (e["ph"] == "B") {
      std::string name = e["name"];
      if (name == "early tick" || name == "late tick") inside[name] = open;
      open.push_back(name);
    } else if (e["ph"] == "E") {
      open.pop_back();
    }
  }
  auto contains = [](const std::vector<std::string>& around, const char* name) {
    return std::find(around.begin(), around.end(), name) != around.end();
  };
  REQUIRE(inside.count("early tick") == 1);
  REQUIRE(inside.count("late tick") == 1);
  CHECK(contains(inside["early tick"], "frame"));
  CHECK(contains(inside["early tick"], "pre_physics"));
  CHECK(contains(inside["late tick"], "post_physics"));
  CHECK(named(events, "B", "timer").size() == 1);
  CHECK(named(events, "B", "timers").size() == 1);
  CHECK(named(events, "B", "tickables").size() == 1);
}

TEST_CASE("trace: a full ring drops its oldest events, counts them, and still nests") {
  trace::clear();
  magpie::scheduler pool(workers(0));
  trace::options small;
  small.buffer_events_per_thread = 16;
  trace::start(small);
  for (int i = 0; i < 100; ++i) pool.launch("many", [] {}).wait();
  trace::stop();
  json events = written("dropped");
  check_well_formed(events);
  std::uint64_t dropped = 0;
  for (const json& e : events) {
    if (e["ph"] == "i" && e.contains("args") && e["args"].contains("dropped")) dropped += e["args"]["dropped"].get<std::uint64_t>();
  }
  CHECK(dropped > 0);
  CHECK(events.size() < 100);
  trace::start();  // the next recording has the default size again
  trace::stop();
}

TEST_CASE("trace: nothing is recorded while stopped, and what was written is gone") {
  trace::clear();
  magpie::scheduler pool(workers(0));
  pool.launch("unseen", [] {}).wait();
  trace::start();
  CHECK(trace::is_recording());
  pool.launch("seen", [] {}).wait();
  trace::stop();
  CHECK_FALSE(trace::is_recording());
  pool.launch("unseen either", [] {}).wait();
  json events = written("stopped");
  CHECK(named(events, "B", "seen").size() == 1);
  CHECK(named(events, "B", "unseen").empty());
  CHECK(named(events, "B", "unseen either").empty());
  json again = written("again");
  CHECK(named(again, "B", "seen").empty());
}

TEST_CASE("trace: a file that cannot be opened or written is reported, and the recording is kept for the next write") {
  magpie::test::diagnostic_recorder recorder;
  trace::clear();
  magpie::scheduler pool(workers(0));
  trace::start();
  pool.launch("kept", [] {}).wait();
  trace::stop();
  std::filesystem::path missing_folder = scratch_file("missing") / "no" / "such.json";
  CHECK(trace::write_chrome_json(missing_folder) == 0);
  CHECK(recorder.count() == 1);
  std::size_t failures = 1;
  if (std::filesystem::exists("/dev/full")) {  // every write there fails with ENOSPC
    CHECK(trace::write_chrome_json("/dev/full") == 0);
    CHECK(recorder.count() == 2);
    failures = 2;
  }
  for (const auto& each : recorder.reports()) {
    INFO(each.message);
    CHECK(each.message.find("kept") != std::string::npos);
    // A warning: the caller has the 0 returned to act on, and a handler that aborts on
    // errors must leave it the chance of another try.
    CHECK(each.severity == magpie::severity::warning);
  }
  json events = written("kept");
  CHECK(named(events, "B", "kept").size() == 1);
  CHECK(recorder.count() == failures);
  json again = written("kept-again");  // written once: gone now
  CHECK(named(again, "B", "kept").empty());
}

// claimed_buffers counts the trace buffers a thread holds (a live thread's, or one never
// handed back).
int claimed_buffers() {
  int claimed = 0;
  for (auto* each = magpie::detail::tracing::first_buffer(); each != nullptr; each = each->next) {
    claimed += each->claimed.load() ? 1 : 0;
  }
  return claimed;
}

// records_at_exit makes a trace point in its destructor. As a thread_local made before its
// thread's first event, it is destroyed after that thread's buffer went back.
struct records_at_exit {
  ~records_at_exit() { trace::instant("after the buffer went back"); }
};

TEST_CASE("trace: a trace point after the thread's buffer went back at exit leaves no buffer held") {
  trace::start();
  const int before = claimed_buffers();
  for (int i = 0; i < 3; ++i) {
    std::thread([] {
      thread_local records_at_exit late;
      (void)late;
      trace::instant("in");
    }).join();
    CHECK(claimed_buffers() == before);
  }
  trace::stop();
  trace::clear();
}

TEST_CASE("trace: recording from many threads while another writes the file after stop" * doctest::test_suite("stress")) {
  for (int round = 0; round < 5 * magpie::test::stress_repeat(); ++round) {
    trace::clear();
    magpie::scheduler pool(workers(2));
    std::atomic<bool> go_on{true};
    std::atomic<int> finished{0};
    trace::options small;  // keeps the file, and TSan's time reading it, small
    small.buffer_events_per_thread = 1 << 12;
    trace::start(small);
    std::vector<std::thread> launchers;
    for (int t = 0; t < 3; ++t) {
      launchers.emplace_back([&] {
        trace::name_this_thread("launcher");
        while (go_on.load()) {
          trace::scope busy("busy");
          pool.launch("stress", [] { trace::instant("inside"); }).wait();
          finished.fetch_add(1);
        }
      });
    }
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (finished.load() < 100 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    trace::stop();
    json events = written("stress");  // while the launchers still run, not recording
    check_well_formed(events);
    CHECK(!named(events, "B", "stress").empty());
    go_on = false;
    for (auto& launcher : launchers) launcher.join();
  }
  trace::clear();
}
