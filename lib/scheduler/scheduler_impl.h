// Private to lib/: the scheduler's state, shared by scheduler.cpp (workers, standby),
// scheduler_shutdown.cpp (shutdown) and named_thread.cpp (named-thread queues).
#pragma once

#include <magpie/detail/deque.h>
#include <magpie/detail/event_count.h>
#include <magpie/detail/injection_queue.h>
#include <magpie/detail/thread_context.h>
#include <magpie/detail/thread_tag.h>
#include <magpie/scheduler.h>

#include "thread_state.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace magpie {

using detail::work_item;

// worker is one worker thread's state; owner-written counters are plain load+store.
struct worker {
  unsigned index = 0;
  worker_kind kind = worker_kind::foreground;
  bool standby = false;
  unsigned rank = 0;  // standby only: active while more than `rank` workers are blocked
  detail::work_stealing_deque<work_item*> deque;
  std::uint64_t random_state = 0;
  std::atomic<std::uint64_t> executed{0};
  std::atomic<std::uint64_t> stolen{0};
  std::uint64_t stolen_before_search = 0;  // owner-only: `stolen` when the last search began
  std::uint64_t unblocked = 0;  // owner-only: its part of its standby pool's `unblocked`
  bool napping = false;         // owner-only: its block is a nap, whose end is no progress
  std::thread thread;

  void count(std::atomic<std::uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // relaxed: owner-only writes, read as a statistic
  }
};

// standby_pool holds the standby workers of one kind.
struct standby_pool {
  worker_kind kind = worker_kind::foreground;
  unsigned cap = 0;
  std::atomic<unsigned> blocked{0};  // workers of this kind inside a blocking_scope
  // unblocked counts the blocking_scopes its threads left: less a thread's own part, the
  // progress of the others while every thread is blocked, which the last thread standing
  // watches before it helps (others_unblocked).
  std::atomic<std::uint64_t> unblocked{0};
  std::atomic<unsigned> created{0};
  detail::event_count<> wake;        // standby workers not needed park here
  std::mutex creation;               // slow path only: creating a standby thread
  bool overflow_reported = false;    // under `creation`: the last standby past the cap was reported
  std::vector<std::unique_ptr<worker>> threads;
  scheduler::impl* owner = nullptr;
};

// named_queue is one of a named thread's two queues.
struct named_queue {
  detail::counted_injection_queue<work_item> high;
  detail::counted_injection_queue<work_item> normal;
  std::atomic<bool> processing{false};
  std::atomic<bool> return_requested{false};
};

// small_deque_capacity is the first ring's size for the lent and the named threads' deques:
// a scheduler holds sixteen of each and most stay unused; one that fills grows.
inline constexpr std::int64_t small_deque_capacity = 32;

// lent_deque is a deque lent to a thread outside the pool (neither a worker nor attached)
// that launches on the scheduler: its normal-priority launches go there, workers steal from
// it, and its waits take their tasks back from it, as an attached thread's do
// (lib/scheduler/lent_deques.cpp). A thread keeps it until it exits.
struct lent_deque {
  detail::work_stealing_deque<work_item*> deque{small_deque_capacity};
  std::atomic<bool> lent{false};
};

// named_thread_state is one named thread's queues and parking spot, plus the deque its
// own normal-priority launches go to: workers steal from it (UE: the game thread's local
// queue), and the thread pops from it when it helps.
struct named_thread_state {
  std::array<named_queue, 2> queues;  // indexed by thread_queue
  detail::event_count<> wake;
  std::atomic<bool> attached{false};
  detail::work_stealing_deque<work_item*> deque{small_deque_capacity};
  // blocked_waiter is the event count the attached thread is blocked on inside a wait (else
  // nullptr): a send to its queues wakes it there too, since its wait runs its queues'
  // work (lib/tasks/task_wait.cpp). Event counts waited on are never freed.
  std::atomic<detail::event_count<>*> blocked_waiter{nullptr};

