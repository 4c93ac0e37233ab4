// The scheduler's workers: finding work, waking, parking, standby workers. Shutdown lives in
// scheduler_shutdown.cpp, named threads in named_thread.cpp, the public facade in
// scheduler_facade.cpp, the table of living schedulers in scheduler_slots.cpp; the shared
// state in scheduler_impl.h.
#include "scheduler_impl.h"
#include "../trace/trace_buffers.h"

#include <magpie/detail/thread_tag.h>

#include <magpie/chaos.h>
#include <magpie/diagnostics.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace magpie {

namespace {

// max_overflow_standby bounds the standby workers started past the cap, each only when
// every thread of its kind is blocked (enter_blocking).
constexpr unsigned max_overflow_standby = 64;

// max_spin_pauses caps the pause instructions between two looks for work while spinning.
constexpr int max_spin_pauses = 128;

// spin_after_steal multiplies spin_for for a worker that stole since its last search: loops
// and fork-join trees hand out their work as pieces to steal, and a worker that parks
// between two of them pays a park and a wake (a barrier and two futex calls) per piece.
constexpr int spin_after_steal = 4;

std::uint64_t next_random(std::uint64_t& state) noexcept {  // xorshift64
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

}  // namespace

constinit thread_local thread_context detail::current_thread_context;
constinit thread_local char detail::thread_tag = 0;
constinit thread_local std::uint64_t detail::own_deque_generation = 0;

void detail::renew_own_deque_generation() noexcept {
  static std::atomic<std::uint64_t> last{0};
  // relaxed: only uniqueness matters
  own_deque_generation = last.fetch_add(1, std::memory_order_relaxed) + 1;
}

constinit thread_local detail::scheduler_thread_state detail::scheduler_tls;

namespace {
// next_serial numbers the schedulers the process makes (scheduler::impl::serial).
std::uint64_t next_serial() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: only uniqueness matters
}
}  // namespace

scheduler::impl::impl(scheduler& owner, scheduler_options chosen)
    : serial(next_serial()),
      facade(owner),
      options(std::move(chosen)),
      // The background workers are a part of the workers, the last ones.
      foreground_count(options.workers - std::min<unsigned>(options.background_workers, options.workers)) {
  // An idle worker's spin ends at now + spin_for: bounded, so that the sum cannot overflow
  // and the worker parks (scheduler_options::spin_for).
  options.spin_for = std::min<std::chrono::microseconds>(options.spin_for, std::chrono::milliseconds(10));
  stall_after = options.stall_report_after;
  if (const char* text = std::getenv("MAGPIE_STALL_REPORT_MS"); text != nullptr && *text != '\0') {
    stall_after = std::chrono::milliseconds(std::strtoll(text, nullptr, 10));
  }
  // Before any of its tasks exists: their completions' barriers depend on it.
  detail::std_atomics::enable_asymmetric_barriers();
  unsigned total = options.workers;
  workers.reserve(total);
  for (unsigned i = 0; i < total; ++i) {
    auto fresh = std::make_unique<worker>();
    fresh->kind = i < foreground_count ? worker_kind::foreground : worker_kind::background;
    fresh->index = i < foreground_count ? i : i - foreground_count;
    fresh->random_state = 0x9E37'79B9'7F4A'7C15ull * (i + 1);
    workers.push_back(std::move(fresh));
  }
  for (worker_kind kind : {worker_kind::foreground, worker_kind::background}) {
    standby_pool& pool = standby[index_of(kind)];
    pool.kind = kind;
    pool.owner = this;
    pool.cap = options.max_standby_workers.value_or(pool_size(kind));
  }
}

void scheduler::impl::start() {
  for (auto& each : workers) {
    worker* raw = each.get();
    raw->thread = std::thread([this, raw] { run_worker(*raw); });
  }
}

bool scheduler::impl::accepts_from_this_thread() const {
  // relaxed: `true` is the constructor's value, published with the scheduler; after `false`
  // the caller only reports and discards its own item, reading nothing shutdown wrote
  if (accepting.load(std::memory_order_relaxed)) return true;
  const thread_context& context = this_thread_context();
  return context.owner == this && (context.self != nullptr || context.running > 0);
}

