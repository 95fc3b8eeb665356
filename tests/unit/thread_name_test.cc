// Prism's threads carry names (common/thread_name.h): a task runs on "prism-task", an
// actor's methods on "prism-actor", so `top -H` and perf tell them from the user's threads.
#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <pthread.h>

#include <chrono>
#include <string>
#include <thread>

#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

std::string TnCurrentName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

std::string TnTaskThread() { return TnCurrentName(); }

class TnActor {
 public:
  static TnActor* Create() { return new TnActor; }
  std::string Thread() { return TnCurrentName(); }
};

PRISM_REMOTE(TnTaskThread, TnActor::Create, &TnActor::Thread);

TEST(ThreadNames, TasksAndActorMethodsRunOnNamedThreads) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  // A task the driver waits for before a pool thread took it runs on the driver's thread
  // (Executor::RunHere); given the time, a pool thread takes it.
  auto task = prism::Task(TnTaskThread).Remote();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(*task.Get(30000), "prism-task");
  auto actor = prism::Actor(TnActor::Create).Remote();
  EXPECT_EQ(*actor.Task(&TnActor::Thread).Remote().Get(30000), "prism-actor");
  EXPECT_NE(TnCurrentName(), "prism-task");  // the driver keeps the user's name
}

TEST(ThreadNames, ALongNameIsCutAtTheKernelsFifteenCharacters) {
  std::string seen;
  std::thread t([&] {
    prism::internal::NameThisThread("prism-a-name-longer-than-fifteen");
    seen = TnCurrentName();
  });
  t.join();
  EXPECT_EQ(seen, "prism-a-name-lo");
}

}  // namespace
