"""DeploymentHandle and DeploymentResponse (Ray Serve's), over the engine's routers.

A call is pickled as (method, args, kwargs) and sent through prism._serve.submit, which
routes it like a C++ handle call (the engine's router on this rank, power of two choices,
max_ongoing_requests, back pressure). DeploymentResponses among the top-level arguments are
sent after they finish, their pickled results beside the call (_Slot marks where they go),
without a thread waiting for them.

`await response` registers a token with the engine's response; once it is done, the token
reaches this process's waker thread (prism._serve.next_done), which wakes the awaiting
event loop. The engine's completion threads never take the GIL."""

import asyncio
import itertools
import threading

import cloudpickle

from . import exceptions

_serve = None  # prism._serve, set by prism.serve's __init__


class _Slot:
    """Stands for the i-th DeploymentResponse argument in a pickled call."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        return (_Slot, (self.index,))


def _cpp_name(app_name, deployment_name):
    """The engine's name of a deployment: unique within the job, as Ray's are within an
    application."""
    return f"{app_name}:{deployment_name}"


class DeploymentHandle:
    """A handle to a deployment (Ray's DeploymentHandle): ``handle.remote(...)`` calls its
    ``__call__`` (a function deployment: the function), ``handle.method.remote(...)`` another
    method; both return a DeploymentResponse at once. Cheap, picklable: pass it to a
    constructor with .bind(), or to tasks; usable on any rank. Thread-safe."""

    def __init__(self, deployment_name, app_name="default", method_name="__call__"):
        self.deployment_name = deployment_name
        self.app_name = app_name
        self._method = method_name
        self._cpp = _cpp_name(app_name, deployment_name)

    def options(self, *, method_name=None, multiplexed_model_id=None, stream=False, use_new_handle_api=True):
        """A copy with other call options (Ray's): method_name. stream=True and
        multiplexed_model_id are not supported."""
        if stream:
            raise NotImplementedError("prism.serve: streaming handles (stream=True) are not supported")
        if multiplexed_model_id:
            raise NotImplementedError("prism.serve: model multiplexing is not supported")
        return DeploymentHandle(self.deployment_name, self.app_name, method_name or self._method)

    def __getattr__(self, name):
        if name.startswith("__") or name.startswith("_prism"):
            raise AttributeError(name)
        return DeploymentHandle(self.deployment_name, self.app_name, name)

    def remote(self, *args, **kwargs):
        """Calls the method with these arguments (any picklable values; DeploymentResponses
        are passed as their results once ready). Returns a DeploymentResponse."""
        deps = []

        def slot(value):
            if isinstance(value, DeploymentResponse):
                deps.append(value._state)
                return _Slot(len(deps) - 1)
            return value

        args = tuple(slot(a) for a in args)
        kwargs = {k: slot(v) for k, v in kwargs.items()}
        call = cloudpickle.dumps((self._method, args, kwargs), protocol=5)
        return DeploymentResponse(_serve.submit(self._cpp, call, deps), self)

    def __reduce__(self):
        return (DeploymentHandle, (self.deployment_name, self.app_name, self._method))

    def __repr__(self):
        return f"DeploymentHandle(deployment={self.deployment_name!r}, app={self.app_name!r}, method={self._method!r})"


class DeploymentResponse:
    """The future result of a handle call (Ray's DeploymentResponse): ``.result(timeout_s=)``
    waits for it, ``await response`` awaits it on an event loop, and passing it to another
    handle call sends that call once this one finished. Thread-safe."""

    def __init__(self, state, handle):
        self._state = state
        self._handle = handle

    def result(self, timeout_s=None, *, _skip_asyncio_check=False):
        """The call's return value, waiting up to timeout_s seconds (None: no limit).
        Raises TimeoutError (prism.exceptions.GetTimeoutError) when the wait ends first; the
        method's own exception (a prism TaskError that is also of the original type, with
        the replica's traceback); BackPressureError; RayServeException (no such deployment,
        deleted, Serve shut down). Inside an event loop use ``await`` instead (Ray's rule)."""
        if not _skip_asyncio_check and _in_event_loop():
            raise RuntimeError("prism.serve: DeploymentResponse.result() blocks, and would block this "
                               "thread's event loop: use `await response` in an async method")
        if not self._state.wait(-1.0 if timeout_s is None else float(timeout_s)):
            from prism.exceptions import GetTimeoutError
            raise GetTimeoutError(f"prism.serve: no result from {self._what()} within {timeout_s} s")
        return _unpack(self._state.outcome(), self._what())

    def __await__(self):
        if not self._state.done():
            yield from _waiter(self._state).__await__()
        return _unpack(self._state.outcome(), self._what())

    def _what(self):
        h = self._handle
        return f"{h.deployment_name}.{h._method} (application {h.app_name!r})"

    def __reduce__(self):
        raise TypeError("prism.serve: a DeploymentResponse cannot be pickled; pass it as a top-level "
                        "argument of a handle call, or its .result()")


def _in_event_loop():
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def _unpack(outcome, what):
    kind = outcome[0]
    if kind == "ok":
        return cloudpickle.loads(outcome[1])
    if kind == "task":
        _, original_type, message, task_name, rank = outcome
        _raise_replica_error(original_type, message, what, rank)
    if kind == "backpressure":
        raise exceptions.BackPressureError(outcome[1])
    if kind == "deployment":
        raise exceptions.RayServeException(outcome[1])
    if kind == "actor":
        raise exceptions.DeploymentUnavailableError(f"prism.serve: the replica running {what} died: {outcome[1]}")
    raise exceptions.RayServeException(outcome[1])


def _raise_replica_error(original_type, message, what, rank):
    """Raises the replica's exception as prism.get raises a task's: a TaskError that is also
    of the original type, with the replica's traceback."""
    from prism._worker import MARKER, decode_attached
    from prism.exceptions import TaskError, _task_error
    at = message.rfind(MARKER)
    if at < 0:
        raise TaskError(f"{original_type} in {what} on rank {rank}: {message}", None, original_type, message,
                        what, rank) from None
    cause, cause_type, text = decode_attached(message[at + len(MARKER):].rstrip("]"), original_type, message[:at])
    header = f"{cause_type} in {what} on rank {rank}; the replica's traceback:\n"
    raise _task_error(header + text.rstrip("\n"), cause, cause_type, text, what, rank) from None


# ---- await -------------------------------------------------------------------------------

_waiters = {}  # token -> (loop, future)
_tokens = itertools.count(1)
_waker_lock = threading.Lock()
_waker = None


def _waiter(state):
    """An asyncio future of the running loop, done once `state` is."""
    global _waker
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    token = next(_tokens)
    _waiters[token] = (loop, future)
    with _waker_lock:
        if _waker is None:
            _waker = threading.Thread(target=_wake, name="prism-serve-waker", daemon=True)
            _waker.start()
    state.notify(token)
    return future


def _wake():
    while True:
        token = _serve.next_done(1.0)
        if token is None:
            continue
        loop, future = _waiters.pop(token, (None, None))
        if loop is None:
            continue
        try:
            loop.call_soon_threadsafe(_set_done, future)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            pass


def _set_done(future):
    if not future.done():
        future.set_result(None)
