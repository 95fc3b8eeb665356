"""Bad input gets a clear Python error; a trainable that raises is a trial ERROR with its
traceback in result.error; tune.run and its analysis."""
import pytest

from prism import tune
from prism.tune.schedulers import ASHAScheduler


def test_unknown_config_keys():
    with pytest.raises(TypeError, match="metirc, num_sample"):
        tune.TuneConfig(metirc="x", num_sample=3)
    with pytest.raises(TypeError, match="storage"):
        tune.RunConfig(storage="/tmp")
    with pytest.raises(TypeError, match="max_failure"):
        tune.FailureConfig(max_failure=2)


def test_bad_domains_and_space():
    with pytest.raises(ValueError):
        tune.uniform(2, 1)
    with pytest.raises(ValueError):
        tune.loguniform(0, 1)
    with pytest.raises(ValueError):
        tune.choice([])
    with pytest.raises(ValueError):
        tune.grid_search([])
    with pytest.raises(TypeError):
        tune.sample_from(3)
    with pytest.raises(TypeError, match="param_space"):
        tune.Tuner(lambda c: None, param_space=[1, 2])
    with pytest.raises(ValueError, match="mode"):
        tune.Tuner(lambda c: None, tune_config=tune.TuneConfig(metric="x"))
    with pytest.raises(ValueError, match="num_samples"):
        tune.Tuner(lambda c: None, tune_config=tune.TuneConfig(num_samples=0))
    with pytest.raises(TypeError, match="class trainables"):
        tune.Tuner(type("T", (), {}))


def boom(config):
    tune.report({"v": 1})
    if config["x"] == 2:
        raise KeyError("no such layer: 'fc9'")
    tune.report({"v": 2})


def test_trainable_that_raises(storage):
    grid = tune.Tuner(boom, param_space={"x": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=storage, name="boom", verbose=0)).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 1 and len(grid.errors) == 1
    bad = next(r for r in grid if r.config["x"] == 2)
    assert bad.status == "ERROR" and isinstance(bad.error, tune.TrialError)
    text = str(bad.error)
    assert "KeyError" in text and "no such layer" in text and "Traceback" in text and "boom" in text
    assert bad.metrics["v"] == 1
    good = next(r for r in grid if r.config["x"] == 1)
    assert good.error is None and good.metrics["v"] == 2
    with pytest.raises(tune.TuneError):
        tune.Tuner(boom, param_space={"x": 2},
                   run_config=tune.RunConfig(storage_path=storage, name="failfast", verbose=0,
                                             failure_config=tune.FailureConfig(fail_fast=True))).fit()


def test_retries_from_checkpoint(storage):
    import os
    import tempfile

    def flaky(config):
        c = tune.get_checkpoint()
        start = int(open(os.path.join(c.path, "i")).read()) if c else 0
        for i in range(start, 4):
            d = tempfile.mkdtemp()
            open(os.path.join(d, "i"), "w").write(str(i + 1))
            tune.report({"i": i + 1}, checkpoint=tune.Checkpoint.from_directory(d))
            if i == 1 and not c:
                raise RuntimeError("transient")

    grid = tune.Tuner(flaky, run_config=tune.RunConfig(storage_path=storage, name="retry", verbose=0,
                                                       failure_config=tune.FailureConfig(max_failures=1))).fit()
    assert grid.num_errors == 0 and grid[0].metrics["i"] == 4


def test_report_outside_a_trial():
    with pytest.raises(RuntimeError, match="outside a trial"):
        tune.report({"x": 1})
    with pytest.raises(RuntimeError, match="outside a trial"):
        tune.get_context()
    assert tune.get_checkpoint() is None


def test_existing_experiment_is_refused(storage):
    run = tune.RunConfig(storage_path=storage, name="twice", verbose=0)
    tune.Tuner(lambda c: tune.report({"a": 1}), run_config=run).fit()
    with pytest.raises(tune.TuneError, match="already holds an experiment"):
        tune.Tuner(lambda c: tune.report({"a": 1}), run_config=run).fit()


def test_tune_run_analysis(storage):
    def objective(config):
        for i in range(1, 5):
            tune.report(score=config["a"] * i)

    analysis = tune.run(objective, config={"a": tune.grid_search([1, 3, 2])}, metric="score", mode="max",
                        scheduler=ASHAScheduler(max_t=4, grace_period=1, reduction_factor=2),
                        storage_path=storage, name="legacy", verbose=0)
    assert analysis.best_config == {"a": 3}
    assert analysis.get_best_config("score", "min") in ({"a": 1}, {"a": 2})
    assert len(analysis.trials) == 3 and all(t.status == "TERMINATED" for t in analysis.trials)
    assert analysis.best_result["score"] == 12
    df = analysis.dataframe()
    assert len(df) == 3 and "config/a" in df
    with pytest.raises(TypeError, match="bogus"):
        tune.run(objective, bogus=1)
    with pytest.raises(tune.TuneError, match="did not complete"):
        tune.run(boom, config={"x": 2}, storage_path=storage, name="legacy_err", verbose=0)
