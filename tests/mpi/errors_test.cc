// Errors: TaskError contents, propagation to dependents, retries, unregistered functions.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

using namespace prism_test;

namespace errtest {
struct CustomFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace errtest

namespace {

int ErThrowOutOfRange(int x) {
  if (x > 0) throw std::out_of_range("x must not be positive, got " + std::to_string(x));
  return x;
}
int ErThrowCustom(int x) { throw errtest::CustomFailure("custom failure #" + std::to_string(x)); }
int ErThrowInt(int x) { throw x; }
int ErAddOne(int x) { return x + 1; }
int ErAdd(int a, int b) { return a + b; }
// Gets a failing subtask without catching: the original cause must pass through.
int ErNestedFailure(int x) {
  auto inner = prism::Task(ErThrowOutOfRange).SetName("inner-failure").Remote(x);
  return *inner.Get() + 1;
}
// Catches the failure of its subtask and recovers.
int ErNestedRecovers(int x) {
  try {
    return *prism::Task(ErThrowOutOfRange).Remote(x).Get();
  } catch (const prism::TaskError& e) {
    return e.OriginalType() == "std::out_of_range" ? -1 : -2;
  }
}

// Counts its attempts in `path` (one line per attempt) and fails until attempt `succeed_at`.
int ErFlaky(std::string path, int succeed_at) {
  int attempts = 0;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) ++attempts;
  }
  ++attempts;
  std::ofstream(path, std::ios::app) << "attempt on rank " << prism::GetRuntimeContext().GetRank()
                                     << "\n";
  if (attempts < succeed_at) {
    throw std::runtime_error("flaky attempt " + std::to_string(attempts));
  }
  return attempts;
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

int ErNotRegistered(int x) { return x; }  // deliberately not in PRISM_REMOTE

PRISM_REMOTE(ErThrowOutOfRange, ErThrowCustom, ErThrowInt, ErAddOne, ErAdd, ErNestedFailure,
             ErNestedRecovers, ErFlaky);

}  // namespace

TEST(TaskError, CarriesTypeMessageNameAndRank) {
  for (int r = 0; r < World(); ++r) {
    auto ref = On(r, ErThrowOutOfRange).SetName("named-failure").Remote(7);
    try {
      ref.Get();
      FAIL() << "expected TaskError from rank " << r;
    } catch (const prism::TaskError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("std::out_of_range"), std::string::npos) << what;
      EXPECT_NE(what.find("x must not be positive, got 7"), std::string::npos) << what;
      EXPECT_NE(what.find("named-failure"), std::string::npos) << what;
      EXPECT_NE(what.find("rank " + std::to_string(r)), std::string::npos) << what;
      EXPECT_EQ(e.OriginalType(), "std::out_of_range");
      EXPECT_EQ(e.OriginalMessage(), "x must not be positive, got 7");
      EXPECT_EQ(e.TaskName(), "named-failure");
      EXPECT_EQ(e.Rank(), r);
    }
    // Every Get rethrows; it is also a prism::Error.
    EXPECT_THROW(ref.Get(), prism::Error);
  }
  // Without SetName the task carries the function's name.
  try {
    prism::Task(ErThrowOutOfRange).Remote(1).Get();
    FAIL() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.TaskName(), "ErThrowOutOfRange");
    EXPECT_NE(std::string(e.what()).find("ErThrowOutOfRange"), std::string::npos);
  }
  // The same function succeeds for good input: errors are per call.
  EXPECT_EQ(*prism::Task(ErThrowOutOfRange).Remote(-4).Get(), -4);
}

TEST(TaskError, UserAndNonStandardExceptions) {
  try {
    On(World() - 1, ErThrowCustom).Remote(5).Get();
    FAIL() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.OriginalType(), "errtest::CustomFailure");
    EXPECT_EQ(e.OriginalMessage(), "custom failure #5");
  }
  try {
    prism::Task(ErThrowInt).Remote(5).Get();
    FAIL() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_FALSE(e.OriginalType().empty());
  }
}

