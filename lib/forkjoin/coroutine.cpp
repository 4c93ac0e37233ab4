// Coroutine tasks: suspending, resuming, and giving up on a coroutine that cannot resume.
#include "../primitives/address_sanitizer.h"
#include "../tasks/task_internal.h"
#include "thread_state.h"

#include <magpie/coroutine.h>
#include <magpie/diagnostics.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace magpie::detail {

namespace {

// The frame cache. A fork-join tree makes and ends a frame per call, and a frame that ends
// on a thread is, nearly always, about the size of the next one the thread makes: kept in a
// per-thread stack by size (64-byte lines) and handed out newest first, it is reused while
// still in cache, by a pop from a linked list, with none of the pool's bookkeeping. Only
// inside a frame_cache_scope: the outermost scope to close returns every kept frame to the
// pool, so a thread between coroutine runs holds none and the pool's counts see each frame
// returned. A bounded number per size: a deep tree's unwinding sends the rest to the pool.
// Under AddressSanitizer every frame goes to the pool, which poisons it while free.
struct cached_frame {
  cached_frame* next;
};

struct frame_cache {
  static constexpr std::size_t line_counts = task_pool::largest_pooled / 64 + 1;  // index: a frame's size in lines
  static constexpr std::uint32_t per_size = 8;
  cached_frame* newest[line_counts] = {};
  std::uint32_t kept[line_counts] = {};
  std::uint32_t kept_total = 0;
  std::uint32_t open_scopes = 0;
};

constexpr bool caches_frames = MAGPIE_ADDRESS_SANITIZED == 0;

// Read and written by its own thread only: a frame it keeps was freed on this thread, after
// whatever last touched it elsewhere had been ordered before the free (a join, a completion).
constinit thread_local frame_cache frames;

std::size_t lines_of(std::size_t bytes) noexcept { return (bytes + 63) / 64; }

// return_kept_frames hands every frame the thread keeps back to the pool.
[[gnu::noinline]] void return_kept_frames(frame_cache& cache) noexcept {
  for (std::size_t lines = 1; lines < frame_cache::line_counts; ++lines) {
    while (cached_frame* frame = cache.newest[lines]) {
      cache.newest[lines] = frame->next;
      task_pool::deallocate(frame, lines * 64);  // same class as the frame's own size: the pool's classes are whole lines
    }
    cache.kept[lines] = 0;
  }
  cache.kept_total = 0;
}

using resumption_task = task_impl<resumer, void>;

// The waiting record: every resumer, of every scheduler, waiting behind the task its
// coroutine awaits, so that a scheduler's shutdown can find the coroutines whose awaited
// work never completes (an event never triggered) — nothing else reaches them: only the
// awaited task's subsequent list names their resumptions. Suspending behind a task and
// resuming each take one stripe's lock once, briefly; nothing else pays for the record.
//
// Stripes keep threads apart. A thread records in its own stripe, so a chain of
// coroutines, which resumes in the reverse of the order it suspended in, unlinks next to
// the stripe's head, in cache lines the thread touched last.
constexpr std::size_t stripe_count = 32;

struct alignas(cache_line) waiting_stripe {
  std::atomic<bool> locked{false};
  resumer* newest = nullptr;  // under `locked`
};

std::array<waiting_stripe, stripe_count> waiting_stripes;

// stripe_lock holds a stripe's lock for a scope. What it guards is a few pointer writes,
// never a call out: a spin, yielding while another thread holds it, is enough.
class stripe_lock {
 public:
  explicit stripe_lock(waiting_stripe& stripe) noexcept : stripe_(stripe) {
    // acquire: pairs with the release in the previous holder's unlock
    while (stripe_.locked.exchange(true, std::memory_order_acquire)) {
      // relaxed: only a hint that the lock is free; the exchange above takes it
      while (stripe_.locked.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  ~stripe_lock() { stripe_.locked.store(false, std::memory_order_release); }  // release: pairs with the next holder's acquire
  stripe_lock(const stripe_lock&) = delete;
  stripe_lock& operator=(const stripe_lock&) = delete;

 private:
  waiting_stripe& stripe_;
};

// own_stripe is the calling thread's stripe, handed out round robin on first use.
std::uint8_t own_stripe() noexcept {
  std::uint8_t& mine = forkjoin_tls.stripe;
  if (mine == forkjoin_thread_state::unassigned_stripe) {
    static std::atomic<std::uint32_t> next_stripe{0};
    // relaxed: only spreads threads over the stripes; nothing is published by it
    mine = static_cast<std::uint8_t>(next_stripe.fetch_add(1, std::memory_order_relaxed) % stripe_count);
  }
  return mine;
}

// abandon_coroutine gives up on a suspended coroutine that can never resume, as its
// claimer: reports it by name, completes its task holding task_never_ran, and frees its
// frame and its body (which may hold handles to what it awaited).
void abandon_coroutine(std::coroutine_handle<> frame, coro_promise_base& promise) noexcept {
  task_base* owner = promise.owner;
  if (promise.forks.parent != nullptr) {
    // A forked child: it ends as one that threw, so that its parent's join goes on.
    std::string text = std::string("coroutine forked by task '") + owner->name +
                       "' was suspended when its scheduler shut down: it never resumes; frame freed";
    report(diagnostic_kind::never_ran, text);
    promise.failure = std::make_exception_ptr(task_never_ran(text));
    finish_forked(promise).resume();
    return;
  }
  report(diagnostic_kind::never_ran, std::string("coroutine task '") + owner->name +
                                         "' was suspended when its scheduler shut down: it never resumes; frame freed");
  hand_over_failure(owner, std::make_exception_ptr(task_never_ran(std::string("coroutine task '") + owner->name +
                                                                  "' never resumed")));
  owner->flags.fetch_or(exception_observed, std::memory_order_relaxed);  // relaxed: published by completion; reported already
  std::optional<task_event> done = std::move(promise.done);
  auto destroy_body = promise.destroy_body;
  frame.destroy();
  destroy_body(owner);
  if (done) done->trigger();
}

}  // namespace

// noinline (as each of these): link-time optimisation must not take the thread's cache into a coroutine body.
[[gnu::noinline]] void* allocate_frame(std::size_t bytes) {
  const std::size_t lines = lines_of(bytes);
  frame_cache& cache = frames;
  if (lines < frame_cache::line_counts) {
    if (cached_frame* frame = cache.newest[lines]) {
      cache.newest[lines] = frame->next;
      --cache.kept[lines];
      --cache.kept_total;
      return frame;
    }
  }
  return task_pool::allocate(bytes);
}

[[gnu::noinline]] void free_frame(void* frame, std::size_t bytes) noexcept {
  const std::size_t lines = lines_of(bytes);
  frame_cache& cache = frames;
  if (caches_frames && lines < frame_cache::line_counts && cache.open_scopes != 0 &&
      cache.kept[lines] < frame_cache::per_size) {
    auto* kept = static_cast<cached_frame*>(frame);
    kept->next = cache.newest[lines];
    cache.newest[lines] = kept;
    ++cache.kept[lines];
    ++cache.kept_total;
    return;
  }
  task_pool::deallocate(frame, bytes);
}

[[gnu::noinline]] frame_cache_scope::frame_cache_scope() noexcept { ++frames.open_scopes; }

[[gnu::noinline]] frame_cache_scope::~frame_cache_scope() {
  frame_cache& cache = frames;
  if (--cache.open_scopes == 0 && cache.kept_total != 0) return_kept_frames(cache);
}

// waiting_record_access reaches a resumer's links for the record.
struct waiting_record_access {
  static void link(resumer& entry, waiting_stripe& stripe) noexcept {
    entry.older_ = stripe.newest;
    if (stripe.newest != nullptr) stripe.newest->newer_ = &entry;
    stripe.newest = &entry;
  }
  static void unlink(resumer& entry, waiting_stripe& stripe) noexcept {
    if (entry.newer_ != nullptr) {
      entry.newer_->older_ = entry.older_;
    } else {
      stripe.newest = entry.older_;
    }
    if (entry.older_ != nullptr) entry.older_->newer_ = entry.newer_;
    entry.newer_ = entry.older_ = nullptr;
  }

  // still_awaiting: the entry's task is still locked behind the work its coroutine awaits
  // (not ready, not begun): a resumption already ready runs as usual.
  static bool still_awaiting(const resumer& entry) noexcept {
    const task_base* task = entry.task_;
    return !task->state.is_ready() && !task->state.has_begun();
  }

  // claim_stranded takes, from one stripe, up to `room` coroutines of the scheduler in slot
  // `owner_index` still awaiting their work, into `frames` and `promises`; returns how many.
  static std::size_t claim_stranded(waiting_stripe& stripe, std::uint8_t owner_index, std::coroutine_handle<>* frames,
                                    coro_promise_base** promises, std::size_t room) noexcept {
    std::size_t taken = 0;
    stripe_lock lock(stripe);
    for (resumer* entry = stripe.newest; entry != nullptr && taken < room;) {
      resumer* older = entry->older_;
      if (entry->task_->owner_index == owner_index && still_awaiting(*entry)) {
        frames[taken] = std::exchange(entry->frame_, {});
        promises[taken] = entry->promise_;
        ++taken;
        unlink(*entry, stripe);  // its task stays in the awaited task's list: run later, it finds no frame
      }
      entry = older;
    }
    return taken;
  }

  static bool is_abandoned(resumer& entry) noexcept {
    if (entry.stripe_ == resumer::not_recorded) return false;
    stripe_lock lock(waiting_stripes[entry.stripe_]);
    return !entry.frame_;
  }
};

void resumer::record_waiting(task_base* resumption) noexcept {
  task_ = resumption;
  stripe_ = own_stripe();
  waiting_stripe& stripe = waiting_stripes[stripe_];
  stripe_lock lock(stripe);
  waiting_record_access::link(*this, stripe);
}

std::coroutine_handle<> resumer::claim_recorded() noexcept {
  waiting_stripe& stripe = waiting_stripes[stripe_];
  std::coroutine_handle<> frame;
  {
    stripe_lock lock(stripe);
    frame = std::exchange(frame_, {});
    if (frame) waiting_record_access::unlink(*this, stripe);  // else the shutdown claimed and unlinked it
  }
  stripe_ = not_recorded;  // the record no longer names it: its destruction need not look again
  return frame;
}

// abandon_stranded_coroutines abandons the coroutines of `owner` that are still suspended
// behind work that has not completed: the scheduler's shutdown drain, run once nothing else
// of it runs. Each is reported, its frame and body freed, its task completed as never
// resumed. Returns whether it found any (what they made ready is then queued).
bool abandon_stranded_coroutines(scheduler::impl& owner) noexcept {
  // The sweep runs as the scheduler's work, so that what the abandoned coroutines' tasks
  // make ready as they complete is accepted, and runs in the drain that follows.
  struct sweep : work_item {
    std::uint8_t owner_index = 0;
    bool abandoned = false;
  } item;
  item.name = "abandon stranded coroutines";
  item.owner_index = owner.slot.index();
  item.handler = [](work_item* self, work_action) noexcept {
    std::uint8_t owner_index = static_cast<sweep*>(self)->owner_index;
    constexpr std::size_t batch = 64;  // claimed under one hold of the lock, abandoned after it
    std::array<std::coroutine_handle<>, batch> frames;
    std::array<coro_promise_base*, batch> promises;
    for (waiting_stripe& stripe : waiting_stripes) {
      std::size_t taken;
      do {
        taken = waiting_record_access::claim_stranded(stripe, owner_index, frames.data(), promises.data(), batch);
        // Outside the lock: freeing a body runs its captures' destructors, which may do anything.
        for (std::size_t i = 0; i < taken; ++i) abandon_coroutine(frames[i], *promises[i]);
        if (taken != 0) static_cast<sweep*>(self)->abandoned = true;
      } while (taken == batch);
    }
    return true;
  };
  owner.execute(&item, nullptr);
  return item.abandoned;
}

// Installed before main: a scheduler shutting down abandons the coroutines stranded on it.
[[maybe_unused]] const bool shutdown_drain_installed =
    (install_shutdown_drain(&abandon_stranded_coroutines), true);

bool is_abandoned_resumption(task_base* task) noexcept {
  if ((task->tag & task_base::resumes_coroutine) == 0) return false;
  return waiting_record_access::is_abandoned(static_cast<resumption_task*>(task)->body());
}

void resume_later(std::coroutine_handle<> frame, coro_promise_base& promise, task_base* after, placement where) {
  if (promise.forks.parent != nullptr) {
    promise.forks.finished_inline = nullptr;  // a forked child: it finishes elsewhere now (coroutine_fork.h)
  } else if (!promise.done) {
    // The first suspension, so still inside the coroutine task's own run: the event nests
    // in it before anything can resume the coroutine.
    promise.done.emplace(promise.owner->name);
    magpie::add_nested(*promise.done);
  }
  resumption_task* resumption = resumption_task::create(resumer(frame, &promise), after != nullptr ? 1 : 0);
  initialise(resumption, promise.owner->name, where.kind(), scheduler_for_free_functions(), where.task_priority(),
             where.target());
  resumption->tag |= task_base::resumes_coroutine;
  // Nobody holds a handle to it: only the system's reference. relaxed: nothing else can
  // reach the task yet; the launch below publishes it
  resumption->references.store(task_base::one_reference, std::memory_order_relaxed);
  // Behind a task, the awaited work may never complete: the shutdown must be able to find it.
  if (after != nullptr) resumption->body().record_waiting(resumption);
  // After this the coroutine may resume on another thread at once: `promise` is not ours.
  if (after != nullptr) {
    launch_behind(resumption, &after, 1, resumption->own_group());
  } else {
    launch_task(resumption, nullptr);
  }
}

// max_inline_await_depth bounds the bodies on this stack below which an awaited task still
// runs inline: past it the coroutine suspends as usual, and resumes from a queue with an
// empty stack (a chain of coroutines each awaiting the next must not recurse without end).
constexpr unsigned max_inline_await_depth = 64;

// A chain of coroutines deeper than the bound gains nothing from running inline: the
// deepest await is refused, so the awaited task beneath every level on the stack suspends,
// and every level suspends as well after its inline run — both costs paid, and the
// suspensions, made while the stack unwinds, lay the chain out in memory in the reverse of
// the order it completes in, so such a chain runs slower than with no inline runs at all. So
// once an await on this thread has been refused at the bound, its awaits suspend at once,
// until an inline run completes its task again: one await in
// inline_probe_period still tries, and a task that completes (a chain's or a tree's leaf)
// turns inline runs back on.
constexpr unsigned inline_probe_period = 64;

// forkjoin_tls.past_inline_bound: an await on this thread was refused at the depth bound,
// and no inline run has completed its task since. forkjoin_tls.awaits_since_probe counts
// the awaits that suspended at once since the last one that tried.

bool run_awaited_here(task_base* awaited) noexcept {
  // (Its own task, already begun, is left alone by retract: the claim fails.)
  if (awaited->kind() != task_kind::queued) return false;
  if (tasks_tls.innermost_running != nullptr && tasks_tls.innermost_running->depth >= max_inline_await_depth) {
    forkjoin_tls.past_inline_bound = true;
    return false;
  }
  if (forkjoin_tls.past_inline_bound) {
    if (++forkjoin_tls.awaits_since_probe < inline_probe_period) return false;
    forkjoin_tls.awaits_since_probe = 0;
  }
  retract(awaited, 0, nullptr, /*finish_open=*/false);  // its resumption may link to it (retract)
  if (!awaited->is_completed()) return false;
  forkjoin_tls.past_inline_bound = false;
  return true;
}

void hand_over_failure(task_base* owner, std::exception_ptr failure) noexcept {
  owner->ensure_extras().exception = std::move(failure);
  owner->flags.fetch_or(has_exception, std::memory_order_relaxed);  // relaxed: published by completion
}

void resumer::abandon(std::coroutine_handle<> frame) noexcept { abandon_coroutine(frame, *promise_); }

void nest_in_coroutine(task_base* resumption, task_base* nested) noexcept {
  coro_promise_base* promise = static_cast<resumption_task*>(resumption)->body().promise();
  if (promise->forks.parent != nullptr) {
    report(diagnostic_kind::misuse, std::string("add_nested('") + nested->name +
                                        "') from a forked coroutine of task '" + promise->owner->name +
                                        "': only a task's own coroutine can nest tasks; ignored");
    return;
  }
  add_handle(nested);
  promise->done->add_prerequisites(task_access::adopt(nested));
}

}  // namespace magpie::detail
