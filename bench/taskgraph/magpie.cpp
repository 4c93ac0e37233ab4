// The compatibility layer's cost: TaskGraph function tasks one at a time and in
// a batch, and a graph-task chain, each timed in pairs against magpie's own launch doing
// the same (the *_over_launch rows are that ratio); a future `next` chain; an async_pool
// round trip and queued-thread-pool throughput. Peers: bench/taskgraph/tbb.cpp (task_group
// for the same shapes) and bench/taskgraph/std.cpp (std::promise/std::future with a thread
// hand-off, a std::thread + mutex-queue pool). "N threads" = N − 1 workers + this thread,
// attached as the game thread; the pool rows use a pool of N threads.
#include "../common/harness.h"
#include "../common/magpie_threads.h"

#include <magpie/magpie.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace magpie::taskgraph;

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

void launch_one_at_a_time(magpie::scheduler& pool, std::size_t count) {
  std::size_t ran = 0;
  for (std::size_t i = 0; i < count; ++i) pool.launch("empty", [&ran] { ++ran; }).wait();
  check(ran == count, "launch one at a time");
}

void function_task_one_at_a_time(std::size_t count) {
  std::size_t ran = 0;
  for (std::size_t i = 0; i < count; ++i) {
    function_graph_task::create_and_dispatch_when_ready([&ran] { ++ran; }, "empty")->wait();
  }
  check(ran == count, "function task one at a time");
}

