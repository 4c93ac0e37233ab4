// The public scheduler: its construction and destruction, counters, helping, execute(),
// the default scheduler, and blocking_scope. The workers themselves are in scheduler.cpp.
#include "scheduler_impl.h"

#include <magpie/chaos.h>
#include <magpie/diagnostics.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace magpie {

namespace {

// most_threads_from_environment bounds MAGPIE_NUM_THREADS: beyond it a value is a typo.
constexpr unsigned long most_threads_from_environment = 65536;

// threads_from_environment is MAGPIE_NUM_THREADS when it holds a count from 1 to
// most_threads_from_environment; anything else set there is reported, once per process.
std::optional<unsigned> threads_from_environment() noexcept {
  const char* text = std::getenv("MAGPIE_NUM_THREADS");
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long value = std::isdigit(static_cast<unsigned char>(*text)) != 0 ? std::strtoul(text, &end, 10) : 0;
  if (end != nullptr && *end == '\0' && errno == 0 && value >= 1 && value <= most_threads_from_environment) {
    return static_cast<unsigned>(value);
  }
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true, std::memory_order_relaxed)) {  // relaxed: only "once" matters
    report(diagnostic_kind::misuse,
           std::string("MAGPIE_NUM_THREADS='") + text + "' is not a thread count from 1 to " +
               std::to_string(most_threads_from_environment) + "; ignored (the hardware's count applies)");
  }
  return std::nullopt;
}

}  // namespace

unsigned default_worker_count() noexcept {
  // N threads of foreground work counting the caller: N − 1 workers.
  if (std::optional<unsigned> threads = threads_from_environment()) return *threads - 1;
  // Read once: the standard library asks the kernel on every call (a file read on Linux),
  // which every default scheduler_options would otherwise pay.
  static const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 1 ? hardware - 1 : 1;
}

// --- the facade ---------------------------------------------------------------------

scheduler::scheduler(scheduler_options options)
    : impl_(std::make_unique<impl>(*this, std::move(options))) {
  // Before the workers start, so that their first points already draw.
  chaos::start_from_environment();
  if (impl_->options.chaos) chaos::start(*impl_->options.chaos);
  impl_->start();
}

scheduler::~scheduler() {
  shutdown();
  // Destroyed on a thread attached to it (a game thread that never detaches): that thread
  // must not go on naming the freed scheduler (its next launch, another's attach).
  const thread_context& caller = this_thread_context();
  if (caller.owner == impl_.get() && caller.named >= 0) detach();
  impl_->close_attachments();  // the threads still attached cannot be detached from here
}

void scheduler::shutdown() { impl_->shutdown(); }

unsigned scheduler::worker_count() const noexcept { return static_cast<unsigned>(impl_->workers.size()); }

unsigned scheduler::background_worker_count() const noexcept {
  return static_cast<unsigned>(impl_->workers.size()) - impl_->foreground_count;
}

scheduler_counters scheduler::counters() const noexcept {
  scheduler_counters result{};
  auto add = [&result](const worker& each) {
    result.executed += each.executed.load(std::memory_order_relaxed);  // relaxed: statistics
    result.stolen += each.stolen.load(std::memory_order_relaxed);      // relaxed: statistics
  };
  for (const auto& each : impl_->workers) add(*each);
  for (standby_pool& pool : impl_->standby) {
    std::lock_guard lock(pool.creation);
    for (const auto& each : pool.threads) add(*each);
    result.standby_workers += static_cast<unsigned>(pool.threads.size());
    result.blocked_workers += pool.blocked.load(std::memory_order_relaxed);  // relaxed: statistics
  }
  result.parked_workers = static_cast<unsigned>(impl_->parked.load(std::memory_order_acquire) & parked_mask);  // acquire: a test that sees everyone parked sees their work
  return result;
}

void scheduler::schedule(detail::work_item* item, priority p) { impl_->schedule(item, p); }

void detail::schedule_item(scheduler& owner, work_item* item, priority p) { scheduler_access::schedule(owner, item, p); }

void detail::schedule_item(scheduler& owner, work_item* item, named_thread thread, thread_queue queue,
                           bool high_priority) {
  scheduler_access::schedule(owner, item, thread, queue, high_priority);
}

