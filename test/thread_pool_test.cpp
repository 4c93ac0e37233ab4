// Suite "thread_pool": Unreal's queued thread pool (include/magpie/thread_pool.h): its own
// threads, FIFO per priority with higher priorities first, retraction, destroy (abandon,
// finish, join), parking, misuse.
#include "support.h"
#include "task_support.h"

#include <magpie/task.h>
#include <magpie/thread_pool.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace magpie;
using test::diagnostic_recorder;

namespace {

// counted_work records what happened to it; it never deletes itself (the test owns it).
class counted_work : public queued_work {
 public:
  explicit counted_work(std::function<void()> body = {}) : body_(std::move(body)) {}
  void do_threaded_work() override {
    if (body_) body_();
    ran.fetch_add(1);
  }
  void abandon() override { abandoned.fetch_add(1); }

  std::atomic<int> ran{0};
  std::atomic<int> abandoned{0};

 private:
  std::function<void()> body_;
};

// gate holds a pool thread inside a work item until opened.
class gate {
 public:
  void open() {
    open_.store(true);
    open_.notify_all();
  }
  void pass() { open_.wait(false); }

 private:
  std::atomic<bool> open_{false};
};

void wait_for(const std::function<bool()>& done) {
  while (!done()) std::this_thread::yield();
}

// threads_named counts the process's threads whose name begins with `prefix`.
std::size_t threads_named(const std::string& prefix) {
  std::size_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name.rfind(prefix, 0) == 0) ++found;
  }
  return found;
}

