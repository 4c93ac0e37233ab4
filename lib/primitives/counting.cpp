// The counting build's tallies (magpie/detail/counted_atomic.h): a table of call sites per
// thread, and the history of the cache lines the counted atomics live on.
//
// Each thread counts into a table of its own, so counting adds no sharing between the
// threads it measures beyond the line history. A thread's table goes back to a free list
// when the thread exits and the next new thread takes it over, counts included: the sums are
// per site, never per thread, and a test creating thousands of threads holds a few tables.
// Only this file uses plain std::atomic: it must not count itself. Outside the counting
// build it compiles to nothing.
#include <magpie/config.h>

#if MAGPIE_COUNTING
#include <magpie/detail/counted_atomic.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace magpie::detail::counting {
namespace {

constexpr std::size_t sites_per_thread = 4096;  // a power of two; the core has a few hundred
constexpr std::size_t tallies = operation_count + 1;  // the operations, then the moves
constexpr std::size_t moves_tally = operation_count;

// site_entry is one call site's counts in one thread's table. Only the owning thread
// writes it; snapshot reads it from another thread, so every field is atomic.
struct site_entry {
  std::atomic<const char*> file{nullptr};  // null: free; set last, once, with release
  std::atomic<const char*> function{nullptr};
  std::atomic<std::uint32_t> line{0};
  std::array<std::atomic<std::uint64_t>, tallies> counts{};

  // add raises one tally; the owner is its only writer, so a load and a store suffice.
  void add(std::size_t tally) noexcept {
    std::atomic<std::uint64_t>& count = counts[tally];
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // relaxed: read by snapshot, which may be a moment behind
  }
};

struct thread_table {
  std::uint32_t id = 0;  // its index among all tables: the bit it holds lines with
  std::array<site_entry, sites_per_thread> sites{};
  site_entry overflow;   // every site beyond the table's capacity
};

// The registry of every table ever made; tables are never freed (the process keeps at most
// as many as it had threads alive at once).
std::mutex registry_lock;
std::vector<std::unique_ptr<thread_table>>& all_tables() {
  static auto* tables = new std::vector<std::unique_ptr<thread_table>>();  // outlives every thread's exit
  return *tables;
}
std::vector<thread_table*>& free_tables() {
  static auto* tables = new std::vector<thread_table*>();
  return *tables;
}

thread_table* const retired = reinterpret_cast<thread_table*>(std::uintptr_t{1});
constinit thread_local thread_table* mine = nullptr;  // null: none yet; retired: the thread is exiting

// table_lease hands the thread's table back when the thread exits; what the thread counts
// after that (its last destructors) is not counted.
struct table_lease {
  ~table_lease() {
    std::lock_guard hold(registry_lock);
    free_tables().push_back(mine);
    mine = retired;
  }
};
thread_local table_lease lease;

thread_table* table_of_this_thread() noexcept {
  if (mine != nullptr) [[likely]] return mine == retired ? nullptr : mine;
  {
    std::lock_guard hold(registry_lock);
    if (!free_tables().empty()) {
      mine = free_tables().back();
      free_tables().pop_back();
    } else {
      auto table = std::make_unique<thread_table>();
      table->id = static_cast<std::uint32_t>(all_tables().size());
      mine = table.get();
      all_tables().push_back(std::move(table));
    }
  }
  (void)&lease;  // constructs the lease: its destructor runs at this thread's exit
  return mine;
}

site_entry& entry_for(thread_table& table, const std::source_location& where) noexcept {
  const char* file = where.file_name();
  std::uint32_t line = where.line();
  std::size_t hash = (reinterpret_cast<std::uintptr_t>(file) >> 3) * 0x9e3779b97f4a7c15ULL + line;
  for (std::size_t probe = 0; probe < sites_per_thread; ++probe) {
    site_entry& entry = table.sites[(hash + probe) & (sites_per_thread - 1)];
    const char* held = entry.file.load(std::memory_order_relaxed);  // relaxed: the owner wrote it
    if (held == file && entry.line.load(std::memory_order_relaxed) == line) return entry;  // relaxed: as above
    if (held == nullptr) {
      entry.line.store(line, std::memory_order_relaxed);                       // relaxed: published by file's release
      entry.function.store(where.function_name(), std::memory_order_relaxed);  // relaxed: as above
      entry.file.store(file, std::memory_order_release);  // release: pairs with snapshot's acquire
      return entry;
    }
  }
  return table.overflow;
}

// line_history is what the counting knows of one cache line: which line it is (0: none
// yet) and the bits of the threads that hold a valid copy of it.
struct line_history {
  std::atomic<std::uint64_t> line{0};
  std::atomic<std::uint64_t> holders{0};
};
constexpr std::size_t line_slots = std::size_t{1} << 20;
std::array<line_history, line_slots> lines{};

// touch updates the line's history for one access and says whether the line moved to this
// thread. The history is read and written without a lock: two threads touching one line at
// the same moment may each miss the other's update, which makes the counts approximate
// while threads race and exact when they take turns.
bool touch(const volatile void* address, bool writes, std::uint32_t thread_id) noexcept {
  const std::uint64_t line = (reinterpret_cast<std::uintptr_t>(address) / 64) + 1;  // never 0
  line_history& slot = lines[(line * 0x9e3779b97f4a7c15ULL) >> (64 - 20)];
  const std::uint64_t mine_bit = std::uint64_t{1} << (thread_id % 64);
  // relaxed, here and below: the history is a statistic no other memory depends on
  if (slot.line.load(std::memory_order_relaxed) != line) {  // first seen, or another line was here
    slot.line.store(line, std::memory_order_relaxed);
    slot.holders.store(mine_bit, std::memory_order_relaxed);
    return false;
  }
  const bool moved = (slot.holders.load(std::memory_order_relaxed) & mine_bit) == 0;
  if (writes) {
    slot.holders.store(mine_bit, std::memory_order_relaxed);  // a write invalidates every other copy
  } else if (moved) {
    slot.holders.fetch_or(mine_bit, std::memory_order_relaxed);
  }
  return moved;
}

using site_key = std::pair<std::string, std::uint32_t>;

void add_table(std::map<site_key, site_counts>& sums, const thread_table& table) {
  auto add_entry = [&](const site_entry& entry) {
    const char* file = entry.file.load(std::memory_order_acquire);  // acquire: pairs with entry_for's release
    if (file == nullptr) return;
    std::uint32_t line = entry.line.load(std::memory_order_relaxed);  // relaxed: published by file's release
    site_counts& sum = sums[{file, line}];
    sum.file = file;
    sum.line = line;
    sum.function = entry.function.load(std::memory_order_relaxed);  // relaxed: as above
    for (std::size_t what = 0; what < operation_count; ++what) {
      sum.by_operation[what] += entry.counts[what].load(std::memory_order_relaxed);  // relaxed: a moment behind is fine
    }
    sum.moves += entry.counts[moves_tally].load(std::memory_order_relaxed);  // relaxed: as above
  };
  for (const site_entry& entry : table.sites) add_entry(entry);
  add_entry(table.overflow);
}

std::uint64_t weight(const site_counts& site) {
  std::uint64_t sum = site.moves;
  for (std::uint64_t count : site.by_operation) sum += count;
  return sum;
}

}  // namespace

