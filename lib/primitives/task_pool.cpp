// The task memory pool; see include/magpie/detail/task_pool.h for the design.
#include <magpie/detail/task_pool.h>
#include <magpie/task_memory.h>

#include "address_sanitizer.h"
#include "thread_state.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#if MAGPIE_ADDRESS_SANITIZED
#include <sanitizer/asan_interface.h>
#define MAGPIE_POISON(address, size) ASAN_POISON_MEMORY_REGION(address, size)
#define MAGPIE_UNPOISON(address, size) ASAN_UNPOISON_MEMORY_REGION(address, size)
#else
#define MAGPIE_POISON(address, size) ((void)(address), (void)(size))
#define MAGPIE_UNPOISON(address, size) ((void)(address), (void)(size))
#endif

namespace magpie::detail {
constinit thread_local primitives_thread_state primitives_tls;
}  // namespace magpie::detail

namespace magpie::detail::task_pool {

namespace {

constexpr std::size_t slab_size = 64 * 1024;
// Multiples of 64 only, so that every block is cache-line aligned (the slab header takes
// the first 64 bytes); 192 holds a task with one prerequisite edge in its own block.
constexpr std::array<std::size_t, 6> class_sizes = {64, 128, 192, 256, 384, 512};

// free_block is the link a block carries while it waits in a "returned" stack.
struct free_block {
  free_block* next;
};

// free_stack holds one class's free blocks on its owner's heap: their addresses, in an
// array used as a stack. Addresses rather than a list threaded through the blocks, so that
// allocation knows which blocks it hands out next and starts fetching them (a burst of
// launches otherwise waits on each block's line in turn), and a free writes nothing into
// the freed block. Owner thread only; the sizes are atomics for live_blocks() alone.
struct free_stack {
  void** blocks = nullptr;
  std::size_t capacity = 0;             // at least `carved`: every free block fits
  std::atomic<std::size_t> size{0};     // free blocks, on top of blocks[0]
  std::atomic<std::size_t> carved{0};   // blocks of this class in the heap's slabs
};

// The allocation that hands out blocks[i] prefetches blocks[i - prefetch_distance]: about
// a hundred nanoseconds ahead of its use in a burst of launches.
constexpr std::size_t prefetch_distance = 8;

// counter_add adds to a counter only its owner writes: a load and a store, not a locked add.
void counter_add(std::atomic<std::size_t>& counter, std::size_t delta) noexcept {
  // relaxed: a statistic with a single writer, read by live_blocks() only
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

}  // namespace

struct heap;  // named in thread_state.h

namespace {

// slab_header sits at the start of every 64 KiB-aligned slab: it names the owning heap,
// so any thread can find where a block goes back to.
struct alignas(64) slab_header {
  heap* owner;
  std::size_t class_index;
  std::size_t free_blocks = 0;  // the owner's scratch count while it trims; zero otherwise
};

}  // namespace

// heap is one thread's pool. Fields the owner writes on every allocation and fields other
// threads write when they free are kept on separate cache lines: sharing one made every
// cross-thread free bounce the owner's line (a quarter of the empty-job benchmark).
struct heap {
  // Owner thread only (the counters are read by live_blocks()).
  alignas(64) std::array<free_stack, class_sizes.size()> free_stacks{};
  std::atomic<std::size_t> taken_back{0};        // blocks moved from `returned` to `free_stacks`
  std::atomic<std::size_t> freed_for_others{0};  // blocks of other heaps this thread freed
  std::size_t slabs = 0;  // slabs this heap carved and still holds
  // Pushed by other threads, taken whole by the owner.
  alignas(64) std::array<std::atomic<free_block*>, class_sizes.size()> returned{};
  std::atomic<std::size_t> freed_elsewhere{0};  // by threads without a heap of their own (exiting)
  // Cold.
  alignas(64) heap* next_parked = nullptr;  // in the parked list while no thread owns this heap
  heap* next_created = nullptr;             // in the list of every heap, for live_blocks()
};

namespace {

std::atomic<heap*> every_heap{nullptr};

// Heaps of exited threads wait here for adoption. This runs once per thread start and
// exit, never per block, so a small spinlock is enough.
std::atomic_flag parked_lock = ATOMIC_FLAG_INIT;
heap* parked_heaps = nullptr;

void lock_parked() noexcept {
  while (parked_lock.test_and_set(std::memory_order_acquire)) {  // acquire: pairs with unlock_parked's release
  }
}
void unlock_parked() noexcept { parked_lock.clear(std::memory_order_release); }  // release: pairs with lock_parked's acquire

heap* adopt_or_create() {
  lock_parked();
  heap* adopted = parked_heaps;
  if (adopted != nullptr) parked_heaps = adopted->next_parked;
  unlock_parked();
  if (adopted != nullptr) return adopted;
  auto* fresh = new heap();
  fresh->next_created = every_heap.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
  while (!every_heap.compare_exchange_weak(fresh->next_created, fresh,
                                           std::memory_order_release,    // release: live_blocks' acquire sees the heap whole
                                           std::memory_order_relaxed)) {  // relaxed: we only retry
  }
  return fresh;
}

void park(heap& unowned) noexcept {
  lock_parked();
  unowned.next_parked = parked_heaps;
  parked_heaps = &unowned;
  unlock_parked();
}

std::size_t trim(heap& owner) noexcept;

// thread_heap owns the calling thread's heap, parked again when the thread exits. Only
// allocate_slowly's first allocation of a thread reads it; every other path reads
// primitives_tls, a plain pointer without the guard of a thread_local that has a destructor,
// whose fields stay readable once this object is destroyed (a compiler may drop the stores
// of a destructor to its own members).
struct thread_heap {
  heap* mine = nullptr;
  heap& get() {
    if (mine == nullptr) {
      mine = adopt_or_create();
      primitives_tls.pool_heap = mine;
    }
    return *mine;
  }
  ~thread_heap() {
    // Later frees on this thread take the "elsewhere" path; later allocations borrow a heap
    // (also when get() found no heap: this object is gone either way).
    primitives_tls.pool_heap = nullptr;
    primitives_tls.pool_heap_parked = true;
    if (mine == nullptr) return;
    trim(*mine);  // a parked heap keeps only slabs that still hold live blocks
    park(*mine);
  }
};

thread_local thread_heap this_thread_heap;

// class_by_lines maps a request's size in 64-byte lines (rounded up) to its class: one
// load on the allocation path instead of a search.
constexpr auto class_by_lines = [] {
  std::array<std::uint8_t, largest_pooled / 64 + 1> table{};
  for (std::size_t lines = 0; lines < table.size(); ++lines) {
    std::size_t index = 0;
    while (class_sizes[index] < lines * 64) ++index;
    table[lines] = static_cast<std::uint8_t>(index);
  }
  return table;
}();
static_assert(class_sizes.back() == largest_pooled);

std::size_t class_of(std::size_t size) noexcept { return class_by_lines[(size + 63) / 64]; }

slab_header* slab_of(void* block) noexcept {
  return reinterpret_cast<slab_header*>(reinterpret_cast<std::uintptr_t>(block) & ~(slab_size - 1));
}

// first_block is the index of a slab's first block of class `index` (the header comes first).
std::size_t first_block(std::size_t index) noexcept {
  return (sizeof(slab_header) + class_sizes[index] - 1) / class_sizes[index];
}

// blocks_per_slab is how many blocks of class `index` one slab holds.
std::size_t blocks_per_slab(std::size_t index) noexcept { return slab_size / class_sizes[index] - first_block(index); }

// take_back moves the blocks other threads returned to the owner's free stack; returns
// the stack's new size.
std::size_t take_back(heap& owner, std::size_t index) noexcept {
  free_stack& stack = owner.free_stacks[index];
  std::size_t size = stack.size.load(std::memory_order_relaxed);  // relaxed: the owner's own count
  std::size_t taken = 0;
  // acquire: pairs with the release CAS in deallocate, so the returned blocks' links are visible
  for (free_block* back = owner.returned[index].exchange(nullptr, std::memory_order_acquire); back != nullptr;) {
    free_block* next = back->next;
    MAGPIE_POISON(back, sizeof(free_block));  // the rest of it was poisoned when it was freed
    stack.blocks[size + taken++] = back;
    back = next;
  }
  stack.size.store(size + taken, std::memory_order_relaxed);  // relaxed: as counter_add
  counter_add(owner.taken_back, taken);
  return size + taken;
}

// trim frees the owner's slabs whose every block is free; owner thread only. Two walks of
// each free stack, counting in the slab headers (zero between trims): no allocation, no
// hashing — an exiting worker may hold a million free blocks.
std::size_t trim(heap& owner) noexcept {
  std::size_t released = 0;
  for (std::size_t index = 0; index < class_sizes.size(); ++index) {
    free_stack& stack = owner.free_stacks[index];
    const std::size_t size = take_back(owner, index);
    for (std::size_t i = 0; i < size; ++i) ++slab_of(stack.blocks[i])->free_blocks;
    const std::size_t whole = blocks_per_slab(index);
    std::size_t kept = 0;
    std::size_t freed_slabs = 0;
    for (std::size_t i = 0; i < size; ++i) {
      void* block = stack.blocks[i];
      slab_header* slab = slab_of(block);
      if (slab->free_blocks < whole) {
        --slab->free_blocks;  // back to zero after the slab's last free block, as trim found it
        stack.blocks[kept++] = block;
      } else if (++slab->free_blocks == 2 * whole) {
        // Every block of the slab is free; counting on from `whole`, this was the last of
        // them in the stack (no later entry names the slab): free it.
        MAGPIE_UNPOISON(slab, slab_size);
        std::free(slab);
        ++freed_slabs;
      }
    }
    stack.size.store(kept, std::memory_order_relaxed);  // relaxed: as counter_add
    stack.carved.store(stack.carved.load(std::memory_order_relaxed) - freed_slabs * whole,  // relaxed: as counter_add
                       std::memory_order_relaxed);
    if (stack.carved.load(std::memory_order_relaxed) == 0) {  // relaxed: the owner's own count
      std::free(stack.blocks);
      stack.blocks = nullptr;
      stack.capacity = 0;
    }
    owner.slabs -= freed_slabs;
    released += freed_slabs * slab_size;
  }
  return released;
}

// refill gives the owner's free stack more blocks and returns its new size: first those
// other threads returned, else a fresh slab's, its blocks aligned to their size after the
// header and handed out from the lowest address up. Out of line: allocate stays a leaf.
[[gnu::noinline]] std::size_t refill(heap& owner, std::size_t index) {
  if (std::size_t size = take_back(owner, index); size != 0) return size;
  free_stack& stack = owner.free_stacks[index];
  const std::size_t count = blocks_per_slab(index);
  const std::size_t carved = stack.carved.load(std::memory_order_relaxed);  // relaxed: the owner's own count
  void* memory = std::aligned_alloc(slab_size, slab_size);
  if (memory == nullptr) throw std::bad_alloc();
  if (carved + count > stack.capacity) {
    std::size_t capacity = std::max(2 * stack.capacity, carved + count);
    void* grown = std::realloc(stack.blocks, capacity * sizeof(void*));
    if (grown == nullptr) {
      std::free(memory);
      throw std::bad_alloc();
    }
    stack.blocks = static_cast<void**>(grown);
    stack.capacity = capacity;
  }
  new (memory) slab_header{&owner, index};
  ++owner.slabs;
  std::size_t block_size = class_sizes[index];
  char* base = static_cast<char*>(memory);
  std::size_t first = first_block(index);
  for (std::size_t i = 0; i < count; ++i) {
    char* block = base + (first + count - 1 - i) * block_size;
    stack.blocks[i] = block;
    MAGPIE_POISON(block, block_size);
  }
  stack.carved.store(carved + count, std::memory_order_relaxed);  // relaxed: as counter_add
  stack.size.store(count, std::memory_order_relaxed);             // relaxed: as counter_add
  return count;
}

}  // namespace

namespace {

// pop_block takes a block of class `index` from the owner's free stack, refilled if empty.
void* pop_block(heap& owner, std::size_t index) {
  free_stack& stack = owner.free_stacks[index];
  std::size_t left = stack.size.load(std::memory_order_relaxed);  // relaxed: the owner's own count
  if (left == 0) left = refill(owner, index);
  void* block = stack.blocks[--left];
  stack.size.store(left, std::memory_order_relaxed);  // relaxed: as counter_add
  MAGPIE_UNPOISON(block, class_sizes[index]);
  return block;
}

// allocate_slowly is allocate() when the fast path cannot serve: a large block, a thread
// without a heap yet, an empty free stack. Out of line, so that allocate's fast path saves
// no registers and makes no call.
[[gnu::noinline]] void* allocate_slowly(std::size_t size) {
  if (size > largest_pooled) return ::operator new(size, std::align_val_t{64});
  std::size_t index = class_of(size);
  if (primitives_tls.pool_heap_parked) {
    // The thread is exiting and its heap is parked, free for another thread to adopt: borrow
    // a heap for this one block and park it again (also when the refill runs out of
    // memory), so that no heap stays with a thread that is gone.
    struct borrowed_heap {
      heap* borrowed = adopt_or_create();
      ~borrowed_heap() { park(*borrowed); }
    } lender;
    return pop_block(*lender.borrowed, index);
  }
  return pop_block(this_thread_heap.get(), index);
}

// deallocate_elsewhere is deallocate() of a large block or of another heap's block (or on a
// thread without a heap): out of line, as allocate_slowly.
[[gnu::noinline]] void deallocate_elsewhere(void* memory, std::size_t size, heap* mine) noexcept {
  if (size > largest_pooled) {
    ::operator delete(memory, std::align_val_t{64});
    return;
  }
  slab_header* slab = slab_of(memory);
  heap& owner = *slab->owner;
  std::size_t index = slab->class_index;
  auto* block = static_cast<free_block*>(memory);
  MAGPIE_POISON(static_cast<char*>(memory) + sizeof(free_block), class_sizes[index] - sizeof(free_block));
  // Counted on this thread's heap where it has one (live_blocks sums every heap): no locked
  // add on the owner's line per cross-thread free.
  if (mine != nullptr) {
    counter_add(mine->freed_for_others, 1);
  } else {
    owner.freed_elsewhere.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  }
  std::atomic<free_block*>& returned = owner.returned[index];
  free_block* head = returned.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
  do {
    block->next = head;
  } while (!returned.compare_exchange_weak(head, block,
                                                  std::memory_order_release,    // release: pairs with take_back's acquire
                                                  std::memory_order_relaxed));  // relaxed: we only retry
}

}  // namespace

void* allocate(std::size_t size) {
  heap* mine = primitives_tls.pool_heap;
  if (size <= largest_pooled && mine != nullptr) [[likely]] {
    std::size_t index = class_of(size);
    free_stack& stack = mine->free_stacks[index];
    std::size_t left = stack.size.load(std::memory_order_relaxed);  // relaxed: the owner's own count
    if (left != 0) [[likely]] {
      void* block = stack.blocks[--left];
      stack.size.store(left, std::memory_order_relaxed);  // relaxed: as counter_add
      if (left >= prefetch_distance) __builtin_prefetch(stack.blocks[left - prefetch_distance], 1);
      MAGPIE_UNPOISON(block, class_sizes[index]);
      return block;
    }
  }
  return allocate_slowly(size);
}

void deallocate(void* memory, std::size_t size) noexcept {
  if (memory == nullptr) return;
  heap* mine = primitives_tls.pool_heap;
  if (size <= largest_pooled) [[likely]] {
    slab_header* slab = slab_of(memory);
    if (slab->owner == mine) [[likely]] {  // never nullptr: a pooled block's slab names its heap
      std::size_t index = slab->class_index;
      MAGPIE_POISON(memory, class_sizes[index]);
      free_stack& stack = mine->free_stacks[index];
      std::size_t free_count = stack.size.load(std::memory_order_relaxed);  // relaxed: the owner's own count
      stack.blocks[free_count] = memory;  // fits: no more blocks are free than were carved
      stack.size.store(free_count + 1, std::memory_order_relaxed);  // relaxed: as counter_add
      return;
    }
  }
  deallocate_elsewhere(memory, size, mine);
}

std::size_t parked_heap_count() noexcept {
  lock_parked();
  std::size_t count = 0;
  for (heap* each = parked_heaps; each != nullptr; each = each->next_parked) ++count;
  unlock_parked();
  return count;
}

std::int64_t live_blocks() noexcept {
  // Every carved block is live, free on its heap's stack, or in a "returned" stack (freed
  // elsewhere and not yet taken back).
  std::int64_t live = 0;
  auto read = [](const std::atomic<std::size_t>& counter) {
    return static_cast<std::int64_t>(counter.load(std::memory_order_relaxed));  // relaxed: statistics
  };
  // acquire: pairs with adopt_or_create's release CAS
  for (heap* each = every_heap.load(std::memory_order_acquire); each != nullptr; each = each->next_created) {
    for (const free_stack& stack : each->free_stacks) live += read(stack.carved) - read(stack.size);
    live += read(each->taken_back) - read(each->freed_for_others) - read(each->freed_elsewhere);
  }
  return live;
}

}  // namespace magpie::detail::task_pool

namespace magpie {

std::size_t trim_task_memory() noexcept {
  detail::task_pool::heap* mine = detail::primitives_tls.pool_heap;
  return mine != nullptr ? detail::task_pool::trim(*mine) : 0;
}

std::size_t task_memory_held() noexcept {
  detail::task_pool::heap* mine = detail::primitives_tls.pool_heap;
  return mine != nullptr ? mine->slabs * detail::task_pool::slab_size : 0;
}

}  // namespace magpie
