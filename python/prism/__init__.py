"""Prism for Python: Ray's programming model inside one MPI job, over Prism's C++ core.

    import prism

    @prism.remote
    def square(x):
        return x * x

    prism.init()          # rank 0 returns; other ranks serve tasks and exit when it ends
    print(prism.get([square.remote(i) for i in range(4)]))
    prism.shutdown()

Launch it like the C++ programs: ``mpirun -n 4 python3 app.py``, ``srun --mpi=pmix python3
app.py``, or ``python3 app.py`` (a one-rank cluster). Every rank runs the same script: code
before ``prism.init()`` runs on every rank, code after it on rank 0 only (the driver).
"""

import atexit
import os
import sys



def _import_global(name):
    """prism.<name>, a C++ extension, loaded with RTLD_GLOBAL: the extensions loaded after it
    resolve its engine from it instead of holding a copy (prism._prism: the core, which Open
    MPI's plugins and load_library's functions need too; prism._tune: Tune and the checkpoint
    store, which prism._train's TorchTrainer trials report to)."""
    import importlib
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_GLOBAL)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    finally:
        sys.setdlopenflags(flags)


from . import _malloc  # noqa: E402

# Before prism.init starts the rank's threads: one malloc arena that keeps what a step
# frees for the next, so a task's allocations are not faulted in again (prism/_malloc.py).
_MALLOC_SET = _malloc.keep_freed_memory()

_prism = _import_global("_prism")

from . import _events, _serialization, exceptions  # noqa: E402
from ._remote import ActorClass, ActorHandle, ObjectRefGenerator, RemoteFunction, method, remote  # noqa: E402
from ._remote import ensure_init as _ensure_init  # noqa: E402
from .exceptions import (GetTimeoutError, PrismRuntimeError, TaskError,  # noqa: E402
                         _task_error)
from ._worker import MARKER as _MARKER, decode_attached as _decode_attached  # noqa: E402

ObjectRef = _prism.ObjectRef

__all__ = ["init", "shutdown", "is_initialized", "remote", "get", "put", "wait", "cancel",
           "get_actor", "kill", "nodes", "cluster_resources", "available_resources",
           "get_runtime_context", "method", "get_gpu_ids", "cpp_function", "cpp_actor", "load_library", "ObjectRef",
           "ObjectRefGenerator",
           "ActorHandle", "exceptions", "kv", "util"]


# Resources every rank adds to its own at init, registered by libraries imported before it
# (prism.train.torch: one torch.distributed default group per process).
_rank_resources = {}


def init(*, num_cpus=None, num_gpus=None, resources=None, namespace=None, log_level=None,
         dashboard=None, ignore_reinit_error=False):
    """Starts Prism. On rank 0 it returns and the rest of the script is the driver; on every
    other rank it serves tasks, session after session (an init after shutdown starts the
    next), and exits the process when the driver ends (the job's exit status is the
    driver's). Options apply to this rank's resources (as in C++, per rank: num_cpus, num_gpus,
    custom resources). dashboard: rank 0's dashboard, "off" (the default), "loopback",
    "<address>:<port>" or "report" (README, "Dashboard"; PRISM_DASHBOARD overrides it).
    Raises PrismRuntimeError if already initialized (unless ignore_reinit_error)."""
    if _prism.is_initialized():
        if ignore_reinit_error:
            return
        raise PrismRuntimeError("prism.init() was called twice: Prism is already running in "
                                "this process (call prism.shutdown() first, or pass "
                                "ignore_reinit_error=True)")
    _events.start()  # before init: on worker ranks init serves tasks until the driver ends
    _prism.init(list(sys.argv), {**_rank_resources, **(resources or {})}, num_cpus, num_gpus, namespace,
                log_level, dashboard)
    atexit.register(_shutdown_at_exit)


def _shutdown_at_exit():
    if _prism.is_initialized():
        shutdown()


def shutdown():
    """Stops every rank (the driver only). Outstanding tasks are abandoned. A no-op when
    not initialized. Called at exit if the script did not."""
    from . import _worker
    _worker.cancel_async_calls()
    _prism.shutdown()
    _events.fail_pending("prism.shutdown() ended the session before this future's object was ready")


def is_initialized():
    """True between init and shutdown."""
    return _prism.is_initialized()