void on_access(const volatile void* address, operation what, const std::source_location& where) noexcept {
  thread_table* table = table_of_this_thread();
  if (table == nullptr) return;
  site_entry& entry = entry_for(*table, where);
  entry.add(static_cast<std::size_t>(what));
  // A failed compare-exchange takes the line exclusive as a successful one does.
  if (touch(address, what != operation::load, table->id)) entry.add(moves_tally);
}

void on_fence(operation what, const std::source_location& where) noexcept {
  thread_table* table = table_of_this_thread();
  if (table == nullptr) return;
  entry_for(*table, where).add(static_cast<std::size_t>(what));
}

totals snapshot() {
  std::map<site_key, site_counts> sums;
  {
    std::lock_guard hold(registry_lock);
    for (const auto& table : all_tables()) add_table(sums, *table);
  }
  totals result;
  result.reserve(sums.size());
  for (auto& [key, counts] : sums) result.push_back(counts);
  return result;
}

totals since(const totals& before) {
  std::map<site_key, const site_counts*> earlier;
  for (const site_counts& site : before) earlier[{site.file, site.line}] = &site;
  totals result;
  for (site_counts site : snapshot()) {
    if (auto found = earlier.find({site.file, site.line}); found != earlier.end()) {
      for (std::size_t what = 0; what < operation_count; ++what) site.by_operation[what] -= found->second->by_operation[what];
      site.moves -= found->second->moves;
    }
    if (weight(site) != 0) result.push_back(site);
  }
  std::stable_sort(result.begin(), result.end(),
                   [](const site_counts& a, const site_counts& b) { return weight(a) > weight(b); });
  return result;
}

void reset() {
  std::lock_guard hold(registry_lock);
  for (const auto& table : all_tables()) {
    auto clear = [](site_entry& entry) {
      for (auto& count : entry.counts) count.store(0, std::memory_order_relaxed);  // relaxed: the caller keeps other threads out
    };
    for (site_entry& entry : table->sites) clear(entry);
    clear(table->overflow);
  }
  for (line_history& slot : lines) {
    slot.line.store(0, std::memory_order_relaxed);  // relaxed: as above
    slot.holders.store(0, std::memory_order_relaxed);
  }
}

}  // namespace magpie::detail::counting
#endif  // MAGPIE_COUNTING
