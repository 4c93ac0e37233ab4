// Relacy model of the subsequent list's tag (include/magpie/detail/subsequent_list.h) as the
// tasks use it: the completer of an inline task P closes P's list with a load and a store
// when no other thread can push (close_subsequents in lib/tasks/task.cpp), and a launch that
// is handed P's only handle keeps it in its edge and tags the list (link_only_prerequisite
// in lib/tasks/task_launch.cpp). P's references word is kept as task_base keeps it: handles
// in the high half, every reference (handles included) in the low half.
//   thread 0: holds P's handle from the start and launches S0 behind P with it, by rvalue:
//             if it counts one handle, the edge keeps the handle and the push is tagged,
//             else the edge takes a reference and the push is plain; the handle goes after
//             a plain push or a failed tagged one (the launcher kept it). Then hands S0's
//             handle to the waiter (thread 3);
//   thread 1: takes the handle P's body made with this_task(), unless it looked before the
//             body offered it (then the body drops it), launches S1 behind P keeping the
//             handle (a plain push; the edge takes a reference), then S2 with it by rvalue,
//             as thread 0;
//   thread 2: runs P: the body writes P's result, makes the handle and offers it to thread
//             1; then completes P as close_subsequents does — no handle: close_unshared;
//             one handle and the tag standing: the tagged close; else close — and runs
//             each subsequent it took;
//   thread 3: a waiter for S0 that claims S0's prerequisites before S0 begins and lets go
//             of what the edge holds: with a handle, it clears the tag first
//             (drop_prerequisite_references in lib/tasks/task_references.cpp).
// Whoever runs a subsequent claims its prerequisites (one wins) and drops what its edge
// holds; a subsequent whose push failed runs at once and reads P's result. Two cases:
// "push" runs threads 0 to 2, "let go" all four.
// Must hold: a pushed edge is handed to the completer exactly once, whole, and a failed
// push never is (its subsequent sees P's result); a plain close never meets a tag, and no
// store overwrites a push; every handle and every edge's hold goes exactly once (only the
// completion's reference is left). Each case must reach all three closes, or it proves
// nothing about them.
//
// Mutants (each must fail):
//   --mutant=release_to_relaxed: the pushes and the handles' drops publish nothing, so the
//     completer reads an edge before its launcher wrote it, or counts a handle gone and
//     still finds its tag;
//   --mutant=no_clear_tag: the waiter lets go of the edge's handle without clearing the
//     tag, so the completer counts no handle and meets the tag, or counts the body's one
//     handle and closes with a store over that handle's push ("let go" only);
//   --mutant=relaxed_handle_look: the completer counts handles with a relaxed load, which
//     orders no dropped handle's push before its look at the list: the store loses it.
#include <magpie/detail/subsequent_list.h>

#include <array>  // before Relacy, which redefines `delete`
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "relacy_atomics.h"

namespace magpie::model {

// protocol_change is a mutant of the protocol around the list rather than of one class of
// memory orders.
enum class protocol_change { none, no_clear_tag, relaxed_handle_look };

inline protocol_change protocol_change_from_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--mutant=no_clear_tag") return protocol_change::no_clear_tag;
    if (arg == "--mutant=relaxed_handle_look") return protocol_change::relaxed_handle_look;
  }
  return protocol_change::none;
}

// close_path is how the completer closed the list.
enum class close_path { unshared, tagged, exchange };

template <weakening W, bool Waiter, protocol_change Change>
struct tag_model : rl::test_suite<tag_model<W, Waiter, Change>, Waiter ? 4 : 3> {
  using atomics = relacy_atomics<W>;
  struct edge {
    detail::subsequent_list_hook<edge, atomics> hook;
    typename atomics::template atomic<int> subsequent;    // uninitialised until its launcher writes it
    typename atomics::template atomic<int> holds_handle;  // likewise
  };
  using list_type = detail::subsequent_list<edge, atomics>;

  static constexpr std::uint64_t one_reference = 1;
  static constexpr std::uint64_t one_handle = (std::uint64_t{1} << 32) | 1;  // a handle is also a reference
  static constexpr int empty = 0, offered = 1, refused = 2;  // the body's handle in the mailbox

