"""Schedulers and searchers: the C++ ones behind Ray's classes and arguments."""
import json
import os
import tempfile

import pytest

from prism import tune
from prism.tune.schedulers import (ASHAScheduler, AsyncHyperBandScheduler, FIFOScheduler, HyperBandScheduler,
                                   MedianStoppingRule, PopulationBasedTraining)
from prism.tune.search import BasicVariantGenerator, ConcurrencyLimiter, TPESearch


def curve(config):
    # A trial's score is its quality times the step: ASHA can rank trials at the first rung
    # (the best trials come first in the grids below, so later, worse ones meet full rungs).
    for step in range(1, 17):
        tune.report({"score": config["q"] * step})


def test_asha_stops_trials_early(storage):
    grid = tune.Tuner(curve, param_space={"q": tune.grid_search([0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1])},
                      tune_config=tune.TuneConfig(metric="score", mode="max", max_concurrent_trials=2,
                                                  scheduler=ASHAScheduler(max_t=16, grace_period=1,
                                                                          reduction_factor=2)),
                      run_config=tune.RunConfig(storage_path=storage, name="asha", verbose=0)).fit()
    iters = {r.config["q"]: r.metrics["training_iteration"] for r in grid}
    assert max(iters.values()) == 16
    assert sum(1 for v in iters.values() if v < 16) >= 4  # most were stopped early
    assert iters[0.8] == 16  # the best runs to max_t
    assert grid.get_best_result().config["q"] == 0.8
    assert AsyncHyperBandScheduler is ASHAScheduler
    assert ASHAScheduler(max_t=16, grace_period=1, reduction_factor=2).rungs() == [[16, 8, 4, 2, 1]]  # Ray's milestones


def test_hyperband_and_median_and_fifo(storage):
    for i, sched in enumerate([HyperBandScheduler(max_t=9, reduction_factor=3),
                               MedianStoppingRule(time_attr="training_iteration", grace_period=2,
                                                  min_samples_required=2),
                               FIFOScheduler()]):
        grid = tune.Tuner(curve, param_space={"q": tune.uniform(0, 1)},
                          tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=4, scheduler=sched),
                          run_config=tune.RunConfig(storage_path=storage, name=f"s{i}", verbose=0,
                                                    stop={"training_iteration": 9})).fit()
        assert grid.num_errors == 0 and len(grid) == 4
        best = grid.get_best_result()
        assert best.config["q"] == max(r.config["q"] for r in grid)


def pbt_trainable(config):
    step, score = 0, 0.0
    ckpt = tune.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                state = json.load(f)
        step, score = state["step"], state["score"]
    while step < 12:
        step += 1
        score += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step, "score": score}, f)
            tune.report({"score": score}, checkpoint=tune.Checkpoint.from_directory(d))


def test_pbt_exploits_checkpoints(storage):
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                  hyperparam_mutations={"lr": tune.uniform(0.01, 1.0)}, seed=3)
    grid = tune.Tuner(pbt_trainable, param_space={"lr": tune.grid_search([0.01, 0.02, 0.9, 1.0])},
                      tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt),
                      run_config=tune.RunConfig(storage_path=storage, name="pbt", verbose=0)).fit()
    assert grid.num_errors == 0
    log = pbt.policy_log()
    assert log, "PBT perturbed no trial"
    # A trial that took over a top trial's checkpoint scores far above its own lr * 12.
    assert all(r.checkpoint is not None for r in grid)
    low = [r for r in grid if r.trial_id.endswith(("00000", "00001"))]
    assert any(r.metrics["score"] > 1.0 for r in low)


def test_searchers(storage):
    def f(config):
        tune.report({"y": (config["x"] - 2) ** 2 + (0 if config["c"] == "b" else 1)})

    space = {"x": tune.uniform(0, 4), "c": tune.choice(["a", "b"])}
    for i, alg in enumerate([TPESearch(n_startup_trials=4), ConcurrencyLimiter(TPESearch(), max_concurrent=2),
                             BasicVariantGenerator(max_concurrent=1)]):
        grid = tune.Tuner(f, param_space=space,
                          tune_config=tune.TuneConfig(metric="y", mode="min", num_samples=8, search_alg=alg),
                          run_config=tune.RunConfig(storage_path=storage, name=f"search{i}", verbose=0)).fit()
        assert len(grid) == 8 and grid.num_errors == 0
        assert grid.get_best_result().metrics["y"] == min(r.metrics["y"] for r in grid)


def test_scheduler_arguments_are_checked():
    with pytest.raises(ValueError, match="reduction_factor"):
        ASHAScheduler(reduction_factor=1)
    with pytest.raises(ValueError, match="mode"):
        ASHAScheduler(mode="best")
    with pytest.raises(ValueError):
        PopulationBasedTraining(hyperparam_mutations={})
    with pytest.raises(TypeError):
        PopulationBasedTraining(hyperparam_mutations={"lr": lambda: 1})
    with pytest.raises(ValueError):
        ConcurrencyLimiter(TPESearch(), max_concurrent=0)

def test_tpe_refuses_a_grid(storage):
    with pytest.raises(tune.TuneError, match="(?i)grid"):
        tune.Tuner(curve, param_space={"q": tune.grid_search([1, 2])},
                   tune_config=tune.TuneConfig(metric="score", mode="max", search_alg=TPESearch()),
                   run_config=tune.RunConfig(storage_path=storage, name="tpegrid", verbose=0)).fit()
