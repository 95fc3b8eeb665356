// Waiting threads help the MPI transport (common/progress_helper.h): a thread that waits for
// a reply receives it itself, the progress thread takes over when helpers stop, and the
// transport stops cleanly while a thread helps. Two ranks, MpiTransport alone (no
// prism::Init): rank 1 echoes each Stop message back to rank 0.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/progress_helper.h"
#include "transport/mpi/mpi_transport.h"

namespace prism::internal {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDone = -1;  // tells rank 1 the test is over

int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Waits for `cond` up to `seconds`, sleeping (not helping) between looks.
template <typename Cond>
bool SleepUntil(Cond cond, double seconds) {
  auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (!cond()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// One transport on a communicator of its own; rank 1 echoes, rank 0 counts replies and
// the ones its main thread handled.
struct Pair {
  MPI_Comm comm;
  std::thread::id main_thread = std::this_thread::get_id();
  std::atomic<int> replies{0};
  std::atomic<int> on_main{0};
  std::atomic<bool> done{false};
  std::unique_ptr<MpiTransport> transport;

  /// `doorbell`: each rank opens one on loopback and learns the other's before Start.
  explicit Pair(bool doorbell = false) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MpiTransport::Handlers h;
    h.on_message = [this](int from, Message&& m) {
      auto* s = std::get_if<Stop>(&m);
      if (s == nullptr) return;
      if (Rank() == 1) {
        if (s->exit_code == kDone) {
          done = true;
        } else {
          transport->Send(from, Stop{s->exit_code, ""});
        }
        return;
      }
      if (std::this_thread::get_id() == main_thread) on_main++;
      replies++;
    };
    h.lookup = [](ObjectId) { return Payload(); };
    h.on_fatal = [](const std::string& why) { ADD_FAILURE() << "transport: " << why; };
    transport = std::make_unique<MpiTransport>(comm, 60.0, h);
    if (doorbell) {
      std::string why;
      auto bell = Doorbell::Open("shm", &why);
      EXPECT_NE(bell, nullptr) << why;
      char mine[64] = {}, both[128] = {};
      std::snprintf(mine, sizeof mine, "%s", bell ? bell->Address().c_str() : "");
      MPI_Allgather(mine, 64, MPI_CHAR, both, 64, MPI_CHAR, comm);
      if (bell) {
        bell->SetPeers({std::string(both), std::string(both + 64)});
        transport->SetDoorbell(std::move(bell));
      }
    }
    transport->Start();
  }

  // Rank 0 ends the echo; both ranks stop their transport and meet.
  void Finish() {
    if (Rank() == 0) {
      transport->Send(1, Stop{kDone, ""});
    } else {
      EXPECT_TRUE(SleepUntil([&] { return done.load(); }, 60)) << "rank 1 never told to finish";
    }
    transport->Stop(std::chrono::milliseconds(2000));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
  }
};

TEST(TransportHelp, AWaitingThreadReceivesItsRepliesItself) {
  Pair p;
  if (Rank() == 0) {
    constexpr int kRounds = 200;
    for (int i = 0; i < kRounds; ++i) {
      p.transport->Send(1, Stop{i, ""});
      auto until = Clock::now() + std::chrono::seconds(10);
      while (p.replies.load() <= i && Clock::now() < until) {
        if (!HelpProgress()) sched_yield();
      }
      ASSERT_GT(p.replies.load(), i) << "no reply to message " << i << " within 10 s";
    }
    std::printf("replies handled by the waiting thread: %d of %d\n", p.on_main.load(), kRounds);
    EXPECT_GT(p.on_main.load(), 0) << "every reply went through the progress thread";

    // Helpers gone: the progress thread receives again, promptly.
    StopHelpingProgress();
    const int before = p.on_main.load();
    p.transport->Send(1, Stop{kRounds, ""});
    EXPECT_TRUE(SleepUntil([&] { return p.replies.load() > kRounds; }, 10));
    EXPECT_EQ(p.on_main.load(), before) << "the sleeping main thread handled a message";
  }
  p.Finish();
}

TEST(TransportHelp, StopsWhileAnotherThreadHelps) {
  Pair p;
  if (Rank() == 0) {
    std::atomic<bool> quit{false};
    std::atomic<int> helped_after_stop{0};
    std::atomic<bool> stopped{false};
    std::thread helper([&] {
      while (!quit.load()) {
        const bool was_stopped = stopped.load();
        if (HelpProgress() && was_stopped) helped_after_stop++;
      }
    });
    for (int i = 0; i < 50; ++i) p.transport->Send(1, Stop{i, ""});
    EXPECT_TRUE(SleepUntil([&] { return p.replies.load() == 50; }, 10));
    p.transport->Send(1, Stop{kDone, ""});
    p.transport->Stop(std::chrono::milliseconds(2000));  // the helper still spins
    stopped = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    quit = true;
    helper.join();
    EXPECT_EQ(helped_after_stop.load(), 0) << "a stopped transport was still driven";
    EXPECT_FALSE(HelpProgress());
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&p.comm);
  } else {
    p.Finish();
  }
}

// A message to a peer idle for a second rings its doorbell (transport/doorbell.h), and the
// peer, napping in ppoll on it, wakes for the ring rather than at its nap's end. Counted,
// not timed (benchmarks time it: prism_microbenchmark's single_client_task_after_idle).
TEST(TransportHelp, AMessageToAnIdlePeerRingsItAndWakesIt) {
  Pair p(/*doorbell=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // both idle: long naps
  uint64_t heard = 0;
  if (Rank() == 0) {
    const uint64_t sent = p.transport->RingsSent();
    p.transport->Send(1, Stop{7, ""});
    EXPECT_TRUE(SleepUntil([&] { return p.replies.load() == 1; }, 10)) << "no reply within 10 s";
    EXPECT_EQ(p.transport->RingsSent(), sent + 1) << "the idle peer was not rung";
  } else {
    EXPECT_TRUE(SleepUntil([&] { return p.transport->RingsHeard() > 0; }, 10));
    heard = p.transport->RingsHeard();
  }
  p.Finish();
  if (Rank() == 1) EXPECT_GE(heard, 1u) << "rank 1's progress thread never woke for a ring";
}

}  // namespace
}  // namespace prism::internal

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  MPI_Finalize();
  return status;
}