// Out of line and cold: schedule() stays a leaf-like function with a small frame.
[[gnu::cold, gnu::noinline]] void detail::discard_late_work(work_item* item, const char* where) {
  std::string name = item->name;  // the handler may free the item
  if (const std::string* stranded = scheduler_tls.discarding_stranded_work) {
    if (item->handler(item, detail::work_action::discard)) {
      report(diagnostic_kind::never_ran, "scheduler: '" + name + "' never ran: it was launched before shutdown "
                                             "behind " + *stranded + ", which was discarded at shutdown");
    }
    return;
  }
  report(diagnostic_kind::misuse, "scheduler: '" + name + "' " + where + " after shutdown began; discarded");
  item->handler(item, detail::work_action::discard);
}

void scheduler::impl::schedule(work_item* item, priority p) {
  if (!accepts_from_this_thread()) {
    detail::discard_late_work(item, "launched from outside");
    return;
  }
  if (auto* own = p == priority::normal ? own_deque() : nullptr) {
    own->push(item);
  } else {
    injection[index_of(p)].push(item);
  }
  wake_for(p);
}

void scheduler::impl::schedule_shared(work_item* item, priority p) {
  if (!accepts_from_this_thread()) {
    detail::discard_late_work(item, "launched from outside");
    return;
  }
  injection[index_of(p)].push(item);
  wake_for(p);
}

void scheduler::impl::wake_for(priority p) {
  // A pool without threads has nobody to wake: skip its fence.
  bool background_pool = workers.size() > foreground_count;
  if (is_background(p)) {
    if (background_pool) wake_kind(background_wake, worker_kind::background);
  } else if (foreground_count > 0 && background_pool) {
    wake_for_foreground_work(/*after_atomic=*/false);
  } else if (foreground_count > 0) {
    wake_kind(foreground_wake, worker_kind::foreground);
  } else if (background_pool) {
    wake_kind(background_wake, worker_kind::background);  // no foreground pool: background workers take its work
  }
}

void scheduler::impl::wake_for_foreground_work(bool after_atomic) {
  // Background workers run foreground work too: when no foreground worker is parked
  // without a wake-up coming, and none is searching, a parked background worker takes it.
  // The fence is wake_kind's, made once for both looks.
  detail::chaos::point(detail::chaos::site::wake);
  if (after_atomic) {
    detail::std_atomics::fence_after_atomic();
  } else {
    detail::std_atomics::light_barrier();
  }
  std::atomic<std::uint32_t>& foreground_searchers = searching[index_of(worker_kind::foreground)];
  if (!foreground_wake.notify_one_unless(&foreground_searchers) &&
      foreground_searchers.load(std::memory_order_relaxed) == 0) {  // relaxed: ordered by the fence above
    background_wake.notify_one_unless(&searching[index_of(worker_kind::background)]);
  }
}

void scheduler::impl::wake_kind(detail::event_count<>& wake, worker_kind kind, bool after_atomic) {
  detail::chaos::point(detail::chaos::site::wake);
  // Dekker with a parking worker (run_worker: prepare_wait, then the heavy barrier, then a
  // last look): either that look sees the work pushed, or we see the waiter it announced.
  // The light half costs a launch nothing on x86; parking, which is rare beside launching,
  // pays for both. A searcher counted in `searching` leaves the search either with work,
  // or through that same park, so a launch it covered is never left unseen.
  if (after_atomic) {
    detail::std_atomics::fence_after_atomic();
  } else {
    detail::std_atomics::light_barrier();
  }
  wake.notify_one_unless(&searching[index_of(kind)]);
}

