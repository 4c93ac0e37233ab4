// Layer 4 — compatibility: Unreal's FGraphEvent, FGraphEventRef and FGraphEventArray over
// magpie's tasks. Part of <magpie/taskgraph.h>; see docs/porting-from-unreal.md.
//
//   using namespace magpie::taskgraph;
//   graph_event_ref loaded = graph_event::create_graph_event();
//   graph_event_array before{loaded};
//   graph_event_ref done = function_graph_task::create_and_dispatch_when_ready([] { ... }, "use", &before);
//   loaded->dispatch_subsequents();     // the function may run now
//   done->wait();
//
// A graph event *is* a magpie task: the event of create_graph_event is a task_event, and the
// completion event of a graph task is the task running its do_task. So a graph_event_ref
// is a `magpie::task<>` (use it as a prerequisite of magpie::launch, or in
// magpie::wait_all), and as_task() bridges to the native API. Handles are reference
// counted: an event stays valid, and completed, as long as a graph_event_ref names it.
#pragma once

#include <magpie/detail/language.h>

#include <magpie/task.h>
#include <magpie/task_event.h>
#include <magpie/taskgraph_named_threads.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <utility>
#include <vector>

namespace magpie::taskgraph {

class graph_event_ref;

namespace internal {
// launched_for_any_thread_t marks a graph_event_ref made for a task this layer launched
// for any thread (on no named thread), so that a wait need not read the task to know it.
struct launched_for_any_thread_t {
  explicit launched_for_any_thread_t() = default;
};
inline constexpr launched_for_any_thread_t launched_for_any_thread{};
}  // namespace internal

// graph_event is what a graph_event_ref points to: a graph event made by
// create_graph_event, or the completion event of a graph task. It is a task handle (a
// task<>), so it serves as a prerequisite or in magpie::wait_all as it is.
class graph_event : public task<> {
 public:
  // create_graph_event makes an event that completes when dispatch_subsequents is called
  // (and what dont_complete_until added before it has completed). It belongs to the calling
  // task's scheduler, else the calling named thread's, else the default scheduler.
  static graph_event_ref create_graph_event();

  // dispatch_subsequents completes an event made by create_graph_event, letting the tasks
  // behind it run. Idempotent, any thread. On a graph task's completion event (which
  // completes by itself when do_task returns) it is reported and ignored.
  void dispatch_subsequents();

  // dispatch_subsequents(current_thread_if_known) is the same; the thread is only a hint.
  void dispatch_subsequents(named_threads::type current_thread_if_known);

  // dont_complete_until makes this event complete only after `other` completes. Inside the
  // do_task of the graph task this event belongs to, the running task waits for `other`
  // as a nested task (no thread blocks); on an event from create_graph_event not yet
  // dispatched, `other` becomes one more prerequisite. Anything else is reported.
  void dont_complete_until(graph_event_ref other);

  // is_complete says whether the event completed (true for an empty reference).
  bool is_complete() const noexcept { return is_completed(); }

  // wait returns once the event completed. What has not started runs here first; on a
  // named thread the wait then processes that thread's queue, as
  // task_graph_interface::wait_until_task_completes does.
  void wait(named_threads::type current_thread_if_known = named_threads::any_thread);

  // as_task is the magpie task behind the event.
  task<> as_task() const noexcept { return *this; }

  // may_run_on_named_thread says whether the task may be placed on a named thread, told
  // without reading the task where the reference knows: false for an empty reference, an
  // event, or a task this layer launched for any thread; else whether runs_on() names one.
  // A wait over many events asks it of each (a task object read per event, the line
  // perhaps still in the cache of the worker that ran it, cost a 2^20 batch's wait a
  // third more than magpie's wait_all).
  bool may_run_on_named_thread() const noexcept { return kind_ == kind::unknown && runs_on().has_value(); }

  ~graph_event() { drop_event(); }

 protected:
  graph_event() noexcept {}
  explicit graph_event(task<> completion) noexcept : task<>(std::move(completion)), kind_(kind::unknown) {}
  graph_event(task<> completion, internal::launched_for_any_thread_t) noexcept : task<>(std::move(completion)) {}
  explicit graph_event(task_event event) noexcept : task<>(event), kind_(kind::event) {
    new (&event_) task_event(std::move(event));
  }
  graph_event(const graph_event& other) noexcept : task<>(other), kind_(other.kind_) {
    if (kind_ == kind::event) new (&event_) task_event(other.event_);
  }
  graph_event(graph_event&& other) noexcept : task<>(std::move(other)), kind_(other.kind_) {
    if (kind_ == kind::event) new (&event_) task_event(std::move(other.event_));
  }
  graph_event& operator=(const graph_event& other) noexcept {
    if (this != &other) {
      task<>::operator=(other);
      drop_event();
      kind_ = other.kind_;
      if (kind_ == kind::event) new (&event_) task_event(other.event_);
    }
    return *this;
  }
  graph_event& operator=(graph_event&& other) noexcept {
    if (this != &other) {
      task<>::operator=(std::move(static_cast<task<>&>(other)));
      drop_event();
      kind_ = other.kind_;
      if (kind_ == kind::event) new (&event_) task_event(std::move(other.event_));
    }
    return *this;
  }

