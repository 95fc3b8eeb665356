"""OptunaSearch (Ray's ray.tune.search.optuna) and Python searchers in the C++ Tuner: the
engine asks them on the driver through prism._tune.python_searcher."""
import os
import statistics

import pytest

optuna = pytest.importorskip("optuna")

from prism import tune  # noqa: E402
from prism.tune.search import ConcurrencyLimiter, Searcher  # noqa: E402
from prism.tune.search.optuna import OptunaSearch, convert_search_space  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"x": tune.uniform(-5, 5), "y": tune.uniform(-5, 5)}


def quadratic(config):
    tune.report({"loss": (config["x"] - 1.3) ** 2 + (config["y"] + 0.7) ** 2})


def run(storage, name, alg, space=SPACE, trainable=quadratic, num_samples=30, metric="loss", mode="min",
        max_concurrent_trials=None, **run):
    return tune.Tuner(trainable, param_space=space,
                      tune_config=tune.TuneConfig(metric=metric, mode=mode, num_samples=num_samples, search_alg=alg,
                                                  max_concurrent_trials=max_concurrent_trials),
                      run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0, **run)).fit()


def late_median(grid):
    losses = [r.metrics["loss"] for r in sorted(grid, key=lambda r: r.trial_id)]
    return statistics.median(losses[len(losses) // 2:])


def test_optuna_beats_random_on_a_quadratic(storage):
    # One trial at a time: TPE (seed 0) then sees the same history at every ask, on every run
    # and rank count. With trials in flight together the order they finish in changed its
    # proposals, and about 1 run in 25 ended with a best loss of 1.05.
    optuna_grid = run(storage, "tpe", OptunaSearch(), max_concurrent_trials=1)
    random_grid = run(storage, "random", None)
    assert len(optuna_grid) == 30 and optuna_grid.num_errors == 0
    assert optuna_grid.get_best_result().metrics["loss"] < 1.0
    # TPE's later trials crowd the minimum (median ~2-5 here), random ones do not (~12-19).
    assert late_median(optuna_grid) < 0.5 * late_median(random_grid)
    # A ConcurrencyLimiter wraps it like any searcher; the param_space's constants reach trials.
    grid = run(storage, "limited", ConcurrencyLimiter(OptunaSearch(seed=1), max_concurrent=2), num_samples=6,
               space={**SPACE, "const": [1, "a"]})
    assert len(grid) == 6 and grid.num_errors == 0
    assert all(r.config["const"] == [1, "a"] and -5 <= r.config["x"] < 5 for r in grid)


def test_optuna_types_and_its_own_space(storage):
    seen = []

    def f(config):
        seen.append(config)
        tune.report({"loss": config["n"] + config["q"] + (0 if config["c"] == "b" else 1) + config["lr"]})

    space = {"n": tune.randint(0, 3), "q": tune.qrandint(0, 10, 5), "c": tune.choice(["a", "b"]),
             "lr": tune.qloguniform(1e-3, 1.0, 1e-3)}
    grid = run(storage, "types", OptunaSearch(), space=space, trainable=f, num_samples=12)
    assert grid.num_errors == 0
    for r in grid:
        c = r.config
        assert type(c["n"]) is int and 0 <= c["n"] <= 2
        assert c["q"] in (0, 5, 10) and c["c"] in ("a", "b")
        assert abs(c["lr"] / 1e-3 - round(c["lr"] / 1e-3)) < 1e-6 and 1e-3 <= c["lr"] <= 1.0
    dists, _ = convert_search_space(space)
    assert dists["n"] == optuna.distributions.IntDistribution(0, 2)  # Ray's exclusive upper bound
    assert dists["q"] == optuna.distributions.IntDistribution(0, 10, step=5)
    # Its own space of Optuna distributions, metric and mode on the searcher, points first.
    own = OptunaSearch(space={"x": optuna.distributions.FloatDistribution(-5, 5),
                              "y": optuna.distributions.FloatDistribution(-5, 5)},
                       metric="loss", mode="min", points_to_evaluate=[{"x": 1.3, "y": -0.7}])
    grid = run(storage, "own", own, space={}, num_samples=4, metric=None, mode=None)
    assert grid.get_best_result("loss", "min").metrics["loss"] == 0.0
    assert own.study.direction == optuna.study.StudyDirection.MINIMIZE and len(own.study.trials) == 4
    # A define-by-run space: the function asks the Optuna trial and returns constants.
    def define(trial):
        trial.suggest_float("x", -5, 5)
        if trial.suggest_categorical("use_y", [True, False]):
            trial.suggest_float("y", -1, 1)
        return {"y": 0.0} if not trial.params["use_y"] else None

    by_run = OptunaSearch(space=define, metric="loss", mode="min")
    grid = run(storage, "by_run", by_run, space={}, num_samples=5, metric=None, mode=None)
    assert grid.num_errors == 0 and all(-5 <= r.config["x"] <= 5 and -1 <= r.config["y"] <= 1 for r in grid)
    # evaluated_rewards are told, not run: TPE starts from them.
    told = OptunaSearch(points_to_evaluate=[{"x": 0.0, "y": 0.0}], evaluated_rewards=[2.18])
    run(storage, "told", told, num_samples=3)
    assert len(told.study.trials) == 4 and told.study.trials[0].value == 2.18


def test_optuna_metric_and_mode(storage):
    with pytest.raises(tune.TuneError, match="differs from TuneConfig"):
        run(storage, "conflict", OptunaSearch(metric="other", mode="min"), num_samples=2)
    with pytest.raises(tune.TuneError, match="needs a metric and a mode"):
        run(storage, "none", OptunaSearch(), num_samples=2, metric=None, mode=None)
    alg = OptunaSearch(metric="loss", mode="max")  # the searcher's own, TuneConfig has none
    grid = run(storage, "own_mode", alg, num_samples=3, metric=None, mode=None)
    assert grid.num_errors == 0 and alg.study.direction == optuna.study.StudyDirection.MAXIMIZE
    with pytest.raises(ValueError, match="mode"):
        OptunaSearch(mode="best")


def sometimes_fails(config):
    if config["x"] > 0:
        raise RuntimeError("diverged")
    if config["x"] > -1:
        return  # ends without the metric: PRUNED
    tune.report({"loss": config["x"] ** 2})


def test_optuna_failed_trials(storage):
    alg = OptunaSearch(metric="loss", mode="min")
    grid = run(storage, "fails", alg, trainable=sometimes_fails, num_samples=10, metric=None, mode=None)
    states = [t.state for t in alg.study.trials]
    assert grid.num_errors == states.count(optuna.trial.TrialState.FAIL) > 0
    assert states.count(optuna.trial.TrialState.COMPLETE) == sum(1 for r in grid if "loss" in r.metrics)
    assert optuna.trial.TrialState.RUNNING not in states


def test_optuna_refuses_spaces_it_cannot_search(storage):
    for bad, what in [({"x": tune.grid_search([1, 2])}, "(?i)grid search"),
                      ({"x": tune.sample_from(lambda spec: 1)}, "sample_from"),
                      ({"x": tune.randn()}, "randn")]:
        with pytest.raises(ValueError, match=what):
            tune.Tuner(quadratic, param_space=bad, tune_config=tune.TuneConfig(search_alg=OptunaSearch()))
    with pytest.raises(ValueError, match="own space"):
        tune.Tuner(quadratic, param_space=SPACE,
                   tune_config=tune.TuneConfig(search_alg=OptunaSearch(space=dict(SPACE))))
    with pytest.raises(ValueError, match="evaluated_rewards"):
        OptunaSearch(points_to_evaluate=[{"x": 1}], evaluated_rewards=[1, 2])
    with pytest.raises(TypeError, match="storage"):
        OptunaSearch(storage=object())


def stops_the_experiment(config):
    if tune.get_context().get_trial_id().endswith("_00004") and not os.path.exists(config["marker"]):
        open(config["marker"], "w").close()
        raise RuntimeError("preempted")
    tune.report({"loss": (config["x"] - 1.3) ** 2 + (config["y"] + 0.7) ** 2})


def test_optuna_restore(storage):
    # fail_fast ends the experiment at trial 4; the restore restarts that trial and runs the
    # rest with the sampler's saved state.
    space = {**SPACE, "marker": os.path.join(storage, "failed-once")}
    os.makedirs(storage, exist_ok=True)
    with pytest.raises(tune.TuneError):  # one trial at a time: no running trial to wait for at the end
        tune.Tuner(stops_the_experiment, param_space=space,
                   tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=12, search_alg=OptunaSearch(),
                                               max_concurrent_trials=1),
                   run_config=tune.RunConfig(storage_path=storage, name="interrupted", verbose=0,
                                             failure_config=tune.FailureConfig(fail_fast=True))).fit()
    path = os.path.join(storage, "interrupted")
    tuner = tune.Tuner.restore(path, stops_the_experiment, restart_errored=True)
    grid = tuner.fit()
    assert len(grid) == 12 and grid.num_errors == 0
    xs = [r.config["x"] for r in grid]
    assert len(set(xs)) == 12  # the restored sampler does not draw the first configs again
    study = tuner._state["search_alg"].study
    assert len(study.trials) == 12  # the trials before the restore were told again


class Alternate(Searcher):
    """A searcher of one's own (Ray's Searcher API): 0, 1, 0, 1, ... then finished."""

    def __init__(self, n):
        super().__init__(metric="v", mode="max")
        self.n, self.suggested, self.done = n, [], []

    def suggest(self, trial_id):
        if len(self.suggested) >= self.n:
            return Searcher.FINISHED
        self.suggested.append(trial_id)
        return {"k": len(self.suggested) % 2}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.done.append((trial_id, result["v"] if result else None))
        if result and result["v"] < 0:
            raise KeyError("a searcher bug")


def test_custom_searcher(storage):
    def f(config):
        tune.report({"v": config["k"]})

    alg = Alternate(4)
    grid = run(storage, "custom", alg, space={"k": tune.randint(0, 2)}, trainable=f, num_samples=10,
               metric=None, mode=None)
    assert sorted(r.config["k"] for r in grid) == [0, 0, 1, 1]
    assert len(alg.done) == 4 and alg.metric == "v"
    with pytest.raises(TypeError, match="suggest"):
        tune.Tuner(f, tune_config=tune.TuneConfig(search_alg=Searcher()))


def test_searcher_error_ends_the_experiment(storage):
    def f(config):
        tune.report({"v": -1})

    with pytest.raises(tune.TuneError, match="(?s)Alternate.*KeyError.*a searcher bug"):
        tune.Tuner(f, param_space={"k": tune.randint(0, 2)},
                   tune_config=tune.TuneConfig(search_alg=Alternate(4), num_samples=4, max_concurrent_trials=1),
                   run_config=tune.RunConfig(storage_path=storage, name="bug", verbose=0)).fit()


class BrokenSuggest(Alternate):
    """Two trials, then (once both run: none is cancelled before it starts) a broken suggest."""

    reported = ()

    def suggest(self, trial_id):
        if len(self.suggested) < 2:
            return super().suggest(trial_id)
        if len(set(self.reported)) < 2:
            return None
        raise ZeroDivisionError("the searcher's model broke")

    def on_trial_result(self, trial_id, result):
        self.reported = (*self.reported, trial_id)


def test_searcher_error_stops_running_trials(storage):
    # Two trials report forever under ASHA (each report waits for the driver's answer): the
    # third suggest raises, and fit ends them and raises instead of waiting for them.
    def forever(config):
        while True:
            tune.report({"v": 1})

    from prism.tune.schedulers import ASHAScheduler
    with pytest.raises(tune.TuneError, match="(?s)raised in Suggest.*ZeroDivisionError.*model broke"):
        tune.Tuner(forever, param_space={"k": tune.randint(0, 2)},
                   tune_config=tune.TuneConfig(search_alg=BrokenSuggest(10), num_samples=10, max_concurrent_trials=3,
                                               scheduler=ASHAScheduler(metric="v", mode="max", max_t=10 ** 9)),
                   run_config=tune.RunConfig(storage_path=storage, name="broken", verbose=0)).fit()