  // has_work_to_run says whether a queue the attached thread is not already processing
  // holds work. On that thread only (it alone sets `processing`).
  bool has_work_to_run() const noexcept {
    for (const named_queue& each : queues) {
      // relaxed: this thread's own flag
      if (!each.processing.load(std::memory_order_relaxed) && (!each.high.looks_empty() || !each.normal.looks_empty())) {
        return true;
      }
    }
    return false;
  }
};

// named_thread_name names named thread `index` in reports: "game", "user 3".
std::string named_thread_name(std::uint32_t index);

// attachable_serial[slot] is the serial of the scheduler in that slot while threads may be
// attached to it, 0 from its destruction on. A thread remembers the serial and slot of the
// scheduler it attached to (scheduler_tls.attached_serial, attached_slot; 0: none), so
// that it can tell, without touching the scheduler, that it was destroyed while it stayed
// attached. Serials are never reused; slots are.
extern std::array<std::atomic<std::uint64_t>, 256> attachable_serial;

// attached_scheduler_gone says whether the calling thread is still attached to a scheduler
// since destroyed. Inline: scheduler::current() asks it on every free launch from an
// attached thread, where a call would cost more than the look.
inline bool attached_scheduler_gone() noexcept {
  const std::uint64_t serial = detail::scheduler_tls.attached_serial;
  // acquire: pairs with close_attachments' release store
  return serial != 0 && attachable_serial[detail::scheduler_tls.attached_slot].load(std::memory_order_acquire) != serial;
}

// drop_dead_attachment detaches the calling thread, with a report, when it is still
// attached to a scheduler since destroyed, and says whether it did. Cold: asked only on a
// thread whose context names a named thread.
bool drop_dead_attachment() noexcept;

// calling_thread_name names the calling thread in reports: "the game thread", "worker 2",
// "thread 140213" (a thread of no scheduler).
std::string calling_thread_name();

// stall_watch reports a blocking wait that has made no progress for a while
// (scheduler_options::stall_report_after), once. It arms when its owner is about to block,
// so a wait that never blocks never reads the clock for it.
class stall_watch {
 public:
  using clock = std::chrono::steady_clock;

  // limit is how long the coming block may last before the watch must look: until `after`
  // has passed since it armed (this call arms it); no limit when off or already reported.
  std::chrono::nanoseconds limit(std::chrono::milliseconds after, clock::time_point now) noexcept {
    if (after.count() <= 0 || reported_) return std::chrono::nanoseconds::max();
    if (!armed_) {
      armed_ = true;
      since_ = now;
    }
    return std::max(std::chrono::nanoseconds::zero(), std::chrono::nanoseconds(since_ + after - now));
  }
  // due says, once, that `after` has passed since the watch armed.
  bool due(std::chrono::milliseconds after, clock::time_point now) noexcept {
    if (after.count() <= 0 || reported_ || !armed_ || now - since_ < after) return false;
    reported_ = true;
    return true;
  }
  // progressed disarms the watch: the wait moved (ran something), the clock starts again.
  void progressed() noexcept { armed_ = false; }
  // waited is how long the stall has lasted at `now`, in whole milliseconds.
  long long waited_ms(clock::time_point now) const noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
  }

 private:
  bool armed_ = false;
  bool reported_ = false;
  clock::time_point since_{};
};

using detail::current_thread_context;
using detail::thread_context;

inline thread_context& this_thread_context() noexcept { return current_thread_context; }

// scheduler_slot names a living scheduler in one byte, so that a task can name its
// scheduler (task_base::owner_index) in a byte rather than a pointer: what keeps a task
// with a pointer's worth of captures in one cache line.
//
// A scheduler destroyed while tasks naming it are alive (a handle kept, a task behind an
// event not yet triggered) leaves its slot retired rather than free: such a task that
// becomes ready later is reported and completes as never run (ready_loop), where a reused
// slot would hand it to a stranger's scheduler. The slot is reused once the census
// (task_census.h) says its last task is gone.
class scheduler_slot {
 public:
  // Takes a free slot for `owner`; throws std::length_error when 256 schedulers are alive
  // (retired slots whose tasks are still alive count as alive).
  explicit scheduler_slot(scheduler::impl* owner);
  ~scheduler_slot();
  scheduler_slot(const scheduler_slot&) = delete;
  scheduler_slot& operator=(const scheduler_slot&) = delete;

