"""@prism.remote: remote functions, actor classes and actor handles.

A call is submitted through one registered C++ function (prism.python.task) or actor class
(prism.python.actor / actor_call) with these arguments:

    [function blob, call spec, ObjectRef...]

The function blob names the function: b"R" + module + "\\0" + qualified name when the
worker can import it by name (a module other than __main__), else b"P" + its cloudpickled
bytes (functions of the script itself, lambdas, closures). The call spec is the encoded
(args, kwargs, slots); each ObjectRef passed at the top level is replaced by None and listed
in slots, and travels as a reference the core resolves before the call (the function gets
the value, as in Ray). Values larger than 100 KiB are put in the object store first, so a
worker reads them without a copy.
"""

import importlib
import inspect
import sys

import cloudpickle

from . import _prism, _serialization
from .exceptions import SerializationError

ObjectRef = _prism.ObjectRef
_INLINE_LIMIT = 100 * 1024


def _future(self):
    """A concurrent.futures.Future of this ref's value (Ray's ObjectRef.future())."""
    from . import _events
    return _events.future(self)


def _await(self):
    """`await ref` in async code (an async actor's method, asyncio.gather over refs): the
    value, without blocking the event loop."""
    import asyncio
    return asyncio.wrap_future(_future(self)).__await__()


ObjectRef.future = _future
ObjectRef.__await__ = _await

_TASK_OPTIONS = {"num_cpus", "num_gpus", "resources", "name", "max_retries", "retry_exceptions",
                 "placement_group", "bundle_index", "scheduling_strategy", "memory", "num_returns"}
_METHOD_OPTIONS = {"name", "num_returns"}
_ACTOR_OPTIONS = {"num_cpus", "num_gpus", "resources", "name", "namespace", "max_restarts",
                  "max_task_retries", "max_concurrency", "placement_group", "bundle_index",
                  "scheduling_strategy", "lifetime", "memory", "get_if_exists"}


def ensure_init():
    """Ray starts itself at the first .remote() or put of a program that never called init;
    so does Prism, as a prism.init() at that point would (on every rank: the other ranks
    serve from there)."""
    if not _prism.is_initialized():
        import prism
        prism.init()


class _ArgCheck:
    """Refuses a call whose arguments do not fit, at .remote() as Ray does, rather than as a
    task failure later. Positional calls to a function of positional parameters (the common
    case) are counted, not bound (inspect's bind costs 1.6 us, 7% of a submission)."""

    def __init__(self, target, what, drop_self=False):
        self.what = what
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):  # Python cannot tell (a builtin): the task will
            self.sig, self.low, self.high = None, 0, -1
            return
        params = list(sig.parameters.values())[1 if drop_self else 0:]
        self.sig = sig.replace(parameters=params)
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if all(p.kind in positional for p in params):
            self.low, self.high = sum(1 for p in params if p.default is p.empty), len(params)
        else:
            self.low, self.high = 0, -1

    def __call__(self, args, kwargs):
        if self.sig is None or (not kwargs and self.low <= len(args) <= self.high):
            return
        try:
            self.sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"prism: {self.what}.remote{self.sig}: {e}") from None


def function_blob(target, wrapper):
    """How a worker finds `target`: by reference if its module is importable there and names
    `wrapper` (or the target), else by value (cloudpickle)."""
    module_name = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", "")
    if module_name and module_name != "__main__" and "<" not in qualname:
        module = sys.modules.get(module_name)
        obj = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is wrapper or getattr(obj, "_prism_target", obj) is target:
            return b"R" + f"{module_name}\0{qualname}".encode()
    try:
        return b"P" + cloudpickle.dumps(target)
    except Exception as e:
        raise SerializationError(
            f"prism: cannot send {qualname or target!r} to the workers: cloudpickle failed "
            f"({type(e).__name__}: {e}); define it at module level or drop unpicklable state "
            "from its closure") from e


def pack_args(args, kwargs):
    """The call's arguments as the C++ side takes them, and the ids of nested refs."""
    if not args and not kwargs:
        return [b""], []
    slots = []
    refs = []
    if any(isinstance(a, ObjectRef) for a in args):
        args = list(args)
        for i, a in enumerate(args):
            if isinstance(a, ObjectRef):
                slots.append((i, a._cpp_type))
                refs.append(a)
                args[i] = None
    if any(isinstance(v, ObjectRef) for v in kwargs.values()):
        kwargs = dict(kwargs)
        for k, v in list(kwargs.items()):
            if isinstance(v, ObjectRef):
                slots.append((k, v._cpp_type))
                refs.append(v)
                kwargs[k] = None
    parts, contained = _serialization.encode((tuple(args), kwargs, slots))
    if len(parts) > 1 or _serialization.encoded_size(parts) > _INLINE_LIMIT:
        # Large or with arrays: through the store, so the worker reads it without a copy.
        spec_ref = _prism.put(parts, contained)
        return [spec_ref] + refs, []
    return [parts[0]] + refs, contained


