#!/usr/bin/env python3
"""Prism for Python: the core of Ray's Python samples on Prism's C++ core.

    PYTHONPATH=build/python mpirun -n 3 /usr/bin/python3 apps/python_demo/demo.py
    PYTHONPATH=build/python /usr/bin/python3 apps/python_demo/demo.py        # one rank

1. remote functions: squares in parallel
2. an actor: a counter whose state lives on one rank
3. a task graph: a tree reduction whose tasks take each other's ObjectRefs
4. batch prediction: a torch model trained briefly on the driver, its weights put once in
   the object store, and a prism.util.ActorPool of predictor actors over batches; every
   prediction is checked against the driver's own (exit 1 on a mismatch)
"""

import argparse
import sys
import time
import warnings

import numpy as np

import prism
from prism.util import ActorPool


@prism.remote
def square(x):
    return x * x


@prism.remote
class Counter:
    def __init__(self):
        self.n = 0

    def increment(self, by=1):
        self.n += by
        return self.n


@prism.remote
def make_block(seed, size):
    return np.random.default_rng(seed).random(size)


@prism.remote
def block_sum(block):
    return float(block.sum())


@prism.remote
def add(a, b):
    return a + b


def tree_sum(refs):
    """Pairs ObjectRefs into add tasks until one is left: a graph the core schedules as each
    task's inputs become ready."""
    while len(refs) > 1:
        nxt = [add.remote(refs[i], refs[i + 1]) for i in range(0, len(refs) - 1, 2)]
        if len(refs) % 2:
            nxt.append(refs[-1])
        refs = nxt
    return refs[0]


def as_tensor(array):
    """A tensor over a (read-only) array from the object store, without a copy: the model
    only reads it (torch warns about read-only arrays; here that is intended)."""
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.as_tensor(array)


def make_model():
    import torch
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


@prism.remote
class Predictor:
    """One model replica; its weights come from the object store (read without a copy)."""

    def __init__(self, weights):
        import torch
        torch.set_num_threads(1)
        self.model = make_model()
        self.model.load_state_dict({k: as_tensor(v) for k, v in weights.items()})
        self.model.eval()

    def predict(self, batch):
        import torch
        with torch.no_grad():
            return self.model(as_tensor(batch)).argmax(dim=1).numpy()


def train_model(steps):
    import torch
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(512, 16)
    y = (x[:, :4].argmax(dim=1))  # the label: which of the first 4 features is largest
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model, float(loss)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--actors", type=int, default=0, help="predictor actors (default: one per rank)")
    args = ap.parse_args()

    prism.init()  # ranks 1..N-1 serve tasks here and exit at shutdown
    world = prism.get_runtime_context().world_size
    print(f"prism: {world} rank(s), resources {prism.cluster_resources().get('CPU')} CPUs")

    # 1. remote functions
    squares = prism.get([square.remote(i) for i in range(10)], timeout=60)
    assert squares == [i * i for i in range(10)]
    print("squares:", squares)

    # 2. an actor
    counter = Counter.remote()
    counts = prism.get([counter.increment.remote() for _ in range(5)], timeout=60)
    assert counts == [1, 2, 3, 4, 5]
    print("counter:", counts)

    # 3. a task graph: 16 blocks made on the ranks, summed, reduced as a tree
    blocks = [make_block.remote(seed, 100_000) for seed in range(16)]
    total = prism.get(tree_sum([block_sum.remote(b) for b in blocks]), timeout=120)
    expected = sum(float(np.random.default_rng(s).random(100_000).sum()) for s in range(16))
    assert abs(total - expected) < 1e-6 * expected, (total, expected)
    print(f"task graph: sum of 16 blocks = {total:.3f}")

    # 4. batch prediction with an ActorPool
    import torch
    model, loss = train_model(steps=60)
    weights = prism.put({k: v.detach().numpy() for k, v in model.state_dict().items()})
    actors = [Predictor.remote(weights) for _ in range(args.actors or world)]
    pool = ActorPool(actors)
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((args.batch_size, 16)).astype(np.float32) for _ in range(args.batches)]
    t = time.perf_counter()
    predictions = list(pool.map(lambda actor, b: actor.predict.remote(b), batches))
    elapsed = time.perf_counter() - t
    with torch.no_grad():
        local = [model(torch.as_tensor(b)).argmax(dim=1).numpy() for b in batches]
    mismatches = sum(int((p != q).sum()) for p, q in zip(predictions, local))
    rows = args.batches * args.batch_size
    accuracy = float(np.mean(np.concatenate([p == b[:, :4].argmax(axis=1) for p, b in zip(predictions, batches)])))
    print(f"batch prediction: {rows} rows in {elapsed * 1e3:.0f} ms on {len(actors)} actor(s), "
          f"train loss {loss:.3f}, accuracy {accuracy:.2f}, mismatches vs the driver: {mismatches}")
    prism.shutdown()
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
