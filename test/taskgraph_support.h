// Helpers shared by the TaskGraph suites (test/taskgraph_test.cpp, test/taskgraph_wait_test.cpp).
#pragma once

#include "support.h"

#include <magpie/scheduler.h>

#include <string>

namespace magpie::test {

// attached_as attaches the calling thread for the lifetime of the object.
struct attached_as {
  attached_as(scheduler& pool, named_thread thread) : pool_(pool) { pool_.attach(thread); }
  ~attached_as() { pool_.detach(); }
  attached_as(const attached_as&) = delete;
  attached_as& operator=(const attached_as&) = delete;
  scheduler& pool_;
};

// reported says whether `recorder` saw a report whose message contains `part`.
inline bool reported(const diagnostic_recorder& recorder, const std::string& part) {
  return recorder.count_naming(part) != 0;
}

}  // namespace magpie::test