work_item* scheduler::impl::steal(worker* thief) {
  std::size_t count = workers.size();
  std::size_t start = count == 0 ? 0 : next_random(thief != nullptr ? thief->random_state : detail::scheduler_tls.helper_random) % count;
  auto took_from = [this, thief](std::uint32_t victim) {  // victim: a worker's index, ~0u for a lent or named deque
    if (thief != nullptr) thief->count(thief->stolen);
    detail::tracing::trace_point(detail::tracing::scheduler, detail::tracing::event_kind::stole, this, nullptr, 0, victim);
  };
  for (std::size_t i = 0; i < count; ++i) {
    worker& victim = *workers[(start + i) % count];
    if (&victim == thief) continue;
    if (auto item = victim.deque.steal()) {
      took_from(victim.index);
      return *item;
    }
  }
  // relaxed: a bit set after the attach that precedes any push; a late view only skips a
  // deque whose pusher's notify (and its fence) comes after this anyway
  for (std::uint32_t in_use = named_deques_in_use.load(std::memory_order_relaxed); in_use != 0;
       in_use &= in_use - 1) {
    auto& victim = named[static_cast<std::size_t>(std::countr_zero(in_use))].deque;
    if (auto item = victim.steal()) {
      took_from(~0u);
      return *item;
    }
  }
  // relaxed: as named_deques_in_use's
  for (std::uint32_t in_use = lent_deques_in_use.load(std::memory_order_relaxed); in_use != 0; in_use &= in_use - 1) {
    auto& victim = lent[static_cast<std::size_t>(std::countr_zero(in_use))].deque;
    if (auto item = victim.steal()) {
      took_from(~0u);
      return *item;
    }
  }
  return nullptr;
}

work_item* scheduler::impl::find_work(worker* self) {
  if (work_item* item = injection[index_of(priority::high)].try_pop()) return item;
  if (!self->standby) {
    if (auto own = self->deque.pop()) return *own;
  }
  if (work_item* item = injection[index_of(priority::normal)].try_pop()) return item;
  if (work_item* item = steal(self)) return item;
  if (self->kind == worker_kind::background) {
    for (priority p : {priority::background_high, priority::background_normal, priority::background_low}) {
      if (work_item* item = injection[index_of(p)].try_pop()) return item;
    }
  }
  return nullptr;
}

work_item* scheduler::impl::find_work_as_helper() {
  if (work_item* item = injection[index_of(priority::high)].try_pop()) return item;
  if (auto* own = own_deque()) {  // a helper that is an attached named thread: its own deque first
    if (auto mine = own->pop()) return *mine;
  }
  if (work_item* item = injection[index_of(priority::normal)].try_pop()) return item;
  if (work_item* item = steal(nullptr)) return item;
  for (priority p : {priority::background_high, priority::background_normal, priority::background_low}) {
    if (work_item* item = injection[index_of(p)].try_pop()) return item;
  }
  return nullptr;
}

bool scheduler::impl::execute(work_item* item, worker* self) {
  if (self != nullptr) {  // a worker's context already names this scheduler
    bool ran = item->handler(item, detail::work_action::run);
    self->count(self->executed);
    return ran;
  }
  // Another scheduler's worker or named thread helping here: its deque is not ours, so the
  // item must not see it. A thread of no scheduler uses the deque lent to it
  // (lib/scheduler/lent_deques.cpp).
  detail::guest_of guest(*this, this_thread_context().owner == nullptr);
  return item->handler(item, detail::work_action::run);
}

std::chrono::microseconds scheduler::impl::search_spin(worker& self) const noexcept {
  // relaxed: the worker's own counter (worker::count)
  std::uint64_t stolen_now = self.stolen.load(std::memory_order_relaxed);
  bool stole = std::exchange(self.stolen_before_search, stolen_now) != stolen_now;
  // options.spin_for is at most 10 ms (the constructor), so the product cannot overflow.
  return stole ? options.spin_for * spin_after_steal : options.spin_for;
}

