#pragma once
// Object and task ids. A task's id is the id of the object it returns. Ids are minted
// locally without coordination: the creating rank in the top 16 bits, a per-rank counter
// below.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>

namespace prism {

/// Identifies one object (and the task that produces it, for task returns). Cheap value.
class ObjectId {
 public:
  constexpr ObjectId() = default;
  constexpr explicit ObjectId(uint64_t value) : value_(value) {}
  static ObjectId Make(int rank, uint64_t counter) {
    return ObjectId((static_cast<uint64_t>(rank) << 48) | (counter & ((1ULL << 48) - 1)));
  }
  uint64_t Value() const { return value_; }
  /// Rank that minted the id.
  int CreatorRank() const { return static_cast<int>(value_ >> 48); }
  bool IsNil() const { return value_ == 0; }
  /// 16 hex digits, as printed in logs and errors.
  std::string Hex() const {
    char s[17];
    std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(value_));
    return s;
  }
  /// The id as a string (its 16 hex digits), so code written for Ray, whose ID() returns a
  /// std::string, compiles: `std::string id = ref.ID();`.
  operator std::string() const { return Hex(); }
  friend std::ostream& operator<<(std::ostream& os, ObjectId id) { return os << id.Hex(); }
  friend std::string operator+(const std::string& s, ObjectId id) { return s + id.Hex(); }
  friend std::string operator+(ObjectId id, const std::string& s) { return id.Hex() + s; }
  friend std::string operator+(const char* s, ObjectId id) { return s + id.Hex(); }
  friend std::string operator+(ObjectId id, const char* s) { return id.Hex() + s; }
  friend bool operator==(ObjectId a, ObjectId b) { return a.value_ == b.value_; }
  friend bool operator!=(ObjectId a, ObjectId b) { return a.value_ != b.value_; }
  friend bool operator<(ObjectId a, ObjectId b) { return a.value_ < b.value_; }

 private:
  uint64_t value_ = 0;
};

using TaskId = ObjectId;

namespace internal {
/// The id of return `index` of a task with n returns (SetNumReturns): a task's returns are
/// n consecutive ids minted together, the first being the task's own id (Ray's
/// ObjectID::FromIndex). Retries keep them.
inline ObjectId ReturnId(TaskId task, int index) {
  return ObjectId(task.Value() + static_cast<uint64_t>(index));
}
}  // namespace internal

}  // namespace prism

template <>
struct std::hash<prism::ObjectId> {
  size_t operator()(prism::ObjectId id) const noexcept {
    // The value itself. A rank mints its ids in order and the standard tables take the
    // hash modulo a prime bucket count, so ids minted together sit in neighbouring
    // buckets, and their entries, allocated in the same order, near each other: a batch of
    // tasks walks each table (tasks, objects, references, values) almost in memory order.
    // A mixing hash (splitmix64 until Nov 29) scattered them, and every look-up missed the
    // cache: 362k -> 527k async tasks/s (perf/README, "Hot path").
    return static_cast<size_t>(id.Value());
  }
};
