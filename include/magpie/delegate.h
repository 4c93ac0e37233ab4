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
// removes itself can keep using its captures (UE frees it at once). A listener's exception
// ends the broadcast and reaches the caller; removed listeners are still freed.
#pragma once

#include <magpie/detail/language.h>

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

namespace detail {
template <class T>
inline constexpr bool is_std_function = false;
template <class Signature>
inline constexpr bool is_std_function<std::function<Signature>> = true;
}  // namespace detail

// delegate holds at most one callable: a lambda or function, an object and a member
// function, or a weakly held object and a member function (unbound once it expires).
// A callable may rebind, unbind, reassign or destroy its own delegate while it runs: the
// running callable, captures included, lives until its call returns.
template <class R, class... Args>
class delegate<R(Args...)> {
 public:
  delegate() = default;
  // delegate(const delegate&) copies the binding: the callable (captures included), or the
  // object and member function.
  delegate(const delegate& other)
      : call_(other.call_.clone()), object_(other.object_), weak_(other.weak_), weakly_bound_(other.weakly_bound_) {}
  // delegate(delegate&&) moves the binding out of `other`, which is left unbound.
  delegate(delegate&& other) noexcept
      : call_(std::move(other.call_)),
        object_(std::exchange(other.object_, nullptr)),
        weak_(std::move(other.weak_)),
        weakly_bound_(std::exchange(other.weakly_bound_, false)) {}
  // operator= (copy and move) swaps the new binding in first and frees the old one last,
  // since the old callable's captures may use this delegate as they are destroyed.
  delegate& operator=(const delegate& other) {
    delegate(other).swap(*this);
    return *this;
  }
  delegate& operator=(delegate&& other) noexcept {
    delegate(std::move(other)).swap(*this);
    return *this;
  }
  ~delegate() = default;

  // bind stores any callable invocable as R(Args...); a null function pointer, null member
  // pointer or empty std::function leaves the delegate unbound, as std::function would.
  template <class Callable>
    requires std::is_invocable_r_v<R, Callable&, Args...> && std::is_copy_constructible_v<std::decay_t<Callable>>
  void bind(Callable&& target) {
    delegate fresh;
    if (!is_null(target)) fresh.call_ = make_callable(std::forward<Callable>(target));
    fresh.swap(*this);
  }

  // bind stores `object` and a member function of it; `object` must outlive the binding.
  template <class T>
  void bind(T* object, R (T::*method)(Args...)) {
    delegate fresh;
    fresh.call_ = make_callable(
        [object, method](Args... args) -> R { return (object->*method)(std::forward<Args>(args)...); });
    fresh.object_ = object;
    fresh.swap(*this);
  }

  // bind stores a weakly held object and a member function; once the object is gone the
  // delegate counts as unbound.
  template <class T>
  void bind(std::weak_ptr<T> object, R (T::*method)(Args...)) {
    delegate fresh;
    fresh.call_ = make_callable([object, method](Args... args) -> R {
      std::shared_ptr<T> alive = object.lock();  // keeps it alive for the call
      return ((*alive).*method)(std::forward<Args>(args)...);
    });
    std::shared_ptr<T> now = object.lock();
    fresh.object_ = now.get();
    fresh.weak_ = std::move(object);
    fresh.weakly_bound_ = true;
    fresh.swap(*this);
  }

  // is_bound says whether execute would call something.
  bool is_bound() const noexcept { return call_.get() != nullptr && !(weakly_bound_ && weak_.expired()); }

