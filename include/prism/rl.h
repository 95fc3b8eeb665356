#pragma once
// Prism RL: RLlib for HPC. Environments (prism/rl/env.h, target prism::rl_env) and PPO with
// env runners as actors on the worker ranks (prism/rl/algorithm.h, target prism::rl).

#include "prism/rl/algorithm.h"
#include "prism/rl/env.h"
