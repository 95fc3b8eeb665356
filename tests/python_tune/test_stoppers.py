"""RunConfig(stop=...) with Ray's stoppers (prism.tune.stopper): each built-in, a Stopper
subclass, a plain function, a list, stop_all ending the experiment, a stopper that raises,
its state after Tuner.restore, and bad input. Stoppers run on the driver (this process), so
the tests read what they saw directly.

Experiments that stop_all run one trial at a time (max_concurrent_trials=1): a trial launched
but not yet started when the experiment ends is noticed only after a grace period."""
import datetime
import json
import os
import time

import pytest

from prism import tune
from prism.tune.stopper import (CombinedStopper, ExperimentPlateauStopper, FunctionStopper,
                                MaximumIterationStopper, NoopStopper, Stopper, TimeoutStopper,
                                TrialPlateauStopper)


def losses(config):
    """Reports config["losses"] in order, then stays at the last one for ever (1000 steps)."""
    values = config["losses"]
    for i in range(1000):
        tune.report({"loss": values[min(i, len(values) - 1)]})


def forever(config):
    for i in range(100000):
        time.sleep(0.005)
        tune.report({"i": i})


def run(storage, name, stop, trainable=losses, losses=(1.0,), samples=1, **tune_config):
    return tune.Tuner(trainable, param_space={"losses": list(losses)},
                      tune_config=tune.TuneConfig(num_samples=samples, **tune_config),
                      run_config=tune.RunConfig(storage_path=storage, name=name, stop=stop, verbose=0)).fit()


def iterations(grid):
    """Each trial's number of results (its last training_iteration; 0 if it never ran)."""
    return [r.metrics.get("training_iteration", 0) for r in grid]


def test_maximum_iteration_and_list_and_function(storage):
    grid = run(storage, "max_iter", MaximumIterationStopper(max_iter=3), samples=2)
    assert iterations(grid) == [3, 3]  # and no 4th result: the trial waited for the answer
    assert all(r.status == "TERMINATED" and r.metrics["training_iteration"] == 3 for r in grid)
    seen = []

    def stop(trial_id, result):
        seen.append((trial_id, result))
        return result["training_iteration"] >= 2

    grid = run(storage, "function", stop)
    assert iterations(grid) == [2]
    trial_id, result = seen[-1]
    assert trial_id == grid[0].trial_id == result["trial_id"]
    assert result["loss"] == 1.0 and result["training_iteration"] == 2
    assert isinstance(result["training_iteration"], int)
    grid = run(storage, "list", [NoopStopper(), MaximumIterationStopper(4), FunctionStopper(stop)])
    assert iterations(grid) == [2]  # any of them


def test_trial_plateau(storage):
    # Flat from the 5th result: the window of 3 is flat at the 7th.
    grid = run(storage, "plateau", TrialPlateauStopper("loss", num_results=3, grace_period=3),
               losses=(5, 4, 3, 2, 1))
    assert iterations(grid) == [7]
    # Flat too, but never down to the threshold: only MaximumIterationStopper stops it.
    grid = run(storage, "threshold", [TrialPlateauStopper("loss", num_results=2, metric_threshold=0.5, mode="min"),
                                      MaximumIterationStopper(12)], losses=(5, 1))
    assert iterations(grid) == [12]


def test_experiment_plateau_ends_the_experiment(storage):
    # The top 3 values agree at the 3rd result, for 2 results in a row at the 4th: the trial
    # stops there and the two others never start.
    grid = run(storage, "exp_plateau", ExperimentPlateauStopper("loss", top=3, patience=2), samples=3,
               max_concurrent_trials=1)
    assert iterations(grid) == [4, 0, 0]
    assert [r.status for r in grid] == ["TERMINATED"] * 3


def test_timeout(storage):
    start = time.monotonic()
    grid = run(storage, "timeout", TimeoutStopper(datetime.timedelta(seconds=0.3)), trainable=forever)
    assert 0.3 <= time.monotonic() - start < 5
    assert grid[0].status == "TERMINATED" and 0 < iterations(grid)[0] < 1000


class StopsTwoTrials(Stopper):
    """Ends each trial at its 3rd result and the experiment once two trials ended."""

    def __init__(self):
        self.results = {}

    def __call__(self, trial_id, result):
        self.results[trial_id] = result["training_iteration"]
        return result["training_iteration"] >= 3

    def stop_all(self):
        return sum(1 for n in self.results.values() if n >= 3) >= 2


