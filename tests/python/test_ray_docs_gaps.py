"""Gaps that Ray's own programs (tests/python_ray_docs) found in prism, one test each."""
import os

import pytest

import prism
from helpers import own_driver


def test_refs_of_an_earlier_session_dropped_in_a_later_one_free_nothing_of_it(world_size, tmp_path):
    # Ray's tests init and shut down around each test, and Python drops a test's refs when
    # the garbage collector gets to them: often in a later session. Ids began again at 1 in
    # each session, so those refs released the new session's objects and actors.
    done = own_driver(world_size, tmp_path, (
        "import gc\n"
        "import prism\n"
        "@prism.remote\n"
        "class Counter:\n"
        "    def __init__(self):\n"
        "        self.n = 0\n"
        "    def add(self):\n"
        "        self.n += 1\n"
        "        return self.n\n"
        "prism.init()\n"
        "old = [prism.put(i) for i in range(4)]\n"
        "old_counter = Counter.remote()\n"
        "assert prism.get(old_counter.add.remote()) == 1\n"
        "prism.shutdown()\n"
        "prism.init()\n"
        "new = [prism.put(10 + i) for i in range(4)]\n"
        "counter = Counter.remote()\n"
        "assert prism.get(counter.add.remote()) == 1\n"
        "del old, old_counter\n"
        "gc.collect()\n"
        "print(prism.get(new, timeout=10))\n"
        "print(prism.get(counter.add.remote(), timeout=10))\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[10, 11, 12, 13]", "2"]


@prism.remote(max_restarts=1, max_task_retries=-1)
class ExitsAtThree:
    """Ends its process at its third call, as in Ray's actor_restart.py."""

    def __init__(self):
        self.counter = 0

    def increment_and_possibly_fail(self):
        if self.counter == 2:
            os._exit(0)
        self.counter += 1
        return self.counter


def test_an_actor_whose_call_ends_its_process_restarts_while_max_restarts_allow():
    # Ray restarts an actor whose worker process died and retries the call that was running
    # (max_task_retries); prism ended the actor at once, whatever its max_restarts.
    actor = ExitsAtThree.remote()
    counters = [prism.get(actor.increment_and_possibly_fail.remote(), timeout=60) for _ in range(4)]
    assert counters == [1, 2, 1, 2]  # the third call ran again on the restarted actor
    with pytest.raises(prism.exceptions.RayActorError, match="os._exit"):
        prism.get(actor.increment_and_possibly_fail.remote(), timeout=60)  # no restart left
    with pytest.raises(prism.exceptions.RayActorError):
        prism.get(actor.increment_and_possibly_fail.remote(), timeout=60)


def test_without_max_task_retries_the_call_that_crashed_fails_and_the_actor_restarts():
    actor = ExitsAtThree.options(max_task_retries=0).remote()
    assert [prism.get(actor.increment_and_possibly_fail.remote(), timeout=60) for _ in range(2)] == [1, 2]
    with pytest.raises(prism.exceptions.RayActorError, match="os._exit"):
        prism.get(actor.increment_and_possibly_fail.remote(), timeout=60)
    assert prism.get(actor.increment_and_possibly_fail.remote(), timeout=60) == 1  # restarted


def test_without_max_restarts_an_actor_whose_call_ends_its_process_dies():
    actor = ExitsAtThree.options(max_restarts=0).remote()
    assert [prism.get(actor.increment_and_possibly_fail.remote(), timeout=60) for _ in range(2)] == [1, 2]
    for _ in range(2):
        with pytest.raises(prism.exceptions.RayActorError, match="os._exit"):
            prism.get(actor.increment_and_possibly_fail.remote(), timeout=60)
