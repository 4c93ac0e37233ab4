// Recording for magpie/trace.h: each thread appends to a ring buffer of its own, so a
// trace point that records takes no lock and, after the thread's first event of a
// recording, allocates nothing (lib/trace/trace_buffers.h).
#include "trace_buffers.h"

#include <magpie/trace.h>

#include <magpie/diagnostics.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace magpie::detail::tracing {

std::atomic<std::uint32_t> recording_categories{0};

namespace {

std::atomic<thread_buffer*> every_buffer{nullptr};
std::atomic<std::uint64_t> current_session{0};         // bumped by each start
std::atomic<std::uint64_t> wanted_capacity{1u << 16};  // the latest start's, rounded
std::atomic<std::uint64_t> epoch_ticks{0};            // ticks() at the first start
std::atomic<std::uint64_t> epoch_steady{0};           // steady_ns() at the same moment

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// ticks is the events' clock: the time-stamp counter where there is one (a few ns to read,
// where steady_clock costs tens), converted to ns by the writer against steady_clock.
std::uint64_t ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return steady_ns();
#endif
}

// trace_thread_state is what tracing keeps per thread; every field is read and written by
// its own thread only. Constant-initialised and trivially destructible: a trace point reads
// it with one thread-pointer-relative load, no guard and no call. The buffer goes back at
// thread exit through buffer_return, a function-local thread_local made on the first claim.
struct trace_thread_state {
  // What the core told this thread it is (set_thread_role, set_thread_user_name), kept
  // until it has a buffer to show it in.
  std::uint32_t role = 0;
  const char* user_name = nullptr;
  // The buffer this thread records into: claimed by arm, handed back by buffer_return.
  thread_buffer* buffer = nullptr;
  // Set by buffer_return: the thread is exiting and its buffer went back. A trace point made
  // after that (from a later thread_local's destructor) records nothing, since no returner
  // is left to hand a newly claimed buffer back.
  bool buffer_returned = false;
};
constinit thread_local trace_thread_state trace_tls;

struct buffer_return {  // hands the buffer on at thread exit; its events stay for the writer
  buffer_return() = default;
  buffer_return(const buffer_return&) = delete;
  buffer_return& operator=(const buffer_return&) = delete;
  ~buffer_return() {
    if (trace_tls.buffer != nullptr) trace_tls.buffer->claimed.store(false, std::memory_order_release);  // release: pairs with claim's CAS
    trace_tls.buffer = nullptr;
    trace_tls.buffer_returned = true;
  }
};

// claim takes a buffer nobody holds and nothing is left in, else makes one.
thread_buffer* claim() {
  for (thread_buffer* each = every_buffer.load(std::memory_order_acquire); each != nullptr; each = each->next) {  // acquire: pairs with the push below
    bool claimed = false;
    // acquire: sees the previous owner's writes (its events, all exported: written == exported)
    if (each->written.load(std::memory_order_acquire) == each->exported.load(std::memory_order_acquire) &&
        each->claimed.compare_exchange_strong(claimed, true, std::memory_order_acquire, std::memory_order_relaxed)) {  // relaxed: we look on
      if (each->written.load(std::memory_order_relaxed) == each->exported.load(std::memory_order_acquire)) return each;  // relaxed: its own last store, seen through the CAS
      each->claimed.store(false, std::memory_order_release);  // release: as buffer_return's
    }
  }
  auto* made = new thread_buffer;
  // acquire: pairs with the push's release — the count below walks the buffers other
  // threads pushed, reading their `next` (TSan under chaos caught it relaxed)
  made->next = every_buffer.load(std::memory_order_acquire);
  std::uint32_t count = 0;
  for (thread_buffer* each = made->next; each != nullptr; each = each->next) ++count;
  made->number = count + 1;
  // acq_rel: its release publishes the buffer's fields to the writer's walk and other
  // claimers; acquire on failure: the retry walks the list it read, as the first walk does
  while (!every_buffer.compare_exchange_weak(made->next, made, std::memory_order_acq_rel, std::memory_order_acquire)) {
    count = 0;
    for (thread_buffer* each = made->next; each != nullptr; each = each->next) ++count;
    made->number = count + 1;
  }
  return made;
}

