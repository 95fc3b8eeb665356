"""CartPole-v1 in Python with gymnasium's interface (gymnasium is not in Debian): the same
equations and constants as gymnasium.envs.classic_control.CartPoleEnv. ppo_cartpole.py uses it
to evaluate the trained policy, and, with --python-env, to train on it: a custom environment
as an RLlib user writes one, stepped inside prism::rl's C++ env runners."""

import math

import numpy as np

from prism.rllib.spaces import Box, Discrete


class CartPole:
    def __init__(self, config=None):
        config = config or {}
        self.max_episode_steps = int(config.get("max_episode_steps", 500))
        high = np.array([4.8, np.finfo(np.float32).max, 0.418, np.finfo(np.float32).max], dtype=np.float32)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.action_space = Discrete(2)
        self._rng = np.random.default_rng()
        self._state = np.zeros(4)
        self._steps = 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self._rng.uniform(-0.05, 0.05, size=4)
        self._steps = 0
        return self._state.astype(np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self._state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot * theta_dot * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self._state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                                theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc])
        self._steps += 1
        terminated = bool(abs(self._state[0]) > 2.4 or abs(self._state[2]) > 0.2095)
        truncated = self._steps >= self.max_episode_steps
        return self._state.astype(np.float32), 1.0, terminated, truncated, {}