def _num_returns(options, what):
    """The num_returns option: an int >= 1 (a call returns that many refs when > 1), or
    "streaming" (0 here: the call returns an ObjectRefGenerator)."""
    n = options.get("num_returns", 1)
    if n is None:
        return 1
    if n == "streaming":
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"prism: {what}: num_returns must be an int >= 1, not {n!r}")
    return n


def _returns(options, what):
    n = _num_returns(options, what)
    return dict(num_returns=max(n, 1), streaming=n == 0)


def _wrap(submitted):
    """What .remote() returns: the core's ref or refs, or a streaming generator's end."""
    if isinstance(submitted, _prism.StreamingGenerator):
        return ObjectRefGenerator(submitted)
    return submitted


class ObjectRefGenerator:
    """What .remote() of a num_returns="streaming" call returns (Ray's ObjectRefGenerator):
    iterate it (or next()) for the ref of each value the generator yields, in order, as
    they come. If the generator raises, next() raises its exception (after the refs of the
    values before). Lives on the caller; dropping it frees the values not taken and stops
    the generator."""

    _NOTHING = object()

    def __init__(self, core):
        self._core = core
        self._peeked = self._NOTHING  # what _ready took from the core: a ref, None (ended), an error

    def __iter__(self):
        return self

    def __next__(self):
        return self._next(-1)

    def _next(self, timeout_ms):
        if self._peeked is not self._NOTHING:
            got, self._peeked = self._peeked, self._NOTHING
        else:
            got = self._take(timeout_ms)
        if isinstance(got, BaseException):
            raise got
        if got is None:
            raise StopIteration
        return got

    def _take(self, timeout_ms):
        """The core's next: a ref, None once ended, or the exception next() raises."""
        try:
            return self._core.next_ref(timeout_ms)
        except _prism.TaskFailure as e:
            from . import _raise_task_failure
            try:
                _raise_task_failure(e.args)
            except BaseException as error:
                return error

    def _ready(self, timeout_ms=0):
        """True if next() would not wait (a value came, or the generator ended), waiting up
        to timeout_ms for it: what prism.wait asks of a generator (Ray's ray.wait([gen]))."""
        if self._peeked is not self._NOTHING:
            return True
        from .exceptions import GetTimeoutError
        try:
            self._peeked = self._take(timeout_ms)
        except GetTimeoutError:
            return False
        return True

    def __aiter__(self):
        return self

    async def __anext__(self):
        """`async for ref in gen`: waits for the next ref on a thread of the loop's executor."""
        import asyncio
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def _next_or_none(self):
        try:
            return self._next(-1)
        except StopIteration:
            return None

    def completed(self):
        """The generator task's own ref: ready when it ended (get gives None, or raises
        the generator's error) (Ray's completed())."""
        return _prism._with_cpp_type(self._core.task_ref(), "void")  # the core's empty object

    _generator_task_ref = completed

    def close(self):
        self._core.close()

    def __reduce__(self):
        raise TypeError("prism: an ObjectRefGenerator cannot be passed to tasks or pickled "
                        "(it lives on the caller, as Ray's)")


def method(*args, **options):
    """@prism.method(num_returns=N) on an actor method (Ray's ray.method): the options its
    calls take by default (handle.m.options(...) overrides them per call)."""
    unknown = set(options) - _METHOD_OPTIONS
    if args or unknown:
        raise TypeError(f"prism.method takes only keyword options {sorted(_METHOD_OPTIONS)}")

    def decorate(function):
        function.__prism_method_options__ = options
        return function
    return decorate


def _retry_exceptions(options, blob, what):
    """(the core's retry_exceptions flag, the blob a call sends) for the retry_exceptions
    option: a bool is the core's own; a list of exception types (Ray's allowlist) makes the
    blob b"X" + (types, max_retries, blob), whose worker side retries only those exceptions,
    in place, up to max_retries times (the core retries crashes alone)."""
    retry = options.get("retry_exceptions", False)
    if isinstance(retry, (list, tuple)):
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry):
            raise ValueError(f"prism: {what}: retry_exceptions must be a bool or a list of exception "
                             f"types, not {retry!r}")
        max_retries = int(options.get("max_retries", 3))
        if max_retries < 0:
            max_retries = 1 << 30  # -1: no limit, as Ray's
        return False, b"X" + cloudpickle.dumps((tuple(retry), max_retries, blob))
    if not isinstance(retry, bool) and retry is not None:
        raise ValueError(f"prism: {what}: retry_exceptions must be a bool or a list of exception "
                         f"types, not {retry!r}")
    return bool(retry), blob


