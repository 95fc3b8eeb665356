"""@serve.batch (Ray Serve's): concurrent calls of an async method, each with one item, run
the method once with the list of their items; each caller gets its own result.

It batches on the replica's event loop (one queue per instance and method), as Ray's does:
a batch runs when max_batch_size items wait or batch_wait_timeout_s has passed since the
first. The replica's concurrency is max_ongoing_requests (the engine's router and actor
threads enforce it): set it >= max_batch_size for full batches. serve::Batch is the C++
engine's thread-based equivalent for C++ deployments; a Python method is a coroutine on the
replica's loop, so the queue lives there."""

import asyncio
import functools
import inspect


def batch(_func=None, *, max_batch_size=10, batch_wait_timeout_s=0.01, max_concurrent_batches=1):
    """Decorates an `async def` function or method taking a list (and returning a list of
    the same length) so that callers pass one item and get one result. Raises TypeError for
    a function that is not async or for bad option types, ValueError for values out of
    range."""
    if _func is not None and not callable(_func):
        raise TypeError("@serve.batch: use it as @serve.batch or @serve.batch(max_batch_size=..., "
                        "batch_wait_timeout_s=...)")
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int):
        raise TypeError(f"@serve.batch: max_batch_size must be an int, got {type(max_batch_size).__name__}")
    if max_batch_size < 1:
        raise ValueError(f"@serve.batch: max_batch_size must be >= 1, got {max_batch_size}")
    if isinstance(batch_wait_timeout_s, bool) or not isinstance(batch_wait_timeout_s, (int, float)):
        raise TypeError("@serve.batch: batch_wait_timeout_s must be a number of seconds, got "
                        f"{type(batch_wait_timeout_s).__name__}")
    if batch_wait_timeout_s < 0:
        raise ValueError(f"@serve.batch: batch_wait_timeout_s must be >= 0, got {batch_wait_timeout_s}")
    if isinstance(max_concurrent_batches, bool) or not isinstance(max_concurrent_batches, int) \
            or max_concurrent_batches < 1:
        raise ValueError(f"@serve.batch: max_concurrent_batches must be an int >= 1, got {max_concurrent_batches!r}")

    def decorate(func):
        if not inspect.iscoroutinefunction(func):
            raise TypeError(f"@serve.batch: {getattr(func, '__qualname__', func)!r} must be an `async def` "
                            "function taking a list of items and returning a list of results (Ray's rule)")
        options = (max_batch_size, float(batch_wait_timeout_s), max_concurrent_batches)
        queues = {}  # for a plain function: its one queue per event loop

        @functools.wraps(func)
        async def wrapper(*args, **kwargs):
            if kwargs:
                raise TypeError(f"@serve.batch: {func.__qualname__} takes its item positionally, not as keywords")
            self_arg, items = _split_self(wrapper, args)
            if len(items) != 1:
                raise TypeError(f"@serve.batch: {func.__qualname__} is called with one item, got {len(items)} "
                                "arguments")
            loop = asyncio.get_running_loop()
            if self_arg is None:
                key = id(loop)
                queue = queues.get(key)
                if queue is None:
                    queue = queues[key] = _Queue(func, None, *options)
            else:
                store = self_arg.__dict__.setdefault("_prism_batch_queues", {})
                queue = store.get(func)
                if queue is None:
                    queue = store[func] = _Queue(func, self_arg, *options)
            return await queue.submit(items[0])

        wrapper._prism_batch = options
        return wrapper

    return decorate(_func) if _func is not None else decorate


def _split_self(wrapper, args):
    """(the instance, the other arguments) for a method call, (None, args) for a function."""
    if args:
        bound = getattr(args[0], wrapper.__name__, None)
        if getattr(bound, "__func__", None) is wrapper:
            return args[0], args[1:]
    return None, args


class _Queue:
    def __init__(self, func, self_arg, max_batch_size, timeout_s, max_concurrent):
        self.func = func
        self.self_arg = self_arg
        self.max_batch_size = max_batch_size
        self.timeout_s = timeout_s
        self.items = []  # (item, future)
        self.arrived = asyncio.Event()
        self.slots = asyncio.Semaphore(max_concurrent)
        self.task = None

    async def submit(self, item):
        future = asyncio.get_running_loop().create_future()
        self.items.append((item, future))
        self.arrived.set()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._loop())
        return await future

    async def _loop(self):
        loop = asyncio.get_running_loop()
        while True:
            if not self.items:
                self.arrived.clear()
                await self.arrived.wait()
            deadline = loop.time() + self.timeout_s
            while len(self.items) < self.max_batch_size:
                left = deadline - loop.time()
                if left <= 0:
                    break
                self.arrived.clear()
                try:
                    await asyncio.wait_for(self.arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch, self.items = self.items[:self.max_batch_size], self.items[self.max_batch_size:]
            await self.slots.acquire()
            loop.create_task(self._run(batch))

    async def _run(self, batch):
        try:
            items = [item for item, _ in batch]
            try:
                if self.self_arg is None:
                    results = await self.func(items)
                else:
                    results = await self.func(self.self_arg, items)
                if not isinstance(results, (list, tuple)) or len(results) != len(batch):
                    got = f"{len(results)} results" if isinstance(results, (list, tuple)) else \
                        f"a {type(results).__name__}"
                    raise TypeError(f"@serve.batch: {self.func.__qualname__} returned {got} for {len(batch)} "
                                    "items; it must return a list with one result per item")
            except BaseException as e:  # noqa: B902 - every caller of the batch gets it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                return
            for (_, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)
        finally:
            self.slots.release()
