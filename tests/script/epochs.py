"""A small training stand-in with checkpoints: runs epochs up to argv[1], each reported with
a checkpoint (epoch.json) on world rank 0; resumes from prism_train.get_checkpoint().
Modes (argv[2]):
  ok          train to the end
  crash       world rank 0 exits 3 in epoch 2 of the first attempt (a worker failure),
              after committing epoch 1
  hang        never report (sleep)
  bad-ckpt    report a checkpoint_dir that is a file
  preempt     sleep 1 s per epoch, and stop at the first epoch after should_stop()
"""
import json
import os
import sys
import tempfile
import time

import prism_train

epochs, mode = int(sys.argv[1]), sys.argv[2]
ctx = prism_train.get_context()
start = 0
ckpt = prism_train.get_checkpoint()
if ckpt:
    with open(os.path.join(ckpt, "epoch.json")) as f:
        start = json.load(f)["epoch"]
    print("resuming after epoch %d from %s (attempt %d)" % (start, ckpt, ctx.attempt))
if mode == "hang":
    print("hanging without a report", flush=True)
    time.sleep(3600)
for epoch in range(start + 1, epochs + 1):
    if mode == "crash" and epoch == 2 and ctx.attempt == 0 and ctx.world_rank == 0:
        print("crashing in epoch 2", file=sys.stderr)
        sys.exit(3)
    if mode == "preempt":
        time.sleep(1)
    metrics = {"epoch": epoch, "loss": 1.0 / epoch}
    if mode == "bad-ckpt":
        prism_train.report(metrics, checkpoint_dir="/etc/hostname")
    if ctx.world_rank == 0:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "epoch.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            committed = prism_train.report(metrics, checkpoint_dir=d)
        print("epoch %d committed %s" % (epoch, committed))
    else:
        prism_train.report(metrics)
    if prism_train.should_stop():
        print("stopping after epoch %d" % epoch)
        sys.exit(0)
print("done at epoch %d" % epochs)
