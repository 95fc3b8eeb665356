"""ActorPool (Ray's ray.util.ActorPool): spread calls over a fixed set of actors.

    pool = ActorPool([Model.remote() for _ in range(4)])
    for y in pool.map(lambda actor, x: actor.predict.remote(x), batches):
        ...
"""

import prism


class ActorPool:
    """Submits fn(actor, value) to idle actors; results in submission order (map, get_next)
    or as they finish (map_unordered, get_next_unordered). Not thread-safe."""

    def __init__(self, actors):
        self._idle = list(actors)
        self._future_to_actor = {}
        self._index_to_future = {}
        self._next_task_index = 0
        self._next_return_index = 0
        self._pending = []

    def map(self, fn, values):
        while self.has_next():  # leftovers of an earlier map
            self.get_next_unordered()
        for v in values:
            self.submit(fn, v)
        while self.has_next():
            yield self.get_next()

    def map_unordered(self, fn, values):
        while self.has_next():
            self.get_next_unordered()
        for v in values:
            self.submit(fn, v)
        while self.has_next():
            yield self.get_next_unordered()

    def submit(self, fn, value):
        """Runs fn(actor, value) on an idle actor, or queues it until one is free."""
        if self._idle:
            actor = self._idle.pop()
            future = fn(actor, value)
            self._future_to_actor[future] = (self._next_task_index, actor)
            self._index_to_future[self._next_task_index] = future
            self._next_task_index += 1
        else:
            self._pending.append((fn, value))

    def has_next(self):
        return bool(self._future_to_actor)

    def has_free(self):
        return bool(self._idle) and not self._pending

    def get_next(self, timeout=None):
        """The next result in submission order. Raises StopIteration if none is pending,
        GetTimeoutError after timeout seconds."""
        if not self.has_next():
            raise StopIteration("prism.util.ActorPool: no more results to get")
        if self._next_return_index >= self._next_task_index:
            raise ValueError("prism.util.ActorPool: get_next after get_next_unordered")
        future = self._index_to_future[self._next_return_index]
        if timeout is not None:
            ready, _ = prism.wait([future], timeout=timeout)
            if not ready:
                raise prism.exceptions.GetTimeoutError("prism.util.ActorPool: timed out")
        del self._index_to_future[self._next_return_index]
        self._next_return_index += 1
        _, actor = self._future_to_actor.pop(future)
        self._return_actor(actor)
        return prism.get(future)

    def get_next_unordered(self, timeout=None):
        """Any finished result. Raises StopIteration if none is pending."""
        if not self.has_next():
            raise StopIteration("prism.util.ActorPool: no more results to get")
        ready, _ = prism.wait(list(self._future_to_actor), num_returns=1, timeout=timeout)
        if not ready:
            raise prism.exceptions.GetTimeoutError("prism.util.ActorPool: timed out")
        future = ready[0]
        index, actor = self._future_to_actor.pop(future)
        self._index_to_future.pop(index, None)
        self._next_return_index = max(self._next_return_index, index + 1)
        self._return_actor(actor)
        return prism.get(future)

    def _return_actor(self, actor):
        self._idle.append(actor)
        if self._pending:
            self.submit(*self._pending.pop(0))

    def push(self, actor):
        """Adds an actor to the pool."""
        busy = {a for _, a in self._future_to_actor.values()}
        if actor in self._idle or actor in busy:
            raise ValueError("prism.util.ActorPool: the actor is already in the pool")
        self._return_actor(actor)

    def pop_idle(self):
        """Removes and returns an idle actor, or None."""
        return self._idle.pop() if self.has_free() else None
