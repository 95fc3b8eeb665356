"""The worker's side of a Python task: called by prism._prism on an executor thread that
holds the GIL. Finds the function (by module and qualified name, or from its cloudpickled
bytes, cached), decodes the arguments, calls it and encodes the result. An exception goes
back as ("error", text): the traceback, then the pickled exception after a marker, which
prism.get turns back into the same exception type on the driver."""

import asyncio
import base64
import concurrent.futures
import importlib
import inspect
import os
import sys
import threading
import time
import traceback

import cloudpickle

from . import _serialization
from .exceptions import FunctionNotFoundError, TaskError

MARKER = "\n[prism-python-exception:"  # the C++ core's kErrorAttachmentMarker
_cache = {}  # function blob -> function or class
_calls = threading.local()  # per executor thread: .depth (user code running), .loop, .pid


class _ProcessExit(BaseException):
    """os._exit called by a task's code: it would end the rank and every task on it."""

    def __init__(self, status):
        BaseException.__init__(self, status)
        self.status = status


_real_exit = os._exit


def _exit(status):
    """os._exit inside a task or actor method ends the call as if its worker died (the
    task is retried, the actor ends), not the rank: in Prism a rank hosts the driver or
    other tasks, where in Ray each task has a worker process of its own. Anywhere else (the
    driver's own code, a process the task forked) it exits as always."""
    if getattr(_calls, "depth", 0) > 0 and getattr(_calls, "pid", None) == os.getpid():
        raise _ProcessExit(status)
    _real_exit(status)


os._exit = _exit

_real_sleep = time.sleep
_sleepers = {}  # thread ident -> threading.Event, while a task's code sleeps in time.sleep
_async_calls = {}  # thread ident -> the concurrent future of the async actor call it waits for


def _sleep(seconds):
    """time.sleep inside a task or actor method: a wait that prism.cancel ends at once, so
    the KeyboardInterrupt it raises (Ray's) is not held up by a long sleep. Short sleeps,
    and every sleep outside tasks, are time.sleep's own."""
    if seconds < 0.05 or getattr(_calls, "depth", 0) == 0:
        return _real_sleep(seconds)
    woken = threading.Event()
    ident = threading.get_ident()
    _sleepers[ident] = woken
    try:
        woken.wait(seconds)
    finally:
        _sleepers.pop(ident, None)


time.sleep = _sleep


def on_cancel(ident, actor_call):
    """prism._events' thread, after the core flagged the call running on thread `ident`: a
    task's sleep ends (its KeyboardInterrupt follows); an async actor call's coroutine is
    cancelled (asyncio.CancelledError inside it, as in Ray). A sync actor method runs on
    (its is_canceled() is true)."""
    woken = None if actor_call else _sleepers.get(ident)
    if woken is not None:
        woken.set()
    call = _async_calls.get(ident)
    if call is not None:
        call.cancel()


def cancel_async_calls():
    """At shutdown: the async actor calls still waiting are cancelled, so no thread waits
    on an event loop when the interpreter ends."""
    for call in list(_async_calls.values()):
        call.cancel()


def _call(function, args, kwargs):
    """Calls the user's function as a task's code; a coroutine it returns (an async def
    method) runs to completion on this thread's event loop."""
    _calls.depth = getattr(_calls, "depth", 0) + 1
    _calls.pid = os.getpid()
    try:
        result = function(*args, **kwargs)
        if inspect.iscoroutine(result):
            loop = getattr(_calls, "loop", None)
            if loop is None or loop.is_closed():
                loop = _calls.loop = asyncio.new_event_loop()
            result = loop.run_until_complete(result)
        return result
    finally:
        _calls.depth -= 1


def _rank():
    try:
        from . import _prism
        return _prism.runtime_context()["rank"]
    except Exception:
        return -1