  // unbind drops the callable.
  void unbind() noexcept { delegate().swap(*this); }

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
    return run(std::forward<Args>(args)...);
  }

  // execute_if_bound calls the callable if bound: `bool` (whether it ran) for a `void`
  // delegate, else `std::optional<R>`.
  auto execute_if_bound(Args... args) const {
    if constexpr (std::is_void_v<R>) {
      if (!is_bound()) return false;
      run(std::forward<Args>(args)...);
      return true;
    } else {
      if (!is_bound()) return std::optional<R>();
      return std::optional<R>(run(std::forward<Args>(args)...));
    }
  }

 private:
  // callable is the type-erased callable, on the heap so that its address outlives any
  // rebinding. `holders` counts the delegate storing it plus every call running it; it need
  // not be atomic, as a delegate belongs to one thread and copies clone rather than share.
  struct callable {
    callable() = default;
    callable(const callable&) = delete;
    callable& operator=(const callable&) = delete;
    virtual ~callable() = default;
    virtual R invoke(Args&&... args) = 0;
    virtual callable* clone() const = 0;
    int holders = 1;
  };

  template <class Function>
  struct callable_for final : callable {
    explicit callable_for(Function stored) : function(std::move(stored)) {}
    R invoke(Args&&... args) override {
      if constexpr (std::is_void_v<R>) {
        std::invoke(function, std::forward<Args>(args)...);
      } else {
        return std::invoke(function, std::forward<Args>(args)...);
      }
    }
    callable* clone() const override { return new callable_for(function); }
    Function function;
  };

  // callable_ref is one holder of a callable; the last one to let go deletes it.
  class callable_ref {
   public:
    callable_ref() = default;
    explicit callable_ref(callable* adopted) noexcept : held_(adopted) {}
    callable_ref(callable_ref&& other) noexcept : held_(std::exchange(other.held_, nullptr)) {}
    callable_ref& operator=(callable_ref&& other) noexcept {
      callable_ref(std::move(other)).swap(*this);
      return *this;
    }
    callable_ref(const callable_ref&) = delete;
    callable_ref& operator=(const callable_ref&) = delete;
    ~callable_ref() {
      if (held_ != nullptr && --held_->holders == 0) delete held_;
    }

    callable* get() const noexcept { return held_; }
    callable_ref share() const noexcept {
      if (held_ != nullptr) ++held_->holders;
      return callable_ref(held_);
    }
    callable_ref clone() const { return callable_ref(held_ != nullptr ? held_->clone() : nullptr); }
    void swap(callable_ref& other) noexcept { std::swap(held_, other.held_); }

   private:
    callable* held_ = nullptr;
  };

  template <class Callable>
  static callable_ref make_callable(Callable&& function) {
    return callable_ref(new callable_for<std::decay_t<Callable>>(std::forward<Callable>(function)));
  }

  template <class Callable>
  static bool is_null(const Callable& function) noexcept {
    using stored = std::decay_t<Callable>;
    if constexpr (std::is_pointer_v<stored> || std::is_member_pointer_v<stored>) {
      return static_cast<stored>(function) == nullptr;
    } else if constexpr (detail::is_std_function<stored>) {
      return !function;
    } else {
      return false;
    }
  }

  // run calls the bound callable, holding it for the call: should the callee rebind,
  // unbind, reassign or destroy this delegate, the callable it is running stays alive.
  // Nothing here touches `this` once the callee has been entered.
  R run(Args&&... args) const {
    callable_ref running = call_.share();
    return running.get()->invoke(std::forward<Args>(args)...);
  }

  void swap(delegate& other) noexcept {
    call_.swap(other.call_);
    std::swap(object_, other.object_);
    weak_.swap(other.weak_);
    std::swap(weakly_bound_, other.weakly_bound_);
  }

  callable_ref call_;
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

  // slot_count is how many listeners are stored, removed ones not yet freed included: it
  // only grows during a broadcast, and drops back once the outermost one ends.
  std::size_t slot_count() const noexcept { return listeners_.size(); }

  // broadcast calls every listener registered before it began and not removed since, in
  // registration order; listeners whose weak object is gone are skipped.
  // A listener's exception ends the broadcast and reaches the caller.
  void broadcast(Args... args) {
    broadcast_scope scope(*this);
    std::size_t registered = listeners_.size();
    for (std::size_t i = 0; i < registered; ++i) {
      listener& each = *listeners_[i];  // stable: listeners live on the heap
      if (!each.removed) each.callable.execute_if_bound(args...);
    }
  }

 private:
  struct listener {
    delegate_handle handle;
    delegate<void(Args...)> callable;
    bool removed = false;
  };

  // broadcast_scope counts one running broadcast, and on the way out — returning or
  // throwing — frees what was removed meanwhile once the outermost one ends. Were a throw
  // to skip this, the count would stay raised and removed listeners would pile up forever.
  class broadcast_scope {
   public:
    explicit broadcast_scope(multicast_delegate& owner) noexcept : owner_(owner) { ++owner_.broadcasting_; }
    ~broadcast_scope() {
      --owner_.broadcasting_;
      owner_.collect_removed();
    }
    broadcast_scope(const broadcast_scope&) = delete;
    broadcast_scope& operator=(const broadcast_scope&) = delete;

   private:
    multicast_delegate& owner_;
  };

  // collect_removed destroys removed listeners, but never while a broadcast is running.
  void collect_removed() noexcept {
    if (broadcasting_ != 0) return;
    std::erase_if(listeners_, [](const std::unique_ptr<listener>& each) { return each->removed; });
  }

  std::vector<std::unique_ptr<listener>> listeners_;
  int broadcasting_ = 0;
};

}  // namespace magpie
