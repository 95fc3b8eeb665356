"""ray.rllib.algorithms.callbacks' names (DefaultCallbacks), from prism.rllib.callbacks."""
from ..callbacks.callbacks import DefaultCallbacks, RLlibCallback  # noqa: F401
