// Timer workloads on a model of UE's FTimerManager, the baseline for magpie's timing wheel:
// slots in a sparse array (vector + free list) named by 24-bit index + 40-bit serial
// handles; active timers in a binary heap of handles ordered by the slots' expiry (each
// comparison reads the slot array, as FTimerHeapOrder does); pending and paused timers in
// flat hash sets (like TSet: no allocation per element); clear of an active timer leaves a
// tombstone in the heap until it reaches the top; pause finds the timer in the heap by a
// linear search. Callbacks are the same delegates magpie stores. Only what the workloads use
// is here, and callbacks must not call the manager (UE's sparse array may move a running
// delegate; this model does not guard).
#include <magpie/delegate.h>

#include "workloads.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace {

// handle_set is an open-addressing hash set of handle values (never 0 or 1: the serial is at
// least 1 and sits above 24 index bits), standing in for UE's TSet<FTimerHandle>.
class handle_set {
 public:
  handle_set() : slots_(16, empty) {}

  void insert(std::uint64_t value) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    std::size_t at = home(value);
    while (slots_[at] != empty && slots_[at] != erased) at = (at + 1) & (slots_.size() - 1);
    if (slots_[at] == empty) ++used_;
    slots_[at] = value;
    ++size_;
  }

  void erase(std::uint64_t value) {
    for (std::size_t at = home(value); slots_[at] != empty; at = (at + 1) & (slots_.size() - 1)) {
      if (slots_[at] == value) {
        slots_[at] = erased;
        --size_;
        return;
      }
    }
  }

  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::uint64_t each : slots_) {
      if (each > erased) visit(each);
    }
  }

  void clear() {
    if (used_ == 0) return;
    std::memset(slots_.data(), 0, slots_.size() * sizeof(std::uint64_t));
    size_ = 0;
    used_ = 0;
  }

 private:
  static constexpr std::uint64_t empty = 0;
  static constexpr std::uint64_t erased = 1;

  std::size_t home(std::uint64_t value) const {
    return static_cast<std::size_t>((value * 0x9e3779b97f4a7c15ull) >> 20) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<std::uint64_t> old(std::bit_ceil(std::max<std::size_t>(16, size_ * 4)), empty);
    old.swap(slots_);
    size_ = 0;
    used_ = 0;
    for (std::uint64_t each : old) {
      if (each > erased) insert(each);
    }
  }

  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;  // values held
  std::size_t used_ = 0;  // values held and erased markers
};

class heap_timer_manager {
 public:
  class handle {
   public:
    bool is_valid() const { return value != 0; }
    void invalidate() { value = 0; }
    std::uint64_t value = 0;
  };

  template <class Callback>
  void set_timer(handle& out, Callback&& callback, float rate, bool loop = false, float first_delay = -1.f) {
    if (find(out) != nullptr) clear(out);
    if (!(rate > 0)) {
      out.invalidate();
      return;
    }
    timer_data data;
    data.callback.bind(std::forward<Callback>(callback));
    data.rate = rate;
    data.loop = loop;
    data.requires_delegate = data.callback.is_bound();
    data.expire = first_delay >= 0 ? first_delay : rate;  // remaining while pending
    data.status = timer_status::pending;  // no frame counter: the manager never ticked "this frame"
    handle added = add(std::move(data));
    pending_.insert(added.value);
    out = added;
  }

  void clear_timer(handle& h) {
    if (find(h) != nullptr) clear(h);
    h.invalidate();
  }

  void pause_timer(handle h) {
    timer_data* data = find(h);
    if (data == nullptr || data->status == timer_status::paused) return;
    timer_status previous = data->status;
    if (previous == timer_status::active) {
      auto at = std::find_if(heap_.begin(), heap_.end(), [&](const handle& each) { return each.value == h.value; });
      heap_remove_at(static_cast<std::size_t>(at - heap_.begin()));
      data->expire -= now_;
    } else if (previous == timer_status::pending) {
      pending_.erase(h.value);
    }
    data->status = timer_status::paused;
    paused_.insert(h.value);
  }

  void unpause_timer(handle h) {
    timer_data* data = find(h);
    if (data == nullptr || data->status != timer_status::paused) return;
    data->status = timer_status::pending;
    pending_.insert(h.value);
    paused_.erase(h.value);
  }

  bool is_timer_paused(handle h) {
    timer_data* data = find(h);
    return data != nullptr && data->status == timer_status::paused;
  }

  bool timer_exists(handle h) { return find(h) != nullptr; }

