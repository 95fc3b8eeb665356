// Arguments and results as Ray's C++ API passes them (issue 41, item 3): a parameter of
// type ObjectRef<T> receives the reference itself (the task runs without waiting for the
// object), std::vector<std::shared_ptr<T>> results, non-const lvalue-reference parameters
// (the callee gets a copy), and a base class's methods called on a derived-class actor.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace prism_test;

namespace {

/// The referenced value and the reference's id, as the task sees them.
std::string ArRefAndValue(prism::ObjectRef<std::string> ref) {
  return *ref.Get() + "@" + std::string(ref.ID());
}
/// Takes a ref to a ref, as Ray's GetIntVal.
int ArNestedRef(prism::ObjectRef<prism::ObjectRef<int>> outer) { return *(*outer.Get()).Get(); }
/// Passes its ref on to another task: the ref travels, not the value.
std::string ArForward(prism::ObjectRef<std::string> ref) { return *prism::Task(ArRefAndValue).Remote(ref).Get(); }

/// Blocks until the key is in the KV store (at most 60 s).
bool ArBlockUntil(std::string key) {
  for (int i = 0; i < 6000 && !prism::kv::Exists(key); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return prism::kv::Exists(key);
}
/// Runs while `gate`'s task still blocks (it gets the ref, not the value), then releases
/// it and returns its value: Ray's GetValue.
bool ArReleaseAndGet(prism::ObjectRef<bool> gate, std::string key) {
  const bool unready = prism::Wait(std::vector<prism::ObjectRef<bool>>{gate}, 1, 200).unready.size() == 1;
  prism::kv::Put(key, "go");
  return unready && *gate.Get();
}

std::vector<std::shared_ptr<int>> ArGetAll(int offset, std::vector<prism::ObjectRef<int>> refs) {
  std::vector<std::shared_ptr<int>> out = prism::Get(refs);
  for (auto& p : out) *p += offset;
  out.push_back(nullptr);
  return out;
}
std::shared_ptr<std::string> ArShared(std::string s) { return std::make_shared<std::string>(s + "!"); }

std::string ArConcatLvalues(std::string& a, std::string& b) {
  a += b;  // changes the task's copy only
  return a;
}
std::string ArConcatMixed(const std::string& a, std::string&& b, std::string c) { return a + b + c; }

PRISM_REMOTE(ArRefAndValue, ArNestedRef, ArForward, ArBlockUntil, ArReleaseAndGet, ArGetAll, ArShared,
             ArConcatLvalues, ArConcatMixed);

class ArHolder {
 public:
  std::string Value(prism::ObjectRef<std::string> ref) { return *ref.Get(); }
  std::string Concat(std::string& a, const std::string& b) { return a += b; }
  std::vector<std::shared_ptr<int>> All(std::vector<prism::ObjectRef<int>> refs) { return prism::Get(refs); }
};
ArHolder* MakeArHolder() { return new ArHolder(); }
PRISM_REMOTE(MakeArHolder, &ArHolder::Value, &ArHolder::Concat, &ArHolder::All);

struct ArBase {
  virtual ~ArBase() = default;
  virtual int Foo() { return 1; }
  int Plain() { return base_value; }
  int base_value = 7;
};
struct ArDerived : ArBase {
  int Foo() override { return 10; }
  int Own() { return 20; }
};
ArBase* MakeArBase() { return new ArBase(); }
ArDerived* MakeArDerived() { return new ArDerived(); }
PRISM_REMOTE(MakeArBase, MakeArDerived, &ArBase::Foo, &ArBase::Plain, &ArDerived::Own);

TEST(Arguments, AnObjectRefParameterReceivesTheReferenceItself) {
  auto ref = prism::Put(std::string("aaa"));
  const std::string expected = "aaa@" + std::string(ref.ID());
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(*On(r, ArRefAndValue).Remote(ref).Get(60000), expected) << "on rank " << r;
    EXPECT_EQ(*On(r, ArForward).Remote(ref).Get(60000), expected) << "forwarded from rank " << r;
  }
  auto inner = prism::Put(42);
  EXPECT_EQ(*prism::Task(ArNestedRef).Remote(prism::Put(inner)).Get(60000), 42);
  auto holder = prism::Actor(MakeArHolder).Remote();
  EXPECT_EQ(*holder.Task(&ArHolder::Value).Remote(ref).Get(60000), "aaa");
}

TEST(Arguments, ATaskWithAnObjectRefParameterRunsBeforeTheObjectIsReady) {
  const std::string key = "arguments-gate-" + std::to_string(World());
  prism::kv::Delete(key);
  auto gate = prism::Task(ArBlockUntil).Remote(key);
  EXPECT_TRUE(*prism::Task(ArReleaseAndGet).Remote(gate, key).Get(60000));
  prism::kv::Delete(key);
}

TEST(Arguments, VectorsOfSharedPtrAreResults) {
  std::vector<prism::ObjectRef<int>> refs{prism::Put(1), prism::Put(2), prism::Put(3)};
  for (int r = 0; r < World(); ++r) {
    std::vector<std::shared_ptr<int>> got = *On(r, ArGetAll).Remote(10, refs).Get(60000);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(*got[0], 11);
    EXPECT_EQ(*got[2], 13);
    EXPECT_EQ(got[3], nullptr) << "a null shared_ptr stays null";
  }
  EXPECT_EQ(**prism::Task(ArShared).Remote(std::string("hi")).Get(60000), "hi!");
  auto holder = prism::Actor(MakeArHolder).Remote();
  EXPECT_EQ(*(*holder.Task(&ArHolder::All).Remote(refs).Get(60000))[1], 2);
}

TEST(Arguments, NonConstLvalueReferenceParametersGetACopy) {
  std::string a = "a", b = "b";
  EXPECT_EQ(*prism::Task(ArConcatLvalues).Remote(a, b).Get(60000), "ab");
  EXPECT_EQ(a, "a") << "the caller's value never changes";
  EXPECT_EQ(*prism::Task(ArConcatMixed).Remote(a, std::string("b"), "c").Get(60000), "abc");
  auto holder = prism::Actor(MakeArHolder).Remote();
  EXPECT_EQ(*holder.Task(&ArHolder::Concat).Remote(a, "z").Get(60000), "az");
}

TEST(Arguments, ABaseClassMethodOnADerivedActorRunsTheOverride) {
  auto base = prism::Actor(MakeArBase).Remote();
  auto derived = prism::Actor(MakeArDerived).Remote();
  EXPECT_EQ(*base.Task(&ArBase::Foo).Remote().Get(60000), 1);
  EXPECT_EQ(*derived.Task(&ArBase::Foo).Remote().Get(60000), 10);
  EXPECT_EQ(*derived.Task(&ArBase::Plain).Remote().Get(60000), 7);
  EXPECT_EQ(*derived.Task(&ArDerived::Own).Remote().Get(60000), 20);
}

}  // namespace
