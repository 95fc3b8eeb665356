#!/usr/bin/env python3
"""Ray Tune's "Getting Started" example (a small ConvNet, ASHA, tune.choice/tune.uniform),
written as a Ray user writes it, with `ray` changed to `prism` in the imports and
Fashion-MNIST from Debian's dataset-fashion-mnist instead of a download:

    python3 apps/python_tune/tune_fashion_mnist.py                  # one rank
    mpirun -n 3 python3 apps/python_tune/tune_fashion_mnist.py      # trials on 3 ranks

Options: --num-samples (20), --epochs (10), --data-root (a directory where the IDX files
are unpacked under FashionMNIST/raw/, as torchvision reads them; made from
/usr/share/datasets/fashion-mnist if missing), --storage-path, --name, --restore.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Subset
from torchvision import datasets, transforms

from prism import tune
from prism.tune.schedulers import ASHAScheduler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from debian_fashion_mnist import DEFAULT_DATA_ROOT, unpack_debian_files  # noqa: E402

EPOCH_SIZE = 512
TEST_SIZE = 256


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 3, kernel_size=3)
        self.fc = nn.Linear(192, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 3))
        x = x.view(-1, 192)
        x = self.fc(x)
        return F.log_softmax(x, dim=1)


def train_func(model, optimizer, train_loader):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if batch_idx * len(data) > EPOCH_SIZE:  # only a part of the data per "epoch"
            return
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()


def test_func(model, data_loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch_idx, (data, target) in enumerate(data_loader):
            if batch_idx * len(data) > TEST_SIZE:
                break
            _, predicted = torch.max(model(data).data, 1)
            total += target.size(0)
            correct += (predicted == target).sum().item()
    return correct / total


def train_mnist(config):
    mnist_transforms = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))])
    train_set = datasets.FashionMNIST(config["data_root"], train=True, download=False, transform=mnist_transforms)
    test_set = datasets.FashionMNIST(config["data_root"], train=False, download=False, transform=mnist_transforms)
    train_loader = DataLoader(Subset(train_set, range(8192)), batch_size=64, shuffle=True)
    test_loader = DataLoader(Subset(test_set, range(1024)), batch_size=64, shuffle=True)
    torch.set_num_threads(1)
    model = ConvNet()
    optimizer = optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    for _ in range(config["epochs"]):
        train_func(model, optimizer, train_loader)
        acc = test_func(model, test_loader)
        tune.report({"mean_accuracy": acc})  # ASHA may end the trial here


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-samples", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--data-root", default=DEFAULT_DATA_ROOT)
    parser.add_argument("--storage-path", default=None)
    parser.add_argument("--name", default=None,
                        help="the experiment's name (default: tune_<Slurm job id>, else a timestamp)")
    parser.add_argument("--restore", action="store_true",
                        help="resume the experiment --name if it exists (a requeued job), else start it")
    args = parser.parse_args()
    unpack_debian_files(args.data_root)  # every rank: ranks may sit on several hosts

    search_space = {
        "lr": tune.sample_from(lambda spec: 10 ** (-10 * np.random.rand())),
        "momentum": tune.uniform(0.1, 0.9),
        "epochs": args.epochs,
        "data_root": os.path.abspath(args.data_root),
    }
    run_config = tune.RunConfig(name=args.name, storage_path=args.storage_path, verbose=0)
    storage = args.storage_path or os.environ.get("PRISM_STORAGE_PATH") or os.path.expanduser("~/prism_results")
    if args.restore and args.name is None:
        parser.error("--restore needs --name (the experiment to resume)")
    path = os.path.join(storage, args.name or "")
    if args.restore and tune.Tuner.can_restore(path):
        tuner = tune.Tuner.restore(path, train_mnist)
    else:
        tuner = tune.Tuner(
            train_mnist,
            param_space=search_space,
            tune_config=tune.TuneConfig(metric="mean_accuracy", mode="max", num_samples=args.num_samples,
                                        scheduler=ASHAScheduler(max_t=args.epochs, grace_period=1)),
            run_config=run_config)
    try:
        results = tuner.fit()
    except tune.TunePreemptedError as e:  # SIGUSR1/SIGTERM: the journal is committed
        print(f"preempted ({e}); run again with --restore to go on", flush=True)
        return 75  # a job script requeues on 75 (jobs/requeue_step.sh)
    df = results.get_dataframe()
    best = results.get_best_result()
    print(f"{len(df)} trials, {results.num_errors} errors; best mean_accuracy "
          f"{best.metrics['mean_accuracy']:.3f} with lr={best.config['lr']:.4g}, "
          f"momentum={best.config['momentum']:.3f} after {best.metrics['training_iteration']} epochs")
    stopped = sum(1 for r in results if r.metrics.get("training_iteration", 0) < args.epochs)
    print(f"ASHA stopped {stopped} of {len(df)} trials before {args.epochs} epochs")
    return 0 if results.num_errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
