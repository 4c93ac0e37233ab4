// The standard library's answers to bench/taskgraph/magpie.cpp's future and pool rows:
// a chain of std::promise/std::future links whose values hop between two threads (each
// link a thread hand-off, as a continuation on the completing thread avoids), and a
// std::thread + mutex-queue pool for the async_pool round trip and the pool throughput.
#include "../common/harness.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(bool right, const char* what) {
  if (!right) throw std::runtime_error(std::string("wrong answer: ") + what);
}

// mutex_pool is the plain pool everyone writes first: one locked queue, a condition variable.
class mutex_pool {
 public:
  explicit mutex_pool(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  ~mutex_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& each : threads_) each.join();
  }
  void add(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// hand_off_chain passes a value along `links` promise/future pairs, alternating between
// this thread and a helper: every link is a thread hand-off.
void hand_off_chain(std::size_t links) {
  std::vector<std::promise<std::size_t>> promises(links + 1);
  std::vector<std::future<std::size_t>> futures;
  futures.reserve(links + 1);
  for (auto& each : promises) futures.push_back(each.get_future());
  std::thread helper([&] {
    for (std::size_t i = 1; i < links; i += 2) promises[i + 1].set_value(futures[i].get() + 1);
  });
  promises[0].set_value(0);
  for (std::size_t i = 0; i < links; i += 2) promises[i + 1].set_value(futures[i].get() + 1);
  helper.join();
  check(futures[links].get() == links, "hand-off chain");
}

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "std::future and mutex-pool peers");
  const std::size_t links = chosen.quick ? (1u << 12) : (1u << 15);  // as magpie.cpp's
  const std::size_t round_trips = chosen.quick ? 2000 : 20000;
  const std::size_t pool_items = chosen.quick ? (1u << 15) : (1u << 17);

  for (unsigned threads : chosen.threads) {
    auto handed = bench::time_runs(chosen.runs, [&] { hand_off_chain(links); });  // two threads, whatever `threads` says
    bench::record(chosen, "std", "future_next_chain", std::to_string(links), threads, handed, links);

    mutex_pool pool(threads);
    auto trips = bench::time_runs(chosen.runs, [&] {
      std::size_t sum = 0;
      for (std::size_t i = 0; i < round_trips; ++i) {
        std::packaged_task<std::size_t()> job([i] { return i; });
        std::future<std::size_t> result = job.get_future();
        pool.add([&job] { job(); });
        sum += result.get();
      }
      check(sum == round_trips * (round_trips - 1) / 2, "round trips");
    });
    bench::record(chosen, "std", "async_pool_round_trip", std::to_string(round_trips), threads, trips, round_trips);

    auto throughput = bench::time_runs(chosen.runs, [&] {
      std::atomic<std::size_t> left{pool_items};
      for (std::size_t i = 0; i < pool_items; ++i) {
        pool.add([&left] {
          // acq_rel: the last one's release pairs with the waiter's acquire
          if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) left.notify_one();
        });
      }
      // acquire: pairs with the last item's release
      for (std::size_t seen = left.load(std::memory_order_acquire); seen != 0; seen = left.load(std::memory_order_acquire)) {
        left.wait(seen);
      }
    });
    bench::record(chosen, "std", "thread_pool_throughput", std::to_string(pool_items), threads, throughput, pool_items);
  }
}
