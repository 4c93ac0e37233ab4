// The per-thread ring buffers behind magpie/trace.h, shared by the recorder (trace.cpp)
// and the writer (trace_export.cpp).
#pragma once

#include <magpie/detail/trace_points.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

namespace magpie::detail::tracing {

// event is one record: 40 bytes, written by its thread alone.
struct event {
  std::uint64_t time;  // ticks (trace.cpp); the writer converts
  const void* id;
  const char* name;
  std::uint64_t value;
  std::uint32_t arg;
  event_kind kind;
};

// thread_role is what the core knows a thread as, for its track's name.
enum class thread_role : std::uint8_t { other, worker, background_worker, standby_worker, named };

// thread_buffer is one thread's ring. The owner writes events and publishes each by its
// count (`written`); the writer reads up to the count it sees, from `exported` on. Never
// freed: a thread that exits leaves its events for the writer, and its buffer, once
// written out or cleared, to the next thread that needs one.
struct thread_buffer {
  std::unique_ptr<event[]> events;
  std::uint64_t capacity = 0;             // a power of two; the owner's (while it holds the buffer)
  std::atomic<std::uint64_t> written{0};  // events ever written (owner: plain load, release store)
  std::atomic<std::uint64_t> exported{0}; // events before this were written out or cleared (writer's)
  std::atomic<std::uint64_t> session{0};  // the recording the buffer was last armed for
  std::atomic<bool> claimed{true};        // a live thread owns it
  std::atomic<const char*> user_name{nullptr};  // trace::name_this_thread
  std::atomic<std::uint32_t> role{0};           // thread_role << 16 | index
  std::uint32_t number = 0;                     // the track's number in the file (1, 2, ...)
  thread_buffer* next = nullptr;                // in every_buffer's list, written before publication
};

// first_buffer heads the list of every buffer ever made (pushed, never removed).
thread_buffer* first_buffer() noexcept;

// Events are stamped in ticks (the time-stamp counter where there is one); the writer
// turns them into ns since the first start with the scale measured up to now.
double ns_per_tick() noexcept;
std::uint64_t since_epoch_ns(std::uint64_t ticks, double ns_per_tick) noexcept;

// export_lock serializes the writer and clear (each takes what the other has not).
std::mutex& export_lock() noexcept;

// set_thread_role tells the trace what the calling thread is (its track's name).
void set_thread_role(thread_role role, std::uint32_t index) noexcept;

// role_name writes a track's name for a role into `out`.
std::string role_name(std::uint32_t role, std::uint32_t number);

// file_written is what write_recording did: the events written, or why the file was not
// written (`failure` empty when it was).
struct file_written {
  std::size_t events = 0;
  std::string failure;
};

// write_recording is trace::write_chrome_json without the report: it stops recording,
// writes the recording to `path`, and drops it from the buffers only once the whole file
// is written. Its callers word the report: a program's own call can try again, the write
// at exit (MAGPIE_TRACE) cannot.
file_written write_recording(const std::filesystem::path& path);

}  // namespace magpie::detail::tracing
