"""Class trainables (Ray's tune.Trainable): the step loop the engine runs as a function
trainable, their checkpoints (CheckpointConfig.checkpoint_frequency/checkpoint_at_end) and
resumes, schedulers stopping them, and what a bad subclass gets."""
import glob
import json
import os

import pytest

from prism import tune
from prism.tune.schedulers import ASHAScheduler, PopulationBasedTraining


class Counter(tune.Trainable):
    """score = a + steps; a checkpoint is a dict; cleanup leaves a file in config["dir"]."""

    def setup(self, config, offset=0):
        self.score = config["a"] + offset
        self.restored_at = -1

    def step(self):
        if self.config.get("fail_at") == self.iteration and not os.path.exists(self._marker("failed")):
            open(self._marker("failed"), "w").close()
            raise RuntimeError("a node went away")
        self.score += 1
        return {"score": self.score, "it": self.iteration, "restored_at": self.restored_at,
                "done": self.iteration + 1 >= self.config.get("steps", 10 ** 9)}

    def save_checkpoint(self, checkpoint_dir):
        return {"score": self.score}

    def load_checkpoint(self, checkpoint):
        self.score = checkpoint["score"]
        self.restored_at = self.iteration  # restored first, as in Ray

    def cleanup(self):
        open(self._marker(f"cleanup-{self.trial_id}-{self.iteration}"), "w").close()

    def _marker(self, name):
        return os.path.join(self.config["dir"], name)


def tuner(storage, name, trainable, space, scheduler=None, **run):
    os.makedirs(storage, exist_ok=True)
    return tune.Tuner(trainable, param_space={"dir": storage, **space},
                      tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=scheduler),
                      run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0, **run))


def cleanups(storage):
    return len(glob.glob(os.path.join(storage, "cleanup-*")))


def test_step_loop_stop_and_done(storage):
    grid = tuner(storage, "stop", Counter, {"a": tune.grid_search([0, 10])}, stop={"training_iteration": 4}).fit()
    assert grid.num_errors == 0
    for r in grid:
        assert r.metrics["training_iteration"] == 4 and r.metrics["score"] == r.config["a"] + 4
        assert r.metrics["it"] == 3  # self.iteration counts the steps before this one, as Ray
        assert r.checkpoint is None  # no checkpoint_frequency, no checkpoint_at_end
    assert cleanups(storage) == 2
    # done=True ends a trial; checkpoint_at_end saves its last state.
    grid = tuner(storage, "done", Counter, {"a": 5, "steps": 3},
                 checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)).fit()
    (r,) = grid
    assert r.metrics["training_iteration"] == 3 and r.metrics["done"] and r.status == "TERMINATED"
    assert r.checkpoint is not None and os.path.exists(os.path.join(r.checkpoint.path, ".prism_trainable.json"))
    fresh = Counter({"a": 0, "dir": storage})  # a checkpoint restores by hand too
    fresh.restore(r.checkpoint)
    assert fresh.iteration == 3 and fresh.score == 8 and fresh.train()["score"] == 9
    fresh.stop()


def test_checkpoint_frequency_and_retry(storage):
    # Step 4 (iteration 3) fails once; the retry resumes from the checkpoint of step 2.
    grid = tuner(storage, "retry", Counter, {"a": 0, "fail_at": 3}, stop={"training_iteration": 6},
                 failure_config=tune.FailureConfig(max_failures=1),
                 checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2)).fit()
    (r,) = grid
    assert r.error is None and r.metrics["training_iteration"] == 6 and r.metrics["score"] == 6
    assert r.metrics["restored_at"] == 2
    assert [h["training_iteration"] for h in r._history] == [1, 2, 3, 4, 5, 6]
    with open(os.path.join(r.checkpoint.path, ".prism_trainable.json")) as f:
        assert json.load(f)["iteration"] == 6
    assert cleanups(storage) == 2  # the failed run cleaned up too


def test_asha_stops_class_trials(storage):
    grid = tuner(storage, "asha", Counter, {"a": tune.grid_search([8, 7, 6, 5, 4, 3, 2, 1])},
                 scheduler=ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)).fit()
    iters = {r.config["a"]: r.metrics["training_iteration"] for r in grid}
    assert grid.num_errors == 0 and iters[8] == 8 and sum(1 for v in iters.values() if v < 8) >= 3
    assert cleanups(storage) == 8  # a stop from the scheduler runs cleanup


class Climber(tune.Trainable):
    def setup(self, config):
        self.score = 0.0

    def step(self):
        self.score += self.config["lr"]
        return {"score": self.score, "done": self.iteration + 1 >= 12}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "score"), "w") as f:
            f.write(repr(self.score))

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "score")) as f:
            self.score = float(f.read())


def test_pbt_exploits_class_trials(storage):
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                  hyperparam_mutations={"lr": tune.uniform(0.01, 1.0)}, seed=3)
    grid = tuner(storage, "pbt", Climber, {"lr": tune.grid_search([0.01, 0.02, 0.9, 1.0])}, scheduler=pbt).fit()
    assert grid.num_errors == 0 and pbt.policy_log()
    low = [r for r in grid if r.trial_id.endswith(("00000", "00001"))]
    assert any(r.metrics["score"] > 1.0 for r in low)  # took over a top trial's checkpoint


class Shared(tune.Trainable):
    def setup(self, config, data=None):
        self.n = len(data)

    def step(self):
        return {"score": self.n, "done": True}


def test_with_parameters_with_resources_and_run(storage):
    trainable = tune.with_resources(tune.with_parameters(Shared, data=list(range(5))), {"cpu": 1})
    (r,) = tuner(storage, "params", trainable, {}).fit()
    assert r.metrics["score"] == 5
    analysis = tune.run(Counter, config={"a": 1, "dir": storage}, stop={"training_iteration": 2},
                        checkpoint_freq=1, metric="score", mode="max", storage_path=storage, name="run", verbose=0)
    assert analysis.best_result["score"] == 3 and analysis.best_checkpoint is not None


def test_bad_class_trainables(storage):
    class NoStep(tune.Trainable):
        pass

    class NotATrainable:
        def step(self):
            return {}

    class WantsResources(Counter):
        @classmethod
        def default_resource_request(cls, config):
            return {"cpu": 2}

    with pytest.raises(TypeError, match="step"):
        tune.Tuner(NoStep)
    with pytest.raises(TypeError, match="class trainables must subclass"):
        tune.Tuner(NotATrainable)
    with pytest.raises(TypeError, match="with_resources"):
        tune.Tuner(WantsResources)

    class ReturnsAList(tune.Trainable):
        def step(self):
            return [1]

    (r,) = tune.Tuner(ReturnsAList, run_config=tune.RunConfig(storage_path=storage, name="list", verbose=0)).fit()
    assert r.status == "ERROR" and "must return a dict" in str(r.error)
    with pytest.warns(UserWarning, match="class trainables"):
        tune.Tuner(lambda config: None, run_config=tune.RunConfig(
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2)))
