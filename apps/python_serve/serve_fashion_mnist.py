#!/usr/bin/env python3
"""Ray Serve's "serve a PyTorch model" example on Fashion-MNIST, written as a Ray user
writes it (`ray` changed to `prism` in the imports), as one MPI job:

    python3 apps/python_serve/serve_fashion_mnist.py                  # one rank
    mpirun -n 3 python3 apps/python_serve/serve_fashion_mnist.py      # replicas on ranks 1, 2
    curl -H 'Content-Type: application/octet-stream' --data-binary @image.bin \\
         "$(cat serve_fashion_mnist_py.endpoint)/fashion_mnist"        # 784 uint8 pixels
    curl -H 'Content-Type: application/json' -d '{"image": [0, 0, ..., 0]}' ...   # or JSON

Two deployments, composed: Preprocessor (the HTTP ingress: decodes raw bytes or JSON into a
normalized 28x28 array; 400 for a body that is neither) holds a handle to Classifier (the
model, one forward pass per batch of concurrent requests through @serve.batch). The model
is a small CNN read from --checkpoint, trained there first if the file is missing
(--train-steps on Debian's dataset-fashion-mnist, a few seconds). It serves until SIGTERM or
SIGUSR1 (Slurm's time limit or preemption), drains the requests in flight and exits 0.

--self-test=N instead sends N test images over HTTP from 8 client threads, checks each
answer against a local forward pass of the same model, prints the accuracy and the mean
batch size, and exits (1 if an answer differs).
"""
import argparse
import concurrent.futures
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import prism
from prism import serve
from prism.serve.exceptions import BadRequestError

DEBIAN_FILES = "/usr/share/datasets/fashion-mnist"
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
          "Ankle boot"]
PIXELS = 28 * 28
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixel mean and deviation (of x / 255)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.fc = nn.Linear(32 * 5 * 5, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def read_idx(name):
    """A Debian Fashion-MNIST IDX file as a NumPy array (images N x 28 x 28, labels N)."""
    path = os.path.join(DEBIAN_FILES, name + ".gz")
    if not os.path.exists(path):
        sys.exit(f"serve_fashion_mnist.py: {path} is missing: apt-get install dataset-fashion-mnist")
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def normalize(pixels):
    """uint8 pixels (784, or 28 x 28) -> the model's float32 input (1 x 28 x 28)."""
    return ((pixels.astype(np.float32) / 255.0 - MEAN) / STD).reshape(1, 28, 28)


def train(path, steps):
    """Trains Net for `steps` minibatches of 64 and saves its state_dict at `path`."""
    torch.manual_seed(0)
    images, labels = read_idx("train-images-idx3-ubyte"), read_idx("train-labels-idx1-ubyte")
    x = torch.from_numpy(np.stack([normalize(i) for i in images[:steps * 64]]))
    y = torch.from_numpy(labels[:steps * 64].astype(np.int64))
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    start = time.time()
    for step in range(steps):
        batch = slice((step * 64) % len(x), (step * 64) % len(x) + 64)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save(model.state_dict(), path + ".part")
    os.replace(path + ".part", path)
    print(f"trained {steps} steps in {time.time() - start:.1f} s (last loss {loss.item():.3f}); saved {path}",
          flush=True)


def load(path):
    model = Net()
    model.load_state_dict(torch.load(path))
    model.eval()
    return model


def predict(model, batch):
    """[{"class", "label", "scores"}] for a batch (N x 1 x 28 x 28)."""
    with torch.no_grad():
        scores = F.softmax(model(torch.from_numpy(batch)), dim=1).numpy()
    return [{"class": int(s.argmax()), "label": LABELS[int(s.argmax())], "scores": [round(float(v), 6) for v in s]}
            for s in scores]


@serve.deployment(ray_actor_options={"num_cpus": 1})
class Classifier:
    """The model: concurrent requests share one forward pass (@serve.batch)."""

    def __init__(self, checkpoint, max_batch_size, batch_wait_s):
        torch.set_num_threads(1)  # one core per replica: replicas, not threads, scale it
        self.model = load(checkpoint)
        self.batches = 0
        self.items = 0
        # serve.batch on a bound method: its options come from the command line.
        self.infer = serve.batch(max_batch_size=max_batch_size, batch_wait_timeout_s=batch_wait_s)(self.infer_batch)

    async def infer_batch(self, images):
        self.batches += 1
        self.items += len(images)
        return predict(self.model, np.stack(images))

    async def __call__(self, image):
        return await self.infer(image)

    def stats(self):
        return {"batches": self.batches, "items": self.items}


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=32)
class Preprocessor:
    """The HTTP ingress: 784 raw uint8 pixels (application/octet-stream) or JSON
    {"image": [784 ints 0-255]} -> the Classifier's answer."""

    def __init__(self, classifier):
        self.classifier = classifier

    async def __call__(self, request):
        if "json" in request.headers.get("content-type", ""):
            data = await request.json()  # invalid JSON: 400
            image = data.get("image") if isinstance(data, dict) else None
            if not isinstance(image, list) or len(image) != PIXELS or \
                    not all(isinstance(v, int) and 0 <= v <= 255 for v in image):
                raise BadRequestError(f'send {{"image": [{PIXELS} ints from 0 to 255]}}')
            pixels = np.array(image, dtype=np.uint8)
        else:
            body = await request.body()
            if len(body) != PIXELS:
                raise BadRequestError(f"send {PIXELS} bytes of uint8 pixels (row-major 28 x 28), got {len(body)}")
            pixels = np.frombuffer(body, dtype=np.uint8)
        return await self.classifier.remote(normalize(pixels))


