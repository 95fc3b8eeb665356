// Stop signals without a launcher: hooks, the recorded signal, and the job script's
// acknowledgement file (PRISM_SIGNAL_ACK_FILE).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "prism/platform/preemption.h"
#include "runtime/stop_signals.h"

namespace {

template <typename F>
bool Within(std::chrono::milliseconds limit, F done) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(Preemption, HooksHearTheSignalAndRankZeroAcknowledgesIt) {
  const std::string ack = "/tmp/prism-ack-test-" + std::to_string(getpid());
  std::remove(ack.c_str());
  setenv("PRISM_SIGNAL_ACK_FILE", ack.c_str(), 1);
  prism::internal::InstallStopSignals(/*rank=*/0);
  std::atomic<int> heard{0};
  {
    prism::platform::PreemptionHook hook([&](int sig) { heard = sig; });
    std::raise(SIGUSR1);
    ASSERT_TRUE(Within(std::chrono::seconds(5), [&] { return heard.load() != 0; }));
    EXPECT_EQ(heard.load(), SIGUSR1);
    EXPECT_EQ(prism::PreemptionSignal(), SIGUSR1);
    std::string line;
    ASSERT_TRUE(Within(std::chrono::seconds(5), [&] { return std::ifstream(ack).good(); }));
    std::getline(std::ifstream(ack) >> std::ws, line);
    EXPECT_EQ(line, "SIGUSR1");
  }
  heard = 0;
  {
    // A guard keeps SIGTERM from ending rank 0: the library stops on its own.
    EXPECT_FALSE(prism::platform::Guarded());
    prism::platform::PreemptionGuard guard;
    EXPECT_TRUE(prism::platform::Guarded());
    prism::platform::PreemptionHook hook([&](int sig) { heard = sig; });
    std::raise(SIGTERM);
    ASSERT_TRUE(Within(std::chrono::seconds(5), [&] { return heard.load() != 0; }));
    EXPECT_EQ(heard.load(), SIGTERM);
    EXPECT_EQ(prism::PreemptionSignal(), SIGUSR1) << "the first signal since Init is kept";
  }
  EXPECT_FALSE(prism::platform::Guarded());
  prism::internal::UninstallStopSignals();
  unsetenv("PRISM_SIGNAL_ACK_FILE");
  std::remove(ack.c_str());
  EXPECT_STREQ(prism::platform::SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
