// Private to lib/: what the primitives keep per thread, in one place.
//
// primitives_tls is constant-initialised and trivially destructible, so reading a field is
// one thread-pointer-relative load, as cheap as a thread_local of its own: no guard, no
// call, no destructor registration (the task pool's allocation and free paths read it).
// What must happen at thread exit (the pool's heap parked for the next thread) is done by a
// thread_local with a destructor that the cold path makes first (task_pool.cpp,
// thread_heap); it clears pool_heap and sets pool_heap_parked, so that what runs on the
// thread after it (another thread_local's destructor) frees as a thread without a heap and
// allocates from a heap it borrows and parks again.
//
// Outside it: the counting build's per-thread table (counting.cpp), which exists only in
// that build.
#pragma once

#include <cstdint>
#include <type_traits>

namespace magpie::detail {

namespace task_pool {
struct heap;  // task_pool.cpp
}

// chaos_decisions is where this thread's chaos draws stand (chaos.cpp).
struct chaos_decisions {
  std::uint64_t generation = 0;  // the start it drew for; 0: never drawn (generations start at 1)
  std::uint64_t identity = 0;    // which thread it is to the seed
  bool identity_fixed = false;   // set by chaos::set_thread_identity, else numbered on first draw
  std::uint64_t state = 0;       // the generator's
};

// primitives_thread_state is the primitives' per-thread data. Every field is read and
// written by its own thread only.
struct primitives_thread_state {
  // The task pool's heap of this thread once it has one, null before and after
  // (task_pool.cpp): frees on this thread then take the path for another thread's block.
  task_pool::heap* pool_heap = nullptr;
  // Set as the thread's heap is parked at exit. A thread_local destroyed after that may
  // still allocate: it borrows a heap for that block and parks it again.
  bool pool_heap_parked = false;

  chaos_decisions chaos;
};

// primitives_tls is the calling thread's primitives_thread_state.
extern constinit thread_local primitives_thread_state primitives_tls;
static_assert(std::is_trivially_destructible_v<primitives_thread_state>, "read after this thread's destructors ran");

}  // namespace magpie::detail
