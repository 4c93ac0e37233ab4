// Layer 1 — the closable subsequent list.
//
// A task keeps the tasks waiting for it in this list. Until the task completes, anyone
// may add to it; completion closes it in one atomic exchange and takes everything that
// was added; after that every add fails, telling the adder "already complete, don't
// wait". A Treiber stack whose head can be swapped for a `closed` sentinel — lock-free,
// where UE's version takes a mutex.
//
//   struct link { subsequent_list_hook<link> hook; task* waiting; };
//   if (!prerequisite.subsequents.push_if_not_closed(&edge)) { /* already complete */ }
//   for (link* each = list.close(); each != nullptr; each = next_of(each)) unlock(each->waiting);
//
// Nodes are intrusive (`Node::hook`) and owned by the caller; the list never allocates.
// A push may set a tag beside the head, which the next push clears: the owner of the
// list can ask about the newest push without reading a node it does not own.
// close() hands back the nodes newest first. test/model/subsequent_list_model.cpp
// model-checks push_if_not_closed against close() under Relacy, with a mutant, and
// test/model/subsequent_list_tag_model.cpp the tag with the handle counting around it.
#pragma once

#include <magpie/detail/atomics.h>

#include <cstdint>

namespace magpie::detail {

// subsequent_list_hook is the link a node carries; put one in the node type as `hook`.
template <class Node, class Atomics = std_atomics>
struct subsequent_list_hook {
  typename Atomics::template atomic<Node*> next{nullptr};
};

// subsequent_list is a lock-free, closable, intrusive stack of `Node`s.
template <class Node, class Atomics = std_atomics>
class subsequent_list {
 public:
  subsequent_list() = default;
  subsequent_list(const subsequent_list&) = delete;
  subsequent_list& operator=(const subsequent_list&) = delete;

  // push_if_not_closed adds `node` and returns true, or returns false (leaving `node`
  // untouched by the list) if close() already ran. With `tagged`, the push also sets the
  // list's tag (see newest_is_tagged), which every other push clears.
  bool push_if_not_closed(Node* node, bool tagged = false) noexcept {
    Node* const pushed = tagged ? with_tag(node) : node;
    // acquire: if this reads "closed", it pairs with close()'s release, so the caller
    // sees what the closer did first (a completed task's result)
    Node* head = head_.load(std::memory_order_acquire);
    do {
      if (head == closed()) return false;
      node->hook.next.store(without_tag(head), std::memory_order_relaxed);  // relaxed: published by the release CAS
    // seq_cst on success: the release half pairs with close()'s acquire (the closer sees the
    // node whole), and seq_cst orders the push before the pusher's next look at the task
    // (task_state::has_finished, push_subsequent in lib/tasks/task_internal.h), which the completer of a
    // task whose list it leaves open pairs with by a fence (no dearer than acq_rel on x86
    // and ARMv8: both are one locked or exclusive-pair instruction); acquire on failure: as
    // the load above, when the CAS reads "closed"
    } while (!head_.compare_exchange_weak(head, pushed, std::memory_order_seq_cst, std::memory_order_acquire));
    return true;
  }

  // newest_is_tagged says whether the newest push was a tagged one and nobody cleared its
  // tag since (clear_tag). It reads the list's own word only, never a node: a node behind
  // an open list may belong to someone who has let go of it.
  bool newest_is_tagged() const noexcept {
    // relaxed: the tag publishes nothing; a caller that acts on it orders the look itself
    // (try_close_tagged_unshared is the completer's)
    return (reinterpret_cast<std::uintptr_t>(head_.load(std::memory_order_relaxed)) & tag_bit) != 0;
  }

  // clear_tag clears the tag if `node` is still the newest node and was pushed tagged;
  // otherwise the tag is already gone (a later push, or close) and nothing changes.
  void clear_tag(Node* node) noexcept {
    Node* expected = with_tag(node);
    // relaxed: a load first, so that the common case (another push or close replaced the
    // head) costs no locked instruction
    if (head_.load(std::memory_order_relaxed) != expected) return;
    // relaxed: the caller publishes the clear by the release half of what follows it (a
    // reference count's acq_rel drop in lib/tasks/task_references.cpp)
    head_.compare_exchange_strong(expected, node, std::memory_order_relaxed, std::memory_order_relaxed);
  }

