// Layer 1 — the task memory pool: per-thread free stacks, so that launching and
// completing a task allocates nothing from malloc on the hot path.
//
//   void* memory = task_pool::allocate(sizeof(my_task));   // any thread
//   task_pool::deallocate(memory, sizeof(my_task));        // any thread, same size
//
// Blocks come in six size classes (64, 128, 192, 256, 384, 512 bytes); larger requests go to
// operator new. Blocks are carved from 64 KiB slabs owned by one thread's heap, which keeps
// its free blocks' addresses in an array per class: allocation pops one and prefetches the
// block it will hand out a few allocations later (a burst of launches would otherwise wait
// on each block's cache line in turn), and a free on the owning thread pushes the address
// without touching the block. Freeing on another thread pushes onto the owner's lock-free
// "returned" stack, which the owner takes back whole (one exchange) when its array runs
// dry — so no ABA, and no lock anywhere. A heap whose thread exits is parked and adopted
// by the next thread that needs one, so blocks freed after their allocating thread died
// are reused, not leaked. Slabs stay with their heap for reuse until
// magpie::trim_task_memory() (magpie/task_memory.h) or the thread's exit frees those with
// no live block.
//
// Under AddressSanitizer a free block is poisoned, so use-after-free of a pooled task is
// still reported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace magpie::detail::task_pool {

// largest_pooled is the biggest request served from the pool.
inline constexpr std::size_t largest_pooled = 512;

// allocate returns `size` bytes aligned to 64 (from operator new when size > largest_pooled).
// Throws std::bad_alloc.
void* allocate(std::size_t size);

// deallocate returns memory from allocate(size), from any thread.
void deallocate(void* memory, std::size_t size) noexcept;

// live_blocks is the number of pooled blocks allocated and not yet freed, all threads
// together: tests check it returns to where it was.
std::int64_t live_blocks() noexcept;

// parked_heap_count is the number of heaps parked by exited threads for the next thread
// that needs one: tests check that a thread's exit leaves none adopted for good.
std::size_t parked_heap_count() noexcept;

}  // namespace magpie::detail::task_pool
