"""A one-rank Tune experiment for test_restore: `fit` starts it, `restore` resumes it. Each
trial counts to 6 with a checkpoint at every step and logs "<trial> <step>" to runs.log as
it starts each step, so the test sees which steps ran twice."""
import json
import os
import sys
import time

import prism
from prism import tune

mode, storage, name, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
log = os.path.join(storage, "runs.log")


def trainable(config):
    step = 0
    ckpt = tune.get_checkpoint()
    if ckpt:
        with open(os.path.join(ckpt.path, "step")) as f:
            step = int(f.read())
    trial = tune.get_context().get_trial_id()
    while step < 6:
        step += 1
        with open(log, "a") as f:
            f.write(f"{trial} {step}\n")
        time.sleep(delay)
        d = os.path.join(storage, f"tmp-{trial}-{step}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "step"), "w") as f:
            f.write(str(step))
        tune.report({"step": step, "x": config["x"]}, checkpoint=tune.Checkpoint.from_directory(d))


if __name__ == "__main__":
    prism.init(num_cpus=2)
    if mode == "fit":
        tuner = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2, 3, 4])},
                           tune_config=tune.TuneConfig(metric="step", mode="max"),
                           run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0))
    else:
        path = os.path.join(storage, name)
        assert tune.Tuner.can_restore(path)
        tuner = tune.Tuner.restore(path, trainable)
    grid = tuner.fit()
    print(json.dumps({r.trial_id: [r.metrics.get("step"), r.config["x"], r.checkpoint is not None, r.status]
                      for r in grid}))
    prism.shutdown()
