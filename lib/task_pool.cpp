// The task memory pool; see include/magpie/detail/task_pool.h for the design.
#include <magpie/detail/task_pool.h>
#include <magpie/task_memory.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define MAGPIE_POISON(address, size) ASAN_POISON_MEMORY_REGION(address, size)
#define MAGPIE_UNPOISON(address, size) ASAN_UNPOISON_MEMORY_REGION(address, size)
#else
#define MAGPIE_POISON(address, size) ((void)(address), (void)(size))
#define MAGPIE_UNPOISON(address, size) ((void)(address), (void)(size))
#endif

namespace magpie::detail::task_pool {

namespace {

constexpr std::size_t slab_size = 64 * 1024;
// Multiples of 64 only, so that every block is cache-line aligned (the slab header takes
// the first 64 bytes); 192 holds a task with one prerequisite edge in its own block.
constexpr std::array<std::size_t, 6> class_sizes = {64, 128, 192, 256, 384, 512};

struct free_block {
  free_block* next;
};

struct heap;

// slab_header sits at the start of every 64 KiB-aligned slab: it names the owning heap,
// so any thread can find where a block goes back to.
struct alignas(64) slab_header {
  heap* owner;
  std::size_t class_index;
  std::size_t free_blocks = 0;  // the owner's scratch count while it trims; zero otherwise
};

// heap is one thread's pool. Fields the owner writes on every allocation and fields other
// threads write when they free are kept on separate cache lines: sharing one made every
// cross-thread free bounce the owner's line (a quarter of the empty-job benchmark).
struct heap {
  // Owner thread only (the counters are read by live_blocks()).
  alignas(64) std::array<free_block*, class_sizes.size()> local{};
  std::atomic<std::int64_t> allocated{0};
  std::atomic<std::int64_t> freed_here{0};
  std::atomic<std::int64_t> freed_for_others{0};  // blocks of other heaps this thread freed
  std::size_t slabs = 0;  // slabs this heap carved and still holds
  // Pushed by other threads, taken whole by the owner.
  alignas(64) std::array<std::atomic<free_block*>, class_sizes.size()> returned{};
  std::atomic<std::int64_t> freed_elsewhere{0};  // by threads without a heap of their own (exiting)
  // Cold.
  alignas(64) heap* next_parked = nullptr;  // in the parked list while no thread owns this heap
  heap* next_created = nullptr;             // in the list of every heap, for live_blocks()
};

void bump(std::atomic<std::int64_t>& owner_only_counter) noexcept {
  // relaxed: a statistic with a single writer, so load+store instead of a locked add
  owner_only_counter.store(owner_only_counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

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

std::size_t trim(heap& owner) noexcept;

// thread_heap is the calling thread's heap, parked again when the thread exits.
struct thread_heap {
  heap* mine = nullptr;
  heap& get() {
    if (mine == nullptr) mine = adopt_or_create();
    return *mine;
  }
  ~thread_heap() {
    if (mine == nullptr) return;
    trim(*mine);  // a parked heap keeps only slabs that still hold live blocks
    lock_parked();
    mine->next_parked = parked_heaps;
    parked_heaps = mine;
    unlock_parked();
    mine = nullptr;  // later frees on this thread take the "elsewhere" path
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

// trim frees the owner's slabs whose every block is on its free lists; owner thread only.
// Two walks of each free list, counting in the slab headers (zero between trims): no
// allocation, no hashing — an exiting worker may hold a million free blocks.
std::size_t trim(heap& owner) noexcept {
  std::size_t released = 0;
  for (std::size_t index = 0; index < class_sizes.size(); ++index) {
    free_block* free = owner.local[index];
    // acquire: pairs with the release CAS in deallocate, as refill's exchange
    for (free_block* back = owner.returned[index].exchange(nullptr, std::memory_order_acquire); back != nullptr;) {
      free_block* next = back->next;
      back->next = free;
      free = back;
      back = next;
    }
    for (free_block* each = free; each != nullptr; each = each->next) ++slab_of(each)->free_blocks;
    const std::size_t whole = slab_size / class_sizes[index] - first_block(index);
    free_block* kept = nullptr;
    while (free != nullptr) {
      free_block* next = free->next;
      slab_header* slab = slab_of(free);
      if (slab->free_blocks < whole) {
        --slab->free_blocks;  // back to zero after the slab's last free block, as trim found it
        free->next = kept;
        kept = free;
      } else if (++slab->free_blocks == 2 * whole) {
        // Every block of the slab is free; counting on from `whole`, this was the last of
        // them on the list (the others are passed, their links read): free the slab.
        MAGPIE_UNPOISON(slab, slab_size);
        std::free(slab);
        --owner.slabs;
        released += slab_size;
      }
      free = next;
    }
    owner.local[index] = kept;
  }
  return released;
}

// refill gives the owner's list more blocks: first those other threads returned, else a
// fresh slab, its blocks aligned to their size after the header.
void refill(heap& owner, std::size_t index) {
  // acquire: pairs with the release CAS in deallocate, so the returned blocks' links are visible
  owner.local[index] = owner.returned[index].exchange(nullptr, std::memory_order_acquire);
  if (owner.local[index] != nullptr) return;
  void* memory = std::aligned_alloc(slab_size, slab_size);
  if (memory == nullptr) throw std::bad_alloc();
  new (memory) slab_header{&owner, index};
  ++owner.slabs;
  std::size_t block_size = class_sizes[index];
  std::size_t first = first_block(index);
  std::size_t count = slab_size / block_size;
  char* base = static_cast<char*>(memory);
  free_block* list = nullptr;
  for (std::size_t i = count; i-- > first;) {
    auto* block = reinterpret_cast<free_block*>(base + i * block_size);
    block->next = list;
    list = block;
    MAGPIE_POISON(base + i * block_size + sizeof(free_block), block_size - sizeof(free_block));
  }
  owner.local[index] = list;
}

}  // namespace

void* allocate(std::size_t size) {
  if (size > largest_pooled) return ::operator new(size, std::align_val_t{64});
  std::size_t index = class_of(size);
  heap& mine = this_thread_heap.get();
  if (mine.local[index] == nullptr) refill(mine, index);
  free_block* block = mine.local[index];
  mine.local[index] = block->next;
  MAGPIE_UNPOISON(block, class_sizes[index]);
  bump(mine.allocated);
  return block;
}

void deallocate(void* memory, std::size_t size) noexcept {
  if (memory == nullptr) return;
  if (size > largest_pooled) {
    ::operator delete(memory, std::align_val_t{64});
    return;
  }
  slab_header* slab = slab_of(memory);
  heap& owner = *slab->owner;
  std::size_t block_size = class_sizes[slab->class_index];
  auto* block = static_cast<free_block*>(memory);
  MAGPIE_POISON(static_cast<char*>(memory) + sizeof(free_block), block_size - sizeof(free_block));
  std::size_t index = slab->class_index;
  heap* mine = this_thread_heap.mine;
  if (&owner == mine) {
    block->next = owner.local[index];
    owner.local[index] = block;
    bump(owner.freed_here);
    return;
  }
  // Counted on this thread's heap where it has one (live_blocks sums every heap): no locked
  // add on the owner's line per cross-thread free.
  if (mine != nullptr) {
    bump(mine->freed_for_others);
  } else {
    owner.freed_elsewhere.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  }
  std::atomic<free_block*>& returned = owner.returned[index];
  free_block* head = returned.load(std::memory_order_relaxed);  // relaxed: only the CAS's guess
  do {
    block->next = head;
  } while (!returned.compare_exchange_weak(head, block,
                                                  std::memory_order_release,    // release: pairs with refill's acquire
                                                  std::memory_order_relaxed));  // relaxed: we only retry
}

std::int64_t live_blocks() noexcept {
  std::int64_t live = 0;
  // acquire: pairs with adopt_or_create's release CAS
  for (heap* each = every_heap.load(std::memory_order_acquire); each != nullptr; each = each->next_created) {
    live += each->allocated.load(std::memory_order_relaxed) -        // relaxed: statistics
            each->freed_here.load(std::memory_order_relaxed) -       // relaxed: statistics
            each->freed_for_others.load(std::memory_order_relaxed) - // relaxed: statistics
            each->freed_elsewhere.load(std::memory_order_relaxed);   // relaxed: statistics
  }
  return live;
}

}  // namespace magpie::detail::task_pool

namespace magpie {

std::size_t trim_task_memory() noexcept {
  detail::task_pool::heap* mine = detail::task_pool::this_thread_heap.mine;
  return mine != nullptr ? detail::task_pool::trim(*mine) : 0;
}

std::size_t task_memory_held() noexcept {
  detail::task_pool::heap* mine = detail::task_pool::this_thread_heap.mine;
  return mine != nullptr ? mine->slabs * detail::task_pool::slab_size : 0;
}

}  // namespace magpie
