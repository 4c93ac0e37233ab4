// Writing a recording as Chrome trace-event JSON (magpie/trace.h, docs/tracing.md).
//
// The buffers hold raw events: task pointers, not task ids (a pointer is reused once its
// task is freed). The writer reads every thread's events, orders them by time, and gives
// each launch of a task pointer an id of its own; then it writes each thread's track —
// slices kept properly nested, a slice whose start the ring dropped left out, one still
// open at the end closed there — and the arrows, which need both ends: launcher to runner,
// prerequisite to subsequent, nested task to parent.
#include "trace_buffers.h"

#include <magpie/detail/task_base.h>

#include <magpie/diagnostics.h>
#include <magpie/trace.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace magpie::trace {

using namespace detail::tracing;
using json = nlohmann::json;

namespace {

struct track {
  std::uint32_t number;
  std::string name;
  std::vector<event> events;
  std::uint64_t dropped;
};

// taken is a buffer's events copied out: `upto` is the count to mark written once the
// file holds them.
struct taken {
  thread_buffer* buffer;
  std::uint64_t upto;
};

// copy_events copies out what each buffer holds since it was last written out, and notes
// in `marks` how far; it marks nothing written (mark_written does, once the file is
// written), so a failed write leaves the recording for the next one. The newest slot of a
// full ring is left out: a thread that looked at the switch before stop() may still be
// writing there.
std::vector<track> copy_events(std::vector<taken>& marks) {
  std::vector<track> tracks;
  const double scale = ns_per_tick();
  for (thread_buffer* each = first_buffer(); each != nullptr; each = each->next) {
    std::uint64_t written = each->written.load(std::memory_order_acquire);  // acquire: pairs with record's release
    std::uint64_t from = each->exported.load(std::memory_order_relaxed);    // relaxed: only writers (serialized) store it
    if (written == from) continue;
    std::uint64_t kept = std::min(written - from, each->capacity - 1);
    track made{each->number, "", {}, written - from - kept};
    // relaxed: stored before the events that `written` published
    const char* user_name = each->user_name.load(std::memory_order_relaxed);
    made.name = user_name != nullptr ? user_name : role_name(each->role.load(std::memory_order_relaxed), each->number);  // relaxed: as user_name
    made.events.reserve(kept);
    // A thread's events are in its program order; its clock is not always: a thread moved
    // to another core may read a time-stamp counter behind the last one's (seen on VMs).
    // Times are kept from going back within a track, so that merging the tracks by time,
    // which numbers the tasks' launches, keeps each thread's own order.
    std::uint64_t latest = 0;
    for (std::uint64_t i = written - kept; i < written; ++i) {
      event copied = each->events[i & (each->capacity - 1)];
      latest = std::max(latest, since_epoch_ns(copied.time, scale));
      copied.time = latest;
      made.events.push_back(copied);
    }
    marks.push_back({each, written});
    tracks.push_back(std::move(made));
  }
  std::sort(tracks.begin(), tracks.end(), [](const track& a, const track& b) { return a.number < b.number; });
  return tracks;
}

// mark_written marks what copy_events took as written out: the owners may reuse its slots.
void mark_written(const std::vector<taken>& marks) noexcept {
  for (const taken& each : marks) {
    each.buffer->exported.store(each.upto, std::memory_order_release);  // release: the owner may reuse the slots after seeing it
  }
}

double micros(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// instance is what the writer knows of one launch of a task.
struct instance {
  const char* name = nullptr;
  std::uint32_t started_on = 0;   // track of its first slice (0: never ran)
  std::uint64_t started_at = 0;
  std::uint32_t completed_on = 0;  // track of its completion
  std::uint64_t completed_at = 0;
};

struct edge {
  std::uint64_t prerequisite;
  std::uint64_t subsequent;
  std::uint32_t kind;
};

struct launch {
  std::uint64_t id;
  std::uint32_t on;
  std::uint64_t at;
};

class writer {
 public:
  explicit writer(std::vector<track>& tracks) : tracks_(tracks) { number_instances(); }

  json events() {
    json out = json::array();
    out.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "magpie"}}}});
    for (track& each : tracks_) write_track(each, out);
    write_arrows(out);
    write_ready_count(out);
    return out;
  }

 private:
  // number_instances walks every event in time order and gives each launch of a task
  // pointer its own id; `ids_` then holds, per track, each event's id.
  void number_instances() {
    struct ref {
      std::uint64_t time;
      std::uint32_t track;
      std::uint32_t index;
    };
    std::vector<ref> order;
    for (std::uint32_t t = 0; t < tracks_.size(); ++t) {
      for (std::uint32_t i = 0; i < tracks_[t].events.size(); ++i) order.push_back({tracks_[t].events[i].time, t, i});
    }
    std::stable_sort(order.begin(), order.end(), [](const ref& a, const ref& b) { return a.time < b.time; });
    ids_.resize(tracks_.size());
    for (std::uint32_t t = 0; t < tracks_.size(); ++t) ids_[t].resize(tracks_[t].events.size());
    std::unordered_map<const void*, std::uint64_t> current;
    for (const ref& at : order) {
      const event& e = tracks_[at.track].events[at.index];
      if (e.kind > event_kind::wait_ended || e.id == nullptr) continue;  // not about a task
      auto found = current.find(e.id);
      // A pointer seen again after its task completed, other than by a waiter waking, is a
      // new task in the same memory whose launch the ring dropped.
      bool reused = found != current.end() && instances_[found->second].completed_on != 0 &&
                    e.kind != event_kind::task_completed && e.kind != event_kind::wait_ended;
      if (e.kind == event_kind::task_launched || found == current.end() || reused) {
        found = current.insert_or_assign(e.id, instances_.size()).first;
        instances_.emplace_back();
      }
      std::uint64_t id = found->second;
      ids_[at.track][at.index] = id;
      instance& known = instances_[id];
      if (e.name != nullptr && known.name == nullptr) known.name = e.name;
      std::uint32_t number = tracks_[at.track].number;
      switch (e.kind) {
        case event_kind::task_launched: launches_.push_back({id, number, e.time}); break;
        case event_kind::task_started:
          if (known.started_on == 0) {
            known.started_on = number;
            known.started_at = e.time;
          }
          break;
        case event_kind::task_completed:
          known.completed_on = number;
          known.completed_at = e.time;
          break;
        case event_kind::task_edge: {
          auto prerequisite = current.find(reinterpret_cast<const void*>(e.value));
          if (prerequisite != current.end()) edges_.push_back({prerequisite->second, id, e.arg});
          break;
        }
        default: break;
      }
    }
  }

  static json base(const char* phase, const track& on, std::uint64_t at) {
    return {{"ph", phase}, {"pid", 1}, {"tid", on.number}, {"ts", micros(at)}};
  }

  const char* name_of(std::uint64_t id) const {
    const char* name = instances_[id].name;
    return name != nullptr && *name != '\0' ? name : "task";
  }

  // write_track writes one thread's events, its slices properly nested.
  void write_track(const track& on, json& out) {
    std::uint32_t t = static_cast<std::uint32_t>(&on - tracks_.data());
    out.push_back({{"ph", "M"}, {"pid", 1}, {"tid", on.number}, {"name", "thread_name"}, {"args", {{"name", on.name}}}});
    if (on.events.empty()) return;
    if (on.dropped != 0) {
      json dropped = base("i", on, on.events.front().time);
      dropped.update({{"name", "dropped " + std::to_string(on.dropped) + " older events"}, {"s", "t"},
                      {"args", {{"dropped", on.dropped}}}});
      out.push_back(std::move(dropped));
    }
    std::vector<std::string> open;  // names of the slices open on this track, innermost last
    bool retracting = false;
    auto begin = [&](const event& e, std::string name, const char* category, json args) {
      json slice = base("B", on, e.time);
      slice.update({{"name", name}, {"cat", category}, {"args", std::move(args)}});
      out.push_back(std::move(slice));
      open.push_back(std::move(name));
    };
    auto end = [&](const event& e, json args) {
      if (open.empty()) return;  // its start was dropped with the ring's oldest events
      json slice = base("E", on, e.time);
      if (!args.empty()) slice["args"] = std::move(args);
      out.push_back(std::move(slice));
      open.pop_back();
    };
    for (std::uint32_t i = 0; i < on.events.size(); ++i) {
      const event& e = on.events[i];
      std::uint64_t id = ids_[t][i];
      switch (e.kind) {
        case event_kind::task_launched: {
          json mark = base("i", on, e.time);
          mark.update({{"name", std::string("launch ") + name_of(id)}, {"cat", "task"}, {"s", "t"},
                       {"args", {{"id", id}, {"priority", e.arg & 0xffu}, {"named_thread", e.arg >> 8}}}});
          out.push_back(std::move(mark));
          break;
        }
        case event_kind::task_retracted: retracting = true; break;
        case event_kind::task_started:
          begin(e, name_of(id), "task", {{"id", id}, {"retracted", retracting}});
          retracting = false;
          break;
        case event_kind::task_finished: end(e, e.arg != 0 ? json{{"exception", true}} : json::object()); break;
        case event_kind::task_completed: {
          json mark = base("i", on, e.time);
          mark.update({{"name", std::string("complete ") + name_of(id)}, {"cat", "task"}, {"s", "t"}, {"args", {{"id", id}}}});
          out.push_back(std::move(mark));
          break;
        }
        case event_kind::wait_began: begin(e, "wait", "wait", {{"for", id}, {"task", name_of(id)}}); break;
        case event_kind::wait_ended: end(e, {}); break;
        case event_kind::stole: {
          json mark = base("i", on, e.time);
          mark.update({{"name", "steal"}, {"cat", "scheduler"}, {"s", "t"},
                       {"args", {{"victim", e.arg == ~0u ? json("lent or named deque") : json(e.arg)}}}});
          out.push_back(std::move(mark));
          break;
        }
        case event_kind::parked:
        case event_kind::unparked: {
          if (e.kind == event_kind::parked) {
            begin(e, "parked", "scheduler", json::object());
          } else {
            end(e, {});
          }
          json parked = base("C", on, e.time);
          parked.update({{"name", "parked workers"}, {"args", {{"parked", e.value}}}});
          out.push_back(std::move(parked));
          break;
        }
        case event_kind::standby_entered: begin(e, "standby", "scheduler", json::object()); break;
        case event_kind::named_queue_began: begin(e, "named queue", "scheduler", {{"named_thread", e.arg}}); break;
        case event_kind::standby_left:
        case event_kind::named_queue_ended:
        case event_kind::scope_ended: end(e, {}); break;
        case event_kind::scope_began:
          begin(e, e.name != nullptr ? e.name : "scope", "user", e.value != 0 ? json{{"id", e.value}} : json::object());
          break;
        case event_kind::instant: {
          json mark = base("i", on, e.time);
          mark.update({{"name", e.name != nullptr ? e.name : "instant"}, {"cat", "user"}, {"s", "t"}});
          out.push_back(std::move(mark));
          break;
        }
        case event_kind::counter: {
          json value = base("C", on, e.time);
          value.update({{"name", e.name != nullptr ? e.name : "counter"}, {"args", {{"value", std::bit_cast<double>(e.value)}}}});
          out.push_back(std::move(value));
          break;
        }
        case event_kind::task_edge:
        case event_kind::task_scheduled: break;  // drawn as arrows, or implied by the slice
      }
    }
    std::uint64_t last = on.events.back().time;
    while (!open.empty()) {  // still running when recording stopped
      out.push_back(base("E", on, last));
      open.pop_back();
    }
  }

  // arrow writes a flow from (from_track, from_at) to (to_track, to_at), bound to the
  // slices or instants there.
  void arrow(json& out, const char* name, std::uint32_t from_track, std::uint64_t from_at, std::uint32_t to_track,
             std::uint64_t to_at) {
    std::uint64_t flow = next_flow_++;
    out.push_back({{"ph", "s"}, {"pid", 1}, {"tid", from_track}, {"ts", micros(from_at)}, {"id", flow},
                   {"name", name}, {"cat", "flow"}});
    out.push_back({{"ph", "f"}, {"bp", "e"}, {"pid", 1}, {"tid", to_track}, {"ts", micros(to_at)}, {"id", flow},
                   {"name", name}, {"cat", "flow"}});
  }

  // write_ready_count writes the "ready tasks" counter: tasks made ready and queued and not
  // yet started, all threads together, from the events themselves (nothing sampled at run
  // time). A task scheduled before the recording began is not counted when it starts.
  void write_ready_count(json& out) {
    std::vector<std::pair<std::uint64_t, int>> changes;  // (time, +1 scheduled / -1 started)
    std::vector<bool> queued(instances_.size(), false);
    for (std::uint32_t t = 0; t < tracks_.size(); ++t) {
      for (std::uint32_t i = 0; i < tracks_[t].events.size(); ++i) {
        const event& e = tracks_[t].events[i];
        if (e.kind == event_kind::task_scheduled) changes.push_back({e.time, +1});
        if (e.kind == event_kind::task_scheduled) queued[ids_[t][i]] = true;
      }
    }
    for (std::uint32_t t = 0; t < tracks_.size(); ++t) {
      for (std::uint32_t i = 0; i < tracks_[t].events.size(); ++i) {
        const event& e = tracks_[t].events[i];
        if (e.kind == event_kind::task_started && queued[ids_[t][i]]) {
          queued[ids_[t][i]] = false;  // a task's later slices (none today) are not starts
          changes.push_back({e.time, -1});
        }
      }
    }
    std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    long ready = 0;
    for (const auto& [at, step] : changes) {
      ready += step;
      out.push_back({{"ph", "C"}, {"pid", 1}, {"ts", micros(at)}, {"name", "ready tasks"}, {"args", {{"queued", ready}}}});
    }
  }

  void write_arrows(json& out) {
    for (const launch& each : launches_) {
      const instance& ran = instances_[each.id];
      if (ran.started_on != 0) arrow(out, "launch", each.on, each.at, ran.started_on, ran.started_at);
    }
    for (const edge& each : edges_) {
      const instance& before = instances_[each.prerequisite];
      const instance& after = instances_[each.subsequent];
      // From the prerequisite's slice, or its completion where it never ran (an event).
      std::uint32_t from_track = before.started_on != 0 ? before.started_on : before.completed_on;
      std::uint64_t from_at = before.started_on != 0 ? before.started_at : before.completed_at;
      if (from_track == 0) continue;
      if (each.kind == static_cast<std::uint32_t>(detail::edge_kind::nested)) {  // nested: the child's slice to its parent's completion
        if (after.completed_on != 0) arrow(out, "nested", from_track, from_at, after.completed_on, after.completed_at);
      } else if (after.started_on != 0) {
        arrow(out, "prerequisite", from_track, from_at, after.started_on, after.started_at);
      } else if (after.completed_on != 0) {
        arrow(out, "prerequisite", from_track, from_at, after.completed_on, after.completed_at);
      }
    }
  }

  std::vector<track>& tracks_;
  std::vector<std::vector<std::uint64_t>> ids_;
  std::vector<instance> instances_;
  std::vector<edge> edges_;
  std::vector<launch> launches_;
  std::uint64_t next_flow_ = 1;
};

}  // namespace

}  // namespace magpie::trace

