"""Python environments for the tests, in gymnasium's shape (reset(seed=, options=) ->
(obs, info); step(a) -> (obs, reward, terminated, truncated, info)). This module is imported
on every rank (pytest collects it there), so the classes travel by reference."""

import math

import numpy as np

from prism.rllib.spaces import Box, Discrete


class PyCartPole:
    """Gymnasium's CartPole-v1 in Python (its equations and constants)."""

    def __init__(self, config=None):
        config = config or {}
        self.max_steps = int(config.get("max_steps", 500))
        high = np.array([4.8, np.finfo(np.float32).max, 0.418, np.finfo(np.float32).max], dtype=np.float32)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.action_space = Discrete(2)
        self.rng = np.random.default_rng()
        self.state = None
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.steps += 1
        terminated = bool(x < -2.4 or x > 2.4 or theta < -0.2095 or theta > 0.2095)
        truncated = self.steps >= self.max_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}


class Corridor:
    """Walk right (action 1) to the end of a corridor of `length` cells: reward -0.1 a step, +1
    at the end (RLlib's SimpleCorridor). A policy that learns reaches it in `length` steps."""

    def __init__(self, config=None):
        self.length = int((config or {}).get("corridor_length", 5))
        self.observation_space = Box(0.0, float(self.length), shape=(1,))
        self.action_space = Discrete(2)
        self.pos = 0

    def reset(self, *, seed=None, options=None):
        self.pos = 0
        return [float(self.pos)], {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos >= self.length
        return [float(self.pos)], 1.0 if done else -0.1, done, False, {}


class ContinuousTarget:
    """A Box action: reward -|a - 0.5|, one step per episode."""

    def __init__(self, config=None):
        self.observation_space = Box(-1.0, 1.0, shape=(2,))
        self.action_space = Box(-1.0, 1.0, shape=(1,))

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        assert action.shape == (1,), action.shape
        return np.zeros(2, np.float32), -abs(float(action[0]) - 0.5), True, False, {}


class ExplodingEnv(Corridor):
    """Raises KeyError on its 3rd step."""

    def step(self, action):
        self.n = getattr(self, "n", 0) + 1
        if self.n == 3:
            raise KeyError("boom in step 3")
        return super().step(action)


class FourTupleEnv(Corridor):
    """gym's old step API: (obs, reward, done, info)."""

    def step(self, action):
        obs, r, done, _, info = super().step(action)
        return obs, r, done, info


class WrongShapeEnv(Corridor):
    def step(self, action):
        obs, r, d, t, i = super().step(action)
        return [1.0, 2.0, 3.0], r, d, t, i


class NoSpacesEnv:
    def reset(self, *, seed=None, options=None):
        return [0.0], {}

    def step(self, action):
        return [0.0], 0.0, True, False, {}
