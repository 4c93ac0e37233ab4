// Layer 1 — chaos mode: schedules that races need, on purpose and replayable.
//
// A race in a lock-free core shows itself only when one thread stops at the wrong moment.
// Chaos mode makes such moments common: at the core's decision points (push, pop, steal,
// claiming a task's body, completion, closing a subsequent list, parking, waking, a wait
// that blocks, a pipe's hand-over, named-thread queueing) each thread draws from its own
// seeded generator and now and then yields, spins or sleeps for a few microseconds.
//
//   MAGPIE_CHAOS=42 build/test-tsan/test/task_lifetime_test  // the environment, read by
//   MAGPIE_CHAOS=42:0.2 ...                                  // the first scheduler; or
//   magpie::chaos::start({.seed = 42, .rate = 0.05});         // in code; or
//   scheduler_options{.chaos = magpie::chaos::options{42}}
//
// Replay: a thread's decisions depend only on the seed, the thread's identity (a worker's
// index, a named thread's, else the order in which threads first reached a point) and how
// many points it has passed, so the same seed repeats each thread's sequence of choices.
// The interleaving that follows still depends on the OS; a seed that failed once fails
// again far more often than chance. Tests print the seed when they fail (describe()).
//
// Built in unless the build is release (meson option `chaos`); in a release build start()
// returns false and every point compiles to nothing.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/chaos_options.h>
#include <magpie/detail/chaos_points.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace magpie::chaos {

// site names a chaos point of the core: one of the decision points chaos mode can delay.
using site = detail::chaos::site;

// options is chaos_options (magpie/chaos_options.h): the seed and the rate.
using options = chaos_options;

// compiled_in says whether this build has the chaos points (false in release builds).
inline constexpr bool compiled_in = detail::chaos::compiled_in;

// start puts `chosen` in force for the whole process, from the next point each thread
// reaches; a thread restarts its generator from the new seed. False when the build has
// no chaos points (nothing changes then).
bool start(options chosen) noexcept;

// stop ends injection; the counts stay until the next start.
void stop() noexcept;

// current is the options in force, if chaos is on.
std::optional<options> current() noexcept;

// parse reads "seed" or "seed:rate" (the MAGPIE_CHAOS syntax); nothing if malformed.
std::optional<options> parse(std::string_view text) noexcept;

// start_from_environment starts chaos from MAGPIE_CHAOS if it is set, once per process
// (later calls answer the first call's result), and says whether chaos is on. A malformed
// value is reported as a misuse diagnostic. Every scheduler's constructor calls it.
bool start_from_environment() noexcept;

// describe is "off", or how to replay: "MAGPIE_CHAOS=42:0.05".
std::string describe();

// injections counts the delays injected at each site since the last start.
std::array<std::uint64_t, static_cast<std::size_t>(site::count_)> injections() noexcept;

// name is a site's name, e.g. "deque_steal".
std::string_view name(site where) noexcept;

// set_thread_identity fixes the calling thread's identity for replay (workers and named
// threads call it as they start); other threads are numbered as they first reach a point.
void set_thread_identity(std::uint64_t identity) noexcept;

}  // namespace magpie::chaos