  std::uint8_t index() const noexcept { return index_; }

  // at is the scheduler in slot `index`, or a marker (is_retired) once it is gone.
  static scheduler::impl* at(std::uint8_t index) noexcept {
    // relaxed: a slot is filled before its scheduler exists for anyone, so whoever holds
    // one of its tasks learnt of the scheduler after the store (ordered by what handed it
    // over); retirement is ordered for a task's holder by what ended the scheduler's life
    return living[index].load(std::memory_order_relaxed);
  }
  // at_published is `at` for a thread that then reads the slot's closing flag: the acquire
  // pairs with claim's CAS, so a slot claimed anew is not seen with its old flag.
  static scheduler::impl* at_published(std::uint8_t index) noexcept {
    return living[index].load(std::memory_order_acquire);  // acquire: as said
  }
  // is_retired: the slot's scheduler is gone (a slot being claimed counts: see claim).
  static bool is_retired(const scheduler::impl* owner) noexcept { return owner == retired() || owner == claiming(); }
  static bool is_retired(std::uint8_t index) noexcept { return is_retired(at(index)); }

  // retired marks a slot whose scheduler is gone while tasks naming it live on. Never
  // dereferenced; no thread's context names it, so comparing a context's scheduler with
  // it is safe.
  static scheduler::impl* retired() noexcept { return reinterpret_cast<scheduler::impl*>(&markers[0]); }

