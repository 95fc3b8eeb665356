"""Tuner.fit, ResultGrid and Result, search spaces, report forms, with_parameters and
with_resources: Ray's semantics over the C++ engine."""
import math

import numpy as np
import pandas as pd
import pytest

import prism
from prism import tune


def quadratic(config):
    for step in range(1, 4):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / step, "step": step})


def test_fit_and_best_result(storage):
    grid = tune.Tuner(quadratic, param_space={"x": tune.grid_search([0.0, 0.3, 0.9])},
                      tune_config=tune.TuneConfig(metric="loss", mode="min"),
                      run_config=tune.RunConfig(storage_path=storage, name="best", verbose=0)).fit()
    assert len(grid) == 3 and grid.num_terminated == 3 and grid.num_errors == 0 and grid.errors == []
    best = grid.get_best_result()
    assert best.config == {"x": 0.3}
    assert best.metrics["training_iteration"] == 3 and isinstance(best.metrics["training_iteration"], int)
    assert best.metrics["loss"] == pytest.approx(1.0 / 3)
    assert best.metrics["config"] == {"x": 0.3} and best.metrics["trial_id"] == best.trial_id
    worst = grid.get_best_result("loss", "max")
    assert worst.config == {"x": 0.9}
    assert best.checkpoint is None and best.error is None
    assert best.path.startswith(storage)
    df = best.metrics_dataframe
    assert list(df["training_iteration"]) == [1, 2, 3] and list(df["step"]) == [1, 2, 3]
    frame = grid.get_dataframe()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert sorted(frame["config/x"]) == [0.0, 0.3, 0.9]
    assert [r.trial_id for r in grid] == [grid[i].trial_id for i in range(3)]
    best_rows = grid.get_dataframe(filter_metric="loss", filter_mode="min")
    assert (best_rows["training_iteration"] == 3).all()


def test_train_report_in_a_trial_is_the_trials_report(storage, tmp_path):
    # Ray 2.x's function trainables report with ray.train.report and read
    # ray.train.get_checkpoint: the same calls reach the trial's session here.
    from prism import train

    def trainable(config):
        assert train.get_checkpoint() is None
        for step in range(1, 3):
            d = tmp_path / f"{config['x']}-{step}"
            d.mkdir()
            (d / "step").write_text(str(step))
            train.report({"score": config["x"] * step}, checkpoint=train.Checkpoint.from_directory(str(d)))

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(metric="score", mode="max"),
                      run_config=tune.RunConfig(storage_path=storage, name="train_report", verbose=0)).fit()
    assert grid.num_errors == 0, grid.errors
    best = grid.get_best_result()
    assert best.config == {"x": 2} and best.metrics["score"] == 4 and best.metrics["training_iteration"] == 2
    with best.checkpoint.as_directory() as d:
        assert open(f"{d}/step").read() == "2"


def test_value_types_round_trip(storage):
    seen = []

    def trainable(config):
        tune.report({"ok": 1})
        return None

    space = {"f": tune.uniform(1, 2), "lf": tune.loguniform(1e-4, 1e-1), "qf": tune.quniform(0, 10, 0.5),
             "n": tune.randn(0, 1), "i": tune.randint(1, 5), "li": tune.lograndint(1, 100),
             "qi": tune.qrandint(0, 20, 5), "s": tune.choice(["adam", "sgd"]),
             "mixed": tune.choice([1, "1", 1.0, True, None, [1, 2], (3, "x"), {"a": 1}]),
             "const_f": 2.0, "const_s": "3", "const_l": [1, [2, 3]], "nested": {"depth": {"k": tune.choice([4])}},
             "derived": tune.sample_from(lambda spec: spec.config.i * 10), "g": tune.grid_search(["a", 7])}
    grid = tune.Tuner(trainable, param_space=space, tune_config=tune.TuneConfig(num_samples=4),
                      run_config=tune.RunConfig(storage_path=storage, name="types", verbose=0)).fit()
    assert len(grid) == 8
    for r in grid:
        c = r.config
        assert type(c["f"]) is float and 1 <= c["f"] < 2
        assert type(c["lf"]) is float and 1e-4 <= c["lf"] < 1e-1
        assert type(c["qf"]) is float and c["qf"] * 2 == int(c["qf"] * 2)
        assert type(c["n"]) is float
        assert type(c["i"]) is int and 1 <= c["i"] < 5
        assert type(c["li"]) is int and type(c["qi"]) is int and c["qi"] % 5 == 0
        assert c["s"] in ("adam", "sgd")
        assert any(type(c["mixed"]) is type(v) and c["mixed"] == v
                   for v in [1, "1", 1.0, True, None, [1, 2], (3, "x"), {"a": 1}])
        assert type(c["const_f"]) is float and c["const_f"] == 2.0
        assert c["const_s"] == "3" and c["const_l"] == [1, [2, 3]]
        assert c["nested"] == {"depth": {"k": 4}}
        assert c["derived"] == c["i"] * 10
    assert sorted(str(r.config["g"]) for r in grid) == ["7"] * 4 + ["a"] * 4