  // P: the launcher's handle and the completion's own reference to begin with.
  typename atomics::template atomic<std::uint64_t> references{one_handle + one_reference};
  list_type subsequents;
  static constexpr unsigned edge_count = 3;
  edge edges[edge_count];
  // claimed[i]: S_i's prerequisites taken, by its runner or by a waiter (claim_prerequisites)
  typename atomics::template atomic<int> claimed[edge_count] = {0, 0, 0};
  typename atomics::template atomic<int> mailbox{empty};
  typename atomics::template atomic<int> s0_launched{0};  // S0's handle, handed to the waiter
  typename atomics::template atomic<int> result;  // P's, uninitialised until its body writes it
  bool pushed[edge_count] = {false, false, false};
  int seen[edge_count] = {0, 0, 0};
  close_path path = close_path::exchange;

  // paths_reached counts the executions that closed each way.
  inline static std::array<long, 3> paths_reached{};

  void drop(std::uint64_t held) { references.fetch_sub(held, std::memory_order::acq_rel); }

  // claim_and_let_go: S_i's prerequisites, if this caller claims them first, go here: the
  // edge's handle (the tag cleared first) or its reference.
  void claim_and_let_go(unsigned i) {
    if (claimed[i].exchange(1, std::memory_order::acq_rel) != 0) return;  // acq_rel: as claim_prerequisites' RMW
    if (edges[i].holds_handle.load(std::memory_order::relaxed) == 0) {
      drop(one_reference);
      return;
    }
    if (Change != protocol_change::no_clear_tag) subsequents.clear_tag(&edges[i]);
    drop(one_handle);
  }

  // launch_behind: link_only_prerequisite for an inline P, then the launcher's part after
  // it. `by_rvalue`: the launcher's handle to P is offered to the edge (and goes after the
  // launch unless the edge keeps it); else the launcher keeps it.
  void launch_behind(unsigned i, bool by_rvalue) {
    edge& linked = edges[i];
    linked.subsequent.store(static_cast<int>(i) + 1, std::memory_order::relaxed);
    // acquire: as can_hand_handle_to_edge's look
    const bool hand_over = by_rvalue && (references.load(std::memory_order::acquire) >> 32) == 1;
    if (hand_over) {
      linked.holds_handle.store(1, std::memory_order::relaxed);
      pushed[i] = subsequents.push_if_not_closed(&linked, true);
    }
    const bool edge_keeps_handle = hand_over && pushed[i];
    if (!edge_keeps_handle) {  // a plain push, or P complete already: the edge takes a reference
      linked.holds_handle.store(0, std::memory_order::relaxed);
      references.fetch_add(one_reference, std::memory_order::relaxed);  // relaxed: the launcher holds a handle
      if (!hand_over) pushed[i] = subsequents.push_if_not_closed(&linked);
    }
    // Nothing here reads the edge after a push: its subsequent may already have run.
    if (!pushed[i]) {  // P complete: S_i runs at once, and reads P's result
      RL_ASSERT(result.load(std::memory_order::relaxed) == 42);
      claim_and_let_go(i);
    }
    if (by_rvalue && !edge_keeps_handle) drop(one_handle);  // the launcher's handle
  }

  void run_and_complete_p() {
    // The body: writes P's result; this_task() makes a handle (relaxed: the body holds P),
    // offered to thread 1.
    result.store(42, std::memory_order::relaxed);
    references.fetch_add(one_handle, std::memory_order::relaxed);
    // acq_rel: publishes the handle to thread 1 / sees that thread 1 will not take it
    if (mailbox.exchange(offered, std::memory_order::acq_rel) == refused) drop(one_handle);
    // The completion, as close_subsequents.
    constexpr auto look = Change == protocol_change::relaxed_handle_look ? std::memory_order::relaxed
                                                                           : std::memory_order::acquire;
    const std::uint64_t handles = references.load(look) >> 32;
    edge* taken = nullptr;
    if (handles == 0) {
      path = close_path::unshared;
      taken = subsequents.close_unshared();
    } else if (handles == 1 && subsequents.try_close_tagged_unshared(taken)) {
      path = close_path::tagged;
    } else {
      path = close_path::exchange;
      taken = subsequents.close();
    }
    while (taken != nullptr) {
      RL_ASSERT(taken == &edges[0] || taken == &edges[1] || taken == &edges[2]);  // never a tagged word, never garbage
      const int subsequent = taken->subsequent.load(std::memory_order::relaxed);
      RL_ASSERT(subsequent >= 1 && subsequent <= static_cast<int>(edge_count));
      ++seen[subsequent - 1];
      edge* next = list_type::next_of(taken);
      claim_and_let_go(static_cast<unsigned>(subsequent - 1));  // release_subsequents runs it
      taken = next;
    }
  }

