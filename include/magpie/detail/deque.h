// Layer 1 — the Chase-Lev work-stealing deque.
//
// One owner thread pushes and pops at the bottom (LIFO: the newest, cache-hot item);
// any number of thieves steal from the top (FIFO: the oldest item, usually the largest
// piece of work). The orderings are those of Lê, Pop, Cohen and Zappa Nardelli, "Correct
// and efficient work-stealing for weak memory models" (PPoPP 2013), with each of the
// paper's seq_cst fences expressed as a seq_cst operation on the neighbouring access —
// see docs/memory_orders.md for the argument, and test/model/deque_model.cpp for the
// Relacy model that checks it (and a weakened mutant that must fail).
//
//   work_stealing_deque<job*> deque;       // constructed anywhere
//   deque.push(j);                         // owner thread only
//   if (auto mine = deque.pop()) run(*mine);       // owner thread only
//   if (auto loot = other.steal()) run(*loot);     // any thread
//
// Known bugs of deques in the field that this code is written against: indices are signed, so
// `pop` on an empty deque cannot wrap; the stolen slot is read *before* the CAS on top;
// a grown ring is published with release; old rings stay alive until the deque dies,
// because a thief may still be reading one.
#pragma once

#include <magpie/config.h>
#include <magpie/detail/atomics.h>
#include <magpie/diagnostics.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace magpie::detail {

// work_stealing_deque holds trivially copyable items (task pointers) for one owner
// thread and many thieves; the buffer grows without bound.
template <class T, class Atomics = std_atomics>
class work_stealing_deque {
  static_assert(std::is_trivially_copyable_v<T>, "items are copied through atomics");

  template <class U>
  using atomic = typename Atomics::template atomic<U>;

 public:
  // work_stealing_deque creates a deque whose first ring holds `initial_capacity` items
  // (rounded up to a power of two).
  explicit work_stealing_deque(std::int64_t initial_capacity = 256) {
    std::int64_t capacity = 2;
    while (capacity < initial_capacity) capacity *= 2;
    rings_.push_back(std::make_unique<ring>(capacity));
    current_.store(rings_.back().get(), std::memory_order_relaxed);  // relaxed: thieves reach the deque through a later synchronising publication
  }

  work_stealing_deque(const work_stealing_deque&) = delete;
  work_stealing_deque& operator=(const work_stealing_deque&) = delete;

  // push adds `item` at the bottom. Owner thread only.
  void push(T item) {
    check_owner("push");
    std::int64_t b = bottom_.load(std::memory_order_relaxed);  // relaxed: only the owner writes bottom
    ring* r = current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    // top only grows, so an old value of it under-counts the free slots: reload it (and
    // take the cache miss thieves cause) only when the ring looks full.
    if (b - top_seen_ >= r->capacity) {
      // acquire: pairs with the thieves' CAS on top, so a slot a thief has read is free to reuse
      top_seen_ = top_.load(std::memory_order_acquire);
      if (b - top_seen_ >= r->capacity) r = grow(r, top_seen_, b);
    }
    r->put(b, item);
    Atomics::chaos_point(chaos::site::deque_push);
    bottom_.store(b + 1, std::memory_order_release);  // release: publishes the slot to steal()'s load of bottom
  }

  // pop removes the newest item, or returns nothing when the deque is empty or a thief
  // took the last item. Owner thread only.
  std::optional<T> pop() {
    check_owner("pop");
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;  // relaxed: only the owner writes bottom
    ring* r = current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    return pop_at(b, r);
  }