// arm gives the calling thread a buffer fit for the current recording: its own, resized
// if the recording wants another size and it holds nothing unwritten, or a claimed one.
thread_buffer* arm(std::uint64_t session) noexcept {
  try {
    if (trace_tls.buffer == nullptr) {
      if (trace_tls.buffer_returned) return nullptr;
      trace_tls.buffer = claim();
      thread_local buffer_return returner;  // constructed once: hands the buffer on at exit
      (void)returner;
    }
    thread_buffer& buffer = *trace_tls.buffer;
    std::uint64_t capacity = wanted_capacity.load(std::memory_order_relaxed);  // relaxed: set before the session that led here
    std::uint64_t written = buffer.written.load(std::memory_order_relaxed);   // relaxed: only this thread writes it
    if (buffer.capacity != capacity && written == buffer.exported.load(std::memory_order_acquire)) {  // acquire: the writer is done with the old array
      buffer.events = std::make_unique_for_overwrite<event[]>(capacity);  // no zeroing: slots are written before read
      buffer.capacity = capacity;
    }
    buffer.role.store(trace_tls.role, std::memory_order_relaxed);  // relaxed: read after the writer's acquire of `written`
    buffer.user_name.store(trace_tls.user_name, std::memory_order_relaxed);  // relaxed: as role
    buffer.session.store(session, std::memory_order_relaxed);  // relaxed: only this thread reads it back
    return buffer.capacity != 0 ? &buffer : nullptr;
  } catch (...) {
    return nullptr;  // no memory for a buffer: this thread's events are lost, nothing else
  }
}

}  // namespace

thread_buffer* first_buffer() noexcept { return every_buffer.load(std::memory_order_acquire); }  // acquire: pairs with claim's push

double ns_per_tick() noexcept {
  std::uint64_t start_ticks = epoch_ticks.load(std::memory_order_relaxed);    // relaxed: set once, at the first start
  std::uint64_t start_ns = epoch_steady.load(std::memory_order_relaxed);      // relaxed: as epoch_ticks
  if (start_ticks == 0) return 1.0;  // never started: no events to convert
  // At least a millisecond between the two readings, so that the scale is good to a few
  // parts per million (a writer right after a short recording waits out the rest).
  while (steady_ns() - start_ns < 1'000'000) std::this_thread::yield();
  std::uint64_t elapsed_ticks = ticks() - start_ticks;
  std::uint64_t elapsed_ns = steady_ns() - start_ns;
  return elapsed_ticks != 0 ? static_cast<double>(elapsed_ns) / static_cast<double>(elapsed_ticks) : 1.0;
}

std::uint64_t since_epoch_ns(std::uint64_t at, double scale) noexcept {
  std::uint64_t start = epoch_ticks.load(std::memory_order_relaxed);  // relaxed: as ns_per_tick
  return at > start ? static_cast<std::uint64_t>(static_cast<double>(at - start) * scale) : 0;
}

void record(event_kind kind, const void* id, const char* name, std::uint64_t value, std::uint32_t arg) noexcept {
  // Looked at again for each event, so that a thread that saw recording on writes at most
  // one event after stop(): the one slot the writer leaves out (trace_export.cpp).
  if (recording_categories.load(std::memory_order_relaxed) == 0) return;  // relaxed: as on()
  std::uint64_t session = current_session.load(std::memory_order_relaxed);  // relaxed: a stale view arms once more
  thread_buffer* buffer = trace_tls.buffer;
  if (buffer == nullptr || buffer->session.load(std::memory_order_relaxed) != session) {  // relaxed: this thread's own store
    buffer = arm(session);
    if (buffer == nullptr) return;
  }
  std::uint64_t written = buffer->written.load(std::memory_order_relaxed);  // relaxed: only this thread writes it
  buffer->events[written & (buffer->capacity - 1)] = event{ticks(), id, name, value, arg, kind};
  buffer->written.store(written + 1, std::memory_order_release);  // release: pairs with the writer's acquire
}