namespace magpie::detail::tracing {

namespace {

// why_not names the system's reason for the last failed file operation, when it left one.
std::string why_not(int error) { return error != 0 ? std::string(" (") + std::strerror(error) + ")" : std::string(); }

}  // namespace

file_written write_recording(const std::filesystem::path& path) {
  trace::stop();
  std::lock_guard hold(export_lock());
  std::vector<trace::taken> marks;
  std::vector<trace::track> tracks = trace::copy_events(marks);
  trace::json events = trace::writer(tracks).events();
  errno = 0;
  std::ofstream file(path);
  if (!file) return {0, "cannot open '" + path.string() + "' for writing" + why_not(errno)};
  file << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i) file << events[i].dump() << (i + 1 < events.size() ? ",\n" : "\n");
  file << "]}\n";
  // Checked after the close: a full device fails only when the last of the file is flushed.
  file.close();
  if (file.fail()) return {0, "writing '" + path.string() + "' failed" + why_not(errno)};
  trace::mark_written(marks);
  return {events.size(), {}};
}

}  // namespace magpie::detail::tracing

namespace magpie::trace {

std::size_t write_chrome_json(const std::filesystem::path& path) {
  detail::tracing::file_written result = detail::tracing::write_recording(path);
  if (!result.failure.empty()) {
    // A warning: the caller learns it from the 0 returned and may try another path.
    report(diagnostic_kind::misuse, "trace::write_chrome_json: " + result.failure + "; the recording is kept for another try",
           severity::warning);
  }
  return result.events;
}

}  // namespace magpie::trace
