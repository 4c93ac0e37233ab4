// Chaos mode (magpie/chaos.h): each thread's seeded decisions at the core's chaos points.
#include <magpie/chaos.h>
#include <magpie/diagnostics.h>
#include <magpie/detail/atomics.h>

#include "thread_state.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace magpie::detail::chaos {

std::atomic<bool> active{false};

namespace {

constexpr std::size_t site_count = static_cast<std::size_t>(site::count_);

// The options in force, as words any thread may read while another starts chaos anew:
// a point that reads a mix of old and new options draws one decision from either.
std::atomic<std::uint64_t> seed_in_force{0};
std::atomic<std::uint32_t> threshold_in_force{0};  // rate × 2^32
std::atomic<double> rate_in_force{0.0};
// generation counts starts: a thread whose generator is older restarts it from the seed.
std::atomic<std::uint64_t> generation{0};
// next_anonymous numbers threads without a fixed identity, per generation, in the order
// they first reach a point.
std::atomic<std::uint64_t> next_anonymous{0};
std::array<std::atomic<std::uint64_t>, site_count> injected{};

constexpr std::uint64_t anonymous_base = std::uint64_t{1} << 32;


// splitmix64: a full-period generator whose every output is well mixed, so consecutive
// seeds and identities give unrelated sequences.
std::uint64_t next(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void restart_generator(std::uint64_t current_generation) noexcept {
  if (!primitives_tls.chaos.identity_fixed) {
    primitives_tls.chaos.identity = anonymous_base + next_anonymous.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter; its order is the race being numbered
  }
  std::uint64_t mix = seed_in_force.load(std::memory_order_relaxed) ^ (primitives_tls.chaos.identity * 0xd1b54a32d192ed03ULL);  // relaxed: published by generation's release
  primitives_tls.chaos.state = mix;
  (void)next(primitives_tls.chaos.state);
  primitives_tls.chaos.generation = current_generation;
}

}  // namespace

void inject(site where) noexcept {
  std::uint64_t current_generation = generation.load(std::memory_order_acquire);  // acquire: pairs with start()'s release, for the seed
  if (primitives_tls.chaos.generation != current_generation) restart_generator(current_generation);
  std::uint64_t draw = next(primitives_tls.chaos.state);
  if ((draw >> 32) >= threshold_in_force.load(std::memory_order_relaxed)) return;  // relaxed: published by generation's release
  injected[static_cast<std::size_t>(where)].fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  std::uint64_t how = next(primitives_tls.chaos.state);
  unsigned kind = static_cast<unsigned>(how % 100);
  if (kind < 50) {
    std::this_thread::yield();
  } else if (kind < 85) {
    for (std::uint64_t spins = 1 + (how >> 8) % 2048; spins != 0; --spins) cpu_relax();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(1 + (how >> 8) % 50));
  }
}

}  // namespace magpie::detail::chaos

namespace magpie::chaos {

namespace state = detail::chaos;

bool start(options chosen) noexcept {
  if (!compiled_in) return false;
  double rate = chosen.rate < 0 ? 0 : chosen.rate > 1 ? 1 : chosen.rate;
  state::seed_in_force.store(chosen.seed, std::memory_order_relaxed);  // relaxed: published by the generation's release
  auto threshold = static_cast<std::uint64_t>(rate * 4294967296.0);
  state::threshold_in_force.store(threshold > 0xffffffffULL ? 0xffffffffU : static_cast<std::uint32_t>(threshold),
                                  std::memory_order_relaxed);  // relaxed: published by the generation's release
  state::rate_in_force.store(rate, std::memory_order_relaxed);  // relaxed: published by the generation's release
  state::next_anonymous.store(0, std::memory_order_relaxed);  // relaxed: published by the generation's release
  for (auto& count : state::injected) count.store(0, std::memory_order_relaxed);  // relaxed: statistics
  state::generation.fetch_add(1, std::memory_order_release);  // release: pairs with inject()'s acquire
  state::active.store(true, std::memory_order_release);  // release: a point that sees it on finds the generation moved
  return true;
}

void stop() noexcept {
  state::active.store(false, std::memory_order_relaxed);  // relaxed: points notice it when they notice it
}

std::optional<options> current() noexcept {
  if (!state::active.load(std::memory_order_acquire)) return std::nullopt;  // acquire: pairs with start()'s release
  return options{state::seed_in_force.load(std::memory_order_relaxed),  // relaxed: published by active's release
                 state::rate_in_force.load(std::memory_order_relaxed)};  // relaxed: as above
}

std::optional<options> parse(std::string_view text) noexcept {
  options parsed;
  std::string_view seed_text = text.substr(0, text.find(':'));
  const char* seed_end = seed_text.data() + seed_text.size();
  auto [seed_stop, seed_error] = std::from_chars(seed_text.data(), seed_end, parsed.seed);
  if (seed_text.empty() || seed_error != std::errc{} || seed_stop != seed_end) return std::nullopt;
  if (seed_text.size() == text.size()) return parsed;
  std::string_view rate_text = text.substr(seed_text.size() + 1);
  const char* rate_end = rate_text.data() + rate_text.size();
  auto [rate_stop, rate_error] = std::from_chars(rate_text.data(), rate_end, parsed.rate);
  if (rate_text.empty() || rate_error != std::errc{} || rate_stop != rate_end) return std::nullopt;
  if (!(parsed.rate >= 0 && parsed.rate <= 1)) return std::nullopt;
  return parsed;
}

bool start_from_environment() noexcept {
  static const bool started = [] {
    const char* text = std::getenv("MAGPIE_CHAOS");
    if (text == nullptr || *text == '\0') return false;
    std::optional<options> parsed = parse(text);
    if (!parsed) {
      report(diagnostic_kind::misuse,
             "MAGPIE_CHAOS must be seed or seed:rate (a decimal seed, a rate from 0 to 1), e.g. 42:0.05");
      return false;
    }
    if (!start(*parsed)) {
      report(diagnostic_kind::misuse, "MAGPIE_CHAOS is set but this build has no chaos points (a release build)",
             severity::warning);
      return false;
    }
    return true;
  }();
  return started && state::active.load(std::memory_order_relaxed);  // relaxed: a report, not a decision
}

std::string describe() {
  std::optional<options> now = current();
  if (!now) return "off";
  char text[64];
  std::snprintf(text, sizeof text, "MAGPIE_CHAOS=%llu:%g", static_cast<unsigned long long>(now->seed), now->rate);
  return text;
}

std::array<std::uint64_t, state::site_count> injections() noexcept {
  std::array<std::uint64_t, state::site_count> counts{};
  for (std::size_t i = 0; i < counts.size(); ++i) {
    counts[i] = state::injected[i].load(std::memory_order_relaxed);  // relaxed: a statistic
  }
  return counts;
}

std::string_view name(site where) noexcept {
  static constexpr std::string_view names[] = {
      "deque_push",  "deque_pop", "deque_steal", "task_launch",   "execution_claim", "completion",
      "subsequents_close", "park", "wake", "wait_block", "pipe_handover", "named_queue", "limiter_handover"};
  static_assert(std::size(names) == state::site_count);
  auto index = static_cast<std::size_t>(where);
  return index < std::size(names) ? names[index] : "unknown";
}

void set_thread_identity(std::uint64_t identity) noexcept {
  detail::primitives_tls.chaos.identity = identity;
  detail::primitives_tls.chaos.identity_fixed = true;
  detail::primitives_tls.chaos.generation = 0;  // draw afresh from the seed with this identity
}

}  // namespace magpie::chaos