def _raise_task_failure(fields):
    original_type, message, task_name, rank, what = fields
    if original_type == "WorkerCrashed":
        raise exceptions.WorkerCrashedError(f"prism: {message}; its retries (max_retries) are spent") from None
    at = message.rfind(_MARKER)
    if at < 0:  # a C++ task failed
        raise TaskError(what, None, original_type, "", task_name, rank) from None
    cause, cause_type, text = _decode_attached(message[at + len(_MARKER):].rstrip("]"), original_type,
                                               message[:at])
    header = f"{cause_type} in task {task_name} on rank {rank}; the worker's traceback:\n"
    raise _task_error(header + text.rstrip("\n"), cause, cause_type, text, task_name, rank) from None


def _refs_of(refs, what):
    if isinstance(refs, ObjectRef):
        return [refs], True
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"prism.{what} takes an ObjectRef or a list of ObjectRefs, not "
                        f"{type(refs).__name__}")
    refs = list(refs)
    for r in refs:
        if not isinstance(r, ObjectRef):
            raise TypeError(f"prism.{what}: an element is a {type(r).__name__}, not an ObjectRef")
    return refs, False


def _timeout_ms(timeout):
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError(f"prism: timeout must be >= 0 seconds or None, not {timeout}")
    return int(timeout * 1000)


def get(refs, *, timeout=None):
    """The value of an ObjectRef, or the values of a list of them, waiting up to `timeout`
    seconds (None: until ready; a lost rank ends the job, so this cannot wait forever on a
    lost object). Raises the task's exception as a TaskError that is also an instance of
    its type, GetTimeoutError after the timeout. Arrays are read-only views of the object
    store's memory when the object is on this rank."""
    lst, single = _refs_of(refs, "get")
    try:
        views = _prism.get(lst, _timeout_ms(timeout))
    except _prism.TaskFailure as e:
        _raise_task_failure(e.args)
    values = [_serialization.decode(v, r._cpp_type) for v, r in zip(views, lst)]
    return values[0] if single else values


def put(value):
    """Stores a value in the object store and returns its ObjectRef. NumPy arrays (and CPU
    torch tensors) are copied once, into the store."""
    if isinstance(value, ObjectRef):
        raise TypeError("prism.put of an ObjectRef: pass the ref itself instead")
    _ensure_init()
    parts, contained = _serialization.encode(value)
    return _prism.put(parts, contained)


def _wait_with_generators(items, num_returns, timeout):
    """wait over refs and ObjectRefGenerators (Ray's): a generator is ready when its next()
    would not wait. Looks in slices of 10 ms (refs and generators have no common wait)."""
    import time
    deadline = None if timeout is None else time.monotonic() + timeout
    refs = [x for x in items if isinstance(x, ObjectRef)]
    while True:
        flags = dict(zip(refs, _prism.wait(refs, len(refs), 0))) if refs else {}
        ready = [x for x in items if (flags[x] if isinstance(x, ObjectRef) else x._ready(0))]
        left = None if deadline is None else deadline - time.monotonic()
        if len(ready) >= num_returns or (left is not None and left <= 0):
            break
        slice_s = 0.01 if left is None else max(0.0, min(0.01, left))
        gens = [x for x in items if isinstance(x, ObjectRefGenerator) and x not in ready]
        if gens:
            gens[0]._ready(int(slice_s * 1000))
        else:
            _prism.wait(refs, len(refs), int(slice_s * 1000))
    chosen = ready[:num_returns]
    return chosen, [x for x in items if not any(x is c for c in chosen)]


def wait(refs, *, num_returns=1, timeout=None):
    """(ready, not_ready): the first num_returns refs that are ready (in input order) once
    that many are, or those ready after `timeout` seconds. A failed task counts as ready.
    ObjectRefGenerators may be among them (ready when their next value is, or they ended)."""
    if isinstance(refs, (list, tuple)) and any(isinstance(r, ObjectRefGenerator) for r in refs):
        items = list(refs)
        for r in items:
            if not isinstance(r, (ObjectRef, ObjectRefGenerator)):
                raise TypeError(f"prism.wait: an element is a {type(r).__name__}, not an ObjectRef")
        if not 0 <= num_returns <= len(items):
            raise ValueError(f"prism.wait: num_returns is {num_returns} but there are {len(items)} refs")
        _timeout_ms(timeout)  # checks it
        return _wait_with_generators(items, num_returns, timeout)
    lst, _ = _refs_of(list(refs) if isinstance(refs, (list, tuple)) else refs, "wait")
    if not lst:
        return [], []
    if not 0 <= num_returns <= len(lst):
        raise ValueError(f"prism.wait: num_returns is {num_returns} but there are {len(lst)} refs")
    if len(set(lst)) != len(lst):
        raise ValueError("prism.wait: the refs repeat")
    flags = _prism.wait(lst, num_returns, _timeout_ms(timeout))
    ready, not_ready = [], []
    for r, f in zip(lst, flags):
        (ready if f and len(ready) < num_returns else not_ready).append(r)
    return ready, not_ready