def _check_options(options, allowed, what):
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(f"prism: unknown option(s) {sorted(unknown)} for {what}; valid: {sorted(allowed)}")


def _resources(options):
    res = dict(options.get("resources") or {})
    if "num_cpus" in options and options["num_cpus"] is not None:
        res["CPU"] = float(options["num_cpus"])
    if "num_gpus" in options and options["num_gpus"] is not None:
        res["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        res["memory"] = float(options["memory"])
    return res


def _placement(options):
    pg = options.get("placement_group")
    bundle = options.get("bundle_index", -1)
    strategy = options.get("scheduling_strategy")
    node_rank, soft, spread = None, False, False
    if strategy is not None and strategy != "DEFAULT":
        if strategy == "SPREAD":
            spread = True
        elif hasattr(strategy, "placement_group"):
            pg = strategy.placement_group
            bundle = getattr(strategy, "placement_group_bundle_index", -1)
        elif hasattr(strategy, "node_id"):
            node_rank, soft = strategy._rank(), strategy.soft
        else:
            raise ValueError(f"prism: unknown scheduling_strategy {strategy!r}")
    pg_id = "" if pg is None else (pg if isinstance(pg, str) else pg.id)
    return dict(placement_group=pg_id, bundle_index=-1 if bundle is None else int(bundle),
                node_rank=node_rank, node_soft=soft, spread=spread)


class RemoteFunction:
    """A function decorated with @prism.remote: f.remote(...) runs it as a task and returns
    an ObjectRef; f.options(...) gives a copy with other options."""

    def __init__(self, function, options, blob=None):
        _check_options(options, _TASK_OPTIONS, f"remote function {function.__qualname__}")
        self._prism_target = function
        self._options = options
        self._blob = blob
        self._template = None
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__

    def __call__(self, *args, **kwargs):
        raise TypeError(f"prism: remote function {self.__qualname__} cannot be called directly; "
                        f"use {self.__name__}.remote(...)")

    def __reduce__(self):
        return RemoteFunction, (self._prism_target, self._options)

    def options(self, **options):
        return RemoteFunction(self._prism_target, {**self._options, **options}, self._blob)

    def _make_template(self):
        ensure_init()
        self._check_args = _ArgCheck(self._prism_target, self.__qualname__)
        if self._blob is None:
            self._blob = function_blob(self._prism_target, self)
        o = self._options
        if "num_returns" not in o and inspect.isgeneratorfunction(self._prism_target):
            o = {**o, "num_returns": "streaming"}  # Ray's default for a generator function
        retry, self._call_blob = _retry_exceptions(o, self._blob, self.__qualname__)
        self._template = _prism.RequestTemplate(
            "task", _prism.task_function_name(), name=o.get("name") or self.__qualname__,
            resources=_resources(o), max_retries=int(o.get("max_retries", 3)),
            retry_exceptions=retry,
            **_returns(o, self.__qualname__), **_placement(o))

    def remote(self, *args, **kwargs):
        if self._template is None:
            self._make_template()
        self._check_args(args, kwargs)
        packed, contained = pack_args(args, kwargs)
        packed[0:0] = [self._call_blob]
        return _wrap(self._template.submit(packed, contained))


class ActorMethod:
    """handle.method: .remote(...) calls it on the actor; .options(name=...) renames the call."""

    def __init__(self, handle, name, options=None):
        self._handle = handle
        self._name = name
        self._options = options if options is not None else handle._method_options.get(name, {})
        self._template = None

    def options(self, **options):
        _check_options(options, _METHOD_OPTIONS, f"actor method {self._name}")
        return ActorMethod(self._handle, self._name, {**self._options, **options})

    def remote(self, *args, **kwargs):
        if self._template is None:
            o = self._options
            self._template = _prism.RequestTemplate(
                "actor_call", _prism.actor_method_name(),
                name=o.get("name") or f"{self._handle._class_name.rsplit('.', 1)[-1]}.{self._name}",
                actor=self._handle._ref.id(), max_retries=0,
                **_returns(o, f"actor method {self._name}"))
        packed, contained = pack_args(args, kwargs)
        packed[0:0] = [self._name.encode()]
        return _wrap(self._template.submit(packed, contained))

    def __call__(self, *args, **kwargs):
        raise TypeError(f"prism: actor method {self._name} cannot be called directly; "
                        f"use .{self._name}.remote(...)")


class ActorHandle:
    """A handle to an actor: handle.method.remote(...). Cheap; picklable (pass it to tasks)."""

    def __init__(self, creation_ref, class_name, method_options=None):
        self._ref = creation_ref
        self._class_name = class_name
        self._methods = {}
        self._method_options = method_options or {}  # @prism.method options, by method

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_ref", "_class_name", "_methods", "_method_options"):
            raise AttributeError(name)
        method = self._methods.get(name)
        if method is None:
            method = self._methods[name] = ActorMethod(self, name)
        return method

    def __reduce__(self):
        return ActorHandle, (self._ref, self._class_name, self._method_options)

    def __repr__(self):
        return f"ActorHandle({self._class_name}, {self._ref.hex()})"

    def __eq__(self, other):
        return isinstance(other, ActorHandle) and self._ref == other._ref

    def __hash__(self):
        return hash(self._ref)


class ActorClass:
    """A class decorated with @prism.remote: Cls.remote(...) creates an actor and returns
    its handle; Cls.options(...) gives a copy with other options."""

    def __init__(self, cls, options, blob=None):
        _check_options(options, _ACTOR_OPTIONS, f"actor class {cls.__qualname__}")
        self._prism_target = cls
        self._options = options
        self._blob = blob
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        self.__doc__ = cls.__doc__

    def __call__(self, *args, **kwargs):
        raise TypeError(f"prism: actor class {self.__qualname__} cannot be instantiated directly; "
                        f"use {self.__name__}.remote(...)")

    def __reduce__(self):
        return ActorClass, (self._prism_target, self._options)

    def options(self, **options):
        return ActorClass(self._prism_target, {**self._options, **options}, self._blob)

    def remote(self, *args, **kwargs):
        ensure_init()
        o = self._options
        if o.get("get_if_exists"):
            if not o.get("name"):
                raise ValueError(f"prism: {self.__qualname__}.options(get_if_exists=True) needs a name=")
            existing = _prism.lookup_actor(o["name"], o.get("namespace") or "")
            if existing is not None:
                return ActorHandle(*existing)
        init = getattr(self._prism_target, "__init__", None)
        if init is not None and init is not object.__init__:
            _ArgCheck(init, self.__qualname__, drop_self=True)(args, kwargs)
        if self._blob is None:
            self._blob = function_blob(self._prism_target, self)
        class_name = f"python:{self.__module__}.{self.__qualname__}"
        res = _resources(o)
        res.setdefault("CPU", 0.0)
        template = _prism.RequestTemplate(
            "actor", _prism.actor_factory_name(), name=o.get("name") or "", resources=res,
            max_retries=0, max_restarts=int(o.get("max_restarts", 0)),
            max_task_retries=int(o.get("max_task_retries", 0)),
            max_concurrency=int(o.get("max_concurrency", _default_concurrency(self._prism_target))),
            class_name=class_name,
            namespace=o.get("namespace") or "", **_placement(o))
        packed, contained = pack_args(args, kwargs)
        packed[0:0] = [self._blob]
        handle = ActorHandle(template.submit(packed, contained), class_name, _method_options(self._prism_target))
        if o.get("get_if_exists"):
            # Two creators raced: the head kept the first name; both get its actor.
            found = _prism.lookup_actor(o["name"], o.get("namespace") or "")
            if found is not None:
                return ActorHandle(*found)
        return handle


def _default_concurrency(cls):
    """Ray's default max_concurrency: 1000 for an async actor (a class with an async def
    method), whose calls interleave on its event loop; 1 otherwise."""
    from ._worker import _is_async_class
    return 1000 if _is_async_class(cls) else 1


def _method_options(cls):
    """{method name: its @prism.method options} of an actor class."""
    out = {}
    for name in dir(cls):
        function = getattr(cls, name, None)
        options = dict(getattr(function, "__prism_method_options__", None) or {})
        if "num_returns" not in options and (inspect.isgeneratorfunction(function) or
                                             inspect.isasyncgenfunction(function)):
            options["num_returns"] = "streaming"  # Ray's default for a generator method
        if options:
            out[name] = options
    return out


def remote(*args, **options):
    """@prism.remote or @prism.remote(num_cpus=..., ...) on a function or a class."""
    if len(args) == 1 and not options and callable(args[0]):
        return _make(args[0], {})
    if args:
        raise TypeError("prism.remote takes a function or class, or only keyword options")

    def decorate(target):
        return _make(target, options)
    return decorate


def _make(target, options):
    if isinstance(target, type):
        return ActorClass(target, options)
    if callable(target):
        return RemoteFunction(target, options)
    raise TypeError(f"prism.remote: {target!r} is neither a function nor a class")
