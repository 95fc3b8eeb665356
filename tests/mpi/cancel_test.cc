// Cancel, SetTimeout, completion callbacks and pushed placement-group state across MPI
// ranks (one CPU each; the cases: tests/common/cancel_cases.h).
#include "../common/cancel_cases.h"

TEST(Cancel, QueuedTaskNeverRuns) { cancel_cases::CancelQueuedTask(); }
TEST(Cancel, RunningTaskSeesItsFlag) { cancel_cases::CancelRunningTaskSetsItsFlag(); }
TEST(Cancel, BlockedGetIsInterrupted) { cancel_cases::CancelInterruptsABlockedGet(); }
TEST(Cancel, Recursive) { cancel_cases::CancelIsRecursive(); }
TEST(Cancel, FinishedTaskKeepsItsValue) { cancel_cases::CancelOfAFinishedTaskHasNoEffect(); }
TEST(Cancel, TwiceAndBadCalls) { cancel_cases::CancelTwiceAndBadCalls(); }
TEST(Cancel, Timeouts) { cancel_cases::TimeoutFiresAndDoesNot(); }
TEST(Cancel, ActorCalls) { cancel_cases::ActorCallsQueuedAreCancelledRunningAreNot(); }
TEST(Cancel, TenThousandCallbacks) { cancel_cases::TenThousandCallbacks(); }
TEST(Cancel, CallbacksSeeFailures) { cancel_cases::CallbacksAndFuturesSeeFailures(); }
TEST(Cancel, PlacementGroupWaitIsPushed) { cancel_cases::PlacementGroupWaitIsWokenByThePush(); }