bool scheduler::try_run_one() {
  thread_context& context = this_thread_context();
  constexpr unsigned max_help_depth = 64;  // helping inside helping grows the stack
  if (context.helping >= max_help_depth) return false;
  detail::prepare_to_help_or_block();  // what this thread holds aside is work to find too
  worker* self = context.owner == impl_.get() ? context.self : nullptr;
  work_item* item = self != nullptr ? impl_->find_work(self) : impl_->find_work_as_helper();
  if (item == nullptr) return false;
  ++context.helping;
  impl_->execute(item, self);
  --context.helping;
  return true;
}

scheduler* scheduler::current() noexcept {
  const thread_context& context = this_thread_context();
  scheduler* facade = context.facade;  // read first: one look at the thread's context
  // An attached thread whose scheduler was destroyed without detaching it is detached
  // here, its first use since, rather than handed the freed scheduler (the free launch and
  // the limiter go through here). Other threads pay one comparison, attached ones an inline
  // look at their scheduler's serial.
  if (context.named >= 0 && attached_scheduler_gone() && drop_dead_attachment()) [[unlikely]] return nullptr;
  return facade;
}

void scheduler::execute_erased(void (*call)(void*), void* state) {
  thread_context& context = this_thread_context();
  if (context.owner == impl_.get()) {  // its worker, attached thread, or already inside its work
    call(state);
    return;
  }
  // Held while `call` runs, as around any of its work run by a thread outside the pool: a
  // shutdown meanwhile waits for it (running its queued work), so what it launches still runs.
  scheduler_pin pin(impl_->slot.index());
  if (pin.get() == nullptr) {
    report(diagnostic_kind::misuse, "scheduler::execute called on a scheduler that is shutting down; the function "
                                    "runs on the calling thread outside it");
    call(state);
    return;
  }
  // As impl::execute runs another scheduler's work: the outer scheduler's worker deque or
  // named-thread identity is hidden. A thread of the user's (not a pool thread, attached to
  // none) pushes onto a deque lent to it, so that its task_groups take their inline paths.
  // Counted as running its work: attach, detach and shutdown inside are misuse, as inside it.
  detail::guest_of guest(*impl_, !context.pool_thread && context.named < 0);
  call(state);
}

namespace {

// The default scheduler's options until it is made, and whether it has been.
std::mutex default_scheduler_lock;
std::optional<scheduler_options> chosen_default_options;  // under default_scheduler_lock
bool default_scheduler_made = false;                       // under default_scheduler_lock

scheduler* make_default_scheduler() {
  std::lock_guard lock(default_scheduler_lock);
  scheduler_options options = chosen_default_options ? std::move(*chosen_default_options) : scheduler_options{};
  chosen_default_options.reset();
  auto* made = new scheduler(std::move(options));  // never destroyed: see the header
  default_scheduler_made = true;
  return made;
}

}  // namespace

scheduler& default_scheduler() {
  static scheduler* shared = make_default_scheduler();
  return *shared;
}

bool set_default_scheduler_options(scheduler_options options) {
  std::lock_guard lock(default_scheduler_lock);
  if (default_scheduler_made) {
    report(diagnostic_kind::misuse, "set_default_scheduler_options called after default_scheduler() was made; ignored");
    return false;
  }
  chosen_default_options = std::move(options);
  return true;
}

// --- blocking_scope -----------------------------------------------------------------

blocking_scope::blocking_scope() : pool_(nullptr) {
  detail::prepare_to_help_or_block();  // others may need what this thread holds aside to unblock it
  thread_context& context = this_thread_context();
  if (context.self == nullptr || context.owner == nullptr) return;
  standby_pool& pool = context.owner->standby[index_of(context.self->kind)];
  pool_ = &pool;
  pool.owner->enter_blocking(pool);
}

blocking_scope::~blocking_scope() {
  if (pool_ == nullptr) return;
  standby_pool& pool = *static_cast<standby_pool*>(pool_);
  pool.owner->leave_blocking(pool, *this_thread_context().self);  // the same thread and context as at entry
}

}  // namespace magpie
