// Waiting threads help the transport (common/progress_helper.h, common/spin_wait.h), with a
// fake helper in place of MpiTransport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/progress_helper.h"
#include "common/spin_wait.h"

namespace prism::internal {
namespace {

struct FakeHelper : ProgressHelper {
  std::atomic<int> helps{0};
  std::atomic<int> stops{0};
  std::atomic<bool> found{false};  // what Help reports
  std::atomic<bool> hold{false};   // Help waits while this holds
  std::atomic<bool> inside{false};
  bool Help() override {
    inside = true;
    while (hold.load()) std::this_thread::yield();
    helps++;
    inside = false;
    return found.load();
  }
  void StopHelping() override { stops++; }
};

// Removes the helper at the end of a test, whatever happened.
struct Installed {
  explicit Installed(ProgressHelper* h) : h(h) { SetProgressHelper(h); }
  ~Installed() { RemoveProgressHelper(h); }
  ProgressHelper* h;
};

TEST(ProgressHelper, WithoutAHelperNothingIsHelped) {
  EXPECT_FALSE(HelpProgress());
  StopHelpingProgress();  // no-op
  int looks = 0;
  SpinWhile([&] { return ++looks < 5; }, 1'000'000);
  EXPECT_EQ(looks, 5);
}

TEST(ProgressHelper, ASpinHelpsBetweenLooksAndStopsHelpingOnlyWhenItRunsOut) {
  FakeHelper h;
  Installed installed(&h);
  int looks = 0;
  SpinWhile([&] { return ++looks < 10; }, 10'000'000);  // ends by its predicate
  EXPECT_EQ(h.helps.load(), 9);
  EXPECT_EQ(h.stops.load(), 0) << "a spin that got what it waited for goes on working";

  h.found = true;
  EXPECT_TRUE(HelpProgress());
  SpinWhile([] { return true; }, 2'000);  // runs out: the caller sleeps next
  EXPECT_EQ(h.stops.load(), 1);
  EXPECT_GT(h.helps.load(), 10);
}

TEST(ProgressHelper, RemovingTheHelperWaitsForACallInFlight) {
  FakeHelper h;
  SetProgressHelper(&h);
  h.hold = true;
  std::thread helper([] { HelpProgress(); });
  while (!h.inside.load()) std::this_thread::yield();
  std::atomic<bool> removed{false};
  std::thread remover([&] {
    RemoveProgressHelper(&h);
    removed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(removed.load()) << "removed while a thread was inside Help";
  h.hold = false;
  remover.join();
  helper.join();
  EXPECT_TRUE(removed.load());
  EXPECT_EQ(h.helps.load(), 1);
  EXPECT_FALSE(HelpProgress()) << "a removed helper is not called";
  EXPECT_EQ(h.helps.load(), 1);
}

// A transport that stops removes only itself: another one installed since stays.
TEST(ProgressHelper, RemovingAnotherHelperLeavesTheInstalledOne) {
  FakeHelper first, second;
  SetProgressHelper(&second);
  RemoveProgressHelper(&first);
  EXPECT_FALSE(HelpProgress());
  EXPECT_EQ(second.helps.load(), 1) << "the installed helper was removed by another";
  RemoveProgressHelper(&second);
  EXPECT_FALSE(HelpProgress());
  EXPECT_EQ(second.helps.load(), 1);
}

// The transport may be stopped from inside a pass (a handler that ends the job): removing
// the helper then must not wait for the caller's own call.
TEST(ProgressHelper, TheHelperCanBeRemovedFromInsideItsOwnCall) {
  struct SelfRemoving : ProgressHelper {
    bool Help() override {
      RemoveProgressHelper(this);
      return true;
    }
    void StopHelping() override {}
  } h;
  SetProgressHelper(&h);
  EXPECT_TRUE(HelpProgress());
  EXPECT_FALSE(HelpProgress());
}

}  // namespace
}  // namespace prism::internal