  // pop_matching pops the newest item only if `wanted(item)` holds (else it stays): a
  // joining thread takes only its own children. The item is popped before `wanted` looks
  // at it — a slot may hold an item a thief already took and freed. Owner thread only.
  // `pushed_back` says whether an unwanted item went back: while it was out a thief may have
  // found the deque empty and gone to sleep, so a caller whose thieves park wakes one then.
  template <class Wanted>
  std::optional<T> pop_matching(Wanted&& wanted, bool& pushed_back) {
    pushed_back = false;
    const std::int64_t low_before = low_water_;
    const std::int64_t end_before = end_index();
    std::optional<T> taken = pop();
    if (!taken || wanted(*taken)) return taken;
    push(*taken);  // back at the bottom (one index higher if the pop moved top instead)
    // Nothing was taken: the low water stays, above the item if it was at the end before.
    low_water_ = low_before == end_before ? end_index() : low_before;
    pushed_back = true;
    return std::nullopt;
  }

  // pop_newest pops the `count` newest items at once, when no thief can reach any of them
  // (an item older than them is left): one fence for the run instead of one per item.
  // False, and nothing popped, otherwise. `hid_items` says a false came after the run was
  // hidden from thieves for a moment and items were put back: a thread that looked then
  // (a worker's last look before parking) found none, so the caller wakes one, as after
  // pop_matching's push back. Owner thread only.
  bool pop_newest(std::int64_t count, bool& hid_items) {
    check_owner("pop_newest");
    hid_items = false;
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - count;  // relaxed: only the owner writes bottom
    if (b <= top_seen_) return false;  // top is at least top_seen_: the run may reach it
    // seq_cst store then load, as in pop_at (Dekker): a thief that read the old bottom read
    // top before we read t, so it takes an index no higher than t; from b up is ours.
    bottom_.store(b, std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t < b) {
      low_water_ = std::min(low_water_, b);
      return true;
    }
    bottom_.store(b + count, std::memory_order_release);  // release: republishes the slots as push did
    hid_items = t < b + count;
    return false;
  }