  // close makes every later push fail and returns the nodes pushed before, newest first
  // (nullptr if none). Walk them with next_of(). Calling it twice returns nullptr.
  Node* close() noexcept {
    // seq_cst: acquire pairs with the pushers' release CAS (their nodes are whole); release
    // pairs with a later pusher's acquire that finds the list closed; seq_cst besides
    // orders it before the closer's look for a waiting thread (lib/tasks/task.cpp), which the
    // waiter pairs with by setting its flag and then calling is_closed
    Atomics::chaos_point(chaos::site::subsequents_close);
    Node* taken = head_.exchange(closed(), std::memory_order_seq_cst);
    return taken == closed() ? nullptr : without_tag(taken);
  }

  // close_unshared is close() for a caller who knows that no push can race with it: a load
  // and a store instead of a locked exchange. (A task whose handles are all gone: every
  // pusher needs one, lib/tasks/task_references.cpp.) Not for a list anyone may still push
  // to, nor for a tagged one (try_close_tagged_unshared).
  Node* close_unshared() noexcept {
    Node* taken = head_.load(std::memory_order_acquire);  // acquire: pairs with the earlier pushers' release CAS
    // release: pairs with is_closed's and a late pusher's acquire (a completed task's result)
    head_.store(closed(), std::memory_order_release);
    return taken == closed() ? nullptr : taken;
  }

  // try_close_tagged_unshared is close_unshared if the tag stands (true, the nodes in
  // `taken`), else nothing (false): for a caller who knows that, with the tag standing, no
  // push can race with it.
  bool try_close_tagged_unshared(Node*& taken) noexcept {
    Node* head = head_.load(std::memory_order_acquire);  // acquire: pairs with the earlier pushers' release CAS
    if ((reinterpret_cast<std::uintptr_t>(head) & tag_bit) == 0) return false;
    // release: as close_unshared's
    head_.store(closed(), std::memory_order_release);
    taken = without_tag(head);
    return true;
  }

  // is_closed says whether close() has run.
  bool is_closed() const noexcept {
    return head_.load(std::memory_order_seq_cst) == closed();  // seq_cst: sees what preceded close(); the waiter's half of close()'s pairing
  }

  // is_empty says whether nothing was pushed and the list is still open.
  bool is_empty() const noexcept {
    // seq_cst: acquire pairs with the pushers' CAS (their nodes are whole); seq_cst besides
    // for the look after a fence that must see every push ordered before it (lib/tasks/wait_retraction.cpp)
    return head_.load(std::memory_order_seq_cst) == nullptr;
  }

  // newest_while_open is the newest node pushed so far (nullptr if none, or if closed),
  // for a walk with next_of() by a caller who knows the list cannot close meanwhile: an
  // open list only grows at its head, so the nodes behind it stay put.
  Node* newest_while_open() const noexcept {
    Node* head = head_.load(std::memory_order_acquire);  // acquire: pairs with the pushers' release CAS
    return head == closed() ? nullptr : without_tag(head);
  }

  // newest_hint is the newest node's address for a prefetch of its cache line, or nullptr
  // if none or closed. Never to be read through: the node may already belong to someone
  // else, and the tag may still be set (it stays within the node's cache line).
  const void* newest_hint() const noexcept {
    // relaxed: nothing is read through it
    Node* head = head_.load(std::memory_order_relaxed);
    return reinterpret_cast<std::uintptr_t>(head) > reinterpret_cast<std::uintptr_t>(closed()) ? head : nullptr;
  }

  // next_of is the node pushed before `node`, in a list returned by close() or
  // newest_while_open().
  static Node* next_of(Node* node) noexcept {
    return node->hook.next.load(std::memory_order_relaxed);  // relaxed: the acquire that found the newest node ordered it
  }

 private:
  // closed is a sentinel address no real node can have.
  static Node* closed() noexcept { return reinterpret_cast<Node*>(std::uintptr_t{1}); }
  // tag_bit marks a tagged push in the head word, beside the newest node's address (nodes
  // hold a pointer, so they are at least 4-byte aligned and the bit is free).
  static constexpr std::uintptr_t tag_bit = 2;
  static Node* with_tag(Node* node) noexcept {
    static_assert(alignof(Node) > tag_bit, "magpie: a subsequent list's nodes must leave the tag bit free");
    return reinterpret_cast<Node*>(reinterpret_cast<std::uintptr_t>(node) | tag_bit);
  }
  static Node* without_tag(Node* node) noexcept {
    return reinterpret_cast<Node*>(reinterpret_cast<std::uintptr_t>(node) & ~tag_bit);
  }

  typename Atomics::template atomic<Node*> head_{nullptr};
};

}  // namespace magpie::detail