  void thread(unsigned index) {
    switch (index) {
      case 0:
        launch_behind(0, true);
        s0_launched.store(1, std::memory_order::release);  // release: the launch, before the waiter's claim
        break;
      case 1:
        // acq_rel: takes the offered handle with its count / tells the body it was not taken
        if (mailbox.exchange(refused, std::memory_order::acq_rel) == offered) {
          launch_behind(1, false);
          launch_behind(2, true);
        }
        break;
      case 2:
        run_and_complete_p();
        break;
      default:
        if (s0_launched.load(std::memory_order::acquire) != 0) claim_and_let_go(0);  // acquire: pairs with the launch
        break;
    }
  }

  void after() {
    for (unsigned i = 0; i < edge_count; ++i) RL_ASSERT(seen[i] == (pushed[i] ? 1 : 0));
    RL_ASSERT(references.load(std::memory_order::relaxed) == one_reference);  // the completion's own
    RL_ASSERT(!subsequents.push_if_not_closed(&edges[0]));
    ++paths_reached[static_cast<int>(path)];
  }
};

template <weakening W>
using tag_push_model = tag_model<W, false, protocol_change::none>;
template <weakening W>
using tag_let_go_model = tag_model<W, true, protocol_change::none>;

// reached_every_close says whether the unmutated `Model` closed each way at least once.
template <class Model>
int reached_every_close(const char* name) {
  const auto& reached = Model::paths_reached;
  std::printf("%s: closes reached: unshared %ld, tagged %ld, exchange %ld\n", name, reached[0], reached[1], reached[2]);
  return reached[0] > 0 && reached[1] > 0 && reached[2] > 0 ? 0 : 1;
}

// The models are small: every schedule with three preemptions takes seconds.
constexpr int iterations = 200000;
constexpr unsigned context_bound = 3;

template <protocol_change Change>
int run_protocol_mutant(const char* name) {
  if (int failed = run_model<tag_model<weakening::none, false, Change>>(name, iterations, context_bound)) {
    return failed;
  }
  return run_model<tag_model<weakening::none, true, Change>>(name, iterations, context_bound);
}

}  // namespace magpie::model

int main(int argc, char** argv) {
  using namespace magpie::model;
  switch (protocol_change_from_args(argc, argv)) {
    case protocol_change::no_clear_tag:
      return run_protocol_mutant<protocol_change::no_clear_tag>("subsequent_list_tag mutant no_clear_tag");
    case protocol_change::relaxed_handle_look:
      return run_protocol_mutant<protocol_change::relaxed_handle_look>(
          "subsequent_list_tag mutant relaxed_handle_look");
    case protocol_change::none:
      break;
  }
  const bool mutated = weakening_from_args(argc, argv) != weakening::none;
  const char* push = "subsequent_list_tag push";
  if (int failed = model_main<tag_push_model>(argc, argv, push, iterations, context_bound)) return failed;
  if (!mutated && reached_every_close<tag_push_model<weakening::none>>(push) != 0) return 1;
  const char* let_go = "subsequent_list_tag let go";
  if (int failed = model_main<tag_let_go_model>(argc, argv, let_go, iterations, context_bound)) return failed;
  if (!mutated && reached_every_close<tag_let_go_model<weakening::none>>(let_go) != 0) return 1;
  return 0;
}
