// The Relacy atomics policy: magpie's lock-free templates compiled against Relacy's
// instrumented atomics, so the model checker explores their weak-memory behaviours.
//
// Include magpie's headers *before* this one: relacy.hpp redefines `new`, `delete` and
// the `std::memory_order_*` names as macros, and magpie's templates must be tokenised
// before those macros exist. This file itself spells orders as `std::memory_order::x`.
//
// A `weakening` turns the policy into a mutant: every operation of one class is given a
// weaker order than the code asked for. Each model runs once with `none` (must pass) and
// once weakened (must fail): proof that the model can see the bug the order prevents.
#pragma once

#include <relacy/relacy.hpp>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <cstring>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

namespace magpie::model {

enum class weakening {
  none,
  seq_cst_to_acq_rel,  // every seq_cst becomes acquire / release / acq_rel
  release_to_relaxed,  // every release is dropped: of release, acq_rel, seq_cst stores and read-modify-writes
};

inline weakening weakening_from_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--mutant=seq_cst_to_acq_rel") return weakening::seq_cst_to_acq_rel;
    if (arg == "--mutant=release_to_relaxed") return weakening::release_to_relaxed;
  }
  return weakening::none;
}

enum class access { load, store, rmw };

template <weakening W>
constexpr rl::memory_order weakened(std::memory_order order, access kind) {
  using mo = std::memory_order;
  if (W == weakening::seq_cst_to_acq_rel && order == mo::seq_cst) {
    order = kind == access::load ? mo::acquire : kind == access::store ? mo::release : mo::acq_rel;
  }
  if (W == weakening::release_to_relaxed) {
    if (order == mo::release) order = mo::relaxed;
    if (order == mo::acq_rel) order = mo::acquire;
    if (order == mo::seq_cst && kind == access::store) order = mo::relaxed;
    if (order == mo::seq_cst && kind == access::rmw) order = mo::acquire;
  }
  switch (order) {
    case mo::relaxed: return rl::mo_relaxed;
    case mo::consume: return rl::mo_consume;
    case mo::acquire: return rl::mo_acquire;
    case mo::release: return rl::mo_release;
    case mo::acq_rel: return rl::mo_acq_rel;
    case mo::seq_cst: return rl::mo_seq_cst;
  }
  return rl::mo_seq_cst;
}

inline rl::debug_info where(const std::source_location& location) {
  return rl::debug_info(location.function_name(), location.file_name(), location.line());
}

// relacy_atomics is the policy type handed to magpie's lock-free templates.
template <weakening W>
struct relacy_atomics {
  // parking_lot emulates a futex for one 32-bit word with Relacy's mutex and condition
  // variable, so a waiter nobody wakes shows up as a DEADLOCK in the model.
  struct parking_lot {
    rl::mutex mutex;
    rl::condition_variable sleepers;
    int timeouts = 0;  // wait_for's time-outs so far (not instrumented: only bounds the model)
  };
  struct no_parking {};

  template <class T>
  class atomic {
   public:
    using source = std::source_location;
    atomic() = default;  // left uninitialised: Relacy flags a read before the first store
    explicit(false) atomic(T initial) : value_(initial) {}

    T load(std::memory_order order = std::memory_order::seq_cst,
           source at = source::current()) const {
      return value_.load(weakened<W>(order, access::load), where(at));
    }
    void store(T desired, std::memory_order order = std::memory_order::seq_cst,
               source at = source::current()) {
      value_.store(desired, weakened<W>(order, access::store), where(at));
    }
    T exchange(T desired, std::memory_order order = std::memory_order::seq_cst,
               source at = source::current()) {
      return value_.exchange(desired, weakened<W>(order, access::rmw), where(at));
    }
    bool compare_exchange_strong(T& expected, T desired, std::memory_order success,
                                 std::memory_order failure, source at = source::current()) {
      return value_.compare_exchange_strong(expected, desired, weakened<W>(success, access::rmw),
                                            where(at), weakened<W>(failure, access::load),
                                            where(at));
    }
    bool compare_exchange_strong(T& expected, T desired,
                                 std::memory_order order = std::memory_order::seq_cst,
                                 source at = source::current()) {
      return compare_exchange_strong(expected, desired, order, failure_order(order), at);
    }
    bool compare_exchange_weak(T& expected, T desired, std::memory_order success,
                               std::memory_order failure, source at = source::current()) {
      return value_.compare_exchange_weak(expected, desired, weakened<W>(success, access::rmw),
                                          where(at), weakened<W>(failure, access::load),
                                          where(at));
    }
    bool compare_exchange_weak(T& expected, T desired,
                               std::memory_order order = std::memory_order::seq_cst,
                               source at = source::current()) {
      return compare_exchange_weak(expected, desired, order, failure_order(order), at);
    }
    T fetch_add(T delta, std::memory_order order = std::memory_order::seq_cst,
                source at = source::current()) {
      return value_.fetch_add(delta, weakened<W>(order, access::rmw), where(at));
    }
    T fetch_sub(T delta, std::memory_order order = std::memory_order::seq_cst,
                source at = source::current()) {
      return value_.fetch_sub(delta, weakened<W>(order, access::rmw), where(at));
    }