def self_test(address, route, checkpoint, n):
    """Sends n test images over HTTP, checks the answers against a local forward pass."""
    import requests
    images, labels = read_idx("t10k-images-idx3-ubyte")[:n], read_idx("t10k-labels-idx1-ubyte")[:n]
    local = predict(load(checkpoint), np.stack([normalize(i) for i in images]))

    def post(i):
        if i % 2:
            return requests.post(address + route, data=images[i].tobytes(),
                                 headers={"Content-Type": "application/octet-stream"}, timeout=60)
        return requests.post(address + route, json={"image": images[i].reshape(-1).tolist()}, timeout=60)

    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(n)))
    elapsed = time.time() - start
    bad = [i for i, a in enumerate(answers) if a.status_code != 200]
    if bad:
        print(f"self-test: {len(bad)} requests failed, the first: {answers[bad[0]].status_code} "
              f"{answers[bad[0]].text}")
        return 1
    served = [a.json() for a in answers]
    same = sum(s["class"] == l["class"] and np.allclose(s["scores"], l["scores"], atol=1e-4)
               for s, l in zip(served, local))
    correct = sum(s["class"] == int(y) for s, y in zip(served, labels))
    bad_request = requests.post(address + route, data=b"not an image", timeout=30)
    print(f"self-test: {same}/{n} served predictions match the local model; accuracy {100 * correct / n:.1f}%; "
          f"{n / elapsed:.0f} requests/s from 8 clients; a bad body answers {bad_request.status_code}", flush=True)
    return 0 if same == n and bad_request.status_code == 400 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="prism_results/fashion_mnist_py_cnn.pt")
    parser.add_argument("--train-steps", type=int, default=400)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (see the endpoint file)")
    parser.add_argument("--endpoint-file", default="serve_fashion_mnist_py.endpoint")
    parser.add_argument("--route-prefix", default="/fashion_mnist")
    parser.add_argument("--self-test", type=int, default=0, metavar="N")
    args = parser.parse_args()

    prism.init()  # rank 0 goes on as the driver; the other ranks host replicas from here
    if not os.path.exists(args.checkpoint):
        train(args.checkpoint, args.train_steps)
    checkpoint = os.path.abspath(args.checkpoint)
    classifier = Classifier.options(num_replicas=args.replicas, max_ongoing_requests=2 * args.max_batch_size)
    app = Preprocessor.bind(classifier.bind(checkpoint, args.max_batch_size, args.batch_wait_ms / 1000))
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(app, route_prefix=args.route_prefix, name="fashion_mnist")
    address = serve.status().http_address
    with open(args.endpoint_file + ".part", "w") as f:
        f.write(address + "\n")
    os.replace(args.endpoint_file + ".part", args.endpoint_file)
    print(f"serving {args.replicas} classifier replicas at {address}{args.route_prefix} "
          f"(endpoint in {args.endpoint_file}); SIGTERM drains and stops", flush=True)
    if args.self_test:
        status = self_test(address, args.route_prefix, checkpoint, args.self_test)
        stats = [serve.get_deployment_handle("Classifier", "fashion_mnist").stats.remote().result(timeout_s=30)
                 for _ in range(4 * args.replicas)]
        batches = max(sum(s["batches"] for s in stats), 1)
        print(f"mean batch size about {sum(s['items'] for s in stats) / batches:.1f} (of replicas asked)")
        serve.shutdown()
        prism.shutdown()
        return status
    serve.run(app, route_prefix=args.route_prefix, name="fashion_mnist", blocking=True)
    print("drained and stopped", flush=True)
    prism.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