class _Retrying:
    """A task's function with retry_exceptions=[types] (Ray's allowlist): an exception of one
    of those types (or a failed nested task's of one) runs it again, up to max_retries
    times, on this rank; any other exception fails the task at once."""

    def __init__(self, function, types, max_retries):
        self.function = function
        self.types = types
        self.max_retries = max_retries
        self.__qualname__ = getattr(function, "__qualname__", "task")

    def __call__(self, *args, **kwargs):
        attempt = 0
        while True:
            try:
                return _call(self.function, args, kwargs)
            except Exception as e:
                cause = e.cause if isinstance(e, TaskError) else e
                if attempt >= self.max_retries or not isinstance(cause, self.types):
                    raise
                attempt += 1
                print(f"prism: task {self.__qualname__} raised {type(cause).__name__}: {cause}; "
                      f"retry {attempt}/{self.max_retries} (retry_exceptions)", file=sys.stderr)


def _unwrap(obj):
    return getattr(obj, "_prism_target", obj)  # a @prism.remote wrapper: what it wraps


def resolve(blob):
    """The function or class `blob` names (see _remote.function_blob). Cached."""
    target = _cache.get(blob)
    if target is not None:
        return target
    kind, body = blob[:1], blob[1:]
    if kind == b"R":
        module_name, qualname = body.decode().split("\0")
        try:
            target = importlib.import_module(module_name)
        except Exception as e:
            raise FunctionNotFoundError(
                f"prism: {module_name}.{qualname} is not on rank {_rank()}: importing "
                f"{module_name!r} failed ({type(e).__name__}: {e}); every rank must run the same "
                "program with the same PYTHONPATH") from None
        for part in qualname.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise FunctionNotFoundError(
                    f"prism: {module_name}.{qualname} is not on rank {_rank()}: module "
                    f"{module_name!r} has no {part!r} there (defined only on the driver?)") from None
        target = _unwrap(target)
    elif kind == b"X":  # retry_exceptions=[types]: the function of the inner blob, retried
        types, max_retries, inner = cloudpickle.loads(body)
        target = _Retrying(resolve(inner), types, max_retries)
    elif kind == b"P":
        try:
            target = _unwrap(cloudpickle.loads(body))
        except Exception as e:
            raise FunctionNotFoundError(
                f"prism: cannot unpickle a remote function on rank {_rank()}: "
                f"{type(e).__name__}: {e}") from None
    else:
        raise FunctionNotFoundError(f"prism: a corrupt function reference ({blob[:16]!r})")
    _cache[blob] = target
    return target


def decode_args(views):
    """(args, kwargs) from a call's views: [spec, resolved refs...]."""
    if not views or len(views[0]) == 0:
        return (), {}
    args, kwargs, slots = _serialization.decode(views[0])
    if slots:
        args = list(args)
        for (where, cpp_type), view in zip(slots, views[1:]):
            value = _serialization.decode(view, cpp_type)
            if isinstance(where, int):
                args[where] = value
            else:
                kwargs[where] = value
    return args, kwargs


def describe(exc):
    """The text a failed task leaves with: traceback, then the pickled exception."""
    if isinstance(exc, TaskError):
        # A task this one called failed: pass its cause on, not the wrapper, so the caller's
        # error is still of the cause's type (`except ValueError` works at every depth, as in
        # Ray) and carries the innermost traceback once; each level adds one header line.
        cause = exc.cause
        return _pickled(str(exc), cause, exc.cause_type)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # from the user's code on: this module's frames say nothing
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return _pickled(text, exc, f"{type(exc).__module__}.{type(exc).__qualname__}")


def _pickled(text, exc, cause_type):
    """`text`, then `exc` pickled as the caller rebuilds it (None: only the text)."""
    # The class, args and attributes apart: an exception whose __init__ takes other
    # arguments than its args cannot be unpickled whole (see rebuild_exception).
    if exc is None:
        return text + MARKER + base64.b64encode(cloudpickle.dumps((None, (), {}, cause_type, text))).decode() + "]"
    try:
        pickled = cloudpickle.dumps((type(exc), exc.args, dict(getattr(exc, "__dict__", {})),
                                     cause_type, text))
    except Exception:
        try:
            pickled = cloudpickle.dumps((type(exc), tuple(str(a) for a in exc.args), {}, cause_type, text))
        except Exception:
            pickled = cloudpickle.dumps((None, (), {}, cause_type, text))
    return text + MARKER + base64.b64encode(pickled).decode() + "]"