   private:
    static std::memory_order failure_order(std::memory_order order) {
      if (order == std::memory_order::acq_rel) return std::memory_order::acquire;
      if (order == std::memory_order::release) return std::memory_order::relaxed;
      return order;
    }

    friend struct relacy_atomics;
    rl::atomic<T> value_;
    [[no_unique_address]] std::conditional_t<std::is_same_v<T, std::uint32_t>, parking_lot, no_parking> parking_;
  };

  static void wait(atomic<std::uint32_t>& word, std::uint32_t expected) {
    auto& lot = word.parking_;
    lot.mutex.lock($);
    while (word.value_.load(rl::mo_relaxed, $) == expected) lot.sleepers.wait(lot.mutex, $);
    lot.mutex.unlock($);
  }
  // wait_for is `wait` whose time-out may come at any moment, before or instead of a
  // wake-up: Relacy chooses. At most two per word, so a waiter that loops on time-outs
  // still ends; after them it waits as `wait` does, and a lost wake-up is a DEADLOCK.
  static bool wait_for(atomic<std::uint32_t>& word, std::uint32_t expected, std::int64_t /*timeout_ns*/) {
    if (word.parking_.timeouts < 2 && rl::rand(2) == 0) {
      ++word.parking_.timeouts;
      return false;
    }
    wait(word, expected);
    return true;
  }
  static void fence_seq_cst() {
    rl::atomic_thread_fence(weakened<W>(std::memory_order::seq_cst, access::rmw), $);
  }
  // The asymmetric barriers are modelled as the fences they stand for: membarrier makes
  // the light side's compiler barrier act as a full fence at some point of its thread, and
  // the Dekker argument needs no more than a fence there and one on the heavy side.
  static void fence_after_atomic() { fence_seq_cst(); }
  static void light_barrier() { fence_seq_cst(); }
  static void chaos_point(magpie::detail::chaos::site) {}
  static void heavy_barrier() { fence_seq_cst(); }
  static void wake_one(atomic<std::uint32_t>& word) {
    auto& lot = word.parking_;
    lot.mutex.lock($);
    lot.mutex.unlock($);
    lot.sleepers.notify_one($);
  }
  static void wake_all(atomic<std::uint32_t>& word) {
    auto& lot = word.parking_;
    lot.mutex.lock($);
    lot.mutex.unlock($);
    lot.sleepers.notify_all($);
  }
};

// run_model simulates `Model` and returns the process exit code: 0 when Relacy found no
// failure. Random exploration first, then a systematic search of every schedule with at
// most `context_bound` preemptions.
template <class Model>
int run_model(const char* name, int iterations, unsigned context_bound = 2) {
  static std::ostringstream progress;  // Relacy's percentage lines; failures still go to stdout
  rl::test_params random;
  random.progress_stream = &progress;
  random.iteration_count = iterations;
  random.search_type = rl::random_scheduler_type;
  random.output_history = false;
  std::printf("%s: random scheduler, %d iterations\n", name, iterations);
  if (!rl::simulate<Model>(random)) return 1;
  rl::test_params bounded;
  bounded.progress_stream = &progress;
  bounded.search_type = rl::fair_context_bound_scheduler_type;
  bounded.context_bound = context_bound;
  std::printf("%s: context-bound scheduler (bound %u)\n", name, context_bound);
  return rl::simulate<Model>(bounded) ? 0 : 1;
}

// model_main is each model's main(): it runs Model<none>, or the mutant the command line
// names (--mutant=seq_cst_to_acq_rel | release_to_relaxed), and returns the exit code.
template <template <weakening> class Model>
int model_main(int argc, char** argv, const std::string& name, int iterations = 200000,
               unsigned context_bound = 2) {
  switch (weakening_from_args(argc, argv)) {
    case weakening::none:
      return run_model<Model<weakening::none>>(name.c_str(), iterations, context_bound);
    case weakening::seq_cst_to_acq_rel:
      return run_model<Model<weakening::seq_cst_to_acq_rel>>((name + " mutant seq_cst_to_acq_rel").c_str(), iterations,
                                                              context_bound);
    case weakening::release_to_relaxed:
      return run_model<Model<weakening::release_to_relaxed>>((name + " mutant release_to_relaxed").c_str(), iterations,
                                                              context_bound);
  }
  return 2;
}

}  // namespace magpie::model