  // event is the event's own handle (for trigger and prerequisites), or null but for an
  // event of create_graph_event.
  task_event* event() noexcept { return kind_ == kind::event ? &event_ : nullptr; }

 private:
  friend class graph_event_array;

  // placement_known says whether the reference knows, without reading the task, whether it
  // runs on a named thread (all but those made from a magpie task).
  bool placement_known() const noexcept { return kind_ != kind::unknown; }

  // kind is what the reference is: an event of create_graph_event (event_ holds the event's
  // own handle, for the event operations a task's completion event has not; an event runs
  // on no thread), a task known to run on no named thread (an empty reference, a task this
  // layer launched for any thread), or a task placed where the reference does not know
  // (made from a magpie task). Kept beside the handle in 16 bytes, as the optional event
  // handle was, with a manual union: as a std::variant, moving it cost a chain hop a few
  // instructions more.
  enum class kind : std::uint8_t { no_named_thread, unknown, event };

  void drop_event() noexcept {
    if (kind_ == kind::event) event_.~task_event();
    kind_ = kind::no_named_thread;
  }

  union {
    const void* no_event_ = nullptr;  // the storage zeroed otherwise (GCC cannot tell it is unread)
    task_event event_;                // only while kind_ is kind::event
  };
  kind kind_ = kind::no_named_thread;
};

// graph_event_ref is Unreal's FGraphEventRef: a copyable, reference-counted pointer to a
// graph event (empty by default). `ref->wait()`, `if (ref)`, `ref.get_reference()`.
class graph_event_ref : public graph_event {
 public:
  graph_event_ref() noexcept = default;
  // graph_event_ref(nullptr) is an empty reference, as FGraphEventRef(nullptr) is.
  graph_event_ref(std::nullptr_t) noexcept {}  // NOLINT: implicit, as FGraphEventRef's

  // graph_event_ref(task) makes any magpie task (or task_event) a graph event.
  explicit graph_event_ref(task<> completion) noexcept : graph_event(std::move(completion)) {}
  explicit graph_event_ref(task_event event) noexcept : graph_event(std::move(event)) {}

  // graph_event_ref(task, launched_for_any_thread) is the layer's own: a reference to a task
  // it launched for any thread, which need not be read to know it runs on no named thread.
  graph_event_ref(task<> completion, internal::launched_for_any_thread_t any) noexcept
      : graph_event(std::move(completion), any) {}

  // operator-> and operator* reach the event; on an empty reference they reach an empty
  // event, whose queries say "complete" and whose operations are reported.
  graph_event* operator->() const noexcept { return const_cast<graph_event_ref*>(this); }
  graph_event& operator*() const noexcept { return *operator->(); }

  // get_reference is the event, or nullptr for an empty reference.
  graph_event* get_reference() const noexcept { return is_valid() ? operator->() : nullptr; }

  // operator bool says whether the reference is not empty.
  explicit operator bool() const noexcept { return is_valid(); }

  // safe_release empties the reference.
  void safe_release() noexcept { *this = graph_event_ref(); }

  // running_task_ref is a reference to the task whose body the calling thread runs that
  // holds no reference count of its own (copies of it do): how a graph task's do_task is
  // handed its completion event for free. It must not outlive the call it is made for.
  class running_task_ref;

  friend bool operator==(const graph_event_ref& a, const graph_event_ref& b) noexcept {
    return static_cast<const task<>&>(a) == static_cast<const task<>&>(b);
  }
  friend bool operator==(const graph_event_ref& a, std::nullptr_t) noexcept { return !a.is_valid(); }
};

// graph_event_ref::running_task_ref: see its declaration in graph_event_ref.
class graph_event_ref::running_task_ref {
 public:
  running_task_ref() noexcept { borrow_running(ref_); }
  ~running_task_ref() { forget_borrowed(ref_); }
  running_task_ref(const running_task_ref&) = delete;
  running_task_ref& operator=(const running_task_ref&) = delete;

  // get is the reference to the running task, valid while this object lives.
  const graph_event_ref& get() const noexcept { return ref_; }

 private:
  // borrow_running and forget_borrowed are task<>'s, reached through a class derived from it.
  struct access : graph_event_ref {
    static void borrow(graph_event_ref& into) noexcept { task<>::borrow_running(into); }
    static void forget(graph_event_ref& borrowed) noexcept { task<>::forget_borrowed(borrowed); }
  };
  static void borrow_running(graph_event_ref& into) noexcept { access::borrow(into); }
  static void forget_borrowed(graph_event_ref& borrowed) noexcept { access::forget(borrowed); }

