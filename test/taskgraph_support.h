// Helpers shared by the TaskGraph suites (test/taskgraph_test.cpp, taskgraph_tasks_test.cpp,
// taskgraph_wait_test.cpp).
#pragma once

#include "support.h"

#include <magpie/scheduler.h>
#include <magpie/taskgraph.h>

#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>

namespace magpie::test {

// recording_task is a graph task that records where and as what thread it ran.
struct recording_task {
  taskgraph::named_threads::type desired;
  std::atomic<int>* runs;
  taskgraph::named_threads::type* told = nullptr;
  std::thread::id* ran_on = nullptr;

  taskgraph::named_threads::type get_desired_thread() const { return desired; }
  static taskgraph::subsequents_mode get_subsequents_mode() { return taskgraph::subsequents_mode::track_subsequents; }
  void do_task(taskgraph::named_threads::type current, const taskgraph::graph_event_ref& self) {
    CHECK(self.is_valid());
    CHECK_FALSE(self->is_complete());
    if (told != nullptr) *told = current;
    if (ran_on != nullptr) *ran_on = std::this_thread::get_id();
    runs->fetch_add(1);
  }
};

}  // namespace magpie::test
