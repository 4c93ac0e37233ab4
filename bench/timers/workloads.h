// Timer-manager workloads, the same for every system: bench/timers/<system>.cpp only names
// its manager and handle types. A system's manager offers set_timer(handle&, callable, rate),
// clear_timer(handle&), pause_timer(handle), unpause_timer(handle), is_timer_paused(handle),
// timer_exists(handle) and tick(delta), and starts without a frame counter (every timer set
// outside tick() waits for the next tick, as in UE before the frame's timer tick).
//
// Every measurement starts from a fresh manager holding N live one-shot timers with delays
// uniform in 0.1–10 s (param "1e6" = N), built untimed and warmed: as many more timers as
// the measurement will add were set and cleared while still pending (no UE tombstones), so
// both systems run at their memory high-water mark, as in a game that has been running,
// rather than timing the first touch of fresh pages:
//   timers_set          set N/10 more timers and run the tick(0) that activates them; per timer
//   timers_clear        clear N/10 timers set (and activated) just before; per timer
//   timers_pause        pause min(N/10, 1000) random live timers; per timer
//   timers_fire         tick 1/60 s frames until every timer fired; per timer fired
//   timers_mixed_frame  60 frames of 1/60 s, each: set N/100 new timers, clear N/200 and
//                       pause N/1000 random live ones, unpause N/1000 paused earlier, tick;
//                       per frame
// Small N repeat the measurement on fresh managers so that each run does enough work.
#pragma once

#include "../common/harness.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace timers_bench {

using bench_clock = std::chrono::steady_clock;

inline double seconds_since(bench_clock::time_point start) {
  return std::chrono::duration<double>(bench_clock::now() - start).count();
}

// random_source is splitmix64: the same streams for every system.
struct random_source {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  float delay() { return static_cast<float>(0.1 + 9.9 * unit()); }
};

// population is a manager with its live timers tracked on the bench's side, so that clear
// and pause pick timers that still exist. Callbacks only touch this bookkeeping.
template <class Manager, class Handle>
class population {
 public:
  population(std::size_t live, std::size_t spare, std::uint64_t seed)
      : timers_(std::make_unique<Manager>()), random_{seed} {
    entries_.reserve(live + spare);
    alive_.reserve(live + spare);
    for (std::size_t i = 0; i < live + spare; ++i) set_one();
    for (std::size_t i = 0; i < spare; ++i) clear_entry(alive_.back());
    timers_->tick(0.f);
  }

  Manager& timers() { return *timers_; }
  random_source& random() { return random_; }
  std::size_t fired() const { return fired_; }
  std::size_t live() const { return alive_.size() + paused_.size(); }

  // set_one sets a new one-shot timer and returns its entry.
  std::uint32_t set_one() {
    std::uint32_t e = take_entry();
    add_alive(e);
    timers_->set_timer(entries_[e].handle, [this, e] { on_fire(e); }, random_.delay());
    return e;
  }

  Handle& handle(std::uint32_t e) { return entries_[e].handle; }

  void clear_entry(std::uint32_t e) {
    remove_alive(e);
    timers_->clear_timer(entries_[e].handle);
    free_.push_back(e);
  }

  void clear_random() {
    if (!alive_.empty()) clear_entry(alive_[random_.below(alive_.size())]);
  }

  std::uint32_t pause_random() {
    std::uint32_t e = alive_[random_.below(alive_.size())];
    remove_alive(e);
    timers_->pause_timer(entries_[e].handle);
    paused_.push_back(e);
    return e;
  }

  void unpause_oldest() {
    if (paused_.empty()) return;
    std::uint32_t e = paused_.front();
    paused_.pop_front();
    timers_->unpause_timer(entries_[e].handle);
    add_alive(e);
  }

 private:
  struct entry {
    Handle handle;
    std::uint32_t alive_at = 0;
  };

  std::uint32_t take_entry() {
    if (!free_.empty()) {
      std::uint32_t e = free_.back();
      free_.pop_back();
      return e;
    }
    entries_.emplace_back();
    return static_cast<std::uint32_t>(entries_.size() - 1);
  }
  void add_alive(std::uint32_t e) {
    entries_[e].alive_at = static_cast<std::uint32_t>(alive_.size());
    alive_.push_back(e);
  }
  void remove_alive(std::uint32_t e) {
    std::uint32_t at = entries_[e].alive_at;
    alive_[at] = alive_.back();
    entries_[alive_[at]].alive_at = at;
    alive_.pop_back();
  }
  void on_fire(std::uint32_t e) {
    ++fired_;
    remove_alive(e);
    free_.push_back(e);
  }

  std::unique_ptr<Manager> timers_;
  random_source random_;
  std::vector<entry> entries_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> alive_;  // live and not paused
  std::deque<std::uint32_t> paused_;
  std::size_t fired_ = 0;
};

