#include "head/object_manager.h"

#include <algorithm>

#include <boost/container/small_vector.hpp>

#include "head/task_table.h"

namespace prism::internal {

ErrorInfo LostError(ObjectId id, const std::string& task_name) {
  return ErrorInfo::Of(ErrorKind::kObjectLost,
                       "object " + id.Hex() + " is gone: it was freed after its last ObjectRef was dropped",
                       task_name, -1);
}

void ObjectManager::OnPut(int from, PutObject&& put) {
  ObjectEntry& e = objects_.Create(put.id, from, /*producer_pending=*/false);
  e.state = ObjectEntry::State::kReady;
  e.size = put.size;
  e.inline_value = std::move(put.inline_value);
  e.locations.push_back(from);
  objects_.SetContained(put.id, std::move(put.contained));
}

void ObjectManager::AddStreamValue(ObjectId id, int consumer, int producer, const Payload& inline_value,
                                   uint64_t size, std::vector<ObjectId> contained) {
  ObjectEntry& e = objects_.Create(id, consumer, /*producer_pending=*/false);
  e.state = ObjectEntry::State::kReady;
  e.size = size;
  e.inline_value = inline_value;
  e.locations.push_back(inline_value ? consumer : producer);
  objects_.SetContained(id, std::move(contained));
}

void ObjectManager::OnRefUpdate(int from, const RefUpdate& m) {
  for (ObjectId id : m.add) objects_.AddHolder(id, from);
  FreedList freed;
  for (ObjectId id : m.remove) objects_.RemoveHolder(id, from, freed);
  Free(freed);
}

void ObjectManager::OnSubscribe(int from, const Subscribe& m) {
  for (ObjectId id : m.ids) SubscribeOne(from, id);
}

void ObjectManager::SubscribeOne(int from, ObjectId id) {
  ObjectEntry* e = objects_.Find(id);
  if (e == nullptr) {
    ObjectReady r;
    r.id = id;
    r.failed = true;
    r.error = LostError(id, "");
    send_(from, std::move(r));
  } else if (e->state == ObjectEntry::State::kPending) {
    e->More().subscribers.push_back(from);
  } else {
    NotifyReady(id, *e, from);
  }
}

ArgLocation ObjectManager::LocationOf(ObjectId id) {
  ArgLocation loc;
  loc.id = id;
  const ObjectEntry* e = objects_.Find(id);
  if (e != nullptr && e->state == ObjectEntry::State::kReady) loc.inline_value = e->inline_value;
  return loc;
}

void ObjectManager::AddBytesOnRanks(ObjectId id, std::vector<uint64_t>& bytes_on_rank, int num_ranks) {
  const ObjectEntry* e = objects_.Find(id);
  if (e == nullptr || e->inline_value) return;
  if (bytes_on_rank.empty()) bytes_on_rank.resize(num_ranks);
  for (int r : e->locations) bytes_on_rank[r] += e->size;
}

std::vector<TaskId> ObjectManager::Resolve(ObjectId id, TaskDone& done,
                                           const std::shared_ptr<ErrorInfo>& failure, int from,
                                           int submitter) {
  std::vector<TaskId> dependents;
  ObjectEntry* e = objects_.Find(id);
  if (e == nullptr) return dependents;  // nobody holds a ref any more
  if (done.ok) {
    e->state = ObjectEntry::State::kReady;
    e->size = done.size;
    e->inline_value = std::move(done.inline_value);
    if (!e->inline_value) e->locations.push_back(from);
  } else {
    e->state = ObjectEntry::State::kFailed;
    e->More().error = failure;
  }
  objects_.SetContained(id, std::move(done.contained));
  // The submitter hears of its results while it holds a ref (Ray's owner), so its Get
  // never asks: small ones and failures come along, a large one is a notice (it then
  // subscribes, to be assigned a copy, only if something reads it).
  const bool submitter_holds =
      std::find(e->holders.begin(), e->holders.end(), submitter) != e->holders.end() &&
      (!e->extra || std::find(e->extra->subscribers.begin(), e->extra->subscribers.end(), submitter) ==
                        e->extra->subscribers.end());
  int also = -1;
  if (submitter_holds && (e->inline_value || !done.ok)) {
    also = submitter;
  } else if (submitter_holds) {
    ObjectReady notice;
    notice.id = id;
    notice.size = e->size;
    notice.notice = true;
    send_(submitter, std::move(notice));
  }
  NotifyReady(id, *e, also);
  if (e->extra) dependents.swap(e->extra->dependents);
  return dependents;
}

ObjectReady ObjectManager::ReadyMessage(ObjectId id, const ObjectEntry& e) const {
  ObjectReady r;
  r.id = id;
  r.size = e.size;
  r.inline_value = e.inline_value;
  if (!e.inline_value) r.holders.assign(e.locations.begin(), e.locations.end());
  if (e.state == ObjectEntry::State::kFailed) {
    r.failed = true;
    r.error = *e.error();
  }
  return r;
}

void ObjectManager::NotifyReady(ObjectId id, ObjectEntry& e, int also) {
  RankList ranks;  // the subscribers in the order they asked, then `also`
  if (e.extra) {
    for (int rank : e.extra->subscribers) ranks.push_back(rank);
    e.extra->subscribers.clear();
  }
  if (also >= 0) ranks.push_back(also);
  const bool pulled = e.state == ObjectEntry::State::kReady && !e.inline_value && !e.locations.empty();
  for (int rank : ranks) {
    if (pulled) {
      AssignPull(id, e, rank);
      continue;
    }
    // A rank sent an inline value or a failure keeps it: it must hear when it is freed (a
    // failure nobody read is reported then, and the entry does not stay for good).
    if ((e.inline_value || e.state == ObjectEntry::State::kFailed) &&
        std::find(e.locations.begin(), e.locations.end(), rank) == e.locations.end()) {
      e.locations.push_back(rank);
    }
    send_(rank, ReadyMessage(id, e));
  }
}

void ObjectManager::AssignPull(ObjectId id, ObjectEntry& e, int reader) {
  auto& pulls = e.More().pulls;
  auto pulling = [&](int rank) {
    return std::any_of(pulls.begin(), pulls.end(), [&](const auto& p) { return p.first == rank; });
  };
  if (pulling(reader)) return;  // one pull per rank at a time
  ObjectReady ready = ReadyMessage(id, e);
  if (std::find(e.locations.begin(), e.locations.end(), reader) != e.locations.end()) {
    send_(reader, std::move(ready));  // it has a copy already
    return;
  }
  // The copy serving the fewest readers, if it has room: each copy serves at most
  // kMaxPullsPerCopy readers at once, and every finished reader becomes a copy, so a
  // broadcast spreads as a tree instead of queueing on the first holder.
  int source = -1;
  size_t load = 0;
  for (int rank : e.locations) {
    size_t n = static_cast<size_t>(std::count_if(pulls.begin(), pulls.end(),
                                                 [&](const auto& p) { return p.second == rank; }));
    if (source < 0 || n < load) {
      source = rank;
      load = n;
    }
  }
  if (source < 0 || load >= kMaxPullsPerCopy) {
    e.extra->waiting_readers.push_back(reader);
    return;
  }
  pulls.emplace_back(reader, source);
  ready.holders = {source};
  send_(reader, std::move(ready));
}

void ObjectManager::OnPullDone(int from, const AddLocation& m) {
  ObjectEntry* e = objects_.Find(m.id);
  if (e == nullptr) {
    // Freed while that copy was in flight: nobody else will ever tell it to go.
    if (m.stored) send_(from, FreeObjects{{m.id}});
    if (m.failed_from >= 0) SubscribeOne(from, m.id);  // it waits for word: the object is gone
    return;
  }
  if (m.stored) objects_.AddLocation(m.id, from);
  if (e->extra) {
    DropPullsOf(*e->extra, from);
    std::vector<int> waiting;
    waiting.swap(e->extra->waiting_readers);
    for (int reader : waiting) AssignPull(m.id, *e, reader);
  }
  if (m.failed_from >= 0) {
    // Recovery mode: the source may be a rank about to be declared lost. Once it is, the
    // reader is answered as a new subscriber (another copy, the rebuilt value, or the error).
    if (IsLost(m.failed_from)) {
      SubscribeOne(from, m.id);
    } else {
      parked_.push_back({m.id, from, m.failed_from, WallNowNs() + park_ns_});
    }
  }
}

void ObjectManager::DropPullsOf(ObjectExtra& x, int reader) {
  x.pulls.erase(std::remove_if(x.pulls.begin(), x.pulls.end(), [reader](const auto& p) { return p.first == reader; }),
                x.pulls.end());
}

void ObjectManager::KeepLineage(ObjectId id, const std::shared_ptr<const TaskSpec>& spec) {
  ObjectEntry* e = objects_.Find(id);
  if (e == nullptr || e->state != ObjectEntry::State::kReady || e->inline_value) return;
  e->More().lineage = spec;
}

std::vector<std::shared_ptr<const TaskSpec>> ObjectManager::OnRankLost(int rank) {
  if (lost_.size() <= static_cast<size_t>(rank)) lost_.resize(static_cast<size_t>(rank) + 1);
  lost_[static_cast<size_t>(rank)] = true;
  auto drop = [rank](auto& v) {  // a RankList or a vector
    for (auto it = std::find(v.begin(), v.end(), rank); it != v.end(); it = std::find(v.begin(), v.end(), rank)) {
      v.erase(it);
    }
  };
  std::vector<std::shared_ptr<const TaskSpec>> rebuild;
  FreedList freed;
  for (ObjectId id : objects_.Touching(rank)) {
    ObjectEntry* e = objects_.Find(id);
    if (e == nullptr) continue;  // freed with an object that contained it
    drop(e->locations);
    if (e->extra) {
      drop(e->extra->subscribers);
      drop(e->extra->waiting_readers);
      DropPullsOf(*e->extra, rank);
    }
    objects_.RemoveHolder(id, rank, freed);  // its refs went with it
    e = objects_.Find(id);
    if (e == nullptr || e->state != ObjectEntry::State::kReady || e->inline_value || !e->locations.empty()) {
      continue;
    }
    // Its only copies were on the lost rank. Readers waiting for a free copy, and those
    // whose pulls from there fail, wait for its next state.
    ObjectExtra& x = e->More();
    x.subscribers.insert(x.subscribers.end(), x.waiting_readers.begin(), x.waiting_readers.end());
    x.waiting_readers.clear();
    x.pulls.clear();
    std::shared_ptr<const TaskSpec> lineage = std::move(x.lineage);
    if (lineage && lineage->attempt < lineage->options->max_retries) {
      e->state = ObjectEntry::State::kPending;  // until its task, run again, ends
      e->producer_pending = true;
      e->size = 0;
      const bool listed = std::any_of(rebuild.begin(), rebuild.end(), [&](const auto& s) { return s->id == lineage->id; });
      if (!listed) rebuild.push_back(std::move(lineage));
      continue;
    }
    e->state = ObjectEntry::State::kFailed;
    const std::string lost = "object " + id.Hex() + " was lost with rank " + std::to_string(rank) +
                             ", which held its only copy, and cannot be rebuilt: ";
    x.error = std::make_shared<ErrorInfo>(ErrorInfo::Of(
        ErrorKind::kObjectLost,
        lost + (lineage ? "its task " + lineage->options->name + " has used its max_retries (" +
                              std::to_string(lineage->options->max_retries) + ")"
                        : std::string("no task can make it again (a Put, an actor call's result or a "
                                      "generator's value)")),
        lineage ? lineage->options->name : "", rank));
    NotifyReady(id, *e);
  }
  Free(freed);
  // Readers whose pull from the lost rank failed before it was declared lost.
  std::vector<Parked> parked;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->source == rank) {
      parked.push_back(*it);
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Parked& p : parked) SubscribeOne(p.reader, p.id);
  return rebuild;
}