def test_subclass_and_stop_all(storage):
    stopper = StopsTwoTrials()
    grid = run(storage, "subclass", stopper, samples=5, max_concurrent_trials=1)
    assert iterations(grid) == [3, 3, 0, 0, 0]
    assert [r.status for r in grid] == ["TERMINATED"] * 5
    assert stopper.results == {grid[0].trial_id: 3, grid[1].trial_id: 3}
    # tune.run passes stop through.
    analysis = tune.run(losses, config={"losses": [1.0]}, stop=MaximumIterationStopper(2), storage_path=storage,
                        name="legacy", verbose=0)
    assert analysis.trials[0].last_result["training_iteration"] == 2


RESTORED = []


class Remembers(Stopper):
    def __init__(self):
        self.seen = 0

    def __call__(self, trial_id, result):
        self.seen += 1
        return self.seen >= 3

    def stop_all(self):
        return False

    def __setstate__(self, state):
        self.__dict__.update(state)
        RESTORED.append(state["seen"])


def test_state_is_journaled_and_restored(storage):
    grid = run(storage, "restore", CombinedStopper(MaximumIterationStopper(5), Remembers()))
    assert iterations(grid) == [3]
    path = grid.experiment_path
    with open(os.path.join(path, "experiment_state.jsonl")) as f:
        saved = [json.loads(line)["state"] for line in f if '"e":"stopper"' in line.replace(" ", "")]
    parts = json.loads(saved[-1])["parts"]
    assert json.loads(parts[0])["iterations"] == {grid[0].trial_id: 3}
    del RESTORED[:]
    tuner = tune.Tuner.restore(path, losses)
    assert RESTORED[-1] == 3  # the Python stopper came back from the journal with what it saw
    assert iterations(tuner.fit()) == [3]


class Raises(Stopper):
    def __call__(self, trial_id, result):
        if result["training_iteration"] == 2:
            raise ValueError("no second result, please")
        return False

    def stop_all(self):
        return False


class NoStopAll(Stopper):
    def __call__(self, trial_id, result):
        return False


def test_a_stopper_that_raises_ends_the_experiment(storage):
    with pytest.raises(tune.TuneError, match="no second result, please") as e:
        run(storage, "raises", Raises())
    assert "Traceback" in str(e.value) and "Raises" in str(e.value)
    with pytest.raises(tune.TuneError, match="NotImplementedError"):  # Ray's base class: implement both
        run(storage, "no_stop_all", NoStopAll())
    with pytest.raises(tune.TuneError, match="ZeroDivisionError"):
        run(storage, "function_raises", lambda trial_id, result: 1 / 0)


def test_built_ins_called_by_hand():
    s = MaximumIterationStopper(2)
    assert [s("a", {}), s("a", {"x": "text"}), s("b", {})] == [False, True, False]
    combined = CombinedStopper(StopsTwoTrials(), TrialPlateauStopper("loss", num_results=1, grace_period=0))
    assert combined("t", {"training_iteration": 1, "loss": 1.0}) is True  # the plateau (of one value)
    assert combined.stop_all() is False
    assert TimeoutStopper(0).stop_all() is True
    assert FunctionStopper.is_valid_function(lambda t, r: True)


def test_bad_input():
    with pytest.raises(ValueError, match="mode"):
        TrialPlateauStopper("loss", mode="maximize")
    with pytest.raises(ValueError, match="needs a mode"):
        TrialPlateauStopper("loss", metric_threshold=0.5)
    with pytest.raises(ValueError, match="num_results"):
        TrialPlateauStopper("loss", num_results=0)
    with pytest.raises(ValueError, match="top is 1"):
        ExperimentPlateauStopper("loss", top=1)
    with pytest.raises(ValueError, match="mode"):
        ExperimentPlateauStopper("loss", mode="best")
    with pytest.raises(ValueError, match="std"):
        ExperimentPlateauStopper("loss", std=0.0)
    with pytest.raises(ValueError, match="timedelta"):
        TimeoutStopper("1h")
    with pytest.raises(TypeError, match="Stoppers"):
        CombinedStopper(MaximumIterationStopper(1), 3)
    with pytest.raises(ValueError, match="RunConfig.stop must be"):
        tune.Tuner(losses, run_config=tune.RunConfig(stop=42))
    with pytest.raises(ValueError, match="each element"):
        tune.Tuner(losses, run_config=tune.RunConfig(stop=[MaximumIterationStopper(1), "x"]))
    with pytest.raises(ValueError, match="Stopper subclass"):
        tune.Tuner(losses, run_config=tune.RunConfig(stop=type("S", (), {"__call__": lambda s, t, r: 0,
                                                                          "stop_all": lambda s: 0})()))
    with pytest.raises(ValueError, match="instance"):
        tune.Tuner(losses, run_config=tune.RunConfig(stop=StopsTwoTrials))
