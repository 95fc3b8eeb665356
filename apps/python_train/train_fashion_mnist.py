#!/usr/bin/env python3
"""Ray Train's PyTorch quickstart ("Get Started with Distributed Training using PyTorch":
resnet18 on Fashion-MNIST, prepare_model / prepare_data_loader, a checkpoint every epoch),
written as a Ray user writes it, with `ray` changed to `prism` in the imports and
Fashion-MNIST from Debian's dataset-fashion-mnist instead of a download:

    python3 apps/python_train/train_fashion_mnist.py                  # one rank, 1 worker
    mpirun -n 3 python3 apps/python_train/train_fashion_mnist.py      # 2 DDP workers

resnet18 is slow on a few CPU cores, so by default each epoch sees a part of the data:
--train-samples (4096) and --test-samples (1024) images, --epochs (3), --batch-size (128
per worker), --num-workers (2, or 1 when the job has one rank), --lr (0.001), --data-root
(as apps/python_tune: the IDX files under <root>/FashionMNIST/raw/, made from
/usr/share/datasets/fashion-mnist if missing). Give --train-samples=60000
--test-samples=10000 --epochs=10 for Ray's full run.

The run lives in --storage-path/--name (default: $PRISM_STORAGE_PATH or ~/prism_results,
and TorchTrainer_<Slurm job id or a timestamp>). Run it again with the same name and it
resumes after its newest checkpoint (model and optimizer). On SIGUSR1/SIGTERM (a Slurm
time-limit warning or preemption) the workers stop after the next epoch's checkpoint and
the program exits 75, which jobs/python_train.sbatch requeues.
"""
import argparse
import os
import sys
import tempfile

import torch
from torch.nn import CrossEntropyLoss
from torch.nn.parallel import DistributedDataParallel
from torch.optim import Adam
from torch.utils.data import DataLoader, Subset
from torchvision.datasets import FashionMNIST
from torchvision.models import resnet18
from torchvision.transforms import Compose, Normalize, ToTensor

import prism
import prism.train
import prism.train.torch  # before prism.init(): every rank registers the training loop
from prism.train import Checkpoint, CheckpointConfig, RunConfig, ScalingConfig
from prism.train.torch import TorchTrainer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from debian_fashion_mnist import DEFAULT_DATA_ROOT, unpack_debian_files  # noqa: E402


def build_model():
    model = resnet18(num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
    return model


def fashion_mnist(root, train, samples):
    transform = Compose([ToTensor(), Normalize((0.5,), (0.5,))])
    data = FashionMNIST(root=root, train=train, download=False, transform=transform)
    return Subset(data, range(min(samples, len(data))))


def evaluate(model, loader):
    """(correct, total) of `model` on `loader`'s batches."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(dim=1) == labels).sum().item()
            total += labels.numel()
    return correct, total


def train_func(config):
    # Model, Loss, Optimizer
    model = build_model()
    model = prism.train.torch.prepare_model(model)  # DDP with more than one worker
    criterion = CrossEntropyLoss()
    optimizer = Adam(model.parameters(), lr=config["lr"])

    # Data: each worker reads its share (prepare_data_loader adds a DistributedSampler)
    train_data = fashion_mnist(config["data_root"], True, config["train_samples"])
    test_data = fashion_mnist(config["data_root"], False, config["test_samples"])
    train_loader = DataLoader(train_data, batch_size=config["batch_size"], shuffle=True)
    test_loader = DataLoader(test_data, batch_size=config["batch_size"])
    train_loader = prism.train.torch.prepare_data_loader(train_loader)
    test_loader = prism.train.torch.prepare_data_loader(test_loader)

    context = prism.train.get_context()
    plain = model.module if isinstance(model, DistributedDataParallel) else model
    start = 0
    checkpoint = prism.train.get_checkpoint()  # set when this run resumes
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            state = torch.load(os.path.join(checkpoint_dir, "checkpoint.pt"))
        plain.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
        if context.get_world_rank() == 0:
            print(f"resuming after epoch {state['epoch']} from {checkpoint.path}", flush=True)

    for epoch in range(start, config["epochs"]):
        model.train()
        if context.get_world_size() > 1:
            train_loader.sampler.set_epoch(epoch)
        for images, labels in train_loader:
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        correct, total = evaluate(model, test_loader)
        counts = torch.tensor([correct, total], dtype=torch.float64)
        torch.distributed.all_reduce(counts)  # every worker's share of the test set
        metrics = {"loss": loss.item(), "accuracy": (counts[0] / counts[1]).item(), "epoch": epoch}

        # Report metrics and checkpoint: world rank 0 saves the model (the same on every
        # worker) and the optimizer; the other workers report the metrics only.
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            checkpoint = None
            if context.get_world_rank() == 0:
                torch.save({"model": plain.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                           os.path.join(temp_checkpoint_dir, "checkpoint.pt"))
                checkpoint = Checkpoint.from_directory(temp_checkpoint_dir)
            prism.train.report(metrics, checkpoint=checkpoint)  # stops here on preemption


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-samples", type=int, default=4096)
    parser.add_argument("--test-samples", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=128, help="per worker")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--num-workers", type=int, default=None,
                        help="training workers, one per rank (default: 2, or 1 with one rank)")
    parser.add_argument("--data-root", default=DEFAULT_DATA_ROOT)
    parser.add_argument("--storage-path", default=None)
    parser.add_argument("--name", default=None,
                        help="the run's name (default: TorchTrainer_<Slurm job id>, else a timestamp); "
                             "a run of that name resumes from its newest checkpoint")
    args = parser.parse_args()
    unpack_debian_files(args.data_root)  # every rank: ranks may sit on several hosts

    prism.init()  # rank 0 goes on as the driver; the other ranks serve until it ends
    num_workers = args.num_workers or min(2, prism.get_runtime_context().world_size)
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": args.lr, "epochs": args.epochs, "batch_size": args.batch_size,
                           "train_samples": args.train_samples, "test_samples": args.test_samples,
                           "data_root": os.path.abspath(args.data_root)},
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=False),
        run_config=RunConfig(name=args.name, storage_path=args.storage_path,
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),  # 135 MB each
    )
    try:
        result = trainer.fit()
    except prism.train.TrainingPreemptedError as e:  # SIGUSR1/SIGTERM, after a checkpoint
        where = f"after {e.checkpoint_path}" if e.checkpoint_path else "before its first checkpoint"
        print(f"preempted {where}: run it again with the same --name and --storage-path to resume", flush=True)
        return 75  # a job script requeues on 75 (jobs/requeue_step.sh)
    print(f"result: {result}")

    # Load the trained model from the run's newest checkpoint and score it on the test images.
    with result.checkpoint.as_directory() as checkpoint_dir:
        state = torch.load(os.path.join(checkpoint_dir, "checkpoint.pt"))
    model = build_model()
    model.load_state_dict(state["model"])
    test_loader = DataLoader(fashion_mnist(args.data_root, False, args.test_samples), batch_size=args.batch_size)
    correct, total = evaluate(model, test_loader)
    print(f"trained {args.epochs} epochs on {num_workers} worker(s); the checkpoint of epoch "
          f"{state['epoch']} classifies {correct} of {total} test images right ({correct / total:.3f}; "
          f"reported {result.metrics.get('accuracy', float('nan')):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
