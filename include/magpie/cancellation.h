// Layer 3 — cancellation: stopping work that is no longer wanted.
//
//   magpie::cancellation_token stop;
//   auto load = magpie::launch("load level", [] {
//     for (auto& chunk : chunks) {
//       if (magpie::is_current_work_canceled()) return;   // a running body stops itself
//       load(chunk);
//     }
//   }, stop);
//   stop.cancel();   // a body that has not started is skipped: load holds task_canceled
//
// A task launched with a token whose cancel() ran before its body started completes without
// running the body, holding task_canceled as its exception (has_exception() is true,
// get_result() rethrows it); its subsequents still run, as after any exception. A body
// that is running when cancel() comes sees is_current_work_canceled() turn true and decides
// for itself; if it returns normally, the task completes with its result. A canceled task
// is not reported as an unhandled exception: its handle may be dropped unread.
//
// The token is the caller's object: it must outlive every task launched with it (launch
// keeps its address). One token may serve a whole graph; canceling twice is harmless.
// Checking a token is one relaxed load.
#pragma once

#include <magpie/detail/language.h>

#include <atomic>
#include <exception>
#include <utility>

namespace magpie {

// cancellation_token is a flag set once by cancel() and read by the work that carries it.
class cancellation_token {
 public:
  cancellation_token() noexcept = default;
  cancellation_token(const cancellation_token&) = delete;
  cancellation_token& operator=(const cancellation_token&) = delete;

  // cancel asks every task carrying the token to stop: any thread, any number of times.
  void cancel() noexcept {
    // relaxed: a request carrying no data; a reader acts on the flag alone, and what the
    // canceled work hands on is ordered by task completion, not by this store
    canceled_.store(true, std::memory_order_relaxed);
  }

  // is_canceled says whether cancel() ran.
  bool is_canceled() const noexcept {
    return canceled_.load(std::memory_order_relaxed);  // relaxed: pairs with cancel()'s store; no data rides on it
  }

 private:
  std::atomic<bool> canceled_{false};
};

// task_canceled is the exception a task holds when its body was skipped because its token
// was canceled before the body started.
class task_canceled : public std::exception {
 public:
  // what names the exception: a task canceled before it started.
  const char* what() const noexcept override { return "magpie: task canceled before it started"; }
};

namespace detail {
// current_cancellation is the token of the work this thread runs (nullptr: none).
extern constinit thread_local const cancellation_token* current_cancellation;
}  // namespace detail

// cancellation_token_scope makes `token` the calling thread's current token until the
// scope ends (then the previous one is current again): is_current_work_canceled() reads it.
// Launching with a token sets one around the body; a scope is for work that is not a task.
class cancellation_token_scope {
 public:
  // cancellation_token_scope makes `token` current until the scope ends.
  explicit cancellation_token_scope(cancellation_token& token) noexcept
      : previous_(detail::current_cancellation) {
    detail::current_cancellation = &token;
  }
  ~cancellation_token_scope() { detail::current_cancellation = previous_; }
  cancellation_token_scope(const cancellation_token_scope&) = delete;
  cancellation_token_scope& operator=(const cancellation_token_scope&) = delete;

 private:
  const cancellation_token* previous_;
};

// is_current_work_canceled says whether the calling thread's current token (the running
// task's, or the innermost cancellation_token_scope's) was canceled; false without one.
inline bool is_current_work_canceled() noexcept {
  const cancellation_token* token = detail::current_cancellation;
  return token != nullptr && token->is_canceled();
}

namespace detail {

// cancelable_body runs `Body` under its token, unless the token was canceled first: the
// task layer asks skip_requested() before it runs the body (task_impl::handle).
template <class Body>
class cancelable_body {
 public:
  template <class F>
  cancelable_body(F&& body, cancellation_token& token) : body_(std::forward<F>(body)), token_(&token) {}

  bool skip_requested() const noexcept { return token_->is_canceled(); }

  // token is the token the body runs under (a coroutine body's resumptions set it again).
  const cancellation_token* token() const noexcept { return token_; }

  decltype(auto) operator()() {
    cancellation_token_scope scope(*token_);
    return body_();
  }

 private:
  Body body_;
  cancellation_token* token_;
};

}  // namespace detail

}  // namespace magpie
