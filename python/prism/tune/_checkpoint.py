"""prism.tune.Checkpoint is prism.train.Checkpoint (python/prism/train/_checkpoint.py, no
LibTorch): one class for both libraries, as Ray's ray.tune.Checkpoint is ray.train's."""

from ..train._checkpoint import Checkpoint

__all__ = ["Checkpoint"]