work_item* scheduler::impl::search(worker& self, detail::event_count<>& wake, bool woken,
                                    std::chrono::microseconds spin) {
  std::atomic<std::uint32_t>& searchers = searching[index_of(self.kind)];
  searchers.fetch_add(1, std::memory_order_relaxed);  // relaxed: the fence below publishes it
  // Dekker with wake_kind's fence: a launcher that reads the count raised pushed before
  // it, and our looks below see that push.
  detail::std_atomics::fence_after_atomic();
  // A worker just woken looks at once; one whose look just failed first pauses (each look
  // costs the deques' owners a cache-line transfer, below).
  work_item* item = woken ? find_work(&self) : nullptr;
  if (item == nullptr && spin.count() > 0) {
    // Each look reads the other threads' deque ends, which costs their next push or pop a
    // cache-line transfer; looking ever less often (up to every max_spin_pauses pauses) keeps a spinning
    // worker from slowing a thread that launches and waits for one task at a time.
    auto give_up = std::chrono::steady_clock::now() + spin;
    int pauses = 16;
    do {
      for (int pause = 0; pause < pauses; ++pause) detail::cpu_relax();
      pauses = std::min(pauses * 2, max_spin_pauses);
      item = find_work(&self);
      // Once shutdown has begun, the spin only delays it: it waits for every worker to park.
      // relaxed: a hint; a worker that parks is woken by whatever is pushed after
    } while (item == nullptr && std::chrono::steady_clock::now() < give_up && accepting.load(std::memory_order_relaxed));
  }
  // relaxed: the fence that follows (the hand-on's, or the park's prepare_wait) orders it
  // before this thread's next look, against wake_kind's fence
  const bool last_searcher = searchers.fetch_sub(1, std::memory_order_relaxed) == 1;
  // The decrement's own barrier stands for wake_kind's fence (hand_on_search).
  if (item != nullptr && last_searcher) hand_on_search(wake, self.kind, /*fenced=*/true);
  return item;
}

void scheduler::impl::hand_on_search(detail::event_count<>& wake, worker_kind kind, bool fenced) {
  // A launch that left its wake-up to a foreground search would have woken a background
  // worker when no foreground one was parked (wake_for): the hand-on does the same, so
  // that work is not left queued beside a sleeping background worker.
  if (kind == worker_kind::foreground && workers.size() > foreground_count) {
    wake_for_foreground_work(fenced);
    return;
  }
  // A lone worker without standby workers has nobody to hand on to: skip the fence.
  // relaxed: a standby created since is woken by enter_blocking's notify_all, and searches
  if (pool_size(kind) <= 1 && standby[index_of(kind)].created.load(std::memory_order_relaxed) == 0) return;
  wake_kind(wake, kind, fenced);
}

void scheduler::impl::park_state_change(std::int64_t parked_delta) {
  // acq_rel: a parking worker publishes everything it did (pushes included) to shutdown's
  // acquire loads in quiescent(); an unparking one sees what the waker published.
  parked.fetch_add(parked_delta > 0 ? one_transition + 1 : one_transition - 1, std::memory_order_acq_rel);
  if (parked_delta > 0) parking_news.notify_all();
}

bool scheduler::impl::wanted_standby(const worker& self) const {
  // relaxed: after the standby event count's fence (the re-check before parking) it is
  // ordered against enter_blocking; elsewhere a hint whose staleness costs one extra look
  // for work or one extra notify
  return standby[index_of(self.kind)].blocked.load(std::memory_order_relaxed) > self.rank;
}

