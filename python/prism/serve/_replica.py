"""A replica's Python side: what prism._serve's PythonDeployment calls, on the replica's
actor thread holding the GIL.

create(spec) builds the user's instance from the cloudpickled deployment (a class and its
bound arguments, or a function). A class with an async method (an `async def`, a
@serve.batch method) or a FastAPI ingress runs every call on one event loop of its own
(prism._worker._AsyncActor, as the core's async actors), so coroutines interleave while the
engine's actor threads wait without the GIL; other classes run on the actor threads.

Nothing here raises into C++: each entry returns its outcome."""

import contextvars
import json
import pickle
import sys
import traceback

import cloudpickle

from prism import _worker

from . import _http
from ._handle import _Slot

# The replica a call runs for: get_replica_context(), get_deployment_handle's default app,
# and the `self` of an ingress class's FastAPI routes.
current = contextvars.ContextVar("prism_serve_replica", default=None)
_servable = contextvars.ContextVar("prism_serve_servable", default=None)


class ReplicaContext:
    """What serve.get_replica_context() returns inside a replica (Ray's ReplicaContext)."""

    def __init__(self, app_name, deployment, replica_id, servable_object):
        self.app_name = app_name
        self.deployment = deployment
        self.replica_id = replica_id
        self.replica_tag = replica_id
        self.servable_object = servable_object


class _FunctionDeployment:
    """A function deployment as a class: its calls (HTTP or handle) call the function."""

    def __init__(self, function):
        self._function = function

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)


class _AsyncFunctionDeployment(_FunctionDeployment):
    async def __call__(self, *args, **kwargs):
        return await self._function(*args, **kwargs)


def create(spec):
    """("ok", Replica) or ("error", the constructor's traceback)."""
    try:
        app_name, name, target, args, kwargs, asgi = cloudpickle.loads(spec)
        return "ok", Replica(app_name, name, cloudpickle.loads(target), args, kwargs, _asgi_app(asgi))
    except BaseException as e:  # noqa: B902 - everything goes back as text
        tb = e.__traceback__
        text = "".join(traceback.format_exception(type(e), e, tb))
        return "error", f"the deployment's constructor raised {type(e).__name__}: {e}\n{text}"
    finally:
        _flush()


def _asgi_app(spec):
    """The ingress class's ASGI app (see prism.serve._api._asgi_spec), or None."""
    if spec is None:
        return None
    if spec[0] == "value":
        return spec[1]
    import importlib
    _, module, name = spec
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"prism.serve: the @serve.ingress app {module}.{name} is not on rank {_worker._rank()} "
                           f"({e}); every rank must run the same program and define the app before "
                           "prism.init()") from None


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


class Replica:
    def __init__(self, app_name, name, target, args, kwargs, asgi_app=None):
        self.app_name = app_name
        self.name = name
        self.asgi_app = asgi_app
        self.context = ReplicaContext(app_name, name, f"{name}@rank{_worker._rank()}", None)
        if isinstance(target, type):
            cls = target
            token = current.set(self.context)
            try:
                instance = _worker._call(cls, args, kwargs)
            finally:
                current.reset(token)
        else:
            import inspect
            wrapper = _AsyncFunctionDeployment if inspect.iscoroutinefunction(target) else _FunctionDeployment
            instance = wrapper(target)
            cls = type(instance)
        self.instance = instance
        self.context.servable_object = instance
        if self.asgi_app is not None:
            _http.bind_class_routes(self.asgi_app, cls, _servable)
        async_class = self.asgi_app is not None or _worker._is_async_class(cls)
        self.actor = _worker._AsyncActor(instance) if async_class else None

    # ---- running user code -------------------------------------------------------------

    def _run(self, function, args, kwargs):
        """Calls function(*args, **kwargs) as the replica's code: on its event loop for an
        async class (a coroutine is awaited there), else on this thread."""
        if self.actor is not None:
            context = self.context

            async def in_context():
                current.set(context)
                _servable.set(context.servable_object)
                result = function(*args, **kwargs)
                if hasattr(result, "__await__"):
                    result = await result
                return result
            return self.actor.run(in_context, (), {})
        token = current.set(self.context)
        try:
            return _worker._call_method(function, args, kwargs)
        finally:
            current.reset(token)

    def _method(self, name):
        try:
            return getattr(self.instance, name)
        except AttributeError:
            what = "function" if isinstance(self.instance, _FunctionDeployment) else "class"
            raise AttributeError(f"prism.serve: deployment {self.name!r} ({what} "
                                 f"{type(self.instance).__qualname__}) has no method {name!r}") from None

    # ---- what the engine calls ---------------------------------------------------------

    def http(self, method, path, route_prefix, query, headers, body):
        """(status, body, content type, headers) for one HTTP request."""
        try:
            if self.asgi_app is not None:
                app = self.asgi_app
                return self._run(_http.run_asgi, (app, method, path, route_prefix, query, headers, body), {})
            handler = getattr(self.instance, "__call__", None)
            if handler is None or not callable(self.instance):
                raise TypeError(f"deployment {self.name!r} has no __call__ method to handle HTTP requests")
            request = _http.make_request(method, path, route_prefix, query, headers, body)
            return _http.to_response(self._run(handler, (request,), {}))
        except BaseException as e:  # noqa: B902
            return _http.error_response(e, f"deployment {self.name!r} handling {method} {path}")
        finally:
            _flush()

    def call(self, parts):
        """("ok", pickled result) or ("error", traceback + pickled exception)."""
        try:
            method_name, args, kwargs = pickle.loads(parts[0])
            if len(parts) > 1:
                def fill(v):
                    return pickle.loads(parts[1 + v.index]) if isinstance(v, _Slot) else v
                args = tuple(fill(a) for a in args)
                kwargs = {k: fill(v) for k, v in kwargs.items()}
            result = self._run(self._method(method_name), args, kwargs)
            return "ok", cloudpickle.dumps(result, protocol=5)
        except BaseException as e:  # noqa: B902
            return "error", _worker.describe(e)
        finally:
            _flush()

    def reconfigure(self, config_text):
        """None, or the error's text."""
        return self._hook("reconfigure", (json.loads(config_text),))

    def check_health(self, _unused=""):
        return self._hook("check_health", ())

    def _hook(self, name, args):
        method = getattr(self.instance, name, None)
        if method is None:
            if name == "reconfigure":
                return (f"deployment {self.name!r} has a user_config but its class has no "
                        "reconfigure(self, config) method")
            return None
        try:
            self._run(method, args, {})
            return None
        except BaseException as e:  # noqa: B902
            return "".join(traceback.format_exception(type(e), e, e.__traceback__))
        finally:
            _flush()

    def close(self):
        actor, self.actor = self.actor, None
        if actor is not None:
            try:
                actor.loop.call_soon_threadsafe(_stop, actor.loop)
            except RuntimeError:  # closed already
                pass


def _stop(loop):
    """Cancels the loop's tasks (an idle @serve.batch queue's), then stops it: a task left
    pending when the loop closes is reported as destroyed."""
    import asyncio
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)
