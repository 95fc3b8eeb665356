#!/usr/bin/env python3
"""Ray Data's batch inference example ("Image classification batch inference with
PyTorch"), written as a Ray user writes it with `ray` changed to `prism`: a torch model in a
callable class, run over Fashion-MNIST's test images by an autoscaling pool of actors, with
the images read from files, preprocessed in a map_batches step and the predictions written
out. Fashion-MNIST comes from Debian's dataset-fashion-mnist (no download); the model is a
small ConvNet trained here for a few seconds first (Ray's example loads a pretrained ResNet).

    python3 apps/python_data/batch_inference.py                 # one rank
    mpirun -n 3 python3 apps/python_data/batch_inference.py     # the actors on 3 ranks

Options: --limit (images, default all 10,000), --train-size (5,000), --concurrency (max
actors, default one per rank), --batch-size (256), --output (a directory for the predictions
as JSON lines), --data-root.
"""
import argparse
import gzip
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import prism
import prism.data  # every rank imports it before prism.init(): the actors run on every rank

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from debian_fashion_mnist import DEFAULT_DATA_ROOT, unpack_debian_files  # noqa: E402

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
           "Ankle boot"]
MEAN, STD = 0.2860, 0.3530


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3)
        self.fc = nn.Linear(16 * 13 * 13, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        return self.fc(x.flatten(1))


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def train_model(images, labels, path, seconds_budget=20):
    """A few passes of SGD over `images` on the driver; saves the state dict to `path`."""
    torch.manual_seed(0)
    model = ConvNet()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    x = torch.from_numpy((images.astype(np.float32) / 255 - MEAN) / STD).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    start = time.perf_counter()
    for epoch in range(2):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 128):
            idx = perm[i:i + 128]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        if time.perf_counter() - start > seconds_budget:
            break
    torch.save(model.state_dict(), path)


def preprocess(batch):
    """Scale and normalize the images (a stateless step: tasks, fused with the read)."""
    return {"image": (batch["image"].astype(np.float32) / 255 - MEAN) / STD, "label": batch["label"]}


class FashionClassifier:
    """Loads the model once per actor; classifies a batch of images per call."""

    def __init__(self, model_path):
        torch.set_num_threads(1)
        self.model = ConvNet()
        self.model.load_state_dict(torch.load(model_path))
        self.model.eval()

    def __call__(self, batch):
        with torch.inference_mode():
            logits = self.model(torch.from_numpy(batch["image"]).unsqueeze(1))
        predicted = logits.argmax(dim=1).numpy()
        return {"label": batch["label"], "predicted_label": predicted,
                "predicted_class": np.array([CLASSES[p] for p in predicted], dtype=object)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=10_000)
    p.add_argument("--train-size", type=int, default=5_000)
    p.add_argument("--concurrency", type=int, default=0, help="most actors (0: one per rank)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--output", default="")
    p.add_argument("--data-root", default=DEFAULT_DATA_ROOT)
    args = p.parse_args()

    prism.init()  # rank 0 goes on as the driver; the other ranks serve the actors from here
    start = time.perf_counter()
    unpack_debian_files(args.data_root)
    raw = os.path.join(args.data_root, "FashionMNIST", "raw")
    work = tempfile.mkdtemp(prefix="prism-batch-inference-")
    model_path = os.path.join(work, "model.pt")
    train_model(read_idx(os.path.join(raw, "train-images-idx3-ubyte"))[:args.train_size],
                read_idx(os.path.join(raw, "train-labels-idx1-ubyte"))[:args.train_size], model_path)
    trained = time.perf_counter()
    # The images to classify, as .npy files the ranks read in row ranges (Ray reads images
    # from files with read_images; Fashion-MNIST's are one IDX file, kept as arrays here).
    np.save(os.path.join(work, "images.npy"), read_idx(os.path.join(raw, "t10k-images-idx3-ubyte"))[:args.limit])
    np.save(os.path.join(work, "labels.npy"), read_idx(os.path.join(raw, "t10k-labels-idx1-ubyte"))[:args.limit])

    world = prism.get_runtime_context().world_size
    images = prism.data.read_numpy(os.path.join(work, "images.npy"), override_num_blocks=4 * world)
    labels = prism.data.read_numpy(os.path.join(work, "labels.npy"))
    ds = images.zip(labels).rename_columns({"data": "image", "data_1": "label"})
    ds = ds.map_batches(preprocess)
    predictions = ds.map_batches(FashionClassifier, fn_constructor_args=(model_path,),
                                 concurrency=(1, args.concurrency or world), batch_size=args.batch_size)
    predictions.show(3)

    correct = total = 0
    per_class = np.zeros((10, 2), dtype=np.int64)
    for batch in predictions.iter_batches(batch_size=1024):
        hit = batch["label"] == batch["predicted_label"]
        correct += int(hit.sum())
        total += len(hit)
        np.add.at(per_class, (batch["label"], 0), hit)
        np.add.at(per_class, (batch["label"], 1), 1)
    done = time.perf_counter()
    print(predictions.stats())
    worst = int(np.argmin(per_class[:, 0] / np.maximum(per_class[:, 1], 1)))
    if args.output:
        predictions.drop_columns(["predicted_class"]).write_json(args.output)
        print(f"predictions written to {args.output}")
    print(f"{total} images classified on {world} rank(s): accuracy {correct / max(total, 1):.3f} "
          f"(hardest class: {CLASSES[worst]}); training {trained - start:.1f} s, inference "
          f"{done - trained:.1f} s")
    prism.shutdown()


if __name__ == "__main__":
    main()
