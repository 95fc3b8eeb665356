"""prism.rllib: RLlib's Python API over Prism's C++ RL engine (prism::rl). One engine, two
front ends: the env runner actors, the samplers, PPO's and DQN's learners, the checkpoints and
the Tune trial are C++; Python holds the config and runs only a Python environment's reset and
step (inside the C++ env runners, on the worker ranks).

    import prism
    from prism.rllib.algorithms.ppo import PPOConfig

    algo = (PPOConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=2)
            .training(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01)
            .build_algo())
    print(algo.train()["env_runners"]["episode_return_mean"])

Import it at the top of the script, on every rank, before prism.init() (build_algo calls it if
you did not): the env runners and Tune trials run on every rank and need its functions there.
"""

import importlib

import prism
from prism import tune as _tune  # loads prism._tune (RTLD_GLOBAL): prism._rllib resolves Tune from it

if prism.is_initialized() and "prism._rllib" not in __import__("sys").modules:
    raise ImportError("prism.rllib must be imported before prism.init(), at the top of the script, so that every "
                      "rank loads it (its env runners and trials run on the worker ranks): move the import above "
                      "prism.init()")

_rllib = importlib.import_module("prism._rllib")  # registers prism::rl's remote functions on this rank

from . import spaces  # noqa: E402
from ._env import register_env  # noqa: E402
from .algorithms import DQN, PPO, Algorithm, AlgorithmConfig, DQNConfig, PPOConfig  # noqa: E402
from .spaces import Box, Discrete  # noqa: E402

# Tuner("PPO", param_space=config) and Tuner("DQN", ...): prism.tune's named trainables.
_tune.register_trainable("PPO", PPO)
_tune.register_trainable("DQN", DQN)

__all__ = ["PPO", "PPOConfig", "DQN", "DQNConfig", "Algorithm", "AlgorithmConfig", "register_env", "spaces",
           "Box", "Discrete"]