  void tick(float delta) {
    now_ += static_cast<double>(delta);
    while (!heap_.empty()) {
      handle top = heap_.front();
      timer_data& data = timers_[index_of(top)];
      if (data.status == timer_status::removed) {
        heap_pop();
        remove(top);
        continue;
      }
      if (!(now_ > data.expire)) break;
      heap_pop();
      data.status = timer_status::executing;
      int calls = data.loop ? static_cast<int>((now_ - data.expire) / data.rate) + 1 : 1;
      for (int i = 0; i < calls; ++i) {
        data.callback.execute_if_bound();
        if (data.status != timer_status::executing) break;
      }
      if (data.status == timer_status::executing) {
        if (data.loop && (!data.requires_delegate || data.callback.is_bound())) {
          data.expire += calls * data.rate;
          data.status = timer_status::active;
          heap_push(top);
        } else {
          remove(top);
        }
      }
    }
    pending_.for_each([this](std::uint64_t value) {
      handle each{value};
      timer_data& data = timers_[index_of(each)];
      data.expire += now_;
      data.status = timer_status::active;
      heap_push(each);
    });
    pending_.clear();
  }

 private:
  enum class timer_status : std::uint8_t { pending, active, paused, executing, removed };

  struct timer_data {
    handle self;
    double expire = 0;
    float rate = 0;
    timer_status status = timer_status::pending;
    bool loop = false;
    bool requires_delegate = false;
    magpie::delegate<void()> callback;
  };

  static std::uint32_t index_of(handle h) { return static_cast<std::uint32_t>(h.value & ((1u << 24) - 1)); }

  timer_data* find(handle h) {
    if (!h.is_valid()) return nullptr;
    std::uint32_t index = index_of(h);
    if (index >= timers_.size() || !allocated_[index]) return nullptr;
    timer_data& data = timers_[index];
    if (data.self.value != h.value || data.status == timer_status::removed) return nullptr;
    return &data;
  }

  handle add(timer_data&& data) {
    std::uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
      timers_[index] = std::move(data);
      allocated_[index] = true;
    } else {
      index = static_cast<std::uint32_t>(timers_.size());
      timers_.push_back(std::move(data));
      allocated_.push_back(true);
    }
    handle made{(++last_serial_ << 24) | index};
    timers_[index].self = made;
    return made;
  }

  void remove(handle h) {
    std::uint32_t index = index_of(h);
    timers_[index] = timer_data{};
    allocated_[index] = false;
    free_.push_back(index);
  }

  void clear(handle h) {
    timer_data& data = timers_[index_of(h)];
    switch (data.status) {
      case timer_status::pending:
        pending_.erase(h.value);
        remove(h);
        break;
      case timer_status::active:
        data.status = timer_status::removed;  // a tombstone until it reaches the heap's top
        break;
      case timer_status::paused:
        paused_.erase(h.value);
        remove(h);
        break;
      case timer_status::executing:
        remove(h);
        break;
      case timer_status::removed:
        break;
    }
  }

  bool earlier(handle a, handle b) const { return timers_[index_of(a)].expire < timers_[index_of(b)].expire; }

  void sift_up(std::size_t at) {
    while (at > 0) {
      std::size_t parent = (at - 1) / 2;
      if (!earlier(heap_[at], heap_[parent])) break;
      std::swap(heap_[at], heap_[parent]);
      at = parent;
    }
  }
  void sift_down(std::size_t at) {
    for (;;) {
      std::size_t smallest = at;
      std::size_t left = 2 * at + 1;
      if (left < heap_.size() && earlier(heap_[left], heap_[smallest])) smallest = left;
      if (left + 1 < heap_.size() && earlier(heap_[left + 1], heap_[smallest])) smallest = left + 1;
      if (smallest == at) return;
      std::swap(heap_[at], heap_[smallest]);
      at = smallest;
    }
  }
  void heap_push(handle h) {
    heap_.push_back(h);
    sift_up(heap_.size() - 1);
  }
  void heap_pop() { heap_remove_at(0); }
  void heap_remove_at(std::size_t at) {
    heap_[at] = heap_.back();
    heap_.pop_back();
    if (at < heap_.size()) {
      sift_down(at);
      sift_up(at);
    }
  }

  std::vector<timer_data> timers_;
  std::vector<bool> allocated_;
  std::vector<std::uint32_t> free_;
  std::vector<handle> heap_;
  handle_set pending_;
  handle_set paused_;
  double now_ = 0;
  static inline std::uint64_t last_serial_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  bench::options chosen = bench::parse(argc, argv, "timer manager workloads: a UE-style binary-heap timer manager");
  timers_bench::run_all<heap_timer_manager, heap_timer_manager::handle>(chosen, "ue_heap");
}
