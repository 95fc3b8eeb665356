"""prism.train: Ray Train's Python API on Prism's C++ Train engine.

    from prism import train
    from prism.train import ScalingConfig, RunConfig, Checkpoint
    from prism.train.torch import TorchTrainer

    def train_loop_per_worker(config):
        ...  # torch code; prism.train.torch.prepare_model / prepare_data_loader
        train.report({"loss": loss}, checkpoint=Checkpoint.from_directory(tmpdir))

    result = TorchTrainer(train_loop_per_worker, train_loop_config={"lr": 1e-3},
                          scaling_config=ScalingConfig(num_workers=2)).fit()

One engine, two front ends: the worker group, placement, failure restarts, checkpoint
commits (atomic, with checksums), retention and preemption are the C++ engine's
(prism::train::TorchTrainer); only train_loop_per_worker runs in Python, in the
interpreter of each worker's rank. Importing prism.train loads no LibTorch (prism.tune
shares Checkpoint); the engine (prism._train) loads with prism.train.torch or on the first
fit or session call.
"""

from ._checkpoint import Checkpoint
from ._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ._result import Result, TrainingFailedError, TrainingPreemptedError
from ._session import TrainContext, get_checkpoint, get_context, get_dataset_shard, report
from ._trainer import DataParallelTrainer


__all__ = ["Checkpoint", "CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig",
           "Result", "TrainingFailedError", "TrainingPreemptedError", "TrainContext",
           "DataParallelTrainer", "get_checkpoint", "get_context", "report", "get_dataset_shard"]
