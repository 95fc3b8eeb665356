#pragma once
// A head over two one-CPU ranks, driven by hand: a fake `send` records what it would put on
// the wire. Shared by the head protocol tests and the GCS state tests.
#include <gtest/gtest.h>

#include "head/head.h"

namespace prism::internal {

struct Sent {
  int dest;
  Message msg;
};

class HeadFixture : public ::testing::Test {
 protected:
  HeadFixture()
      : head_({ResourceSet({{"CPU", 1}, {"rank:0", 1}}), ResourceSet({{"CPU", 1}, {"rank:1", 1}})},
              [this](int dest, Message&& m) { sent_.push_back({dest, std::move(m)}); }) {}

  TaskSpec Spec(uint64_t id, std::vector<TaskSpecArg> args = {}) {
    TaskSpec s;
    s.id = ObjectId(id);
    s.Edit().function = "f";
    s.Edit().name = "f";
    s.args = std::move(args);
    s.Edit().demand = ResourceSet({{"CPU", 1}});
    return s;
  }
  static TaskSpecArg Ref(uint64_t id) {
    TaskSpecArg a;
    a.is_ref = true;
    a.ref = ObjectId(id);
    return a;
  }
  template <typename T>
  std::vector<std::pair<int, T>> Take() {
    std::vector<std::pair<int, T>> out;
    for (auto& s : sent_) {
      if (auto* m = std::get_if<T>(&s.msg)) out.push_back({s.dest, std::move(*m)});
    }
    sent_.clear();
    return out;
  }
  /// `from` reports task `id` done: a small inline result, or (large `size`) one it keeps.
  void Done(int from, uint64_t id, bool ok = true, uint64_t size = 4) {
    TaskDone d;
    d.id = ObjectId(id);
    d.ok = ok;
    d.size = size;
    d.exec_ns = 1000;
    if (ok && size <= 8) d.inline_value = std::make_shared<const Buffer>("abcd", 4);
    if (!ok) d.error = ErrorInfo::Exception("std::runtime_error", "boom", "f", from);
    head_.Handle(from, std::move(d));
  }

  std::vector<Sent> sent_;
  Head head_;
};

}  // namespace prism::internal
