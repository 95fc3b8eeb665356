#include "runtime/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "prism/api.h"
#include "prism/errors.h"

namespace prism {
namespace internal {
namespace {

/// One slice of the trace before it is placed on a row.
struct Span {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  const state::TaskState* task = nullptr;  // nullptr: an actor's lifetime
  std::string name;
  std::string category;
};

int64_t EventTime(const state::TaskState& t, const char* state) {
  for (const auto& e : t.events) {
    if (e.state == state) return e.time_ns;
  }
  return 0;
}

/// Rows on which events nest properly: each row keeps the ends of its open events
/// (innermost last). A span goes on the first row where, once the events that ended by its
/// start are closed, it is inside the innermost open one, or nothing is open.
class Rows {
 public:
  size_t Place(const Span& s) {
    for (size_t row = 0;; ++row) {
      if (row == open_.size()) open_.emplace_back();
      auto& stack = open_[row];
      while (!stack.empty() && stack.back() <= s.start_ns) stack.pop_back();
      if (stack.empty() || stack.back() >= s.end_ns) {
        stack.push_back(s.end_ns);
        return row;
      }
    }
  }
  size_t size() const { return open_.size(); }

 private:
  std::vector<std::vector<int64_t>> open_;
};

void SortForNesting(std::vector<Span>& spans) {
  // Outer before inner: earlier start first, and of equal starts the longer first.
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
}

nlohmann::json Slice(const Span& s, int pid, int tid, int64_t origin_ns) {
  nlohmann::json e = {{"name", s.name},
                      {"cat", s.category},
                      {"ph", "X"},
                      {"ts", static_cast<double>(s.start_ns - origin_ns) / 1000.0},
                      {"dur", static_cast<double>(s.end_ns - s.start_ns) / 1000.0},
                      {"pid", pid},
                      {"tid", tid}};
  nlohmann::json args = nlohmann::json::object();
  if (s.task != nullptr) {
    const auto& t = *s.task;
    args = {{"task_id", t.task_id}, {"func_name", t.func_name}, {"state", t.state},
            {"attempt", t.attempt}};
    if (!t.actor_id.empty()) args["actor_id"] = t.actor_id;
    if (!t.error_type.empty()) args["error"] = t.error_type + ": " + t.error_message;
    if (int64_t submitted = t.events.empty() ? 0 : t.events.front().time_ns; submitted > 0) {
      args["queued_us"] = static_cast<double>(s.start_ns - submitted) / 1000.0;
    }
  }
  e["args"] = std::move(args);
  return e;
}

nlohmann::json Metadata(const char* what, int pid, int tid, nlohmann::json args) {
  nlohmann::json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

nlohmann::json TimelineTrace(const std::vector<state::TaskState>& tasks,
                             const std::vector<state::ActorState>& actors,
                             const std::vector<state::WorkerState>& workers, int64_t origin_ns) {
  std::map<std::string, const state::ActorState*> actor_by_id;
  for (const auto& a : actors) actor_by_id[a.actor_id] = &a;

  // By rank: plain tasks; by rank and actor: the actor's creation and calls.
  std::map<int, std::vector<Span>> task_spans;
  std::map<int, std::map<std::string, std::vector<Span>>> actor_spans;
  for (const auto& t : tasks) {
    const int64_t start = EventTime(t, "RUNNING");
    int64_t end = EventTime(t, "FINISHED");
    if (end == 0) end = EventTime(t, "FAILED");
    if (start == 0 || end == 0 || t.rank < 0) continue;  // never ran, or still running
    Span s{start, std::max(start, end), &t, t.name, "task"};
    if (t.type == "NORMAL_TASK" || t.actor_id.empty()) {
      task_spans[t.rank].push_back(std::move(s));
      continue;
    }
    s.category = t.type == "ACTOR_CREATION_TASK" ? "actor_creation" : "actor_task";
    actor_spans[t.rank][t.actor_id].push_back(std::move(s));
  }

  nlohmann::json events = nlohmann::json::array();
  std::map<int, std::string> hosts;
  for (const auto& w : workers) hosts[w.rank] = w.host;
  std::set<int> ranks;
  for (const auto& [rank, _] : task_spans) ranks.insert(rank);
  for (const auto& [rank, _] : actor_spans) ranks.insert(rank);
  for (int rank : ranks) {
    std::string label = "rank " + std::to_string(rank);
    if (auto h = hosts.find(rank); h != hosts.end() && !h->second.empty()) label += " (" + h->second + ")";
    events.push_back(Metadata("process_name", rank, -1, {{"name", label}}));
    events.push_back(Metadata("process_sort_index", rank, -1, {{"sort_index", rank}}));

    Rows task_rows;
    auto& spans = task_spans[rank];
    SortForNesting(spans);
    for (const auto& s : spans) {
      const int tid = kTimelineTaskTid + static_cast<int>(task_rows.Place(s));
      events.push_back(Slice(s, rank, tid, origin_ns));
    }
    for (size_t row = 0; row < task_rows.size(); ++row) {
      events.push_back(Metadata("thread_name", rank, kTimelineTaskTid + static_cast<int>(row),
                                {{"name", "tasks " + std::to_string(row + 1)}}));
    }

    int next_tid = kTimelineActorTid;
    for (auto& [actor_id, calls] : actor_spans[rank]) {
      auto found = actor_by_id.find(actor_id);
      const state::ActorState* actor = found == actor_by_id.end() ? nullptr : found->second;
      // The class as the program spells it: from the factory's registered name
      // ("Counter::Create"), else the actor table's.
      std::string cls = actor && !actor->class_name.empty() ? actor->class_name : "actor";
      for (const auto& c : calls) {
        const std::string& f = c.task->func_name;
        if (c.category == "actor_creation" && f.rfind("::") != std::string::npos) cls = f.substr(0, f.rfind("::"));
      }
      std::string label = cls + " " + actor_id;
      if (actor && !actor->name.empty()) label += " \"" + actor->name + "\"";
      Span life{std::numeric_limits<int64_t>::max(), 0, nullptr, "actor " + label, "actor"};
      for (const auto& c : calls) {
        life.start_ns = std::min(life.start_ns, c.start_ns);
        life.end_ns = std::max(life.end_ns, c.end_ns);
      }
      calls.push_back(life);
      SortForNesting(calls);  // the lifetime first: it starts first and is the longest
      Rows rows;
      for (const auto& s : calls) {
        nlohmann::json e = Slice(s, rank, next_tid + static_cast<int>(rows.Place(s)), origin_ns);
        if (s.task == nullptr) {
          e["args"] = {{"actor_id", actor_id},
                       {"state", actor ? actor->state : ""},
                       {"num_restarts", actor ? actor->num_restarts : 0}};
          if (actor && !actor->death_cause.empty()) e["args"]["death_cause"] = actor->death_cause;
        }
        events.push_back(std::move(e));
      }
      for (size_t row = 0; row < rows.size(); ++row) {
        events.push_back(Metadata("thread_name", rank, next_tid + static_cast<int>(row),
                                  {{"name", label + (row ? " (" + std::to_string(row + 1) + ")" : "")}}));
      }
      next_tid += static_cast<int>(rows.size());
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"origin_unix_ns", origin_ns}}}};
}

}  // namespace internal

std::string Timeline(const std::string& path) {
  state::TaskFilter all;
  all.limit = std::numeric_limits<size_t>::max();
  auto tasks = state::ListTasks(all);
  auto jobs = state::ListJobs();
  int64_t origin = jobs.empty() ? 0 : jobs.front().start_time_ns;
  for (const auto& t : tasks) {
    if (!t.events.empty() && (origin == 0 || t.events.front().time_ns < origin)) origin = t.events.front().time_ns;
  }
  nlohmann::json trace =
      internal::TimelineTrace(tasks, state::ListActors(), state::ListWorkers(), origin);
  if (!jobs.empty()) trace["otherData"]["job_id"] = jobs.front().job_id;
  std::string text = trace.dump();
  if (!path.empty()) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      throw Error("prism::Timeline: could not write " + path + " (" + std::strerror(errno) +
                  "): give a path in a directory you can write to");
    }
  }
  return text;
}

}  // namespace prism