def rebuild_exception(cls, args, attributes):
    """The exception describe() pickled: cls(*args), else one made without __init__."""
    if cls is None:
        return None
    try:
        exc = cls(*args)
    except Exception:
        try:
            exc = cls.__new__(cls)
            exc.args = args
        except Exception:
            return None
    try:
        exc.__dict__.update(attributes)
    except Exception:
        pass
    return exc


def decode_attached(blob, fallback_type, fallback_text):
    """(exception, its type's name, the worker's traceback text) from the base64 blob that
    describe() put after MARKER; (None, fallback_type, fallback_text) when it cannot be
    read or rebuilt here."""
    try:
        cls, args, attributes, cause_type, text = cloudpickle.loads(base64.b64decode(blob))
        return rebuild_exception(cls, args, attributes), cause_type, text
    except Exception:
        return None, fallback_type, fallback_text


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _ok(result):
    parts, contained = _serialization.encode(result)
    return ("ok", parts, contained)


def _exited(e):
    return ("exit", f"called os._exit({e.status})")


class _ExitActor(BaseException):
    """Raised by prism.actor.exit_actor() in an actor method: ends the actor."""


def _split(result, what):
    """A num_returns > 1 call's result as one encoded value each: ("ok", parts, contained).
    A generator function with num_returns=N gives its N values (Ray's)."""
    if inspect.isgenerator(result):
        result = list(result)
    if not isinstance(result, (tuple, list)):
        raise TypeError(f"prism: {what} was called with num_returns > 1 but returned a "
                        f"{type(result).__name__}, not a tuple or list of that many values")
    parts, contained = [], []
    for value in result:
        p, c = _serialization.encode(value)
        parts.append(p)
        contained.append(c)
    return ("ok", parts, contained)


def run_task_parts(blob, views):
    try:
        function = resolve(blob)
        args, kwargs = decode_args(views)
        return _split(_call(function, args, kwargs), getattr(function, "__qualname__", "the task"))
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()


def call_actor_parts(instance, method_name, views):
    try:
        name = method_name.decode()
        method, actor = _bound(instance, name)
        args, kwargs = decode_args(views)
        return _split(_call_method(method, args, kwargs, actor), f"{type(actor.instance if actor else instance).__qualname__}.{name}")
    except _ExitActor:
        return ("exit_actor", "")
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()


def _is_async_class(cls):
    """An actor class with an `async def` method is an async actor (Ray's rule)."""
    for name in dir(cls):
        attr = getattr(cls, name, None)
        if inspect.iscoroutinefunction(attr) or inspect.isasyncgenfunction(attr):
            return True
    return False


class _AsyncActor:
    """An async actor's instance and its event loop, on a thread of its own: every method
    call (async or not) runs on that loop, as in Ray, so coroutines interleave at their
    awaits while the actor's calls (up to max_concurrency, 1000 by default) wait on the
    core's actor threads without the GIL. The loop ends with the actor."""

    def __init__(self, instance):
        self.instance = instance
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,),
                                       name=f"prism-actor-loop-{type(instance).__name__}", daemon=True)
        self.thread.start()
        started.wait()

    def _serve(self, started):
        asyncio.set_event_loop(self.loop)
        # Everything on this thread is the actor's code: exit_actor and os._exit act there.
        _calls.in_actor, _calls.depth, _calls.pid = True, 1, os.getpid()
        started.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def run(self, method, args, kwargs):
        async def call():
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result
        future = asyncio.run_coroutine_threadsafe(call(), self.loop)
        ident = threading.get_ident()
        _async_calls[ident] = future
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise asyncio.CancelledError(f"prism: {getattr(method, '__qualname__', 'the call')} was "
                                         "cancelled (prism.cancel)") from None
        finally:
            _async_calls.pop(ident, None)

    def __del__(self):
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except Exception:  # already closed
            pass


def _bound(instance, name):
    """(the actor's method `name`, its _AsyncActor or None)."""
    if type(instance) is _AsyncActor:
        return _method(instance.instance, name), instance
    return _method(instance, name), None