void launch_batch(magpie::scheduler& pool, std::size_t count, std::vector<magpie::task<>>& handles) {
  bench::padded_atomic<std::size_t> ran{0};
  for (std::size_t i = 0; i < count; ++i) {
    handles.push_back(pool.launch("empty", [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: read after the wait
  }
  magpie::wait_all(handles);
  handles.clear();
  check(ran.load() == count, "launch batch");
}

void function_task_batch(task_graph_interface& graph, std::size_t count, graph_event_array& events) {
  bench::padded_atomic<std::size_t> ran{0};
  for (std::size_t i = 0; i < count; ++i) {
    events.add(function_graph_task::create_and_dispatch_when_ready(
        [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }, "empty"));  // relaxed: read after the wait
  }
  graph.wait_until_tasks_complete(events);
  events.reset();
  check(ran.load() == count, "function task batch");
}

void launch_chain(magpie::scheduler& pool, std::size_t count) {
  std::size_t hops = 0;
  magpie::task<> last;
  for (std::size_t i = 0; i < count; ++i) last = pool.launch("hop", [&hops] { ++hops; }, last);
  last.wait();
  check(hops == count, "launch chain");
}

// hop is the graph task of the chain: what a TaskGraph port of a dependent step looks like.
struct hop {
  std::size_t* hops;
  named_threads::type get_desired_thread() const { return named_threads::any_thread; }
  static subsequents_mode get_subsequents_mode() { return subsequents_mode::track_subsequents; }
  void do_task(named_threads::type, const graph_event_ref&) { ++*hops; }
};

void graph_task_chain(std::size_t count) {
  std::size_t hops = 0;
  graph_event_array previous;
  for (std::size_t i = 0; i < count; ++i) {
    graph_event_ref next = graph_task<hop>::create_task(previous.empty() ? nullptr : &previous)
                               .construct_and_dispatch_when_ready(&hops);
    previous.reset();
    previous.add(std::move(next));
  }
  previous[0]->wait();
  check(hops == count, "graph task chain");
}

void next_chain(std::size_t links) {
  magpie::promise<std::size_t> head;
  magpie::future<std::size_t> chain = head.get_future();
  for (std::size_t i = 0; i < links; ++i) chain = std::move(chain).next([](std::size_t value) { return value + 1; });
  head.set_value(0);
  check(chain.get() == links, "next chain");
}

void async_pool_round_trips(magpie::queued_thread_pool& pool, std::size_t count) {
  std::size_t sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += magpie::async_pool(pool, [i] { return i; }).get();
  check(sum == count * (count - 1) / 2, "async_pool round trips");
}

// counting_work counts down `left`; the last one wakes the thread waiting for them all.
class counting_work final : public magpie::queued_work {
 public:
  explicit counting_work(std::atomic<std::size_t>* left) : left_(left) {}
  void do_threaded_work() override {
    // acq_rel: the last one's release pairs with the waiter's acquire
    if (left_->fetch_sub(1, std::memory_order_acq_rel) == 1) left_->notify_one();
  }
  void abandon() override {}

 private:
  std::atomic<std::size_t>* left_;
};

void pool_throughput(magpie::queued_thread_pool& pool, std::vector<counting_work>& items, std::atomic<std::size_t>& left) {
  left.store(items.size());
  for (auto& item : items) pool.add_queued_work(&item);
  // acquire: pairs with the last work's release
  for (std::size_t seen = left.load(std::memory_order_acquire); seen != 0; seen = left.load(std::memory_order_acquire)) {
    left.wait(seen);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "magpie TaskGraph-compatibility benchmarks");
  const std::size_t singles = chosen.quick ? (1u << 15) : (1u << 17);
  const std::size_t batch = chosen.quick ? (1u << 17) : (1u << 20);
  const std::size_t chain = chosen.quick ? (1u << 16) : (1u << 20);
  const std::size_t links = chosen.quick ? (1u << 12) : (1u << 15);  // std's peer pays a futex hand-off per link
  const std::size_t round_trips = chosen.quick ? 2000 : 20000;
  const std::size_t pool_items = chosen.quick ? (1u << 15) : (1u << 17);

  for (unsigned threads : chosen.threads) {
    magpie::scheduler pool(bench::magpie_options(threads));
    pool.attach(magpie::named_thread::game);  // the free functions then use `pool`
    task_graph_interface graph(pool);

    std::vector<double> seconds;
    auto singly = bench::time_pairs(
        chosen.runs, [&] { launch_one_at_a_time(pool, singles); }, [&] { function_task_one_at_a_time(singles); },
        seconds);
    bench::record(chosen, "magpie", "tg_function_task_one_at_a_time", std::to_string(singles), threads, seconds, singles);
    bench::record(chosen, "magpie", "tg_function_task_one_at_a_time_over_launch", std::to_string(singles), threads,
                  singly, 0, "ratio");

    {  // the batch's handle arrays (a million entries each) are freed before the rows below
      std::vector<magpie::task<>> handles;
      handles.reserve(batch);
      graph_event_array events;
      events.reserve(batch);
      seconds.clear();
      auto batched = bench::time_pairs(
          chosen.runs, [&] { launch_batch(pool, batch, handles); }, [&] { function_task_batch(graph, batch, events); },
          seconds);
      bench::record(chosen, "magpie", "tg_function_task_batch", std::to_string(batch), threads, seconds, batch);
      bench::record(chosen, "magpie", "tg_function_task_batch_over_launch", std::to_string(batch), threads, batched, 0,
                    "ratio");
    }

    seconds.clear();
    auto chained = bench::time_pairs(
        chosen.runs, [&] { launch_chain(pool, chain); }, [&] { graph_task_chain(chain); }, seconds);
    bench::record(chosen, "magpie", "tg_graph_task_chain", std::to_string(chain), threads, seconds, chain);
    bench::record(chosen, "magpie", "tg_graph_task_chain_over_launch", std::to_string(chain), threads, chained, 0,
                  "ratio");

    auto continued = bench::time_runs(chosen.runs, [&] { next_chain(links); });
    bench::record(chosen, "magpie", "future_next_chain", std::to_string(links), threads, continued, links);
    pool.detach();
    // The pool rows' peak memory is their own: the batch and chain rows leave this thread's
    // task pool holding the slabs of a million tasks, which it keeps for the next burst.
    magpie::trim_task_memory();

    magpie::queued_thread_pool queued;
    queued.create(threads, 0, "bench pool");
    auto trips = bench::time_runs(chosen.runs, [&] { async_pool_round_trips(queued, round_trips); });
    bench::record(chosen, "magpie", "async_pool_round_trip", std::to_string(round_trips), threads, trips, round_trips);

    std::atomic<std::size_t> left{0};
    std::vector<counting_work> items(pool_items, counting_work(&left));
    auto throughput = bench::time_runs(chosen.runs, [&] { pool_throughput(queued, items, left); });
    bench::record(chosen, "magpie", "thread_pool_throughput", std::to_string(pool_items), threads, throughput, pool_items);
  }
}