  graph_event_ref ref_{task<>()};  // made from a task: where the running task is placed is not known
};

// graph_event_array is Unreal's FGraphEventArray: a small vector of graph_event_ref that
// keeps up to four inline. It is a range of task handles, so it serves as prerequisites
// of magpie::launch as well. As a vector's, a reference into it is good until the next
// add or reset.
class graph_event_array {
 public:
  // value_type, iterator and const_iterator make the array a range, as a vector's do.
  using value_type = graph_event_ref;
  using iterator = graph_event_ref*;
  using const_iterator = const graph_event_ref*;

  graph_event_array() noexcept = default;
  // graph_event_array(events) holds `events`, in order.
  graph_event_array(std::initializer_list<graph_event_ref> events) {
    for (const graph_event_ref& each : events) add(each);
  }
  // graph_event_array(const graph_event_array&), graph_event_array(graph_event_array&&) and
  // operator= copy or move the events; a moved-from array is empty.
  graph_event_array(const graph_event_array&) = default;
  graph_event_array& operator=(const graph_event_array&) = default;
  graph_event_array(graph_event_array&& other) noexcept
      : inline_(std::move(other.inline_)),
        spilled_(std::move(other.spilled_)),
        size_(std::exchange(other.size_, 0)),
        may_hold_named_(std::exchange(other.may_hold_named_, false)) {
    other.spilled_.clear();
  }
  graph_event_array& operator=(graph_event_array&& other) noexcept {
    inline_ = std::move(other.inline_);
    spilled_ = std::move(other.spilled_);
    size_ = std::exchange(other.size_, 0);
    may_hold_named_ = std::exchange(other.may_hold_named_, false);
    other.spilled_.clear();
    return *this;
  }

  // add, push_back and emplace_back append an event (add is Unreal's Add).
  void add(graph_event_ref event) {
    may_hold_named_ |= !event.placement_known();
    if (size_ < inline_.size()) {
      inline_[size_++] = std::move(event);
      return;
    }
    if (size_ == inline_.size()) spill();
    spilled_.push_back(std::move(event));
    ++size_;
  }
  void push_back(graph_event_ref event) { add(std::move(event)); }
  template <class... A>
  graph_event_ref& emplace_back(A&&... args) {
    add(graph_event_ref(std::forward<A>(args)...));
    return data()[size_ - 1];  // writable: data() counts it as changed
  }

  // reserve makes room for `count` events, so that adding them allocates once at most.
  void reserve(std::size_t count) {
    if (count > inline_.size()) spilled_.reserve(count);
  }

  // num and size are the number of events (Unreal's Num).
  std::size_t num() const noexcept { return size_; }
  std::size_t size() const noexcept { return size_; }
  // empty says whether the array holds no events.
  bool empty() const noexcept { return size_ == 0; }

  // reset empties the array (Unreal's Reset); clear is the same.
  void reset() noexcept {
    if (!is_spilled()) {
      for (std::size_t i = 0; i < size_; ++i) inline_[i].safe_release();
    }
    spilled_.clear();
    size_ = 0;
    may_hold_named_ = false;
  }
  void clear() noexcept { reset(); }

  // operator[], data, begin and end reach the events. The writable ones count the array as
  // changed in ways it cannot follow (see may_hold_named_thread_tasks) until the next
  // reset; the const ones do not.
  graph_event_ref& operator[](std::size_t index) noexcept { return data()[index]; }
  const graph_event_ref& operator[](std::size_t index) const noexcept { return data()[index]; }
  graph_event_ref* data() noexcept {
    may_hold_named_ = true;
    return is_spilled() ? spilled_.data() : inline_.data();
  }
  const graph_event_ref* data() const noexcept { return is_spilled() ? spilled_.data() : inline_.data(); }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }

  // may_hold_named_thread_tasks is false when every event added since the last reset is
  // known, without reading its task, to run on no named thread (may_run_on_named_thread),
  // and nothing was written through the writable accessors: a wait over the array then
  // need not look at each (a look through a 2^20 batch's references, 24 MiB, cost its
  // wait a fifteenth more than magpie's wait_all).
  bool may_hold_named_thread_tasks() const noexcept { return may_hold_named_; }

 private:
  // is_spilled says whether the events are in spilled_: exactly when there are more than
  // fit inline (the fifth add moves them all there; reset empties it), so the size tells
  // without reading the vector.
  bool is_spilled() const noexcept { return size_ > inline_.size(); }

  // spill moves the four inline events to spilled_, before the fifth is added: out of line,
  // so that add inlines into a loop as a vector's push_back does (called, add cost a 2^20
  // batch some 36 instructions a launch, a sixth of magpie's own launch).
  [[gnu::noinline]] void spill() {
    spilled_.reserve(inline_.size() * 2);
    for (graph_event_ref& each : inline_) spilled_.push_back(std::exchange(each, graph_event_ref()));
  }

  std::array<graph_event_ref, 4> inline_;
  std::vector<graph_event_ref> spilled_;  // all of them, once more than four were added
  std::size_t size_ = 0;
  bool may_hold_named_ = false;  // see may_hold_named_thread_tasks
};

}  // namespace magpie::taskgraph