def _method(instance, name):
    try:
        return getattr(instance, name)
    except AttributeError:
        raise AttributeError(
            f"prism: actor {type(instance).__qualname__} has no method {name!r}") from None


def _call_method(method, args, kwargs, actor=None):
    if actor is not None:
        return actor.run(method, args, kwargs)
    previous = getattr(_calls, "in_actor", False)
    _calls.in_actor = True
    try:
        return _call(method, args, kwargs)
    finally:
        _calls.in_actor = previous


def _drive(generator, emit, what):
    """Yields each value of a streaming generator's Python generator through emit (False:
    the caller dropped its ObjectRefGenerator, so the generator is closed)."""
    if not inspect.isgenerator(generator):
        raise TypeError(f"prism: {what} was called with num_returns=\"streaming\" but is not a "
                        f"generator function (it returned a {type(generator).__name__})")
    _calls.depth = getattr(_calls, "depth", 0) + 1
    _calls.pid = os.getpid()
    try:
        for value in generator:
            parts, contained = _serialization.encode(value)
            if not emit(parts, contained):
                generator.close()
                break
    finally:
        _calls.depth -= 1
    return ("ok", [], [])


_END = object()


def _drive_on_loop(generator, actor, emit, what):
    """An async actor's streaming method (an async generator, or a plain one): each value is
    made on the actor's event loop, and yielded from this thread (emit may wait under
    backpressure, which must not hold up the loop)."""
    if inspect.isasyncgen(generator):
        async def step():
            try:
                return await generator.__anext__()
            except StopAsyncIteration:
                return _END
    elif inspect.isgenerator(generator):
        async def step():
            try:
                return next(generator)
            except StopIteration:
                return _END
    else:
        raise TypeError(f"prism: {what} was called with num_returns=\"streaming\" but is not a "
                        f"generator function (it returned a {type(generator).__name__})")
    while True:
        value = actor.run(step, (), {})
        if value is _END:
            return ("ok", [], [])
        parts, contained = _serialization.encode(value)
        if not emit(parts, contained):
            if inspect.isasyncgen(generator):
                actor.run(generator.aclose, (), {})
            else:
                generator.close()
            return ("ok", [], [])


def run_generator(blob, views, emit):
    try:
        function = resolve(blob)
        args, kwargs = decode_args(views)
        return _drive(_call(function, args, kwargs), emit, getattr(function, "__qualname__", "the task"))
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()


def call_actor_generator(instance, method_name, views, emit):
    previous = getattr(_calls, "in_actor", False)
    _calls.in_actor = True
    try:
        name = method_name.decode()
        method, actor = _bound(instance, name)
        args, kwargs = decode_args(views)
        if actor is not None:
            return _drive_on_loop(method(*args, **kwargs), actor, emit, f"{type(actor.instance).__qualname__}.{name}")
        return _drive(_call(method, args, kwargs), emit, f"{type(instance).__qualname__}.{name}")
    except _ExitActor:
        return ("exit_actor", "")
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _calls.in_actor = previous
        _flush()


def exit_actor():
    """Ray's ray.actor.exit_actor(): inside an actor method, ends the actor once the method
    returns here (its later calls and this one fail with ActorDiedError)."""
    if not getattr(_calls, "in_actor", False):
        raise TypeError("prism.actor.exit_actor() is called only inside an actor method")
    raise _ExitActor()


def run_task(blob, views):
    try:
        function = resolve(blob)
        args, kwargs = decode_args(views)
        return _ok(_call(function, args, kwargs))
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()


def create_actor(blob, views):
    try:
        cls = resolve(blob)
        args, kwargs = decode_args(views)
        instance = _call(cls, args, kwargs)
        return ("ok", _AsyncActor(instance) if _is_async_class(cls) else instance)
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()


def call_actor(instance, method_name, views):
    try:
        method, actor = _bound(instance, method_name.decode())
        args, kwargs = decode_args(views)
        return _ok(_call_method(method, args, kwargs, actor))
    except _ExitActor:
        return ("exit_actor", "")
    except _ProcessExit as e:
        return _exited(e)
    except BaseException as e:
        return ("error", describe(e))
    finally:
        _flush()