void set_thread_role(thread_role role, std::uint32_t index) noexcept {
  trace_tls.role = static_cast<std::uint32_t>(role) << 16 | (index & 0xffffu);
  // relaxed: read by the writer after its acquire of `written`, which a later event publishes
  if (trace_tls.buffer != nullptr) trace_tls.buffer->role.store(trace_tls.role, std::memory_order_relaxed);
}

std::mutex& export_lock() noexcept {
  static std::mutex lock;
  return lock;
}

std::string role_name(std::uint32_t role, std::uint32_t number) {
  std::uint32_t index = role & 0xffffu;
  switch (static_cast<thread_role>(role >> 16)) {
    case thread_role::worker: return "worker " + std::to_string(index);
    case thread_role::background_worker: return "background worker " + std::to_string(index);
    case thread_role::standby_worker: return "standby worker " + std::to_string(index);
    case thread_role::named: {
      static const char* const names[] = {"game thread", "render thread", "rhi thread", "audio thread"};  // named_thread's indices
      return index < std::size(names) ? names[index] : "named thread " + std::to_string(index);
    }
    case thread_role::other: break;
  }
  return "thread " + std::to_string(number);
}

}  // namespace magpie::detail::tracing

namespace magpie::trace {

using namespace detail::tracing;

namespace {
std::mutex start_stop;  // start, stop and the writer are rare and may block; trace points never take it
}

void start(options chosen) {
  std::lock_guard writer_done(export_lock());  // never while the writer reads the rings
  std::lock_guard hold(start_stop);
  if (recording_categories.load(std::memory_order_relaxed) != 0) return;  // relaxed: changed only under start_stop
  if (epoch_ticks.load(std::memory_order_relaxed) == 0) {  // relaxed: only start (under start_stop) writes it
    epoch_steady.store(steady_ns(), std::memory_order_relaxed);  // relaxed: published by the session bump
    epoch_ticks.store(ticks(), std::memory_order_relaxed);       // relaxed: as epoch_steady
  }
  wanted_capacity.store(std::bit_ceil(std::max<std::size_t>(chosen.buffer_events_per_thread, 16)), std::memory_order_relaxed);  // relaxed: published by the session bump
  current_session.fetch_add(1, std::memory_order_release);  // release: the capacity and epoch with it
  std::uint32_t categories = user;
  if (chosen.task_events) categories |= task;
  if (chosen.scheduler_events) categories |= scheduler;
  if (chosen.client_events) categories |= client;
  recording_categories.store(categories, std::memory_order_release);  // release: trace points' relaxed look; a late one is harmless
}

void stop() {
  std::lock_guard hold(start_stop);
  recording_categories.store(0, std::memory_order_release);  // release: as start's
}

bool is_recording() { return recording_categories.load(std::memory_order_relaxed) != 0; }  // relaxed: a snapshot

void clear() {
  stop();
  std::lock_guard hold(export_lock());
  for (thread_buffer* each = first_buffer(); each != nullptr; each = each->next) {
    // acquire: every event counted is then behind us; release: pairs with arm and claim
    each->exported.store(each->written.load(std::memory_order_acquire), std::memory_order_release);
  }
}

scope::scope(const char* name) : recorded_(is_recording()) {
  if (recorded_) record(event_kind::scope_began, nullptr, name, 0, 0);
}

// A scope's end is recorded only while recording goes on: after stop() the writer may be
// reading this thread's ring (a slice left open is closed by the writer).
scope::~scope() {
  if (recorded_ && is_recording()) record(event_kind::scope_ended, nullptr, nullptr, 0, 0);
}

void client_scope::begin(const char* name, std::uint64_t id) noexcept {
  record(event_kind::scope_began, nullptr, name, id, 0);
}

void client_scope::end() noexcept {
  // As scope's end: only while recording goes on.
  if (client_events_on()) record(event_kind::scope_ended, nullptr, nullptr, 0, 0);
}

namespace {

// interned_names never shrinks and is never destroyed: its strings stay valid for a trace
// written at exit (MAGPIE_TRACE), after static destructors have begun.
std::set<std::string, std::less<>>& interned_names() {
  static auto* kept = new std::set<std::string, std::less<>>;
  return *kept;
}

}  // namespace

const char* intern(std::string_view name) {
  static std::mutex lock;
  std::lock_guard hold(lock);
  std::set<std::string, std::less<>>& kept = interned_names();
  auto found = kept.find(name);
  if (found == kept.end()) found = kept.emplace(name).first;
  return found->c_str();
}

void instant(const char* name) {
  if (is_recording()) record(event_kind::instant, nullptr, name, 0, 0);
}

void counter(const char* name, double value) {
  if (is_recording()) record(event_kind::counter, nullptr, name, std::bit_cast<std::uint64_t>(value), 0);
}

void name_this_thread(const char* name) {
  trace_tls.user_name = name;
  // relaxed: read by the writer after its acquire of `written`, which a later event publishes
  if (trace_tls.buffer != nullptr) trace_tls.buffer->user_name.store(name, std::memory_order_relaxed);
}

// --- MAGPIE_TRACE: recording from start to exit without a code change -----------------

namespace {

// The path from MAGPIE_TRACE, kept for the write at exit; never destroyed, so that it is
// still there when the exit handler runs.
const std::string* environment_trace_path = nullptr;

// write_environment_trace writes the recording at exit. A failed write is a warning: the
// program's own work is done and its exit status stays its own; nothing is kept for
// another try, since none comes.
void write_environment_trace() {
  detail::tracing::file_written result = detail::tracing::write_recording(*environment_trace_path);
  if (!result.failure.empty()) {
    report(diagnostic_kind::misuse, "MAGPIE_TRACE: at exit, " + result.failure + "; no trace was written",
           severity::warning);
  } else if (result.events != 0) {
    std::fprintf(stderr, "magpie: MAGPIE_TRACE: %zu event%s written to %s\n", result.events,
                 result.events == 1 ? "" : "s", environment_trace_path->c_str());
  }
}

// start_from_environment starts recording when MAGPIE_TRACE names a file, and registers the
// write for exit. It runs as this file's static initializer: every program that makes a
// scheduler links this file (its workers name their tracks through set_thread_role), so
// the switch needs no call from the program. What the exit handler uses is made first, so
// that it is destroyed after the handler has run (handlers and static destructors run in
// the reverse order of their registration); a scheduler the program destroys before exit
// has finished its work by then.
bool start_from_environment() {
  const char* path = std::getenv("MAGPIE_TRACE");
  if (path == nullptr || *path == '\0') return false;
  if (!std::ofstream(path, std::ios::app)) {  // checked now, so that a typo shows before the run, not after
    report(diagnostic_kind::misuse,
           std::string("MAGPIE_TRACE: cannot write '") + path + "'; the program runs without a trace",
           severity::warning);
    return false;
  }
  environment_trace_path = new std::string(path);
  (void)export_lock();
  (void)interned_names();
  start();
  if (std::atexit(write_environment_trace) != 0) {
    stop();
    report(diagnostic_kind::limit_reached, "MAGPIE_TRACE: no exit handler could be registered; nothing recorded",
           severity::warning);
    return false;
  }
  return true;
}

[[maybe_unused]] const bool recording_from_environment = start_from_environment();

}  // namespace

}  // namespace magpie::trace
