"""A Ray Train program as a user writes it (ray -> prism): reports a checkpoint every 0.2 s
for `steps` steps, resuming from the run's checkpoint. Used by test_preemption.py:
python3 preempt_app.py <storage_path> <steps>."""
import json
import os
import sys
import tempfile
import time

from prism import train
from prism.train import Checkpoint, RunConfig, ScalingConfig
from prism.train.torch import TorchTrainer


def loop(config):
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt:
        with open(os.path.join(ckpt.path, "s.json")) as f:
            start = json.load(f)["step"] + 1
    for step in range(start, config["steps"]):
        time.sleep(0.2)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"step": step}, f)
            train.report({"step": step, "start": start}, checkpoint=Checkpoint.from_directory(d))


result = TorchTrainer(loop, train_loop_config={"steps": int(sys.argv[2])},
                      scaling_config=ScalingConfig(num_workers=1),
                      run_config=RunConfig(storage_path=sys.argv[1], name="app")).fit()
print("DONE", json.dumps(result.metrics))
