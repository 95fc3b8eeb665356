#pragma once
// Prism RL: RLlib for HPC. Environments (prism/rl/env.h, target prism::rl_env), PPO with
// env runners as actors on the worker ranks (prism/rl/algorithm.h, target prism::rl), and
// DQN sampling on the driver (prism/rl/dqn.h, same target).

#include "prism/rl/algorithm.h"
#include "prism/rl/dqn.h"
#include "prism/rl/env.h"
