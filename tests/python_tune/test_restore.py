"""Checkpoints and Tuner.restore: a restore after kill -9 goes on without repeating a trial
or a checkpointed step (the experiment runs in a child process at one rank)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from prism import tune

from conftest import run_child

CHILD = os.path.join(os.path.dirname(__file__), "restore_child.py")


def test_checkpoint_comes_back(storage):
    import tempfile

    def trainable(config):
        start = 0
        c = tune.get_checkpoint()
        assert c is None
        for i in range(3):
            with tempfile.TemporaryDirectory() as d:  # Ray's pattern: the directory is removed after
                with open(os.path.join(d, "w.txt"), "w") as f:
                    f.write(f"{config['x']} {i}")
                tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([5, 6])},
                      tune_config=tune.TuneConfig(metric="i", mode="max"),
                      run_config=tune.RunConfig(storage_path=storage, name="ckpt", verbose=0,
                                                checkpoint_config=tune.CheckpointConfig(num_to_keep=1))).fit()
    for r in grid:
        assert r.checkpoint is not None and r.checkpoint.path.startswith(r.path)
        with r.checkpoint.as_directory() as d:
            assert open(os.path.join(d, "w.txt")).read() == f"{r.config['x']} 2"
        copy = r.checkpoint.to_directory(os.path.join(storage, f"copy-{r.trial_id}"))
        assert open(os.path.join(copy, "w.txt")).read() == f"{r.config['x']} 2"
        assert not any(n.startswith(".prism-py-staging") for n in os.listdir(r.path))
    assert tune.Tuner.can_restore(grid.experiment_path)
    assert not tune.Tuner.can_restore(storage + "/nothing")
    with pytest.raises(ValueError, match="holds no prism.tune experiment"):
        tune.Tuner.restore(storage + "/nothing", trainable)


def test_restore_after_kill9(tmp_path):
    storage = str(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    child = subprocess.Popen([sys.executable, CHILD, "fit", storage, "exp", "0.15"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = os.path.join(storage, "runs.log")
    deadline = time.time() + 40
    while time.time() < deadline:  # kill once some trials checkpointed but not all finished
        if os.path.exists(log) and len(open(log).read().split("\n")) > 9:
            break
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    before = open(log).read().split()
    done = run_child(CHILD, "restore", storage, "exp", "0.01")
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 4
    assert all(v[0] == 6 and v[2] and v[3] == "TERMINATED" for v in results.values())
    assert sorted(v[1] for v in results.values()) == [1, 2, 3, 4]
    runs = [tuple(line.split()) for line in open(log).read().splitlines()]
    # Each step runs once, except a step that was running at the kill (its checkpoint was
    # not committed yet): at most one repeat per trial that was running.
    repeats = len(runs) - len(set(runs))
    assert repeats <= 2, runs
    assert len(set(runs)) == 24
    assert len(before) > 0


def test_restore_of_an_experiment_with_a_stop_dict(storage):
    # The journal's RunConfig.stop came back through a dangling reference (a segfault in
    # Tuner.restore of any experiment run with stop={...}).
    def trainable(config):
        for i in range(5):
            tune.report({"i": i})

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=storage, name="stopped", verbose=0,
                                                stop={"i": 2})).fit()
    assert sorted(r.metrics["i"] for r in grid) == [2, 2]
    again = tune.Tuner.restore(grid.experiment_path, trainable).fit()
    assert sorted(r.metrics["i"] for r in again) == [2, 2] and again.num_errors == 0
