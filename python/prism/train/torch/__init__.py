"""prism.train.torch: Ray Train's PyTorch front end (TorchTrainer, prepare_model,
prepare_data_loader, get_device, TorchConfig) on Prism's C++ Train engine.

Each worker's loop runs in the Python interpreter of its MPI rank, on the thread of the
engine's worker task. Before the loop, TorchConfig sets up torch.distributed for the
workers: world rank 0 picks a free TCP port on its host (as ScriptTrainer does for
torchrun's MASTER_ADDR/MASTER_PORT) and the engine's own collective broadcasts
"host:port" to the others, which all call init_process_group(gloo, tcp://host:port). The
torchrun variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, NODE_RANK) are set too. The group is destroyed when the loop ends (or
fails: its peers' pending collectives then fail instead of waiting for gloo's timeout).

Importing this module loads LibTorch and the engine (prism._train): import it at the top
of the script, before prism.init(), so every rank registers the engine's loop.
"""

import datetime
import os
import threading
import traceback

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import (DataLoader, DistributedSampler, IterableDataset, RandomSampler)

import prism
from prism import _malloc

from .. import _session
from .._config import _check_kwargs
from .._net import free_port as _free_port, reachable_host as _reachable_host
from .._trainer import DataParallelTrainer

_session.ext()  # register the engine's training loop on this rank (see the docstring)

# torch.distributed has one default process group per process, and a rank is one process:
# two workers of different runs (Tune trials) on one rank would share it. Each rank offers
# one of this resource and each worker takes it, so a rank holds one torch worker at a time.
PROCESS_GROUP_RESOURCE = "prism_torch_process_group"
if not prism.is_initialized():
    prism._rank_resources[PROCESS_GROUP_RESOURCE] = 1.0


def _keep_freed_memory():
    """A training step's freed memory is kept for the next: prism._malloc's settings,
    which ``import prism`` applied already (the same opt-outs). Returns what it set."""
    return _malloc.keep_freed_memory()


if not prism.is_initialized():
    _MALLOC_SET = _keep_freed_memory()

__all__ = ["TorchTrainer", "TorchConfig", "prepare_model", "prepare_data_loader", "get_device",
           "get_devices"]


class TorchConfig:
    """How the workers' torch.distributed is set up (Ray's TorchConfig): backend "gloo"
    (default on CPU; "nccl" needs GPUs), timeout_s for its collectives and rendezvous."""

    def __init__(self, backend=None, init_method="env", timeout_s=1800, **kwargs):
        _check_kwargs("TorchConfig", kwargs, ("backend", "init_method", "timeout_s"))
        if backend not in (None, "gloo", "nccl"):
            raise ValueError(f"TorchConfig: backend {backend!r} is not one of 'gloo', 'nccl'")
        if init_method not in ("env", "tcp"):
            raise ValueError(f"TorchConfig: init_method {init_method!r} is not one of 'env', 'tcp'")
        if not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise ValueError(f"TorchConfig: timeout_s must be a positive number, not {timeout_s!r}")
        self.backend = backend
        self.init_method = init_method
        self.timeout_s = timeout_s

    def __repr__(self):
        return f"TorchConfig(backend={self.backend!r}, timeout_s={self.timeout_s})"

    # ---- called by the worker around the loop (prism.train._session.run_worker) ----
    def _on_start(self, ctx):
        backend = self.backend or ("nccl" if ctx._device().startswith("cuda") else "gloo")
        rank, size = ctx.get_world_rank(), ctx.get_world_size()
        mine = b""
        if rank == 0:
            host = "127.0.0.1" if size == 1 else _reachable_host()
            mine = f"{host}:{_free_port()}".encode()
        address = _session.ext().broadcast_bytes(mine).decode()
        host, port = address.rsplit(":", 1)
        os.environ.update({"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank),
                           "WORLD_SIZE": str(size), "LOCAL_RANK": str(ctx.get_local_rank()),
                           "LOCAL_WORLD_SIZE": str(ctx.get_local_world_size()),
                           "NODE_RANK": str(ctx.get_node_rank())})
        if dist.is_initialized():  # left by an earlier loop on this rank that did not end cleanly
            dist.destroy_process_group()
        dist.init_process_group(backend=backend, init_method=f"tcp://{host}:{port}", rank=rank,
                                world_size=size,
                                timeout=datetime.timedelta(seconds=self.timeout_s))

    def _on_shutdown(self):
        if dist.is_initialized():
            dist.destroy_process_group()

    def _on_failure(self, error):
        """The loop raised: its process group goes a second later, with the frames that hold
        the model (a DDP model keeps the group's connections open). The peers' pending
        collectives then fail, so they stop at once instead of at gloo's timeout; the delay
        lets this worker's failure reach the driver first, so fit names the root cause, not
        a peer's "connection reset"."""
        group = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None

        def teardown():
            traceback.clear_frames(error.__traceback__)
            if group is not None and dist.is_initialized() and \
                    dist.distributed_c10d._get_default_group() is group:
                dist.destroy_process_group()

        timer = threading.Timer(1.0, teardown)
        timer.daemon = True
        timer.start()


