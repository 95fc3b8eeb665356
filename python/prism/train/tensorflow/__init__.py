"""prism.train.tensorflow: Ray Train's TensorflowTrainer on Prism's C++ Train engine.

TensorFlow itself is not part of Prism (nor installable on Debian): this module sets up
what Ray's TensorflowConfig does, TF_CONFIG for MultiWorkerMirroredStrategy, written as
Ray writes it: {"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker",
"index": world_rank}}, with a free port on each worker's host, gathered through Prism's
key-value store. The loop imports tensorflow itself. Tested only with a stand-in loop that
checks TF_CONFIG (no TensorFlow here). Imports no torch module (the engine, prism._train,
links LibTorch's C++ library).
"""

import json
import os
import time

from .. import _session
from .._config import _check_kwargs
from .._net import free_port, reachable_host
from .._trainer import DataParallelTrainer

__all__ = ["TensorflowTrainer", "TensorflowConfig"]

_session.ext()  # the engine's loop, registered on this rank: import this before prism.init()


class TensorflowConfig:
    """Ray's TensorflowConfig: writes TF_CONFIG on each worker before the loop."""

    def __init__(self, **kwargs):
        _check_kwargs("TensorflowConfig", kwargs, ())

    def __repr__(self):
        return "TensorflowConfig()"

    def _on_start(self, ctx):
        import prism.kv as kv
        rank, size = ctx.get_world_rank(), ctx.get_world_size()
        mine = os.urandom(8).hex().encode() if rank == 0 else b""
        prefix = f"prism.train.tensorflow/{_session.ext().broadcast_bytes(mine).decode()}/"
        kv.put(prefix + str(rank), f"{reachable_host()}:{free_port()}".encode())
        workers, deadline = [None] * size, time.monotonic() + 120
        while True:
            for i in range(size):
                if workers[i] is None:
                    value = kv.get(prefix + str(i))
                    workers[i] = None if value is None else bytes(value).decode()
            if all(w is not None for w in workers):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("prism.train.tensorflow: the workers' addresses did not all "
                                   "arrive within 120 s")
            time.sleep(0.01)
        os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                              "task": {"type": "worker", "index": rank}})

    def _on_shutdown(self):
        os.environ.pop("TF_CONFIG", None)

    def _on_failure(self, error):
        self._on_shutdown()


class TensorflowTrainer(DataParallelTrainer):
    """Ray's TensorflowTrainer(train_loop_per_worker, *, train_loop_config=None,
    tensorflow_config=None, scaling_config=None, run_config=None,
    resume_from_checkpoint=None).fit() -> Result; each worker finds TF_CONFIG set."""

    _backend_config_class = TensorflowConfig
    _KNOWN = DataParallelTrainer._KNOWN + ("tensorflow_config",)

    def __init__(self, train_loop_per_worker, **kwargs):
        tf_config = kwargs.pop("tensorflow_config", None)
        if tf_config is not None:
            if not isinstance(tf_config, TensorflowConfig):
                raise TypeError("TensorflowTrainer: tensorflow_config must be a TensorflowConfig")
            kwargs["backend_config"] = tf_config
        super().__init__(train_loop_per_worker, **kwargs)
