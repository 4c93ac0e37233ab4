// The queued thread pool: Unreal's FQueuedThreadPool on threads of its own. One mutex
// guards the priority queues (retraction removes from the middle); idle threads park on an
// epoch counter with std::atomic::wait, so an idle pool makes no system calls at all, and a
// busy one none either: producers touch the epoch only when a thread is idle.
#include <magpie/diagnostics.h>
#include <magpie/thread_pool.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <limits.h>
#include <pthread.h>

namespace magpie {

queued_work::~queued_work() = default;

struct queued_thread_pool::state {
  static constexpr std::size_t priority_count = 5;

  std::mutex mutex;  // guards queues, running, stopping, joining and threads
  std::array<std::deque<queued_work*>, priority_count> queues;
  bool running = false;
  bool stopping = false;
  // orphaned: the pool object was destroyed on one of its own threads. Nobody can add work
  // any more, so a thread that finds the queues empty ends instead of parking; the threads
  // are detached, and the last to end frees the state (each holds a share of it).
  bool orphaned = false;
  // joining: a destroy is joining `threads`. They stay listed until joined, so that one of
  // them calling destroy meanwhile is told apart (ignored, not made to wait for itself);
  // every other destroy, and create, waits on `joined` until the join is over.
  bool joining = false;
  std::condition_variable joined;
  std::vector<pthread_t> threads;
  std::string name;

  // wake_epoch changes whenever a parked thread has news (work, or stop). idle counts the
  // threads that found the queues empty and are parking or parked; a thread counts itself
  // idle under the mutex before it parks, so a producer that pushes under the mutex sees it.
  // At most one wake-up is in flight (wake_pending): producers that find one pending leave
  // it at that, and the woken thread passes a wake-up on while work and idle threads remain.
  // So a burst of work costs one futex wake per idle thread, not one per item.
  std::atomic<std::uint32_t> wake_epoch{0};
  unsigned idle = 0;          // guarded by mutex
  bool wake_pending = false;  // guarded by mutex

  queued_work* pop_highest() {
    for (auto& queue : queues) {
      if (!queue.empty()) {
        queued_work* work = queue.front();
        queue.pop_front();
        return work;
      }
    }
    return nullptr;
  }

  bool any_queued() const {
    for (const auto& queue : queues) {
      if (!queue.empty()) return true;
    }
    return false;
  }

  // runs_on_this_thread says whether the caller (holding the mutex) is one of the pool's
  // threads, running or being joined.
  bool runs_on_this_thread() const {
    pthread_t self = pthread_self();
    return std::any_of(threads.begin(), threads.end(), [self](pthread_t each) { return pthread_equal(each, self) != 0; });
  }

  // claim_wake says whether the caller (holding the mutex) should wake a parked thread.
  bool claim_wake() {
    if (idle == 0 || wake_pending) return false;
    wake_pending = true;
    return true;
  }

  // wake moves the epoch on and wakes one parked thread, or all of them.
  void wake(bool everyone) {
    wake_epoch.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load of a parking thread
    if (everyone) {
      wake_epoch.notify_all();
    } else {
      wake_epoch.notify_one();
    }
  }

  void run() {
    for (;;) {
      queued_work* work = nullptr;
      std::uint32_t epoch = 0;
      bool pass_on = false;
      {
        std::lock_guard lock(mutex);
        if (stopping) return;
        work = pop_highest();
        if (work == nullptr) {
          if (orphaned) return;
          ++idle;
          // acquire: pairs with wake's release; read under the mutex, before any producer
          // that finds this thread idle can move the epoch on
          epoch = wake_epoch.load(std::memory_order_acquire);
        } else {
          pass_on = any_queued() && claim_wake();
        }
      }
      if (work != nullptr) {
        if (pass_on) wake(false);
        work->do_threaded_work();
        continue;
      }
      wake_epoch.wait(epoch, std::memory_order_acquire);  // acquire: pairs with wake's release
      std::lock_guard lock(mutex);
      --idle;
      wake_pending = false;  // this thread is up (woken, or it saw the epoch move): others may be woken
    }
  }

