"""RLlib's algorithms (ray.rllib.algorithms) that prism::rl has: PPO and DQN."""

from .algorithm import Algorithm
from .algorithm_config import AlgorithmConfig
from .dqn import DQN, DQNConfig
from .ppo import PPO, PPOConfig

__all__ = ["Algorithm", "AlgorithmConfig", "PPO", "PPOConfig", "DQN", "DQNConfig"]