  // close marks the slot's scheduler as going (shutdown, once every worker is parked with
  // nothing queued): threads outside its pool no longer pin it (scheduler_pin), so they no
  // longer start its work. Returns once no thread is pinned to it any more, running `help`
  // meanwhile (it returns whether it found work): a pinned thread may wait for work only
  // the closer would run. Nothing outside its pool can reach its queues after that.
  template <class Help>
  void close(Help help) noexcept {
    start_closing();
    while (is_pinned()) {
      if (!help()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // pinned_here says whether the calling thread holds a pin on this slot (it runs the
  // scheduler's work further down its stack).
  bool pinned_here() const noexcept;

  // is_closing says whether close has begun (for a pin's look after its barrier).
  static bool is_closing(std::uint8_t index) noexcept;

 private:
  // claiming marks a retired slot while one claimant reads its census (see claim).
  static scheduler::impl* claiming() noexcept { return reinterpret_cast<scheduler::impl*>(&markers[1]); }
  static bool claim(std::size_t index, scheduler::impl* owner) noexcept;
  void start_closing() noexcept;
  bool is_pinned() const noexcept;

  static std::array<std::atomic<scheduler::impl*>, 256> living;
  struct alignas(alignof(std::max_align_t)) marker {
    char unused;
  };
  static constinit marker markers[2];  // retired, claiming: addresses no scheduler has
  // closing[i]: slot i's scheduler is shutting down (close); cleared when the slot is claimed.
  static std::array<std::atomic<bool>, 256> closing;
  std::uint8_t index_ = 0;
};

// scheduler_pin keeps the scheduler in slot `index` from being destroyed while a thread
// outside its pool (neither its worker nor attached to it) runs its work or helps it: a
// waiter retracting one of its tasks, say. get() is the scheduler, or nullptr once it is
// going (close): then the thread must leave its work alone. A pin costs such a thread two
// stores and a load (the light half of an asymmetric barrier, whose heavy half close
// makes); a thread of the scheduler's own pins nothing. The destructor waits for every
// pin to go: hold one around the scheduler's work (a body it runs, which may block as a
// worker's would) and short looks, never around a wait of the pinner's own.
class scheduler_pin {
 public:
  explicit scheduler_pin(std::uint8_t index) noexcept;
  ~scheduler_pin() {
    if (depth_ != nullptr) unpin();
  }
  scheduler_pin(const scheduler_pin&) = delete;
  scheduler_pin& operator=(const scheduler_pin&) = delete;

  scheduler::impl* get() const noexcept { return owner_; }

 private:
  void unpin() noexcept;

  scheduler::impl* owner_ = nullptr;
  std::atomic<std::uint16_t>* depth_ = nullptr;  // this thread's pin count for the slot, if it pinned
};

// parked_mask and one_transition split scheduler::impl::parked: the low half counts parked
// threads, each park or unpark adds one_transition to the high half.
inline constexpr std::uint64_t parked_mask = 0xffff'ffffu;
inline constexpr std::uint64_t one_transition = std::uint64_t{1} << 32;

// index_of is where a priority's injection queue, or a kind's standby pool, sits in its array.
constexpr std::size_t index_of(priority p) noexcept { return static_cast<std::size_t>(p); }
constexpr std::size_t index_of(worker_kind k) noexcept { return static_cast<std::size_t>(k); }

struct scheduler::impl {
  explicit impl(scheduler& facade, scheduler_options options);

  // Unique among every scheduler the process ever had: what a thread's record of a lent
  // deque names its scheduler by (a slot, or an address, may be reused). Before the slot:
  // a thread handing a deque back pins the slot and reads this, so claiming the slot must
  // publish it.
  const std::uint64_t serial;
  scheduler_slot slot{this};  // filled before anything can make a task

  void start();
  void shutdown();

  void schedule(work_item* item, priority p);
  // schedule_shared is schedule() onto the shared queue of `p`, never the calling thread's
  // own deque: for work the thread took but must not run, which would otherwise lie on top
  // of the work its joins take back.
  void schedule_shared(work_item* item, priority p);
  void wake_for(priority p);
  // wake_for_foreground_work is wake_for's for foreground work in a pool with background
  // workers: a parked foreground worker, else (none parked, none searching) a parked
  // background one, unless one of that kind searches. `after_atomic` as for wake_kind.
  void wake_for_foreground_work(bool after_atomic);
  // wake_kind wakes a parked worker of the kind whose wake-ups `wake` carries, unless one
  // of that kind is searching. `after_atomic`: the caller's last atomic operation was a
  // read-modify-write, which stands for the full fence (fence_after_atomic).
  void wake_kind(detail::event_count<>& wake, worker_kind kind, bool after_atomic = false);
  // search looks for work as one of the kind's searchers (`searching`), spinning up to
  // options.spin_for; a launch made meanwhile may leave its wake-up to the search. Whoever
  // finds work as the last searcher hands the search on (hand_on_search): that launch may
  // have queued more than it took.
  // `woken`: the worker has just returned from its park (else its first look just failed).
  // `spin`: how long it keeps looking (search_spin).
  work_item* search(worker& self, detail::event_count<>& wake, bool woken, std::chrono::microseconds spin);
  // search_spin is how long `self`'s next search spins: options.spin_for, longer for a
  // worker that stole since its last search (its work came in pieces taken from others, as
  // a loop's halves or a fork-join's children do: more is likely to follow shortly).
  std::chrono::microseconds search_spin(worker& self) const noexcept;
  // hand_on_search wakes a parked worker of `kind` to search next, unless one searches (for
  // the foreground kind, as wake_for_foreground_work does when background workers exist);
  // `fenced`: the caller's last atomic operation was a read-modify-write (fence_after_atomic).
  void hand_on_search(detail::event_count<>& wake, worker_kind kind, bool fenced);
  work_item* find_work(worker* self);
  work_item* find_work_as_helper();
  work_item* steal(worker* thief);
  bool execute(work_item* item, worker* self);  // the handler's answer: whether it ran something
  void run_worker(worker& self);
  bool wanted_standby(const worker& self) const;
  void enter_blocking(standby_pool& pool) noexcept;
  void start_standbys_for(standby_pool& pool, unsigned blocked) noexcept;
  void leave_blocking(standby_pool& pool, worker& self);
  // would_stall says that if the calling pool thread blocked now, every thread of its kind
  // would be blocked with no standby left to start: nobody would run ready work. Its wait
  // then helps with queued work instead (lib/tasks/task_wait.cpp, docs/scheduler.md).
  bool would_stall(const worker& self) const noexcept;
  // others_unblocked is how many times the pool's other threads (of either kind) have left a
  // blocked wait: unchanged for a while, with every thread blocked, the pool is stuck rather
  // than slow to wake.
  std::uint64_t others_unblocked(const worker& self) const noexcept {
    std::uint64_t all = 0;
    // relaxed: a hint; a stale count makes the waiter nap once more before it helps
    for (const standby_pool& pool : standby) all += pool.unblocked.load(std::memory_order_relaxed);
    return all - self.unblocked;
  }
  // pool_size is how many workers of `kind` the scheduler started with (standby ones aside).
  unsigned pool_size(worker_kind kind) const noexcept {
    return kind == worker_kind::foreground ? foreground_count
                                           : static_cast<unsigned>(workers.size()) - foreground_count;
  }
  void start_standby(standby_pool& pool);
  bool quiescent() const;
  void drain_until_quiescent();
  // report_stalled_drain reports a shutdown that has waited `waited_ms` for its workers, or
  // (`outside`) for threads outside its pool running its work.
  void report_stalled_drain(long long waited_ms, bool outside);
  void park_state_change(std::int64_t parked_delta);
  bool accepts_from_this_thread() const;
  // own_deque is the deque the calling thread pushes its normal work to: a worker's own, an
  // attached named thread's, or, for a thread of no scheduler, one lent to it
  // (lend_deque); nullptr for standby workers, other schedulers' threads, and a thread
  // outside the pool when every lent deque is taken.
  detail::work_stealing_deque<work_item*>* own_deque() { return own_deque(this_thread_context()); }
  detail::work_stealing_deque<work_item*>* own_deque(const thread_context& context);
  // lend_deque is the deque lent to the calling thread (lending one the first time), or
  // nullptr when all are lent to other threads. The scheduler must be alive: the caller
  // launches on it, or holds a pin.
  detail::work_stealing_deque<work_item*>* lend_deque() noexcept;
  // borrowed_deque is the deque lent to the calling thread, if it holds one.
  detail::work_stealing_deque<work_item*>* borrowed_deque() noexcept;
  // Past the one-comparison look at the deque found last (inline below).
  detail::work_stealing_deque<work_item*>* find_borrowed_deque() noexcept;
  detail::work_stealing_deque<work_item*>* lend_deque_slowly() noexcept;
  detail::work_stealing_deque<work_item*>* lend_new_deque() noexcept;
  void discard_stranded_named_work();
  // close_attachments, in the destructor once the destroying thread is detached: reports
  // each named thread still attached (on another thread) and marks this scheduler gone to
  // it, so that the thread's next current(), attach() or wait detaches it with a report
  // instead of using the freed scheduler (lib/scheduler/named_thread.cpp).
  void close_attachments();
  // process_until_return is process_until_request_return's loop over named thread `index`'s
  // `queue`, which the caller has claimed. With `awaited` (a wait's loop) it reports, as a
  // native wait does, an unattached named thread with work queued and a stall past
  // stall_after, each once.
  void process_until_return(std::uint32_t index, thread_queue queue, const detail::awaited_work* awaited);
  // end_named_processing is shutdown's step for named threads: each queue a thread is
  // processing is run empty by that thread, then its processing call is ended (as
  // request_return does) and waited for until it has returned. Whether it found any.
  bool end_named_processing();
  // processing_ended has bit i set once a shutdown ended named thread i's processing call
  // (end_named_processing): the destructor waits a while for that thread to detach
  // (close_attachments). The shutting-down thread's own.
  std::uint32_t processing_ended = 0;
  // run_one_named_item runs one item of named thread `index`'s queues (main, then local,
  // skipping a queue this thread is already processing); on that thread. An item of its
  // deque only on a scheduler without workers, where nobody else runs it: otherwise the
  // workers run those, and one run under a wait could block on what the thread does after
  // the wait (docs/scheduler.md, "The wait protocol").
  bool run_one_named_item(std::uint32_t index);
  // unattached_with_work is a named thread no thread has attached that has work queued,
  // which a wait may need; -1 if none. A look of a few loads per named thread.
  int unattached_with_work() const noexcept;
  // unattached_relook is how often a blocked wait, or a processing loop watched for one,
  // looks again for such a thread, until it has reported one.
  static constexpr std::chrono::milliseconds unattached_relook{1000};

  scheduler& facade;
  scheduler_options options;
  // options.stall_report_after, or MAGPIE_STALL_REPORT_MS from the environment.
  std::chrono::milliseconds stall_after{0};
  std::vector<std::unique_ptr<worker>> workers;  // foreground first, then background; fixed after start
  unsigned foreground_count = 0;
  std::array<detail::counted_injection_queue<work_item>, priority_count> injection;
  detail::event_count<> foreground_wake;
  detail::event_count<> background_wake;
  // searching counts the workers of each kind searching for work: those spinning after a
  // look found nothing, and those just woken. While one is, a launch wakes nobody (it will
  // be found), and the last searcher to find work wakes the next, which searches in turn;
  // so does a worker that finds work in its last look before parking. Without it a
  // launcher feeding a wide pool pays a futex wake per task, as each idle worker parks and
  // is woken again. Go's scheduler counts its spinning threads so, the woken among them.
  alignas(detail::cache_line) std::array<detail::std_atomics::atomic<std::uint32_t>, 2> searching{};
  std::array<standby_pool, 2> standby;  // indexed by worker_kind

  // parked: low 32 bits count parked threads, high 32 bits count park/unpark transitions,
  // so shutdown can tell "everyone stayed parked while I looked at the queues".
  detail::std_atomics::atomic<std::uint64_t> parked{0};
  detail::event_count<> parking_news;  // shutdown waits here for workers to park

  std::atomic<bool> accepting{true};
  std::atomic<bool> stopping{false};
  std::once_flag shut_down;

  std::array<named_thread_state, named_thread::max_count> named;
  // Bit i: named[i].deque has ever been used; thieves and shutdown look only at those.
  std::atomic<std::uint32_t> named_deques_in_use{0};

  static constexpr std::size_t lent_deque_count = 16;
  std::array<lent_deque, lent_deque_count> lent;
  // Bit i: lent[i] has ever been lent; thieves and shutdown look only at those.
  std::atomic<std::uint32_t> lent_deques_in_use{0};
};

namespace detail {
// While this thread discards an item stranded in a named-thread queue at shutdown,
// scheduler_tls.discarding_stranded_work names it and where it was queued ("'draw' queued
// on render (main queue)"). What discarding it makes ready (tasks launched behind it before
// shutdown) never runs, and is reported as such, naming it, rather than as a late launch.
//
// discard_late_work reports and discards `item`, scheduled after shutdown began: as never
// run when discarding stranded work made it ready, else as a launch from outside (onto
// `where`, e.g. "a named thread"). Cold, out of line.
void discard_late_work(work_item* item, const char* where);

}  // namespace detail

inline detail::work_stealing_deque<work_item*>* scheduler::impl::borrowed_deque() noexcept {
  return detail::scheduler_tls.last_lent_serial == serial ? detail::scheduler_tls.last_lent_deque : find_borrowed_deque();
}

inline detail::work_stealing_deque<work_item*>* scheduler::impl::lend_deque() noexcept {
  return detail::scheduler_tls.last_lent_serial == serial ? detail::scheduler_tls.last_lent_deque : lend_deque_slowly();
}

inline detail::work_stealing_deque<work_item*>* scheduler::impl::own_deque(const thread_context& context) {
  if (context.owner == this) return context.deque;
  return context.owner == nullptr ? lend_deque() : nullptr;
}

namespace detail {
// The ways a thread takes on a scheduler, each written once: as one of its workers
// (as_worker, for the worker's life), attached as one of its named threads (attach_context
// / detach_context, from attach() to detach()), or as a guest running some of its work for
// a scope (guest_of). Nothing else writes the thread's context, but for the counters of
// what it runs.

// as_worker makes the calling thread `self`, a worker of `host`, until it goes.
class as_worker {
 public:
  as_worker(scheduler::impl& host, worker& self, work_stealing_deque<work_item*>* deque) noexcept
      : context_(this_thread_context()) {
    context_.owner = &host;
    context_.facade = &host.facade;
    context_.self = &self;
    context_.deque = deque;          // none for a standby worker: it takes no pushes
    context_.push_gate = nullptr;    // a worker's pushes need no check
    context_.wakes_workers = true;
    context_.pool_thread = true;
    renew_own_deque_generation();
  }
  ~as_worker() { context_ = thread_context{}; }
  as_worker(const as_worker&) = delete;
  as_worker& operator=(const as_worker&) = delete;

 private:
  thread_context& context_;
};

// attach_context makes the calling thread `host`'s named thread `index`, pushing onto that
// thread's deque; detach_context makes it a thread of no scheduler again.
inline void attach_context(scheduler::impl& host, unsigned index, work_stealing_deque<work_item*>& deque) noexcept {
  thread_context& context = this_thread_context();
  context.owner = &host;
  context.facade = &host.facade;
  context.named = static_cast<int>(index);
  context.deque = &deque;
  context.push_gate = &host.accepting;
  context.wakes_workers = !host.workers.empty();
  renew_own_deque_generation();  // task_groups made before this see a new deque owner
}
inline void detach_context() noexcept {
  thread_context& context = this_thread_context();
  context.named = -1;
  context.deque = nullptr;
  context.push_gate = nullptr;
  context.wakes_workers = false;
  renew_own_deque_generation();  // this thread's task_groups stop using the deque
  context.owner = nullptr;
  context.facade = nullptr;
}

// guest_of puts the calling thread in `host`'s context while it runs some of host's work
// (a work item, a task body, an execute() call) without being one of its workers. A thread
// of another scheduler has its worker or named-thread identity and its deque hidden
// meanwhile (launches and task_groups inside would push onto a deque that is not host's);
// it pushes onto a deque host lends it where `lend_deque` says so, else onto none. The
// thread counts as running host's work (`running`), and gets back the context it had when
// the scope ends, whatever the work did to it meanwhile (attach, helping).
class guest_of {
 public:
  guest_of(scheduler::impl& host, bool lend_deque) noexcept : context_(this_thread_context()), outer_(context_) {
    if (context_.owner != &host) {
      context_.self = nullptr;
      context_.named = -1;
      context_.deque = lend_deque ? host.lend_deque() : nullptr;
      context_.push_gate = &host.accepting;
      context_.wakes_workers = !host.workers.empty();
      // task_group tells its home thread by a generation a thread with a deque never shares.
      if (context_.deque != nullptr && own_deque_generation == 0) renew_own_deque_generation();
    }
    context_.owner = &host;
    context_.facade = &host.facade;
    ++context_.running;
  }
  ~guest_of() { context_ = outer_; }
  guest_of(const guest_of&) = delete;
  guest_of& operator=(const guest_of&) = delete;

 private:
  thread_context& context_;
  const thread_context outer_;
};
}  // namespace detail

namespace detail {
// Hooks through which the layers above the scheduler act at its moments; the scheduler
// knows nothing of what they do. Each is installed by the layer that needs it.

// prepare_to_help_or_block runs scheduler_tls.before_help_or_block, if set: what this
// thread must do before it helps run other work or blocks, set while a layer above holds
// queued work out of every queue on this thread (a wait_all's run), which whatever this
// thread waits for may need.
inline void prepare_to_help_or_block() noexcept {
  if (scheduler_tls.before_help_or_block != nullptr) [[unlikely]] scheduler_tls.before_help_or_block();
}

// A shutdown drain runs once nothing else of the scheduler runs: it releases what would
// otherwise wait for ever (the coroutines suspended behind work nothing will complete) and
// returns whether it found any, after which what that made ready is drained too.
using shutdown_drain_fn = bool (*)(scheduler::impl& owner) noexcept;

// install_shutdown_drain sets the shutdown drain (one: the coroutine layer's); a later call
// replaces it. Installed during static initialisation, before any scheduler shuts down.
void install_shutdown_drain(shutdown_drain_fn drain) noexcept;

// scheduler_access lets the task layer reach a scheduler's state.
struct scheduler_access {
  static scheduler::impl& of(scheduler& facade) noexcept { return *facade.impl_; }
  // schedule is scheduler's own schedule (to a named thread's queue, or at a priority).
  template <class... Where>
  static void schedule(scheduler& facade, work_item* item, Where... where) {
    facade.schedule(item, where...);
  }
};
}  // namespace detail

}  // namespace magpie
