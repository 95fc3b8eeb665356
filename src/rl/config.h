#pragma once
// What the Algorithm (algorithm.cc) needs of the configs beyond their public API
// (config.cc): the checks that need the runtime, and DQNConfig as the trainer's options.

#include <string>

#include "prism/rl/algorithm.h"
#include "prism/rl/dqn.h"
#include "rl/dqn/dqn_trainer.h"

namespace prism::rl::internal {

/// Throws what to change (naming `config`, "PPOConfig" or "DQNConfig") when `runners` env
/// runner actors cannot be made: no runtime, or (one per worker rank) fewer worker ranks
/// than runners.
void CheckRunnersFit(const std::string& config, int runners, RunnerPlacement placement);

/// Throws what to change when c.num_learners > 1 learners cannot be made: no runtime, fewer
/// worker ranks than learners, or minibatches smaller than the group.
void CheckLearnersFit(const PPOConfig& c);

/// DQNConfig as dqn::DqnTrainer's options.
dqn::DqnConfig ToDqnConfig(const DQNConfig& c);

}  // namespace prism::rl::internal