inline std::string size_name(std::size_t n) {
  int exponent = 0;
  for (std::size_t v = n; v >= 10; v /= 10) ++exponent;
  return "1e" + std::to_string(exponent);
}

inline void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

// measure runs `run` (which returns the seconds of its timed part) once to warm up and then
// `runs` times.
template <class Run>
std::vector<double> measure(int runs, Run&& run) {
  run();
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) seconds.push_back(run());
  return seconds;
}

template <class Manager, class Handle>
void run_all(const bench::options& chosen, const std::string& system) {
  using pop = population<Manager, Handle>;
  std::vector<std::size_t> sizes{1000, 10000, 100000};
  if (!chosen.quick) sizes.push_back(1000000);
  for (std::size_t n : sizes) {
    std::string param = size_name(n);
    int repeat = static_cast<int>(std::max<std::size_t>(1, 100000 / n));
    std::uint64_t seed = 1;

    std::size_t batch = std::max<std::size_t>(n / 10, 100);
    int batch_repeat = static_cast<int>(std::max<std::size_t>(1, 100000 / batch));
    auto set = measure(chosen.runs, [&] {
      double timed = 0;
      for (int r = 0; r < batch_repeat; ++r) {
        pop p(n, batch, ++seed);
        std::vector<Handle> handles(batch);
        std::vector<float> delays(batch);
        for (float& each : delays) each = p.random().delay();
        auto start = bench_clock::now();
        for (std::size_t i = 0; i < batch; ++i) p.timers().set_timer(handles[i], [] {}, delays[i]);
        p.timers().tick(0.f);
        timed += seconds_since(start);
        require(p.timers().timer_exists(handles[batch - 1]), "set: the last timer is missing");
      }
      return timed;
    });
    bench::record(chosen, system, "timers_set", param, 1, set, batch * static_cast<std::size_t>(batch_repeat));

    auto clear = measure(chosen.runs, [&] {
      double timed = 0;
      for (int r = 0; r < batch_repeat; ++r) {
        pop p(n, batch, ++seed);
        std::vector<std::uint32_t> fresh(batch);
        for (auto& e : fresh) e = p.set_one();
        p.timers().tick(0.f);
        auto start = bench_clock::now();
        for (std::uint32_t e : fresh) p.clear_entry(e);
        timed += seconds_since(start);
        require(p.live() == n, "clear: live count");
      }
      return timed;
    });
    bench::record(chosen, system, "timers_clear", param, 1, clear, batch * static_cast<std::size_t>(batch_repeat));

    std::size_t pauses = std::min<std::size_t>(n / 10, 1000);
    auto pause = measure(chosen.runs, [&] {
      double timed = 0;
      for (int r = 0; r < repeat; ++r) {
        pop p(n, 0, ++seed);
        std::uint32_t last = 0;
        auto start = bench_clock::now();
        for (std::size_t i = 0; i < pauses; ++i) last = p.pause_random();
        timed += seconds_since(start);
        require(p.timers().is_timer_paused(p.handle(last)), "pause: not paused");
      }
      return timed;
    });
    bench::record(chosen, system, "timers_pause", param, 1, pause, pauses * static_cast<std::size_t>(repeat));

    auto fire = measure(chosen.runs, [&] {
      double timed = 0;
      for (int r = 0; r < repeat; ++r) {
        pop p(n, 0, ++seed);
        auto start = bench_clock::now();
        while (p.fired() < n) p.timers().tick(1.f / 60);
        timed += seconds_since(start);
        require(p.fired() == n, "fire: count");
      }
      return timed;
    });
    bench::record(chosen, system, "timers_fire", param, 1, fire, n * static_cast<std::size_t>(repeat));

    constexpr int frames = 60;
    auto mixed = measure(chosen.runs, [&] {
      double timed = 0;
      for (int r = 0; r < repeat; ++r) {
        pop p(n, n / 2, ++seed);
        auto start = bench_clock::now();
        for (int f = 0; f < frames; ++f) {
          for (std::size_t i = 0; i < n / 100; ++i) p.set_one();
          for (std::size_t i = 0; i < n / 200; ++i) p.clear_random();
          for (std::size_t i = 0; i < n / 1000; ++i) p.pause_random();
          for (std::size_t i = 0; i < n / 1000; ++i) p.unpause_oldest();
          p.timers().tick(1.f / 60);
        }
        timed += seconds_since(start);
        require(p.fired() > 0, "mixed: nothing fired");
      }
      return timed;
    });
    bench::record(chosen, system, "timers_mixed_frame", param, 1, mixed, frames * static_cast<std::size_t>(repeat));
  }
}

}  // namespace timers_bench