  // steal_if takes the oldest item the way a thief does, but only if it is `expected`: an
  // owner running the oldest of its own items takes it back instead of leaving it to a thief.
  // Compares without dereferencing: the owner wrote the slot itself.
  // Owner thread only (so no push or pop of its own runs beside it); races the thieves.
  bool steal_if(T expected) {
    check_owner("steal_if");
    std::int64_t t = top_.load(std::memory_order_relaxed);  // relaxed: a guess the CAS below settles; the slot read is our own write
    std::int64_t b = bottom_.load(std::memory_order_relaxed);  // relaxed: only the owner writes bottom
    ring* r = current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    // The owner wrote every slot itself, and only it overwrites them: the read is of a
    // value; if a thief took the item meanwhile, the CAS fails.
    if (t >= b || r->get(t) != expected) return false;
    return top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed);  // relaxed: the loser takes nothing
  }

  // take_oldest takes a run of the oldest items at once, oldest first, into `out`: up to
  // `room` of those below index `end`, for as long as `wanted(i, item)` (i counts from 0)
  // says to take them (an owner runs its own items in the order it pushed them). One CAS on
  // top for the run; returns how many. Owner
  // thread only: no push or pop of its own runs beside it, so the run below bottom stays
  // its own unless a thief moves top first, which fails the CAS (the run is then read again
  // from the new oldest item). Races the thieves.
  enum class oldest_take { stop, take, take_and_stop };
  template <class Wanted>
  std::int64_t take_oldest(T* out, std::int64_t room, std::int64_t end, Wanted&& wanted) {
    check_owner("take_oldest");
    ring* r = current_.load(std::memory_order_relaxed);  // relaxed: only the owner replaces the ring
    end = std::min(end, bottom_.load(std::memory_order_relaxed));  // relaxed: only the owner writes bottom
    std::int64_t t = top_.load(std::memory_order_relaxed);  // relaxed: a guess the CAS below settles; the slots are our own writes
    for (;;) {
      std::int64_t taken = 0;
      while (taken < room && t + taken < end) {
        T item = r->get(t + taken);  // compared, not dereferenced, until the CAS makes it ours
        oldest_take answer = wanted(taken, item);
        if (answer == oldest_take::stop) break;
        out[taken++] = item;
        if (answer == oldest_take::take_and_stop) break;
      }
      if (taken == 0) return 0;
      if (top_.compare_exchange_strong(t, t + taken, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {  // relaxed: a thief moved top; `t` is where it left it
        return taken;
      }
    }
  }

  // end_index is one past the newest item's index: items pushed later lie at or above it
  // (unless the owner pops below it first). Owner thread only.
  std::int64_t end_index() const {
    return bottom_.load(std::memory_order_relaxed);  // relaxed: only the owner writes bottom
  }

  // low_water is the lowest end_index since the owner last set it (set_low_water): every
  // item pushed since lies at or above it. An owner that holds items aside puts them back
  // below what it pushed meanwhile. Owner thread only.
  std::int64_t low_water() const { return low_water_; }
  void set_low_water(std::int64_t index) { low_water_ = index; }

  // steal removes the oldest item, or returns nothing when it found the deque empty. A
  // thief that loses the race for an item tries the next one: returning empty-handed
  // while items are left would let a parking worker's last look miss work whose launch
  // counted on that look. Lock-free: each lost race is another thread's take. Any thread.
  std::optional<T> steal() {
    // Acquire load of top, then seq_cst load of bottom: the paper's acquire load plus
    // fence, ordered against pop's store of bottom and load of top (Dekker). The acquire
    // suffices: the CAS that wrote the top we read (seq_cst) then happens before our load of
    // bottom, so precedes it in the single order (docs/memory_orders.md).
    std::int64_t t = top_.load(std::memory_order_acquire);  // acquire: pairs with the seq_cst CAS that moved top
    for (;;) {
      std::int64_t b = bottom_.load(std::memory_order_seq_cst);
      if (t >= b) return std::nullopt;
      ring* r = current_.load(std::memory_order_acquire);  // acquire: pairs with the release store in grow()
      // Read the slot before the CAS: once top moves past it, the owner may overwrite it.
      T item = r->get(t);
      Atomics::chaos_point(chaos::site::deque_steal);
      if (top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                       std::memory_order_acquire)) {  // acquire on failure: as the first load of top
        return item;
      }
    }
  }

  // size_approx is bottom − top at some recent moment; exact only when nobody races.
  std::int64_t size_approx() const {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);  // relaxed: a hint, never acted on without pop/steal
    std::int64_t t = top_.load(std::memory_order_relaxed);  // relaxed: as above
    return b > t ? b - t : 0;
  }

  // empty is `size_approx() == 0`.
  bool empty() const { return size_approx() == 0; }

  // capacity is the size of the current ring; it only ever grows.
  std::int64_t capacity() const {
    return current_.load(std::memory_order_relaxed)->capacity;  // relaxed: owner-side statistic
  }

  // set_owner names the thread allowed to push and pop (checked in debug builds). Without
  // it, the first thread to push or pop becomes the owner.
  void set_owner([[maybe_unused]] std::thread::id owner) noexcept {
#if MAGPIE_DEBUG_CHECKS
    owner_.store(owner, std::memory_order_relaxed);  // relaxed: the owner thread is started after this, which orders it
#endif
  }

 private:
  // deque_owner_view (lib/) builds its owner-side looks (which item lies at either end)
  // on the indices and the ring, without a dereference, and takes with pop_at.
  template <class Deque>
  friend class deque_owner_view;

  // ring is a power-of-two circular buffer indexed by the ever-growing top/bottom.
  struct ring {
    // Every slot starts written: a thief that read an old top may read a slot of a grown
    // ring below the copied ones (its CAS then fails, but the read must be of a value).
    explicit ring(std::int64_t size)
        : capacity(size), mask(size - 1), slots(std::make_unique<atomic<T>[]>(static_cast<std::size_t>(size))) {
      for (std::int64_t i = 0; i < size; ++i) put(i, T{});
    }

    T get(std::int64_t index) const {
      return slots[static_cast<std::size_t>(index & mask)].load(std::memory_order_relaxed);  // relaxed: ordered by the index accesses around it
    }
    void put(std::int64_t index, T item) {
      slots[static_cast<std::size_t>(index & mask)].store(item, std::memory_order_relaxed);  // relaxed: published by the release store of bottom
    }

    const std::int64_t capacity;
    const std::int64_t mask;
    std::unique_ptr<atomic<T>[]> slots;
  };

  // pop_at is pop() once the owner has read bottom − 1 and the ring.
  std::optional<T> pop_at(std::int64_t b, ring* r) {
    // One item at most (top only grows, so an old top over-counts): take it the thieves'
    // way, with their CAS on top and no store to bottom — one read-modify-write instead of
    // the fence below plus that same CAS. A launch followed by a wait lands here.
    std::int64_t seen = top_.load(std::memory_order_relaxed);  // relaxed: a guess the CAS or the fence below settles
    if (seen > b) return std::nullopt;
    if (seen == b) {
      T item = r->get(b);  // before the CAS, as in steal(): a thief may take and free it
      Atomics::chaos_point(chaos::site::deque_pop);
      bool won = top_.compare_exchange_strong(seen, seen + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed);  // relaxed: on failure we read nothing more
      if (!won) return std::nullopt;  // a thief took it: the deque is empty
      return item;
    }
    // seq_cst store then seq_cst load: the paper's fence. Either a thief sees the lowered
    // bottom, or we see its raised top (Dekker) — never both of us taking the last item.
    bottom_.store(b, std::memory_order_seq_cst);
    Atomics::chaos_point(chaos::site::deque_pop);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {
      bottom_.store(b + 1, std::memory_order_release);  // release: republishes the slots as push did
      return std::nullopt;
    }
    T item = r->get(b);
    if (t == b) {
      // The last item: race the thieves for it by moving top, as they do.
      bool won = top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed);  // relaxed: on failure we read nothing more
      bottom_.store(b + 1, std::memory_order_release);  // release: republishes the slots as push did
      if (!won) return std::nullopt;
      return item;
    }
    low_water_ = std::min(low_water_, b);
    return item;
  }

  // Out of line: push() stays small and inlines into its callers.
  [[gnu::noinline]] ring* grow(ring* old, std::int64_t t, std::int64_t b) {
    auto bigger = std::make_unique<ring>(old->capacity * 2);
    for (std::int64_t i = t; i < b; ++i) bigger->put(i, old->get(i));
    ring* fresh = bigger.get();
    rings_.push_back(std::move(bigger));  // the old ring stays: a thief may be reading it
    current_.store(fresh, std::memory_order_release);  // release: pairs with steal()'s acquire load, which then sees the copied slots
    return fresh;
  }

  void check_owner([[maybe_unused]] std::string_view operation) {
#if MAGPIE_DEBUG_CHECKS
    std::thread::id me = std::this_thread::get_id();
    std::thread::id expected{};
    // relaxed: a debug aid; a real race on the owner is the very misuse being reported
    if (owner_.compare_exchange_strong(expected, me, std::memory_order_relaxed) || expected == me) return;
    std::string message = "work_stealing_deque::";
    message.append(operation).append(" called from a thread that does not own the deque");
    report(diagnostic_kind::misuse, message);
#endif
  }

  alignas(cache_line) atomic<std::int64_t> top_{0};
  alignas(cache_line) atomic<std::int64_t> bottom_{0};
  atomic<ring*> current_{nullptr};
  std::vector<std::unique_ptr<ring>> rings_;  // owner-only; every ring ever used, freed with the deque
  std::int64_t top_seen_ = 0;                 // owner-only; a value top had, never above it
  std::int64_t low_water_ = 0;                // owner-only; see low_water
#if MAGPIE_DEBUG_CHECKS
  std::atomic<std::thread::id> owner_{};  // plain std::atomic under every policy: a debug aid, not part of the algorithm
#endif
};

}  // namespace magpie::detail