class TorchTrainer(DataParallelTrainer):
    """Ray's TorchTrainer: TorchTrainer(train_loop_per_worker, *, train_loop_config=None,
    torch_config=None, scaling_config=None, run_config=None, resume_from_checkpoint=None)
    .fit() -> Result. Each worker runs train_loop_per_worker(config) (or () if it takes no
    argument) with torch.distributed set up (see the module's docstring)."""

    _backend_config_class = TorchConfig
    _KNOWN = DataParallelTrainer._KNOWN + ("torch_config",)

    def __init__(self, train_loop_per_worker, **kwargs):
        torch_config = kwargs.pop("torch_config", None)
        if torch_config is not None:
            if not isinstance(torch_config, TorchConfig):
                raise TypeError("TorchTrainer: torch_config must be a prism.train.torch.TorchConfig")
            kwargs["backend_config"] = torch_config
        super().__init__(train_loop_per_worker, **kwargs)

    def _engine_options(self, payload):
        options = super()._engine_options(payload)
        if PROCESS_GROUP_RESOURCE in prism.cluster_resources():  # ranks that imported this first
            sc = self.scaling_config
            res = options["resources_per_worker"] or ({"CPU": 1.0, "GPU": 1.0} if sc.use_gpu else {"CPU": 1.0})
            options["resources_per_worker"] = {**res, PROCESS_GROUP_RESOURCE: 1.0}
        return options


def get_device():
    """The device this worker trains on: cpu, or with use_gpu the GPU its task holds."""
    if not _session.in_session():
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(_session.get_context()._device())


def get_devices():
    return [get_device()]


def prepare_model(model, move_to_device=True, parallel_strategy="ddp",
                  parallel_strategy_kwargs=None, *, wrap_ddp=None, ddp_kwargs=None):
    """Moves `model` to get_device() and, with more than one worker, wraps it in
    DistributedDataParallel over the workers' process group (gradients averaged across
    workers after each backward)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"prepare_model takes a torch.nn.Module, not {type(model).__name__}")
    if wrap_ddp is False:
        parallel_strategy = None
    kwargs = dict(parallel_strategy_kwargs or ddp_kwargs or {})
    if parallel_strategy not in (None, "ddp"):
        raise ValueError(f"prepare_model: parallel_strategy {parallel_strategy!r} is not supported "
                         "(only 'ddp' or None)")
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy == "ddp" and _session.in_session() and \
            _session.get_context().get_world_size() > 1:
        if device.type == "cuda":
            kwargs.setdefault("device_ids", [device])
            kwargs.setdefault("output_device", device)
        model = DistributedDataParallel(model, **kwargs)
    return model


class _DeviceLoader:
    """A DataLoader whose batches are moved to a GPU (Ray's _WrappedDataLoader)."""

    def __init__(self, loader, device):
        self._loader = loader
        self._device = device

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def _move(self, item):
        if isinstance(item, torch.Tensor):
            return item.to(self._device, non_blocking=True)
        if isinstance(item, (list, tuple)):
            return type(item)(self._move(i) for i in item)
        if isinstance(item, dict):
            return {k: self._move(v) for k, v in item.items()}
        return item

    def __iter__(self):
        for batch in self._loader:
            yield self._move(batch)


def prepare_data_loader(data_loader, add_dist_sampler=True, move_to_device=True,
                        auto_transfer=True):
    """With more than one worker, gives `data_loader` a DistributedSampler (each worker
    reads its own share of every epoch; shuffled when the loader shuffled); batches go to
    get_device(). Call loader.sampler.set_epoch(epoch) each epoch to reshuffle."""
    if not isinstance(data_loader, DataLoader):
        raise TypeError(f"prepare_data_loader takes a torch DataLoader, not {type(data_loader).__name__}")
    if add_dist_sampler and _session.in_session() and _session.get_context().get_world_size() > 1 \
            and not isinstance(data_loader.dataset, IterableDataset) \
            and not isinstance(data_loader.sampler, DistributedSampler):
        if data_loader.batch_size is None:
            raise ValueError("prepare_data_loader: a DataLoader with its own batch_sampler cannot be "
                             "sharded; pass add_dist_sampler=False and shard it yourself")
        ctx = _session.get_context()
        sampler = DistributedSampler(data_loader.dataset, num_replicas=ctx.get_world_size(),
                                     rank=ctx.get_world_rank(),
                                     shuffle=isinstance(data_loader.sampler, RandomSampler))
        extra = {}
        if data_loader.num_workers > 0:
            extra = {"prefetch_factor": data_loader.prefetch_factor,
                     "persistent_workers": data_loader.persistent_workers}
        data_loader = DataLoader(
            data_loader.dataset, batch_size=data_loader.batch_size, sampler=sampler,
            num_workers=data_loader.num_workers, collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory, drop_last=data_loader.drop_last,
            timeout=data_loader.timeout, worker_init_fn=data_loader.worker_init_fn,
            generator=data_loader.generator, **extra)
    device = get_device()
    if move_to_device and device.type != "cpu":
        return _DeviceLoader(data_loader, device)
    return data_loader