  // thread_main runs a pool thread on the share of the state it is handed (heap-held, as
  // pthread passes one pointer), and drops the share when the thread ends.
  static void* thread_main(void* share) {
    std::unique_ptr<std::shared_ptr<state>> held(static_cast<std::shared_ptr<state>*>(share));
    (*held)->run();
    return nullptr;
  }
};

namespace {

// this_thread_label is the calling thread's name, as pool threads are named ("io 0").
std::string this_thread_label() {
  char label[16] = {};
  if (pthread_getname_np(pthread_self(), label, sizeof label) != 0) return "a pool thread";
  return std::string("'") + label + "'";
}

}  // namespace

queued_thread_pool::queued_thread_pool() : state_(std::make_shared<state>()) {}

queued_thread_pool::~queued_thread_pool() {
  std::unique_lock lock(state_->mutex);
  if (!state_->runs_on_this_thread()) {
    lock.unlock();
    (void)stop_and_join("~queued_thread_pool");
    return;
  }
  // On one of the pool's own threads, which cannot join itself. A destroy joining the
  // threads meanwhile goes on (it holds its own share of the state); otherwise the threads
  // are left to finish the queue and end, and this object's share goes with it.
  std::string name = state_->name;
  const bool joined_elsewhere = state_->joining;
  if (!joined_elsewhere) {
    state_->orphaned = true;
    state_->running = false;
    for (pthread_t thread : state_->threads) pthread_detach(thread);
    state_->threads.clear();
    state_->wake(true);  // parked threads look again, find the queues empty and end
  }
  lock.unlock();
  report(diagnostic_kind::misuse,
         "queued_thread_pool '" + name + "': ~queued_thread_pool called from one of its own threads (" +
             this_thread_label() + "); not joined: " +
             (joined_elsewhere ? std::string("the destroy under way joins the threads")
                               : std::string("its threads run what is queued, then end, the last one freeing the pool")),
         severity::warning);
}

bool queued_thread_pool::create(unsigned threads, std::size_t stack_size, const char* name) {
  if (threads == 0) {
    report(diagnostic_kind::misuse, "queued_thread_pool: create with 0 threads; nothing created");
    return false;
  }
  std::unique_lock lock(state_->mutex);
  if (state_->runs_on_this_thread()) {  // running, or being joined: waiting for the join would never end
    std::string running_name = state_->name;
    lock.unlock();
    report(diagnostic_kind::misuse, "queued_thread_pool '" + running_name + "': create called from one of its own threads");
    return false;
  }
  state_->joined.wait(lock, [this] { return !state_->joining; });  // a destroy's threads are gone first
  if (state_->running) {
    std::string running_name = state_->name;
    lock.unlock();
    report(diagnostic_kind::misuse, "queued_thread_pool '" + running_name + "': create called on a running pool");
    return false;
  }
  state_->name = name != nullptr ? name : "pool";
  state_->stopping = false;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  if (stack_size != 0) pthread_attr_setstacksize(&attributes, std::max<std::size_t>(stack_size, PTHREAD_STACK_MIN));
  for (unsigned i = 0; i < threads; ++i) {
    pthread_t thread;
    auto share = std::make_unique<std::shared_ptr<state>>(state_);
    if (pthread_create(&thread, &attributes, &state::thread_main, share.get()) != 0) {
      report(diagnostic_kind::limit_reached, "queued_thread_pool '" + state_->name + "': could only start " +
                                                 std::to_string(i) + " of " + std::to_string(threads) + " threads");
      break;
    }
    (void)share.release();  // the thread owns it now
    // Linux thread names hold 15 characters.
    std::string label = state_->name.substr(0, 11) + " " + std::to_string(i);
    pthread_setname_np(thread, label.substr(0, 15).c_str());
    state_->threads.push_back(thread);
  }
  pthread_attr_destroy(&attributes);
  state_->running = !state_->threads.empty();
  return state_->running;
}

void queued_thread_pool::destroy() { (void)stop_and_join("destroy"); }

bool queued_thread_pool::stop_and_join(const char* operation) {
  std::shared_ptr<state> pool = state_;  // a share: a thread may destroy the object meanwhile
  std::vector<queued_work*> abandoned;
  std::vector<pthread_t> threads;
  {
    std::unique_lock lock(pool->mutex);
    if (pool->runs_on_this_thread()) {
      std::string name = pool->name;
      lock.unlock();
      report(diagnostic_kind::misuse, "queued_thread_pool '" + name + "': " + operation +
                                          " called from one of its own threads (" + this_thread_label() +
                                          "); ignored (the pool runs on)");
      return false;
    }
    if (!pool->running) {
      // Another destroy may be joining: return after it, as Unreal's Destroy does.
      pool->joined.wait(lock, [&pool] { return !pool->joining; });
      return true;
    }
    pool->stopping = true;
    pool->running = false;
    pool->joining = true;
    for (auto& queue : pool->queues) {
      abandoned.insert(abandoned.end(), queue.begin(), queue.end());
      queue.clear();
    }
    threads = pool->threads;
  }
  for (queued_work* work : abandoned) work->abandon();
  pool->wake(true);
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  std::lock_guard lock(pool->mutex);
  pool->threads.clear();
  pool->joining = false;
  pool->joined.notify_all();  // under the mutex: a woken destroyer may free the state once it has it
  return true;
}

void queued_thread_pool::add_queued_work(queued_work* work, queued_work_priority priority) {
  if (work == nullptr) {
    report(diagnostic_kind::misuse, "queued_thread_pool: add_queued_work(nullptr); ignored");
    return;
  }
  auto index = static_cast<std::size_t>(priority);
  bool never_created = false;
  {
    std::lock_guard lock(state_->mutex);
    if (index >= state::priority_count) index = static_cast<std::size_t>(queued_work_priority::normal);
    if (state_->running) {
      state_->queues[index].push_back(work);
      // The wake-up too under the mutex: once it is released, the work may run, finish, and
      // the pool be destroyed (by the work itself, or by whoever it told it was done).
      if (state_->claim_wake()) state_->wake(false);
      return;
    }
    never_created = !state_->stopping;
  }
  if (never_created) {
    report(diagnostic_kind::misuse, "queued_thread_pool: add_queued_work before create(); the work is abandoned");
  }
  work->abandon();
}

bool queued_thread_pool::retract_queued_work(queued_work* work) {
  std::lock_guard lock(state_->mutex);
  for (auto& queue : state_->queues) {
    auto found = std::find(queue.begin(), queue.end(), work);
    if (found != queue.end()) {
      queue.erase(found);
      return true;
    }
  }
  return false;
}

unsigned queued_thread_pool::get_num_threads() const {
  std::lock_guard lock(state_->mutex);
  return static_cast<unsigned>(state_->threads.size());
}

unsigned queued_thread_pool::get_num_idle_threads() const {
  std::lock_guard lock(state_->mutex);
  return state_->idle;
}

queued_thread_pool& global_queued_thread_pool() {
  static queued_thread_pool* global = [] {
    auto* made = new queued_thread_pool();  // never destroyed: its threads park until the process ends
    unsigned hardware = std::thread::hardware_concurrency();
    made->create(hardware > 1 ? hardware - 1 : 1, 0, "global pool");
    return made;
  }();
  return *global;
}

}  // namespace magpie
