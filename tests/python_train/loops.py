"""Training loops the tests run (an importable module: the workers import it by name)."""
import json
import os
import tempfile
import time

import torch

from prism import train
from prism.train import Checkpoint
from prism.train.torch import get_device, prepare_data_loader, prepare_model


def report_steps(config):
    """Reports config["steps"] times: loss 1/(i+1), this worker's rank, and a checkpoint
    (a file with the step) when config["checkpoint"]; resumes after the checkpoint's step."""
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            with open(os.path.join(d, "step.json")) as f:
                start = json.load(f)["step"] + 1
    rank = train.get_context().get_world_rank()
    for step in range(start, config["steps"]):
        time.sleep(config.get("sleep", 0))
        metrics = {"loss": 1.0 / (step + 1), "step": step, "rank": rank,
                   "score": config.get("scores", [0] * 100)[step]}
        if config.get("checkpoint", True):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step.json"), "w") as f:
                    json.dump({"step": step, "rank": rank}, f)
                train.report(metrics, checkpoint=Checkpoint.from_directory(d))
        else:
            train.report(metrics)


def no_argument():
    train.report({"called": 1})


class Boom(ValueError):
    pass


def raises(config):
    train.report({"step": 0})
    raise Boom("the loop raised on purpose")


def fails_once(config):
    """Attempt 0: checkpoints step 0, then fails. Attempt 1 resumes and reports step 1."""
    ckpt = train.get_checkpoint()
    with tempfile.TemporaryDirectory() as d:
        if ckpt is None:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump({"step": 0}, f)
            train.report({"step": 0}, checkpoint=Checkpoint.from_directory(d))
            raise RuntimeError("first attempt fails")
        with open(os.path.join(ckpt.path, "step.json")) as f:
            step = json.load(f)["step"] + 1
        train.report({"step": step, "resumed": 1})


def context_fields(config):
    c = train.get_context()
    fields = {"world_rank": c.get_world_rank(), "world_size": c.get_world_size(),
              "local_rank": c.get_local_rank(), "local_world_size": c.get_local_world_size(),
              "node_rank": c.get_node_rank(), "cpu": int(get_device().type == "cpu"),
              "dist_size": torch.distributed.get_world_size(),
              "dist_rank": torch.distributed.get_rank()}
    with open(os.path.join(config["out"], f"{c.get_world_rank()}.json"), "w") as f:
        json.dump(dict(fields, trial_name=c.get_trial_name(), trial_dir=c.get_trial_dir(),
                       env_rank=os.environ.get("RANK")), f)
    train.report(fields)


def bad_metric(config):
    train.report({"name": "text"})


def ddp_step(config):
    """One SGD step of a Linear(2, 1) on data that differs per worker, through prepare_model;
    the weights after the step, and the indices the prepared loader gave, go to out/."""
    torch.manual_seed(config["seed"] + train.get_context().get_world_rank())  # different inits:
    model = prepare_model(torch.nn.Linear(2, 1))  # DDP broadcasts rank 0's
    rank = train.get_context().get_world_rank()
    x = torch.full((4, 2), float(rank + 1))
    y = torch.zeros(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    loader = prepare_data_loader(torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(8)), batch_size=2, shuffle=True))
    seen = [int(i) for (batch,) in loader for i in batch]
    inner = model.module if hasattr(model, "module") else model
    with open(os.path.join(config["out"], f"{rank}.json"), "w") as f:
        json.dump({"weight": inner.weight.detach().flatten().tolist(),
                   "bias": inner.bias.detach().tolist(), "seen": seen,
                   "ddp": int(hasattr(model, "module"))}, f)
    train.report({"loss": loss.item()})


def ddp_peer_fails():
    """World rank 1 raises after prepare_model while rank 0 runs backward passes (DDP
    all-reduces that wait for rank 1)."""
    model = prepare_model(torch.nn.Linear(2, 1))
    if train.get_context().get_world_rank() == 1:
        raise Boom("rank 1 fails")
    for _ in range(3):
        model(torch.ones(4, 2)).sum().backward()
    train.report({"x": 1})


def check_tf_config(config):
    """The stand-in for a TensorFlow program: checks TF_CONFIG as MultiWorkerMirroredStrategy
    reads it, and writes it to out/."""
    tf_config = json.loads(os.environ["TF_CONFIG"])
    rank = train.get_context().get_world_rank()
    assert tf_config["task"] == {"type": "worker", "index": rank}, tf_config
    assert len(tf_config["cluster"]["worker"]) == train.get_context().get_world_size()
    with open(os.path.join(config["out"], f"{rank}.json"), "w") as f:
        json.dump(tf_config, f)
    train.report({"workers": len(tf_config["cluster"]["worker"])})


class FakeKerasModel:
    def save(self, path):
        with open(path, "w") as f:
            f.write("keras model")


def keras_callback(config):
    from prism.train.tensorflow.keras import ReportCheckpointCallback
    callback = ReportCheckpointCallback(metrics={"loss": "val_loss"})
    callback.set_model(FakeKerasModel())
    for epoch in range(2):
        callback.on_epoch_end(epoch, {"val_loss": 1.0 / (epoch + 1), "other": 5})


def read_shards(config):
    """Reads this worker's shard of datasets["train"] for two epochs (batches of 8, and torch
    batches), writes the ids it saw to config["out"]/<world rank>.json."""
    import json
    import os

    import torch

    from prism import train

    shard = train.get_dataset_shard("train")
    epochs = []
    for _ in range(2):
        seen = []
        for batch in shard.iter_batches(batch_size=8):
            seen.extend(int(x) for x in batch["id"])
        epochs.append(seen)
    torch_ids = []
    for batch in shard.iter_torch_batches(batch_size=16):
        assert isinstance(batch["id"], torch.Tensor), type(batch["id"])
        torch_ids.extend(batch["id"].tolist())
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["out"], f"{rank}.json"), "w") as f:
        json.dump({"epochs": epochs, "torch": torch_ids}, f)
    train.report({"rows": len(epochs[0])})


def shard_errors(config):
    """What get_dataset_shard says for a missing name and for no name among several."""
    from prism import train

    errors = []
    for args in (("nope",), ()):
        try:
            train.get_dataset_shard(*args)
            errors.append("")
        except (KeyError, ValueError) as e:
            errors.append(f"{type(e).__name__}: {e}")
    with open(config["out"], "w") as f:
        f.write("\n".join(errors))
    train.report({"errors": sum(1 for e in errors if e)})