def test_config_reaches_trial_as_python_values(storage):
    def trainable(config):
        kinds = {k: type(v).__name__ for k, v in config.items()}
        tune.report({"ok": float(kinds == {"a": "int", "b": "float", "c": "bool", "d": "str", "e": "list"})})

    grid = tune.Tuner(trainable, param_space={"a": 3, "b": 0.5, "c": True, "d": "x", "e": [1]},
                      run_config=tune.RunConfig(storage_path=storage, name="inside", verbose=0)).fit()
    assert grid[0].metrics["ok"] == 1.0


def test_report_forms(storage):
    def trainable(config):
        tune.report(mean_loss=3)  # legacy keyword form
        tune.report({"mean_loss": 2, "nested": {"a": 1}, "arr": np.float32(0.5)})
        return {"mean_loss": 1}  # a returned dict is the last result

    grid = tune.Tuner(trainable, run_config=tune.RunConfig(storage_path=storage, name="forms", verbose=0)).fit()
    r = grid[0]
    assert r.metrics["training_iteration"] == 3 and r.metrics["mean_loss"] == 1
    hist = r.metrics_dataframe
    assert list(hist["mean_loss"]) == [3, 2, 1]
    assert hist["nested/a"][1] == 1 and hist["arr"][1] == 0.5


def test_with_parameters_and_resources(storage):
    data = np.arange(1000, dtype=np.float64)

    def trainable(config, data=None):
        tune.report({"sum": float(data.sum()) * config["k"]})

    t = tune.with_resources(tune.with_parameters(trainable, data=data), {"cpu": 1})
    grid = tune.Tuner(t, param_space={"k": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=storage, name="params", verbose=0)).fit()
    assert sorted(r.metrics["sum"] for r in grid) == [data.sum(), 2 * data.sum()]


def test_stop_and_num_samples(storage):
    def trainable(config):
        for i in range(100):
            tune.report({"i": i})

    grid = tune.Tuner(trainable, param_space={"x": tune.uniform(0, 1)},
                      tune_config=tune.TuneConfig(num_samples=3),
                      run_config=tune.RunConfig(storage_path=storage, name="stop", stop={"training_iteration": 4},
                                                verbose=0)).fit()
    assert len(grid) == 3
    assert all(r.metrics["training_iteration"] == 4 for r in grid)
    assert len({r.config["x"] for r in grid}) == 3


def test_trials_spread_over_ranks(storage, world_size):
    def trainable(config):
        tune.report({"rank": prism.get_runtime_context().rank})

    grid = tune.Tuner(trainable, param_space={"i": tune.grid_search(list(range(2 * world_size)))},
                      run_config=tune.RunConfig(storage_path=storage, name="ranks", verbose=0)).fit()
    assert grid.num_terminated == 2 * world_size
    assert all(not math.isnan(r.metrics["rank"]) for r in grid)
