// A consumer's translation unit that ports Unreal code through magpie's compatibility
// layer — TaskGraph graph tasks and events, Async with futures and continuations, the
// queued thread pool — so that the warnings of its template and inline code show under the
// consumer's flags (check_headers.py compiles it; it runs as a program in the consumer
// sanitizer builds, where it must exit 0).
#include <magpie/async.h>
#include <magpie/taskgraph.h>
#include <magpie/thread_pool.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

using namespace magpie::taskgraph;

namespace {

// split_task is a graph task as Unreal code writes one: it completes only when the nested
// task it hands to its completion event has completed too.
class split_task {
 public:
  explicit split_task(std::vector<int>* halves) : halves_(halves) {}
  named_threads::type get_desired_thread() const { return named_threads::any_hi_pri_thread_normal_task; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  const char* get_debug_name() const { return "split"; }
  void do_task(named_threads::type, const graph_event_ref& my_completion_event) {
    std::vector<int>* halves = halves_;
    my_completion_event->dont_complete_until(
        function_graph_task::create_and_dispatch_when_ready([halves] { (*halves)[1] = 2; }, "upper half"));
    (*halves)[0] = 1;
  }

 private:
  std::vector<int>* halves_;
};

// counted_work is queued_work that counts its runs and its abandonments.
class counted_work final : public magpie::queued_work {
 public:
  explicit counted_work(std::atomic<int>& done) : done_(&done) {}
  void do_threaded_work() override { done_->fetch_add(1); }
  void abandon() override { done_->fetch_add(1); }

 private:
  std::atomic<int>* done_;
};

bool graph_tasks() {
  task_graph_interface& graph = task_graph_interface::get();
  std::atomic<int> chunks_done{0};
  graph_event_array chunks;
  for (int i = 0; i < 8; ++i) {
    chunks.add(function_graph_task::create_and_dispatch_when_ready([&chunks_done] { chunks_done.fetch_add(1); }, "chunk"));
  }
  graph_event_ref gathered = graph_task<null_graph_task>::create_task(&chunks).construct_and_dispatch_when_ready("gathered");
  std::vector<int> halves(2, 0);
  graph_event_array after{gathered};
  graph_event_ref split = graph_task<split_task>::create_task(&after).construct_and_dispatch_when_ready(&halves);
  graph.wait_until_task_completes(split);
  return chunks_done.load() == 8 && halves[0] == 1 && halves[1] == 2;
}

bool futures() {
  magpie::future<std::string> text =
      magpie::async(magpie::async_execution::task_graph, [] { return 21; }).next([](int half) {
        return std::to_string(half * 2);
      });
  magpie::promise<int> promised;
  magpie::future<int> kept = promised.get_future();
  promised.set_value(7);
  return text.consume() == "42" && kept.get() == 7;
}

bool thread_pool() {
  std::atomic<int> done{0};
  std::vector<counted_work> work(16, counted_work(done));
  {
    magpie::queued_thread_pool pool;
    if (!pool.create(2, 0, "consumer pool")) return false;
    for (counted_work& each : work) pool.add_queued_work(&each);
    pool.destroy();  // runs or abandons each: never neither
  }
  return done.load() == 16;
}

}  // namespace

int main() {
  bool ok = true;
  for (auto [part, passes] : {std::pair{"graph tasks", &graph_tasks}, {"futures", &futures}, {"thread pool", &thread_pool}}) {
    if (!passes()) {
      std::printf("compat api: %s FAILED\n", part);
      ok = false;
    }
  }
  std::puts(ok ? "compat api: ok" : "compat api: FAILED");
  return ok ? 0 : 1;
}