def cancel(ref, *, force=False, recursive=True):
    """Cancels the task that makes `ref` (Ray's ray.cancel); its get raises
    TaskCancelledError. A task not started never runs. A running Python task gets
    KeyboardInterrupt in its thread, as in Ray (a blocked get or wait inside it ends at
    once); is_canceled() is true inside it. An actor method call that has not started is
    dropped; a running one is not interrupted. With `recursive` the tasks it submitted are
    cancelled too. force=True would kill the task's worker process in Ray; a Prism task
    shares its rank's process with others, so it is refused (ValueError)."""
    if force:
        raise ValueError("prism.cancel(force=True): a Prism task shares its rank's process with other "
                         "tasks, so it cannot be killed on its own; cancel without force (the task "
                         "gets KeyboardInterrupt), or end an actor with prism.kill")
    _prism.cancel(ref, recursive)


def get_actor(name, namespace=None):
    """The handle of the live actor named `name`. Raises ValueError if there is none."""
    found = _prism.lookup_actor(name, namespace or "")
    if found is None:
        raise ValueError(f"prism.get_actor: no live actor named {name!r}")
    ref, class_name = found
    return ActorHandle(ref, class_name)


def kill(actor, *, no_restart=True):
    """Kills an actor; calls on it then raise ActorDiedError. With no_restart=False it is
    restarted if its max_restarts allows."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"prism.kill takes an actor handle, not {type(actor).__name__}")
    _prism.kill_actor(actor._ref.id(), no_restart)


def nodes():
    """Ray's ray.nodes(): one dict per node (a host; every rank on it has its node id):
    NodeID, Alive, NodeManagerAddress and NodeManagerHostname (the host), Resources (the
    sum over its ranks) and Ranks (Prism's: the ranks on it)."""
    out = {}
    for n in _prism.list_nodes():
        node = out.setdefault(n["node_id"], {"NodeID": n["node_id"], "Alive": True, "NodeManagerAddress": n["host"],
                                             "NodeManagerHostname": n["host"], "Resources": {}, "Ranks": []})
        node["Alive"] = node["Alive"] and n["state"] == "ALIVE"
        node["Ranks"].append(n["rank"])
        for k, v in n["resources_total"].items():
            node["Resources"][k] = node["Resources"].get(k, 0.0) + v
    return list(out.values())


def cluster_resources():
    """Total resources of the cluster, summed over ranks."""
    return _prism.cluster_resources()


def available_resources():
    """Resources not held by running tasks right now."""
    return _prism.available_resources()


class RuntimeContext:
    """Where the caller runs (Ray's get_runtime_context())."""

    def __init__(self, d):
        self._d = d

    rank = property(lambda self: self._d["rank"])
    world_size = property(lambda self: self._d["world_size"])
    namespace = property(lambda self: self._d["namespace"])

    def get_node_id(self):
        return self._d["node_id"]

    def get_job_id(self):
        return self._d["job_id"]

    def get_task_id(self):
        return self._d["task_id"]

    def is_driver(self):
        return self._d["is_driver"]

    def is_canceled(self):
        """True inside a task prism.cancel cancelled while it runs (False in actor methods)."""
        return _prism.is_cancelled()

    def __repr__(self):
        return f"RuntimeContext({self._d})"


def get_runtime_context():
    return RuntimeContext(_prism.runtime_context())


def get_gpu_ids():
    """The GPUs the running task or actor holds."""
    return _prism.gpu_ids()


from ._cpp import cpp_actor, cpp_function, load_library  # noqa: E402
from . import actor, kv, util  # noqa: E402
