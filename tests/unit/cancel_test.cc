// Cancel, SetTimeout, completion callbacks and pushed placement-group state on the
// in-process cluster, at 1 and 3 ranks of one CPU each (the cases: tests/common/cancel_cases.h).
#include "prism/platform/in_process.h"

#include "../common/cancel_cases.h"

namespace {

class CancelTest : public ::testing::TestWithParam<int> {
 protected:
  CancelTest() : cluster_({.num_ranks = GetParam(), .num_cpus = 1}) {}
  prism::platform::InProcessCluster cluster_;
};

TEST_P(CancelTest, QueuedTaskNeverRuns) { cancel_cases::CancelQueuedTask(); }
TEST_P(CancelTest, RunningTaskSeesItsFlag) { cancel_cases::CancelRunningTaskSetsItsFlag(); }
TEST_P(CancelTest, BlockedGetIsInterrupted) { cancel_cases::CancelInterruptsABlockedGet(); }
TEST_P(CancelTest, Recursive) { cancel_cases::CancelIsRecursive(); }
TEST_P(CancelTest, FinishedTaskKeepsItsValue) { cancel_cases::CancelOfAFinishedTaskHasNoEffect(); }
TEST_P(CancelTest, TwiceAndBadCalls) { cancel_cases::CancelTwiceAndBadCalls(); }
TEST_P(CancelTest, Timeouts) { cancel_cases::TimeoutFiresAndDoesNot(); }
TEST_P(CancelTest, ActorCalls) { cancel_cases::ActorCallsQueuedAreCancelledRunningAreNot(); }
TEST_P(CancelTest, TenThousandCallbacks) { cancel_cases::TenThousandCallbacks(); }
TEST_P(CancelTest, CallbacksSeeFailures) { cancel_cases::CallbacksAndFuturesSeeFailures(); }
TEST_P(CancelTest, PlacementGroupWaitIsPushed) { cancel_cases::PlacementGroupWaitIsWokenByThePush(); }

INSTANTIATE_TEST_SUITE_P(Ranks, CancelTest, ::testing::Values(1, 3),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