size_t ObjectManager::ExpireParked(int64_t now_ns) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->deadline_ns > now_ns) {
      ++it;
      continue;
    }
    ObjectReady r;
    r.id = it->id;
    r.failed = true;
    r.error = ErrorInfo::Of(ErrorKind::kObjectLost, "object " + it->id.Hex() + " could not be fetched from rank " +
                                                        std::to_string(it->source) + ", which is not known to be lost");
    send_(it->reader, std::move(r));
    it = parked_.erase(it);
  }
  return parked_.size();
}

void ObjectManager::Free(FreedList& freed) {
  if (freed.empty()) return;
  if (freed_hook_) {
    for (const auto& f : freed) freed_hook_(f.id);
  }
  // Usually one object on one rank: a small inline vector beats a map here.
  boost::container::small_vector<std::pair<int, FreeObjects>, 4> per_rank;
  for (auto& f : freed) {
    for (int r : f.locations) {
      auto it = std::find_if(per_rank.begin(), per_rank.end(), [r](const auto& p) { return p.first == r; });
      if (it == per_rank.end()) it = per_rank.insert(per_rank.end(), {r, FreeObjects{}});
      it->second.ids.push_back(f.id);
    }
  }
  for (auto& [rank, msg] : per_rank) send_(rank, std::move(msg));
  freed.clear();
}

}  // namespace prism::internal
