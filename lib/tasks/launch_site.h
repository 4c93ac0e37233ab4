// Private to lib/: a task's launch site, what the launch-order rule of a wait with no
// workers (wait_launch_order.cpp) tells launches apart by.
#pragma once

#include <magpie/detail/work_item.h>

namespace magpie::detail {

// launch_site identifies where in the code a task was launched from, as far as the
// launch-order rule tells launches apart: by the C++ type of the task's body (each lambda
// expression is a type of its own, so a loop launching one lambda is one launch site; all
// plain function pointers share one, as do all std::functions). Any other queue entry
// (a task_group child, a coroutine's fork) has a site of its own kind, never a task's. It
// is read off an entry only through launch_site_of, and only once the entry is this
// thread's.
//
// Its value is the entry's handler, a per-body-type constant: task_impl<Body, R>::handle
// is one function per instantiation, and distinct functions have distinct addresses, so
// two launch sites never compare equal. It is not a narrowed id that could collide: a
// collision would run another site's task early, which may wait for what the waiting
// thread does next and hang. (Compilers that merge identical functions keep the addresses
// of address-taken ones apart; a link with identical-code folding of address-taken
// functions, as --icf=all or /OPT:ICF, would not, and is not supported.) It costs the task
// no field: the handler is there anyway.
class launch_site {
 public:
  launch_site() noexcept = default;  // no site: what a thread outside a launch-order run holds
  friend bool operator==(launch_site, launch_site) noexcept = default;

 private:
  friend launch_site launch_site_of(const work_item* item) noexcept;
  explicit launch_site(work_item::handler_fn handler) noexcept : handler_(handler) {}

  work_item::handler_fn handler_ = nullptr;
};

// launch_site_of is the launch site of `item`, a queue entry this thread has taken (or
// a task this thread holds a reference to).
inline launch_site launch_site_of(const work_item* item) noexcept { return launch_site(item->handler); }

}  // namespace magpie::detail
