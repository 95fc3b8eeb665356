#include "head/object_directory.h"

#include <algorithm>

#include <boost/container/small_vector.hpp>

#include "head/memory_return.h"

namespace prism::internal {

namespace {
void InsertUnique(RankList& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}
}  // namespace

ObjectEntry& ObjectDirectory::Create(ObjectId id, int holder, bool producer_pending) {
  ObjectEntry& e = objects_[id];
  e.producer_pending = producer_pending;
  InsertUnique(e.holders, holder);
  return e;
}

ObjectEntry* ObjectDirectory::Find(ObjectId id) {
  auto it = objects_.find(id);
  if (it != objects_.end()) return &it->second;
  if (implicit_ == 0 || !claim_) return nullptr;
  const int holder = claim_(id);
  return holder < 0 ? nullptr : &Claim(id, holder);
}

void ObjectDirectory::AddHolder(ObjectId id, int rank) {
  if (auto* e = Find(id)) InsertUnique(e->holders, rank);
}

void ObjectDirectory::AddTaskUse(ObjectId id) {
  if (auto* e = Find(id)) ++e->task_uses;
}

void ObjectDirectory::AddLocation(ObjectId id, int rank) {
  if (auto* e = Find(id)) InsertUnique(e->locations, rank);
}

void ObjectDirectory::SetContained(ObjectId id, std::vector<ObjectId> contained) {
  auto* e = Find(id);
  if (e == nullptr) return;
  if (contained.empty() && !e->extra) return;
  if (e->extra && !e->extra->contained.empty()) return;  // rebuilt: it nests the same refs, counted once
  for (ObjectId c : contained) {
    if (auto* ce = Find(c)) ++ce->More().container_refs;
  }
  e->More().contained = std::move(contained);
}

void ObjectDirectory::RemoveHolder(ObjectId id, int rank, FreedList& freed) {
  auto* e = Find(id);
  if (e == nullptr) return;
  auto it = std::find(e->holders.begin(), e->holders.end(), rank);
  if (it == e->holders.end()) return;
  e->holders.erase(it);
  MaybeFree(id, freed);
}

void ObjectDirectory::RemoveTaskUse(ObjectId id, FreedList& freed) {
  auto* e = Find(id);
  if (e == nullptr) return;
  --e->task_uses;
  MaybeFree(id, freed);
}

void ObjectDirectory::ProducerDone(ObjectId id, FreedList& freed) {
  auto* e = Find(id);
  if (e == nullptr) return;
  e->producer_pending = false;
  MaybeFree(id, freed);
}

std::vector<ObjectId> ObjectDirectory::Touching(int rank) const {
  auto has = [rank](const auto& v) { return std::find(v.begin(), v.end(), rank) != v.end(); };
  std::vector<ObjectId> ids;
  for (const auto& [id, e] : objects_) {
    bool touches = has(e.holders) || has(e.locations);
    if (!touches && e.extra) {
      const ObjectExtra& x = *e.extra;
      touches = has(x.subscribers) || has(x.waiting_readers) ||
                std::any_of(x.pulls.begin(), x.pulls.end(), [rank](const auto& p) { return p.first == rank; });
    }
    if (touches) ids.push_back(id);
  }
  return ids;
}

void ObjectDirectory::MaybeFree(ObjectId id, FreedList& freed) {
  // Iterative: freeing a container may free what it contained, to any depth. Inline room
  // for a few: the usual object contains nothing.
  boost::container::small_vector<ObjectId, 8> work{id};
  while (!work.empty()) {
    ObjectId cur = work.back();
    work.pop_back();
    auto it = objects_.find(cur);
    if (it == objects_.end()) continue;
    ObjectEntry& e = it->second;
    if (!e.holders.empty() || e.task_uses > 0 || e.producer_pending || (e.extra && e.extra->container_refs > 0)) {
      continue;
    }
    if (e.extra) {
      for (ObjectId c : e.extra->contained) {
        if (auto* ce = Find(c)) {
          --ce->More().container_refs;
          work.push_back(c);
        }
      }
    }
    freed.push_back({cur, std::move(e.locations)});
    objects_.erase(it);
  }
  ShrinkIfSparse(objects_);
}

}  // namespace prism::internal
