// Layer 5 — delegates: unicast `delegate<R(Args...)>` and multicast
// `multicast_delegate<void(Args...)>`, as UE's delegates, built only on the standard library
// and magpie's diagnostics.
//
//   magpie::delegate<int(int)> twice;
//   twice.bind([](int x) { return 2 * x; });
//   int four = twice.execute(2);
//
//   magpie::multicast_delegate<void(float)> on_damage;
//   magpie::delegate_handle handle = on_damage.add(&player, &player_type::take_damage);
//   on_damage.add(std::weak_ptr<hud>(hud_view), &hud::flash);  // skipped once the hud is gone
//   on_damage.broadcast(10.f);
//   on_damage.remove(handle);
//
// Not thread-safe: a delegate belongs to one thread at a time (like UE's). Broadcasts may
// re-enter: a listener may add, remove (itself included) or broadcast again. A listener
// added during a broadcast is not called by it; one removed is not called afterwards, and
// its callable is destroyed only when the outermost broadcast returns, so a listener that
// removes itself can keep using its captures (UE frees it at once).
#pragma once

#include <magpie/diagnostics.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace magpie {

template <class Signature>
class delegate;

// delegate holds at most one callable: a lambda or function, an object and a member
// function, or a weakly held object and a member function (unbound once it expires).
template <class R, class... Args>
class delegate<R(Args...)> {
 public:
  delegate() = default;

  // bind stores any callable invocable as R(Args...).
  template <class Callable>
    requires std::is_invocable_r_v<R, Callable&, Args...>
  void bind(Callable&& callable) {
    call_ = std::function<R(Args...)>(std::forward<Callable>(callable));
    object_ = nullptr;
    weak_.reset();
    weakly_bound_ = false;
  }

  // bind stores `object` and a member function of it; `object` must outlive the binding.
  template <class T>
  void bind(T* object, R (T::*method)(Args...)) {
    call_ = [object, method](Args... args) -> R { return (object->*method)(std::forward<Args>(args)...); };
    object_ = object;
    weak_.reset();
    weakly_bound_ = false;
  }

  // bind stores a weakly held object and a member function; once the object is gone the
  // delegate counts as unbound.
  template <class T>
  void bind(std::weak_ptr<T> object, R (T::*method)(Args...)) {
    call_ = [object, method](Args... args) -> R {
      std::shared_ptr<T> alive = object.lock();  // keeps it alive for the call
      return ((*alive).*method)(std::forward<Args>(args)...);
    };
    std::shared_ptr<T> now = object.lock();
    object_ = now.get();
    weak_ = std::move(object);
    weakly_bound_ = true;
  }

  // is_bound says whether execute would call something.
  bool is_bound() const noexcept { return static_cast<bool>(call_) && !(weakly_bound_ && weak_.expired()); }

  // unbind drops the callable.
  void unbind() noexcept {
    call_ = nullptr;
    object_ = nullptr;
    weak_.reset();
    weakly_bound_ = false;
  }

  // object is the object bound with a member function (nullptr for plain callables).
  const void* object() const noexcept { return object_; }

  // execute calls the callable. On an unbound delegate it reports misuse; then a `void`
  // delegate returns and any other throws std::bad_function_call.
  R execute(Args... args) const {
    if (!is_bound()) {
      report(diagnostic_kind::misuse, "delegate: execute on an unbound delegate");
      if constexpr (std::is_void_v<R>) {
        return;
      } else {
        throw std::bad_function_call();
      }
    }
    return call_(std::forward<Args>(args)...);
  }

  // execute_if_bound calls the callable if bound: `bool` (whether it ran) for a `void`
  // delegate, else `std::optional<R>`.
  auto execute_if_bound(Args... args) const {
    if constexpr (std::is_void_v<R>) {
      if (!is_bound()) return false;
      call_(std::forward<Args>(args)...);
      return true;
    } else {
      if (!is_bound()) return std::optional<R>();
      return std::optional<R>(call_(std::forward<Args>(args)...));
    }
  }

 private:
  std::function<R(Args...)> call_;
  const void* object_ = nullptr;
  std::weak_ptr<const void> weak_;
  bool weakly_bound_ = false;
};

// delegate_handle names one listener of a multicast delegate; ids come from one global
// counter, so a handle never names a listener it was not issued for. Default: invalid.
class delegate_handle {
 public:
  delegate_handle() = default;

  // is_valid says whether the handle was issued by add() (it may since have been removed).
  bool is_valid() const noexcept { return id_ != 0; }

  // reset makes the handle invalid.
  void reset() noexcept { id_ = 0; }

  friend bool operator==(const delegate_handle&, const delegate_handle&) = default;

 private:
  template <class Signature>
  friend class multicast_delegate;

  static delegate_handle issue() noexcept {
    static std::atomic<std::uint64_t> next{1};
    delegate_handle handle;
    handle.id_ = next.fetch_add(1, std::memory_order_relaxed);  // relaxed: only uniqueness matters
    return handle;
  }

  std::uint64_t id_ = 0;
};

template <class Signature>
class multicast_delegate;

// multicast_delegate calls every listener, in the order added.
template <class... Args>
class multicast_delegate<void(Args...)> {
 public:
  multicast_delegate() = default;
  multicast_delegate(const multicast_delegate&) = delete;
  multicast_delegate& operator=(const multicast_delegate&) = delete;

  // add registers a listener, with the same forms as delegate::bind, and returns its handle.
  template <class... Binding>
  delegate_handle add(Binding&&... binding) {
    auto fresh = std::make_unique<listener>();
    fresh->handle = delegate_handle::issue();
    fresh->callable.bind(std::forward<Binding>(binding)...);
    delegate_handle handle = fresh->handle;
    listeners_.push_back(std::move(fresh));
    return handle;
  }

  // remove unregisters the listener `handle` names; false if it is not registered.
  bool remove(delegate_handle handle) {
    for (auto& each : listeners_) {
      if (each->handle == handle && !each->removed) {
        each->removed = true;
        collect_removed();
        return true;
      }
    }
    return false;
  }

  // remove_all unregisters every listener bound to `object`; returns how many.
  std::size_t remove_all(const void* object) {
    std::size_t removed = 0;
    for (auto& each : listeners_) {
      if (!each->removed && object != nullptr && each->callable.object() == object) {
        each->removed = true;
        ++removed;
      }
    }
    collect_removed();
    return removed;
  }

  // is_bound says whether any registered listener would be called.
  bool is_bound() const noexcept {
    for (const auto& each : listeners_) {
      if (!each->removed && each->callable.is_bound()) return true;
    }
    return false;
  }

  // broadcast calls every listener registered before it began and not removed since, in
  // registration order; listeners whose weak object is gone are skipped.
  void broadcast(Args... args) {
    ++broadcasting_;
    std::size_t registered = listeners_.size();
    for (std::size_t i = 0; i < registered; ++i) {
      listener& each = *listeners_[i];  // stable: listeners live on the heap
      if (!each.removed) each.callable.execute_if_bound(args...);
    }
    --broadcasting_;
    collect_removed();
  }

 private:
  struct listener {
    delegate_handle handle;
    delegate<void(Args...)> callable;
    bool removed = false;
  };

  // collect_removed destroys removed listeners, but never while a broadcast is running.
  void collect_removed() {
    if (broadcasting_ != 0) return;
    std::erase_if(listeners_, [](const std::unique_ptr<listener>& each) { return each->removed; });
  }

  std::vector<std::unique_ptr<listener>> listeners_;
  int broadcasting_ = 0;
};

}  // namespace magpie
