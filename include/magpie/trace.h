// Layer 6 — tracing: what every thread did, on a timeline you can open in Perfetto.
//
//   magpie::trace::start();                       // any thread
//   ... run a frame ...
//   magpie::trace::stop();
//   magpie::trace::write_chrome_json("frame.json");   // open in ui.perfetto.dev
//
// Each thread records into a ring buffer of its own (no lock; a thread's first event of a
// recording allocates its buffer, nothing else allocates), which drops its oldest events
// when full and counts the drops. A thread's buffer is handed on when the thread exits (its
// events stay for the file); events made on that thread after the hand-back, from a
// thread_local's destructor, are not recorded. The file is Chrome's trace-event JSON: a slice per task
// run on the thread that ran it, arrows from launcher to runner and from each prerequisite
// to its subsequent, waits, parking, steals, standby workers and named-thread queues, and
// the slices, instants and counters that code adds with the calls below.
// tools/trace_view.py draws a trace as a PNG and prints a summary with the critical path.
//
// Without a code change: MAGPIE_TRACE=frame.json ./app records any program linked with
// magpie from before main to exit (start() with the default options before main, a
// write_chrome_json to that file at exit, reported on stderr). A file that cannot be
// written is reported at start-up and the program runs without a trace; a write that fails
// at exit (a full disk) is a warning, and the exit status stays the program's. Calls to the API
// below act on the same recording: stop() ends it early, and a write_chrome_json of the
// program's own takes what was recorded so far, leaving the rest for the write at exit.
//
// Built with -Dtrace=disabled, every trace point compiles to nothing (this API still links
// and records only user events). Built with tracing and not recording, a trace point costs
// one relaxed load. Names are kept by pointer, as task names are: give string literals, or
// strings that outlive the writing of the trace. See docs/tracing.md.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/detail/trace_points.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace magpie::trace {

// options says what start() records and how much each thread keeps.
struct options {
  std::size_t buffer_events_per_thread = 1 << 16;  // rounded up to a power of two
  bool task_events = true;       // launches, runs, completions, edges, waits
  bool scheduler_events = true;  // steals, parking, standby workers, named-thread queues
  bool client_events = true;     // tick groups, ticks, timers (the clients' own slices)
};

// start begins recording (any thread). Starting while recording changes nothing.
void start(options = {});
// stop stops recording; what was recorded stays until written or cleared.
void stop();
// is_recording says whether recording is on.
bool is_recording();
// write_chrome_json stops recording if it is on, writes what was recorded as Chrome
// trace-event JSON, and drops it from the buffers once the whole file is written; returns
// the events written. When the file cannot be opened or fully written (a full disk), that
// is reported as a warning, 0 is returned and the recording is kept: a later call writes it.
std::size_t write_chrome_json(const std::filesystem::path&);
// clear drops what was recorded (stopping first).
void clear();

// scope is a slice on the calling thread, from construction to destruction.
class scope {
 public:
  // scope(name) begins a slice named `name` (kept by pointer: a string literal, or a name
  // that outlives the recording); the destructor ends it.
  explicit scope(const char* name);
  ~scope();
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  bool recorded_;
};

// instant marks a moment on the calling thread.
void instant(const char* name);
// counter records a value of a named series (a track of its own in the viewer).
void counter(const char* name, double value);

// name_this_thread names the calling thread's track (workers, named threads and the thread
// that started recording are named already).
void name_this_thread(const char* name);

// intern keeps a copy of `name` for the life of the process and returns it: a name for
// trace events made from a string that may not outlive the trace (a tick function's).
// Takes a lock: call it once per name (at registration), not per event.
const char* intern(std::string_view name);

// client_events_on says whether the clients (tick manager, timers) should record their
// events: recording, with options::client_events. Inline: the clients ask per tick.
inline bool client_events_on() noexcept {
  // relaxed: as every trace point's look at the switch (magpie/detail/trace_points.h)
  return (detail::tracing::recording_categories.load(std::memory_order_relaxed) & detail::tracing::client) != 0;
}

// client_scope is a slice recorded only when client_events_on(), with an optional number
// shown as its `id` (a timer's handle).
class client_scope {
 public:
  // client_scope(name, id) begins the slice when client events are recorded; the
  // destructor ends it.
  explicit client_scope(const char* name, std::uint64_t id = 0) : recorded_(client_events_on()) {
    if (recorded_) [[unlikely]] {
      begin(name, id);
    }
  }
  ~client_scope() {
    if (recorded_) [[unlikely]] {
      end();
    }
  }
  client_scope(const client_scope&) = delete;
  client_scope& operator=(const client_scope&) = delete;

 private:
  static void begin(const char* name, std::uint64_t id) noexcept;
  static void end() noexcept;
  bool recorded_;
};

}  // namespace magpie::trace