// wait_until waits at most 10 s for `done` and says whether it came.
bool wait_until(const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_SUITE("thread_pool") {

TEST_CASE("thread_pool: work runs on the pool's own threads, each item once") {
  queued_thread_pool pool;
  REQUIRE(pool.create(3, 0, "test pool"));
  CHECK(pool.get_num_threads() == 3);
  std::mutex mutex;
  std::set<std::thread::id> ran_on;
  std::vector<std::unique_ptr<counted_work>> items;
  for (int i = 0; i < 200; ++i) {
    items.push_back(std::make_unique<counted_work>([&] {
      std::lock_guard lock(mutex);
      ran_on.insert(std::this_thread::get_id());
    }));
    pool.add_queued_work(items.back().get());
  }
  wait_for([&] {
    for (auto& each : items) {
      if (each->ran.load() == 0) return false;
    }
    return true;
  });
  pool.destroy();
  for (auto& each : items) {
    CHECK(each->ran.load() == 1);
    CHECK(each->abandoned.load() == 0);
  }
  CHECK(ran_on.count(std::this_thread::get_id()) == 0);
  CHECK(ran_on.size() <= 3);
  CHECK(pool.get_num_threads() == 0);
}

TEST_CASE("thread_pool: FIFO within a priority, higher priorities first") {
  queued_thread_pool pool;
  REQUIRE(pool.create(1));
  gate held;
  std::atomic<bool> holding{false};
  counted_work blocker([&] {
    holding = true;
    held.pass();
  });
  pool.add_queued_work(&blocker);
  wait_for([&] { return holding.load(); });
  std::string order;
  std::vector<std::unique_ptr<counted_work>> items;
  auto add = [&](char label, queued_work_priority priority) {
    items.push_back(std::make_unique<counted_work>([&order, label] { order += label; }));  // one thread: no race
    pool.add_queued_work(items.back().get(), priority);
  };
  add('n', queued_work_priority::normal);
  add('l', queued_work_priority::lowest);
  add('N', queued_work_priority::normal);
  add('h', queued_work_priority::high);
  add('x', queued_work_priority::highest);
  add('o', queued_work_priority::low);
  add('H', queued_work_priority::high);
  held.open();
  wait_for([&] { return items.back()->ran.load() + items[1]->ran.load() == 2; });
  pool.destroy();
  CHECK(order == "xhHnNol");
}

TEST_CASE("thread_pool: retract_queued_work takes back work not started; it neither runs nor is abandoned") {
  queued_thread_pool pool;
  REQUIRE(pool.create(1));
  gate held;
  std::atomic<bool> holding{false};
  counted_work blocker([&] {
    holding = true;
    held.pass();
  });
  pool.add_queued_work(&blocker);
  wait_for([&] { return holding.load(); });
  counted_work kept;
  counted_work taken;
  pool.add_queued_work(&taken, queued_work_priority::low);
  pool.add_queued_work(&kept);
  CHECK(pool.retract_queued_work(&taken));
  CHECK_FALSE(pool.retract_queued_work(&taken));
  CHECK_FALSE(pool.retract_queued_work(&blocker));  // running: too late
  held.open();
  wait_for([&] { return kept.ran.load() == 1; });
  pool.destroy();
  CHECK(taken.ran.load() == 0);
  CHECK(taken.abandoned.load() == 0);
  CHECK(blocker.ran.load() == 1);
}

TEST_CASE("thread_pool: destroy abandons queued work once each, lets running work finish, and joins") {
  queued_thread_pool pool;
  REQUIRE(pool.create(2));
  gate held;
  std::atomic<int> holding{0};
  std::atomic<bool> finished_after_open{false};
  counted_work first([&] {
    ++holding;
    held.pass();
    finished_after_open = true;
  });
  counted_work second([&] {
    ++holding;
    held.pass();
  });
  pool.add_queued_work(&first);
  pool.add_queued_work(&second);
  wait_for([&] { return holding.load() == 2; });
  std::vector<std::unique_ptr<counted_work>> queued;
  for (int i = 0; i < 10; ++i) {
    queued.push_back(std::make_unique<counted_work>());
    pool.add_queued_work(queued.back().get(), static_cast<queued_work_priority>(i % 5));
  }
  std::thread opener([&] {
    // Opens the gate only once destroy has abandoned the queue: the queued items are gone.
    wait_for([&] {
      for (auto& each : queued) {
        if (each->abandoned.load() == 0) return false;
      }
      return true;
    });
    held.open();
  });
  pool.destroy();
  opener.join();
  CHECK(finished_after_open.load());
  CHECK(first.ran.load() == 1);
  CHECK(second.ran.load() == 1);
  for (auto& each : queued) {
    CHECK(each->abandoned.load() == 1);
    CHECK(each->ran.load() == 0);
  }
  // Work added after destroy is abandoned at once.
  counted_work late;
  pool.add_queued_work(&late);
  CHECK(late.abandoned.load() == 1);
  CHECK(late.ran.load() == 0);
  // And the pool can be created again.
  REQUIRE(pool.create(1));
  counted_work again;
  pool.add_queued_work(&again);
  wait_for([&] { return again.ran.load() == 1; });
}

TEST_CASE("thread_pool: a second destroy while the first joins returns only after the join") {
  queued_thread_pool pool;
  REQUIRE(pool.create(1));
  gate held;
  std::atomic<bool> holding{false};
  std::atomic<bool> finished{false};
  counted_work running([&] {
    holding = true;
    held.pass();
    finished = true;
  });
  counted_work queued;
  pool.add_queued_work(&running);
  wait_for([&] { return holding.load(); });
  pool.add_queued_work(&queued);
  std::thread first([&] { pool.destroy(); });
  wait_for([&] { return queued.abandoned.load() == 1; });  // the first destroy is past the queue: joining
  std::atomic<bool> second_returned{false};
  std::atomic<bool> finished_before_second_returned{false};
  std::thread second([&] {
    pool.destroy();
    finished_before_second_returned = finished.load();
    second_returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(second_returned.load());  // the work still runs: nobody may return yet
  held.open();
  first.join();
  second.join();
  CHECK(finished_before_second_returned.load());
  CHECK(running.ran.load() == 1);
  CHECK(pool.get_num_threads() == 0);
}

TEST_CASE("thread_pool: create from one of the pool's own threads is reported, also while a destroy joins it") {
  diagnostic_recorder recorder;
  queued_thread_pool pool;
  REQUIRE(pool.create(1));
  gate held;
  std::atomic<bool> holding{false};
  std::atomic<int> created{-1};
  counted_work work([&] {
    holding = true;
    held.pass();
    created = pool.create(1) ? 1 : 0;  // the destroy below joins this very thread meanwhile
  });
  counted_work queued;
  pool.add_queued_work(&work);
  wait_for([&] { return holding.load(); });
  pool.add_queued_work(&queued);
  std::thread destroyer([&] { pool.destroy(); });
  wait_for([&] { return queued.abandoned.load() == 1; });
  held.open();
  destroyer.join();
  CHECK(created.load() == 0);
  REQUIRE(recorder.count() == 1);
  CHECK(recorder.reports()[0].message.find("create called from one of its own threads") != std::string::npos);
  CHECK(pool.get_num_threads() == 0);
}

TEST_CASE("thread_pool: destroyed on one of its own threads, the pool runs what is queued, then its threads end") {
  diagnostic_recorder recorder;
  auto* pool = new queued_thread_pool();
  REQUIRE(pool->create(2, 0, "orphaned"));
  CHECK(threads_named("orphaned ") == 2);
  gate held;
  gate delete_now;
  std::atomic<int> started{0};
  counted_work holder([&] {
    ++started;
    held.pass();
  });
  counted_work deleter([&] {
    ++started;
    delete_now.pass();
    delete pool;  // not joined here: this thread cannot join itself
  });
  pool->add_queued_work(&holder);
  pool->add_queued_work(&deleter);
  REQUIRE(wait_until([&] { return started.load() == 2; }));
  counted_work queued;  // both threads are busy: it waits in the queue
  pool->add_queued_work(&queued);
  delete_now.open();
  REQUIRE(wait_until([&] { return deleter.ran.load() == 1; }));
  held.open();
  CHECK(wait_until([&] { return queued.ran.load() == 1 && holder.ran.load() == 1; }));  // their last touches
  CHECK(queued.abandoned.load() == 0);
  // Then, with nobody left to give them work, the threads end (the last frees the state).
  CHECK(wait_until([&] { return threads_named("orphaned ") == 0; }));
  REQUIRE(recorder.count() == 1);
  const std::string message = recorder.reports()[0].message;
  CHECK(message.find("~queued_thread_pool called from one of its own threads") != std::string::npos);
  CHECK(message.find("'orphaned'") != std::string::npos);    // the pool
  CHECK(message.find("'orphaned ") != std::string::npos);    // the thread
}

TEST_CASE("thread_pool stress: a pool destroyed by one of its own threads is reported; its threads end and free its state" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < 5 * test::stress_repeat(); ++round) {
    diagnostic_recorder recorder;
    auto* pool = new queued_thread_pool();
    REQUIRE(pool->create(2, 0, "self-deleted"));
    std::vector<std::unique_ptr<counted_work>> queued;
    for (int i = 0; i < 20; ++i) queued.push_back(std::make_unique<counted_work>());
    gate delete_now;
    counted_work deleter([&] {
      delete_now.pass();
      delete pool;  // this thread goes back to the pool's loop, whose state must still be there
    });
    pool->add_queued_work(&deleter);
    for (auto& each : queued) pool->add_queued_work(each.get());  // some run on the other thread meanwhile
    delete_now.open();
    CHECK(wait_until([&] { return threads_named("self-delete") == 0; }));
    CHECK(deleter.ran.load() == 1);
    for (auto& each : queued) CHECK(each->ran.load() == 1);  // queued work still runs
    REQUIRE(recorder.count() == 1);
    CHECK(recorder.reports()[0].message.find("~queued_thread_pool called from one of its own threads") !=
          std::string::npos);
  }
}

TEST_CASE("thread_pool: every idle thread parks") {
  queued_thread_pool pool;
  REQUIRE(pool.create(4));
  wait_for([&] { return pool.get_num_idle_threads() == 4; });
  counted_work one;
  pool.add_queued_work(&one);
  wait_for([&] { return one.ran.load() == 1; });
  // Every thread parks again (a hang here trips the watchdog). A second look could see a
  // thread that woke without work on its way back to parking: idle counts dip and return.
  wait_for([&] { return pool.get_num_idle_threads() == 4; });
}

TEST_CASE("thread_pool: blocking work in the pool never starves magpie's task workers") {
  test::no_leaks leaks;
  scheduler tasks(test::options_with(1));
  queued_thread_pool pool;
  REQUIRE(pool.create(2));
  gate held;
  std::atomic<int> blocked{0};
  counted_work a([&] {
    ++blocked;
    held.pass();
  });
  counted_work b([&] {
    ++blocked;
    held.pass();
  });
  pool.add_queued_work(&a);
  pool.add_queued_work(&b);
  wait_for([&] { return blocked.load() == 2; });
  std::atomic<int> ran{0};
  std::vector<task<>> launched;
  for (int i = 0; i < 100; ++i) launched.push_back(tasks.launch("meanwhile", [&] { ++ran; }));
  wait_for([&] { return ran.load() == 100; });  // the worker runs them: nobody helps here
  held.open();
  pool.destroy();
  wait_all(launched);
}

TEST_CASE("thread_pool: misuse is reported: null work, work before create, create twice or with 0, destroy from inside") {
  diagnostic_recorder recorder;
  queued_thread_pool pool;
  counted_work early;
  pool.add_queued_work(&early);
  CHECK(early.abandoned.load() == 1);
  CHECK(recorder.count() == 1);
  pool.add_queued_work(nullptr);
  CHECK(recorder.count() == 2);
  CHECK_FALSE(pool.create(0));
  CHECK(recorder.count() == 3);
  REQUIRE(pool.create(1));
  CHECK_FALSE(pool.create(1));
  CHECK(recorder.count() == 4);
  counted_work inside([&] { pool.destroy(); });
  pool.add_queued_work(&inside);
  wait_for([&] { return inside.ran.load() == 1; });
  CHECK(recorder.count() == 5);
  CHECK(recorder.reports().back().message.find("from one of its own threads") != std::string::npos);
  pool.destroy();
}

TEST_CASE("thread_pool: the global pool runs work") {
  queued_thread_pool& global = global_queued_thread_pool();
  CHECK(global.get_num_threads() >= 1);
  CHECK(&global == &global_queued_thread_pool());
  counted_work one;
  global.add_queued_work(&one);
  wait_for([&] { return one.ran.load() == 1; });
}

TEST_CASE("thread_pool stress: producers add and retract while threads run; each item ran or was retracted, once" *
          doctest::test_suite("stress")) {
  for (int round = 0; round < test::stress_repeat(); ++round) {
    queued_thread_pool pool;
    REQUIRE(pool.create(3));
    constexpr int producers = 4;
    constexpr int per_producer = 2000;
    std::vector<std::unique_ptr<counted_work>> items(producers * per_producer);
    for (auto& each : items) each = std::make_unique<counted_work>();
    std::vector<std::atomic<int>> retracted(items.size());
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          std::size_t index = static_cast<std::size_t>(p * per_producer + i);
          pool.add_queued_work(items[index].get(), static_cast<queued_work_priority>(i % 5));
          if (i % 3 == 0 && pool.retract_queued_work(items[index].get())) retracted[index] = 1;
        }
      });
    }
    for (auto& each : threads) each.join();
    wait_for([&] {
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (retracted[i].load() == 0 && items[i]->ran.load() == 0) return false;
      }
      return true;
    });
    pool.destroy();
    for (std::size_t i = 0; i < items.size(); ++i) {
      CHECK(items[i]->ran.load() + retracted[i].load() == 1);
      CHECK(items[i]->abandoned.load() == 0);
    }
  }
}

}  // TEST_SUITE
