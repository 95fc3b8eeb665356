#pragma once
// PPO's learner group (PPOConfig::Learners(n > 1), RLlib's LearnerGroup) on
// platform::WorkerGroup: n workers reserved together (1 CPU each, learner i on world rank
// 1 + i), each running PpoLearnerLoop with its own module copy and Adam. The loop is
// driven step by step: every Train() the driver publishes one shard of the batch to each
// learner's inbox (a platform::Channel the learner opened), the learners update with their
// gradients averaged over a prism::collective group, and each reports its stats (learner 0
// its new weights too) through the group's events.
//
//   driver                                   learner i (a WorkerGroup worker)
//   LearnerGroup(...) ── Start(loop) ──────> opens inbox i, Reports kReady
//   Update(shards) ── Publish(inbox i) ────> UpdateShard (AllReduce every step) ─> Report
//   OptimizerState() ─ Publish(inbox 0) ───> Report(Adam's state as bytes)
//   ~LearnerGroup: Abort ── OnAbort hook ──> inbox woken, collective aborted, loop returns
//
// Why a loop with an inbox, not learner actors called per update: the group's reservation,
// placement and end come from the one mechanism every gang of workers uses; a failed learner
// is an event the driver hears at once (kFailed), and aborting the group breaks the others
// out of their all-reduce instead of leaving them waiting for the dead peer.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prism/rl/algorithm.h"
#include "rl/ppo/learner.h"

namespace prism::platform {
class WorkerGroup;
}

namespace prism::rl::internal {

/// Adam's state as bytes (LibTorch's archive), and back into an optimizer over a module of
/// the same shape.
std::vector<uint8_t> OptimizerBytes(torch::optim::Adam& optimizer);
void LoadOptimizerBytes(torch::optim::Adam& optimizer, const std::vector<uint8_t>& bytes);

/// The Learner's options from a config, with the KL coefficient `kl_coeff` (adapted since
/// the config's initial one).
ppo::LearnerOptions LearnerOptionsOf(const PPOConfig& c, double kl_coeff);

struct LearnerReply;  // a learner's report (learner_group.cc)

/// The driver's handle on a running learner group. Not thread-safe: the driver's thread.
class LearnerGroup {
 public:
  /// Reserves config.num_learners workers (1 CPU each on ranks 1..n; waits up to 60 s for
  /// them) and starts every learner from `weights`, `kl_coeff` and Adam's state `optimizer`
  /// (OptimizerBytes; empty for a fresh Adam), waiting up to 60 s for all to be ready.
  /// Throws ResourceError if the cluster could never hold them, Error (saying what to
  /// change) if their CPUs are not free within 60 s or a learner fails to start.
  LearnerGroup(const PPOConfig& config, const std::vector<uint8_t>& weights, double kl_coeff,
               const std::vector<uint8_t>& optimizer);
  /// Aborts the learners and gives their CPUs back.
  ~LearnerGroup();
  LearnerGroup(const LearnerGroup&) = delete;
  LearnerGroup& operator=(const LearnerGroup&) = delete;

  /// One update: shard i to learner i (shards.size() == num_learners). Returns learner 0's
  /// stats (the group's: gradients are averaged, so every copy takes the same steps) and
  /// `weights` its new weights. Throws Error if a learner failed (the group is unusable
  /// afterwards: every later call throws it again) or no result came within `timeout_ms`.
  ppo::LearnerStats Update(std::vector<ppo::LearnerShard> shards, std::vector<uint8_t>& weights,
                           int64_t timeout_ms);
  /// Learner 0's Adam state (OptimizerBytes); the same throws as Update.
  std::vector<uint8_t> OptimizerState(int64_t timeout_ms);

 private:
  /// Reads events until every learner in `from` replied (their replies in `from`'s order).
  std::vector<LearnerReply> Await(const std::vector<int>& from, int64_t timeout_ms,
                                  const char* what);
  void Send(int learner, const std::string& bytes);

  std::unique_ptr<platform::WorkerGroup> group_;
  std::string inbox_prefix_;
  int num_learners_;
  std::string failure_;  // set once a learner failed
};

}  // namespace prism::rl::internal
