#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch DDP (gloo on CPU): apps/train_fashion_mnist's CNN and training
as an ordinary torchrun-style script, run by Prism's ScriptTrainer:

    mpirun -n 3 build/apps/prism-train-script --num-workers=2 --backend=torch \
        -- /usr/bin/python3 apps/train_fashion_mnist_py/train.py --epochs=2

It reads its place in the group from torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
...), reports each epoch with prism_train.report (world rank 0 with a checkpoint directory),
resumes from prism_train.get_checkpoint(), and stops after an epoch's checkpoint once
prism_train.should_stop() (SIGUSR1/SIGTERM) is true on any rank. The same file runs
unchanged under `python3 -m torch.distributed.run --nproc_per_node=2` (perf/script_trainer_benchmark.py
compares the two). Data: the IDX files of Debian's dataset-fashion-mnist.
"""
import argparse
import datetime
import gc
import gzip
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    import prism_train
except ImportError:  # run without Prism (torchrun) from the source tree: the module is in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import prism_train

START = time.time()


class SmallCnn(nn.Module):
    """apps/train_fashion_mnist/models.h's SmallCnn: two conv + ReLU + max-pool stages, then
    two linear layers (about 225k parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 28 -> 26 -> 13
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 13 -> 11 -> 5
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def load_idx(data_dir, split, limit):
    """Images scaled as the C++ loader does ([0,1], then mean 0.2860, std 0.3530), labels."""
    prefix = "train" if split == "train" else "t10k"
    images_file = os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz")
    labels_file = os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz")
    for f in (images_file, labels_file):
        if not os.path.exists(f):
            sys.exit("error: %s is missing: install Debian's dataset-fashion-mnist or pass --data-dir" % f)
    with gzip.open(images_file, "rb") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(labels_file, "rb") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - 0.2860) / 0.3530
    return x, torch.from_numpy(labels)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=128, help="per worker (default 128)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam (default 0.001)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-samples", type=int, default=0, help="the first N training images (0: all)")
    p.add_argument("--test-samples", type=int, default=0, help="the first N test images (0: all)")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit 1 if the final test accuracy is below this")
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    chief = rank == 0
    torch.manual_seed(args.seed)
    model = SmallCnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start_epoch = 0
    checkpoint = prism_train.get_checkpoint()
    if checkpoint:
        state = torch.load(os.path.join(checkpoint, "model.pt"), map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"]
        if chief:
            print("resuming after epoch %d from %s" % (start_epoch, checkpoint), flush=True)
    ddp = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights

    train_x, train_y = load_idx(args.data_dir, "train", args.train_samples)
    test_x, test_y = load_idx(args.data_dir, "test", args.test_samples)
    test_x, test_y = test_x[rank::world], test_y[rank::world]  # every world-th image
    sampler = torch.utils.data.distributed.DistributedSampler(
        torch.utils.data.TensorDataset(train_x, train_y), num_replicas=world, rank=rank,
        shuffle=True, seed=args.seed)
    if start_epoch >= args.epochs and chief:
        print("nothing to train: the checkpoint is at epoch %d, --epochs is %d" % (start_epoch, args.epochs))

    accuracy = float("nan")
    for epoch in range(start_epoch + 1, args.epochs + 1):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        ddp.train()
        loss_sum, steps, t0 = 0.0, 0, time.time()
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(train_x[idx]), train_y[idx])
            loss.backward()  # gradients averaged across workers here
            optimizer.step()
            loss_sum += loss.item()
            steps += 1
            if steps == 1 and epoch == start_epoch + 1 and chief:
                print("first step done at %.6f (%.2f s after the script started)" % (time.time(), time.time() - START),
                      flush=True)
        train_seconds = time.time() - t0
        ddp.eval()
        with torch.no_grad():
            correct = sum(int((ddp.module(test_x[i:i + 500]).argmax(1) == test_y[i:i + 500]).sum())
                          for i in range(0, len(test_x), 500))
        totals = torch.tensor([loss_sum, steps, correct, len(test_x), len(order)], dtype=torch.float64)
        dist.all_reduce(totals)
        loss_mean, accuracy = totals[0].item() / totals[1].item(), totals[2].item() / totals[3].item()
        samples_per_s = totals[4].item() / train_seconds
        metrics = {"epoch": epoch, "loss": loss_mean, "test_accuracy": accuracy, "samples_per_s": samples_per_s}
        if chief:
            print("epoch %d: loss %.4f, test_accuracy %.4f, %.0f samples/s (%d workers, %.1f s)"
                  % (epoch, loss_mean, accuracy, samples_per_s, world, train_seconds), flush=True)
            with tempfile.TemporaryDirectory() as d:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                           os.path.join(d, "model.pt"))
                prism_train.report(metrics, checkpoint_dir=d)
        else:
            prism_train.report(metrics)
        # Stop together: a rank that got SIGUSR1/SIGTERM tells the others.
        stop = torch.tensor([1 if prism_train.should_stop() else 0])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            if chief:
                print("stopping after epoch %d's checkpoint (preemption or time limit)" % epoch, flush=True)
            break
    # Tear down DDP's reducer while the process group is still registered, after a barrier
    # (which waits for every earlier collective), then the group. torch 1.13's
    # ProcessGroupGloo destructor joins its threads while holding the GIL; run from the
    # reducer's destructor at main()'s return (the group already unregistered) it
    # deadlocked once here, a gloo thread waiting for the GIL to free a tensor.
    dist.barrier()
    del ddp
    gc.collect()
    dist.destroy_process_group()
    if args.min_accuracy > 0 and not accuracy >= args.min_accuracy:
        sys.exit("error: test accuracy %.4f is below --min-accuracy %.4f" % (accuracy, args.min_accuracy))


if __name__ == "__main__":
    main()
