"""Box and Discrete, gymnasium.spaces' two spaces in the shape prism::rl has them (gymnasium
is not in Debian). A Python environment gives its observation_space and action_space as these,
or as gymnasium's own spaces where gymnasium is installed: prism.rllib reads only n (Discrete)
and low, high and shape (Box)."""

import numpy as np


class Space:
    """What Box and Discrete share: shape, dtype, sample(), contains(x) (also `x in space`)."""

    shape = ()
    dtype = None

    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def seed(self, seed=None):
        self._rng = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x):
        return self.contains(x)


class Discrete(Space):
    """Discrete(n): the integers 0..n-1 (gymnasium's Discrete with start 0)."""

    def __init__(self, n, seed=None, start=0):
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"Discrete(n): n must be an integer >= 1, not {n!r}")
        if start != 0:
            raise ValueError("Discrete: prism::rl's discrete spaces start at 0 (start=0)")
        super().__init__(seed)
        self.n = int(n)
        self.start = 0
        self.shape = ()
        self.dtype = np.dtype(np.int64)

    def sample(self):
        return int(self._rng.integers(self.n))

    def contains(self, x):
        try:
            return int(x) == x and 0 <= int(x) < self.n
        except (TypeError, ValueError):
            return False

    def __repr__(self):
        return f"Discrete({self.n})"

    def __eq__(self, other):
        return isinstance(other, Discrete) and other.n == self.n


class Box(Space):
    """Box(low, high, shape=None, dtype=np.float32): float32 arrays of `shape` within [low, high]
    element-wise (low and high: scalars, or arrays of the shape; +-inf for no bound)."""

    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        super().__init__(seed)
        if np.dtype(dtype) != np.float32:
            raise ValueError(f"Box: prism::rl's boxes hold float32, not {np.dtype(dtype)}")
        if shape is None:
            shape = np.shape(low) if np.ndim(low) else np.shape(high)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if any(s < 1 for s in shape):
            raise ValueError(f"Box: every dimension of shape must be >= 1, not {shape}")
        self.shape = shape
        self.dtype = np.dtype(np.float32)
        self.low = np.broadcast_to(np.asarray(low, dtype=np.float32), shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=np.float32), shape).copy()
        if np.any(self.low > self.high):
            raise ValueError("Box: low must be <= high element-wise")

    def sample(self):
        lo = np.where(np.isfinite(self.low), self.low, -1.0)
        hi = np.where(np.isfinite(self.high), self.high, 1.0)
        return self._rng.uniform(lo, hi).astype(np.float32)

    def contains(self, x):
        a = np.asarray(x, dtype=np.float32)
        return a.shape == self.shape and bool(np.all(a >= self.low) and np.all(a <= self.high))

    def __repr__(self):
        lo, hi = (self.low.flat[0], self.high.flat[0]) if self.low.size else (0, 0)
        if np.all(self.low == lo) and np.all(self.high == hi):
            return f"Box({lo}, {hi}, {self.shape}, float32)"
        return f"Box({self.low.tolist()}, {self.high.tolist()}, {self.shape}, float32)"

    def __eq__(self, other):
        return (isinstance(other, Box) and other.shape == self.shape and np.array_equal(other.low, self.low)
                and np.array_equal(other.high, self.high))