void scheduler::impl::run_worker(worker& self) {
  detail::as_worker as_one_of_ours(*this, self, self.standby ? nullptr : &self.deque);
  worker_info info{self.index, self.kind, self.standby};
  detail::tracing::set_thread_role(self.standby ? detail::tracing::thread_role::standby_worker
                                   : self.kind == worker_kind::foreground ? detail::tracing::thread_role::worker
                                                                          : detail::tracing::thread_role::background_worker,
                                   self.index);
  // A worker's chaos decisions follow its place in the pool, whichever OS thread it is.
  chaos::set_thread_identity(1 + self.index + (self.kind == worker_kind::foreground ? 0 : 0x100) +
                             (self.standby ? 0x1000 : 0));
  if (options.on_worker_start) options.on_worker_start(info);

  detail::event_count<>& wake = self.kind == worker_kind::foreground ? foreground_wake : background_wake;
  bool woken = false;  // returned from a wait on `wake` and has not looked for work since
  bool standing_in = false;  // a standby worker taking a blocked worker's place (traced as a slice)
  auto trace_parking = [this](detail::tracing::event_kind kind) {
    if (detail::tracing::on(detail::tracing::scheduler)) [[unlikely]] {
      // relaxed: a sample for the trace's counter
      detail::tracing::record(kind, this, nullptr, parked.load(std::memory_order_relaxed) & 0xffff'ffffu, 0);
    }
  };
  for (;;) {
    if (self.standby && !wanted_standby(self)) {
      // The wake-up this thread took (notify_one's are anyone's) may be all that stands for
      // new work: hand it on before parking as a standby, to whom its launch would have
      // woken, as a search that ends with work does. A searcher of the kind it skips covers
      // that work: the work was pushed before the wake-up came, so the searcher's looks see it.
      if (std::exchange(woken, false)) hand_on_search(wake, self.kind, /*fenced=*/false);
      detail::event_count<>& standby_wake = standby[index_of(self.kind)].wake;
      auto key = standby_wake.prepare_wait();
      if (stopping.load(std::memory_order_acquire)) {  // acquire: pairs with shutdown's release
        standby_wake.cancel_wait();
        break;
      }
      if (wanted_standby(self)) {
        standby_wake.cancel_wait();
        continue;
      }
      if (std::exchange(standing_in, false)) {
        detail::tracing::trace_point(detail::tracing::scheduler, detail::tracing::event_kind::standby_left, this);
      }
      park_state_change(+1);
      standby_wake.commit_wait(key);
      park_state_change(-1);
      continue;
    }

    // A worker just woken searches at once: its waker may have left other launches'
    // wake-ups to it (search).
    const bool was_woken = std::exchange(woken, false);
    if (self.standby && !std::exchange(standing_in, true)) {
      detail::tracing::trace_point(detail::tracing::scheduler, detail::tracing::event_kind::standby_entered, this);
    }
    work_item* item = was_woken ? nullptr : find_work(&self);
    if (item == nullptr && (was_woken || options.spin_for.count() > 0)) {
      item = search(self, wake, was_woken, search_spin(self));
    }
    if (item != nullptr) {
      execute(item, &self);
      continue;
    }

    auto key = wake.prepare_wait();
    // The heavy half of the launches' light barrier (wake_kind): a push whose launcher did
    // not see this waiter is visible to the look below. While a searcher of this kind is
    // counted it is skipped: that searcher ends its search with work, handing the search on
    // to a waiter such as this one (search), or parks here, and the last to park, counting
    // no searcher, takes the heavy barrier — so one park in a burst pays it, not each.
    if (searching[index_of(self.kind)].load(std::memory_order_seq_cst) == 0) detail::std_atomics::heavy_barrier();
    if ((item = find_work(&self)) != nullptr) {
      wake.cancel_wait();
      // Found after the search ended: launches may have left their wake-ups to that search.
      hand_on_search(wake, self.kind, /*fenced=*/false);
      execute(item, &self);
      continue;
    }
    if (stopping.load(std::memory_order_acquire)) {  // acquire: pairs with shutdown's release
      wake.cancel_wait();
      break;
    }
    park_state_change(+1);
    trace_parking(detail::tracing::event_kind::parked);
    wake.commit_wait(key);
    woken = true;
    park_state_change(-1);
    trace_parking(detail::tracing::event_kind::unparked);
  }

  if (options.on_worker_exit) options.on_worker_exit(info);
}

void scheduler::impl::start_standby(standby_pool& pool) {
  auto fresh = std::make_unique<worker>();
  fresh->standby = true;
  fresh->kind = pool.kind;
  fresh->rank = pool.created.load(std::memory_order_relaxed);  // relaxed: written only under pool.creation
  fresh->index = fresh->rank;
  fresh->random_state = 0xD1B5'4A32'D192'ED03ull * (fresh->rank + 1);
  worker* raw = fresh.get();
  pool.threads.push_back(std::move(fresh));
  // release: quiescent() counts this thread before it can possibly park
  pool.created.fetch_add(1, std::memory_order_release);
  try {
    raw->thread = std::thread([this, raw] { run_worker(*raw); });
  } catch (...) {  // not counted after all: quiescence would wait for it to park
    pool.created.fetch_sub(1, std::memory_order_relaxed);  // relaxed: under pool.creation, as the add
    pool.threads.pop_back();
    throw;
  }
}

void scheduler::impl::enter_blocking(standby_pool& pool) noexcept {
  unsigned blocked = pool.blocked.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: the notify's fence publishes it
  if (blocked > pool.created.load(std::memory_order_acquire)) {  // acquire: pairs with start_standby
    start_standbys_for(pool, blocked);
  }
  pool.wake.notify_all();
}

void scheduler::impl::start_standbys_for(standby_pool& pool, unsigned blocked) noexcept try {
  {
    std::lock_guard lock(pool.creation);
    while (pool.created.load(std::memory_order_relaxed) < blocked &&  // relaxed: under the lock
           pool.created.load(std::memory_order_relaxed) < pool.cap) {
      start_standby(pool);
    }
    if (blocked == pool.cap + 1) {
      report(diagnostic_kind::limit_reached,
             std::string("scheduler: standby cap reached: ") + std::to_string(blocked) + " " +
                 (pool.kind == worker_kind::foreground ? "foreground" : "background") +
                 " workers blocked, at most " + std::to_string(pool.cap) +
                 " standby workers; past it the pool keeps one thread running",
             severity::warning);
    }
    // Past the cap the pool narrows, but never to nothing: when every thread of the kind is
    // blocked, one more runs, so ready work is never stranded behind blocked waiters
    // (docs/scheduler.md, "Waiting inside a task"), up to max_overflow_standby more threads.
    // Standby r runs while more than r are blocked.
    unsigned created = pool.created.load(std::memory_order_relaxed);  // relaxed: under the lock
    if (created + pool_size(pool.kind) <= blocked) {
      if (created < pool.cap + max_overflow_standby) {
        start_standby(pool);
      } else if (!std::exchange(pool.overflow_reported, true)) {
        report(diagnostic_kind::limit_reached,
               std::string("scheduler: every one of ") + std::to_string(blocked) + " " +
                   (pool.kind == worker_kind::foreground ? "foreground" : "background") +
                   " threads is blocked and no more standby workers may start: the last to wait runs queued work "
                   "on its own stack instead of blocking",
               severity::warning);
      }
    }
  }
} catch (const std::exception& error) {  // a thread or its memory could not be had
  report(diagnostic_kind::limit_reached,
         std::string("scheduler: a standby worker could not start (") + error.what() + "); the pool stays narrower",
         severity::warning);
}

bool scheduler::impl::would_stall(const worker& self) const noexcept {
  const standby_pool& pool = standby[index_of(self.kind)];
  // relaxed, both: a hint; a thread that misreads it blocks, or helps, once more than needed
  unsigned created = pool.created.load(std::memory_order_relaxed);
  unsigned blocked = pool.blocked.load(std::memory_order_relaxed);
  return created >= pool.cap + max_overflow_standby && blocked + 1 >= created + pool_size(self.kind);
}

void scheduler::impl::leave_blocking(standby_pool& pool, worker& self) {
  // relaxed: standby workers notice lazily, after their current item
  pool.blocked.fetch_sub(1, std::memory_order_relaxed);
  if (self.napping) return;  // a nap ends whether or not anything moved
  // Own part first: others_unblocked, on this thread, never sees the pool's count behind it.
  ++self.unblocked;
  // relaxed: a progress hint for others_unblocked, which orders nothing by it; a late view
  // only makes the last thread standing nap once more before it helps
  pool.unblocked.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace magpie
