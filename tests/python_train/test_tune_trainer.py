"""A TorchTrainer as a Tune trainable (Ray's Tuner(trainer, param_space={"train_loop_config":
...})): each trial is a training run of the C++ engine's TorchTrainable, its workers'
reports are the trial's, and its checkpoints are the trial's."""
import os
import tempfile

import pytest

from prism import train, tune
from prism.train import Checkpoint, ScalingConfig
from prism.train.torch import TorchTrainer


def loop(config):
    ckpt = train.get_checkpoint()
    start = 0
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = int(open(os.path.join(d, "step")).read())
    ctx = train.get_context()
    for step in range(start + 1, config["steps"] + 1):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "step"), "w") as f:
            f.write(str(step))
        train.report({"score": config["x"] * step, "lr": config["lr"], "workers": ctx.get_world_size()},
                     checkpoint=Checkpoint.from_directory(d) if ctx.get_world_rank() == 0 else None)


def test_trainer_trials_report_to_the_tuner(tmp_path, world_size):
    workers = 2 if world_size >= 3 else 1
    trainer = TorchTrainer(loop, train_loop_config={"steps": 3, "x": 0, "lr": 0.5},
                           scaling_config=ScalingConfig(num_workers=workers))
    grid = tune.Tuner(trainer, param_space={"train_loop_config": {"x": tune.grid_search([1, 3])}},
                      tune_config=tune.TuneConfig(metric="score", mode="max"),
                      run_config=tune.RunConfig(storage_path=str(tmp_path), name="trainer", verbose=0)).fit()
    assert grid.num_errors == 0, grid.errors
    assert len(grid) == 2
    best = grid.get_best_result()
    assert best.config == {"train_loop_config": {"x": 3}}
    # The trial's value wins; the trainer's other keys (lr, steps) stay.
    assert best.metrics["score"] == 9 and best.metrics["lr"] == 0.5
    assert best.metrics["workers"] == workers and best.metrics["training_iteration"] == 3
    with best.checkpoint.as_directory() as d:
        assert open(os.path.join(d, "step")).read() == "3"
    df = grid.get_dataframe()
    assert sorted(df["config/train_loop_config/x"]) == [1, 3]


def test_asha_stops_trainer_trials(tmp_path):
    from prism.tune.schedulers import ASHAScheduler
    trainer = TorchTrainer(loop, train_loop_config={"steps": 8, "x": 0, "lr": 0.1},
                           scaling_config=ScalingConfig(num_workers=1))
    grid = tune.Tuner(trainer, param_space={"train_loop_config": {"x": tune.grid_search([4, 3, 2, 1])}},
                      tune_config=tune.TuneConfig(metric="score", mode="max",
                                                  scheduler=ASHAScheduler(max_t=8, grace_period=1,
                                                                          reduction_factor=2)),
                      run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0)).fit()
    assert grid.num_errors == 0, grid.errors
    iterations = sorted(r.metrics["training_iteration"] for r in grid)
    assert iterations[-1] == 8 and iterations[0] < 8  # ASHA stopped some trainer trials early
    assert grid.get_best_result().config == {"train_loop_config": {"x": 4}}


def test_trainer_param_space_other_than_train_loop_config_is_refused(tmp_path):
    trainer = TorchTrainer(loop, train_loop_config={"steps": 1, "x": 0, "lr": 0.1})
    with pytest.raises(ValueError, match="only hold train_loop_config.*'scaling_config'"):
        tune.Tuner(trainer, param_space={"scaling_config": {"num_workers": 2}})
    with pytest.raises(TypeError, match="with_resources and with_parameters take a function"):
        tune.Tuner(tune.with_resources(trainer, {"cpu": 2}),
                   run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))


def test_a_failing_trainer_trial_is_the_trials_error(tmp_path):
    def broken(config):
        raise ValueError(f"bad lr {config['lr']}")

    trainer = TorchTrainer(broken, train_loop_config={"lr": 1.0})
    grid = tune.Tuner(trainer, param_space={"train_loop_config": {"lr": tune.grid_search([0.1])}},
                      run_config=tune.RunConfig(storage_path=str(tmp_path), name="broken", verbose=0)).fit()
    assert grid.num_errors == 1
    assert "bad lr 0.1" in str(grid.errors[0])