TEST(TaskError, DependentsFailWithTheCause) {
  const int w = World();
  auto root = On(w - 1, ErThrowOutOfRange).SetName("root-failure").Remote(3);
  auto child = On(0, ErAddOne).Remote(root);
  auto grandchild = On(1 % w, ErAdd).Remote(child, 1);
  for (auto* ref : {&child, &grandchild}) {
    try {
      ref->Get();
      FAIL() << "a dependent of a failed task succeeded";
    } catch (const prism::TaskError& e) {
      EXPECT_EQ(e.OriginalType(), "std::out_of_range");
      EXPECT_EQ(e.OriginalMessage(), "x must not be positive, got 3");
      EXPECT_EQ(e.TaskName(), "root-failure");
      EXPECT_EQ(e.Rank(), w - 1);
    }
  }
  // Submitted after the failure is known: fails too, does not hang.
  EXPECT_THROW(root.Get(), prism::TaskError);
  auto late = prism::Task(ErAddOne).Remote(root);
  EXPECT_THROW(prism::Get(late, 20000), prism::TaskError);
  // Get of a vector throws if any failed.
  std::vector<prism::ObjectRef<int>> mixed{prism::Put(1), child};
  EXPECT_THROW(prism::Get(mixed), prism::TaskError);
}

TEST(TaskError, NestedFailurePassesThroughAndCanBeCaught) {
  try {
    On(World() - 1, ErNestedFailure).SetName("outer").Remote(9).Get();
    FAIL() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.OriginalType(), "std::out_of_range");
    EXPECT_EQ(e.OriginalMessage(), "x must not be positive, got 9");
    EXPECT_EQ(e.TaskName(), "inner-failure");
  }
  EXPECT_EQ(*On(World() - 1, ErNestedRecovers).Remote(9).Get(), -1);
}

TEST(Retries, SucceedsAfterFailedAttempts) {
  TempDir dir;
  const std::string path = dir / "attempts";
  // Fails on attempts 1 and 2, succeeds on attempt 3 = the second retry.
  auto ref = prism::Task(ErFlaky).SetRetryExceptions(true).SetMaxRetries(2).Remote(path, 3);
  EXPECT_EQ(*prism::Get(ref, 30000), 3);
  EXPECT_EQ(CountLines(path), 3);
}

TEST(Retries, ExhaustedRaisesTaskError) {
  TempDir dir;
  const std::string path = dir / "attempts";
  auto ref = prism::Task(ErFlaky).SetRetryExceptions(true).SetMaxRetries(2).Remote(path, 100);
  try {
    prism::Get(ref, 30000);
    FAIL() << "expected TaskError after the retries ran out";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.OriginalType(), "std::runtime_error");
    EXPECT_EQ(e.OriginalMessage(), "flaky attempt 3");
  }
  EXPECT_EQ(CountLines(path), 3) << "1 attempt + 2 retries";
}

TEST(Retries, NoRetryOfExceptionsByDefault) {
  TempDir dir;
  const std::string path = dir / "attempts";
  // Default: exceptions are not retried even though max_retries defaults to 3.
  EXPECT_THROW(prism::Get(prism::Task(ErFlaky).Remote(path, 2), 30000), prism::TaskError);
  EXPECT_EQ(CountLines(path), 1);
  // SetMaxRetries(0) with retry_exceptions: one attempt only.
  const std::string path2 = dir / "attempts2";
  auto ref = prism::Task(ErFlaky).SetRetryExceptions(true).SetMaxRetries(0).Remote(path2, 2);
  EXPECT_THROW(prism::Get(ref, 30000), prism::TaskError);
  EXPECT_EQ(CountLines(path2), 1);
}

TEST(Retries, DependentsWaitForTheRetry) {
  TempDir dir;
  const std::string path = dir / "attempts";
  auto flaky = prism::Task(ErFlaky).SetRetryExceptions(true).SetMaxRetries(3).Remote(path, 2);
  auto dependent = prism::Task(ErAddOne).Remote(flaky);
  EXPECT_EQ(*prism::Get(dependent, 30000), 3);
}

TEST(Registration, UnregisteredFunctionThrowsAtTask) {
  EXPECT_THROW(prism::Task(ErNotRegistered), prism::FunctionNotFound);
  EXPECT_THROW(prism::Task(ErNotRegistered), prism::Error);
  try {
    prism::Task(ErNotRegistered);
  } catch (const prism::FunctionNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("PRISM_REMOTE"), std::string::npos) << e.what();
  }
}
