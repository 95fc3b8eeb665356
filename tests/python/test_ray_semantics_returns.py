"""Ray's Python core semantics of a call's returns (issue 41), written for Prism from Ray's
documentation: num_returns on @remote, .options and @prism.method; prism.actor.exit_actor();
get_runtime_context().is_canceled()."""
import time

import pytest

import prism
from prism.exceptions import ActorDiedError, RayActorError


@prism.remote(num_returns=3)
def three(x):
    return x, x * 2, [x] * 3


@prism.remote
def pair(x):
    return (x, -x)


def test_num_returns_on_remote_gives_one_ref_per_value():
    refs = three.remote(2)
    assert isinstance(refs, list) and len(refs) == 3
    assert all(isinstance(r, prism.ObjectRef) for r in refs)
    assert prism.get(refs) == [2, 4, [2, 2, 2]]
    assert prism.get(refs[1]) == 4


def test_num_returns_by_options_and_one_is_the_whole_value():
    a, b = pair.options(num_returns=2).remote(5)
    assert prism.get(a) == 5 and prism.get(b) == -5
    assert prism.get(pair.remote(5)) == (5, -5)  # without num_returns: one object
    assert prism.get(pair.options(num_returns=1).remote(5)) == (5, -5)


def test_split_refs_are_arguments_of_other_tasks():
    a, b = pair.options(num_returns=2).remote(7)
    assert prism.get(three.remote(a)) == [7, 14, [7, 7, 7]]
    assert prism.get(pair.remote(b)) == (-7, 7)


def test_a_result_of_the_wrong_length_fails_every_ref():
    refs = pair.options(num_returns=3, max_retries=0).remote(1)
    for r in refs:
        with pytest.raises(prism.exceptions.PrismError, match="returned 2 values but the call asked for 3"):
            prism.get(r)


def test_a_result_that_is_not_a_sequence_fails_clearly():
    refs = prism.remote(lambda: 5).options(num_returns=2, max_retries=0).remote()
    with pytest.raises(TypeError, match="num_returns > 1 but returned a int"):
        prism.get(refs[0])


def test_num_returns_must_be_a_positive_int():
    with pytest.raises(ValueError, match="num_returns must be an int >= 1"):
        pair.options(num_returns=0).remote(1)


@prism.remote
class Splitter:
    def __init__(self):
        self.calls = 0

    @prism.method(num_returns=2)
    def halves(self, items):
        self.calls += 1
        mid = len(items) // 2
        return items[:mid], items[mid:]

    def both(self):
        return ("a", "b")

    def stop(self):
        prism.actor.exit_actor()

    def count(self):
        return self.calls


def test_num_returns_on_actor_methods():
    s = Splitter.remote()
    left, right = s.halves.remote([1, 2, 3, 4])
    assert prism.get([left, right]) == [[1, 2], [3, 4]]
    x, y = s.both.options(num_returns=2).remote()
    assert prism.get([x, y]) == ["a", "b"]
    assert prism.get(s.both.remote()) == ("a", "b")
    assert prism.get(s.count.remote()) == 1


@prism.remote
def pass_handle(handle):
    a, b = handle.halves.remote("abcd")
    return prism.get(a) + "|" + prism.get(b)


def test_method_options_travel_with_the_handle():
    assert prism.get(pass_handle.remote(Splitter.remote())) == "ab|cd"


def test_exit_actor_ends_the_actor():
    s = Splitter.remote()
    assert prism.get(s.count.remote()) == 0
    with pytest.raises(RayActorError):
        prism.get(s.stop.remote())
    with pytest.raises(ActorDiedError):
        prism.get(s.count.remote(), timeout=30)


def test_exit_actor_outside_an_actor_is_refused():
    with pytest.raises(TypeError, match="only inside an actor method"):
        prism.actor.exit_actor()

    @prism.remote(max_retries=0)
    def not_an_actor():
        prism.actor.exit_actor()
    with pytest.raises(TypeError, match="only inside an actor method"):
        prism.get(not_an_actor.remote())


@prism.remote
def until_cancelled():
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if prism.get_runtime_context().is_canceled():
            return "saw it"
        time.sleep(0.01)
    return "never"


def test_is_canceled_inside_a_cancelled_task():
    assert prism.get_runtime_context().is_canceled() is False
    ref = until_cancelled.remote()
    time.sleep(0.3)
    prism.cancel(ref)
    with pytest.raises(prism.exceptions.TaskCancelledError):
        prism.get(ref, timeout=30)


@prism.remote(max_retries=3, retry_exceptions=[ValueError])
def flaky(path, fail_times, error):
    with open(path, "a") as f:
        f.write("x")
    with open(path) as f:
        attempts = len(f.read())
    if attempts <= fail_times:
        raise error(f"attempt {attempts}")
    return attempts


def test_retry_exceptions_as_a_list_retries_only_those_types(tmp_path):
    assert prism.get(flaky.remote(str(tmp_path / "a"), 2, ValueError)) == 3
    with pytest.raises(KeyError):  # not in the list: no retry
        prism.get(flaky.remote(str(tmp_path / "b"), 2, KeyError))
    assert (tmp_path / "b").read_text() == "x"
    with pytest.raises(ValueError, match="attempt 4"):  # 1 + max_retries attempts
        prism.get(flaky.remote(str(tmp_path / "c"), 10, ValueError))
    assert (tmp_path / "c").read_text() == "xxxx"
    subclass = flaky.options(retry_exceptions=[LookupError], max_retries=1)
    assert prism.get(subclass.remote(str(tmp_path / "d"), 1, KeyError)) == 2
    assert prism.get(flaky.options(retry_exceptions=True).remote(str(tmp_path / "e"), 1, KeyError)) == 2
    with pytest.raises(ValueError, match="retry_exceptions must be a bool or a list of exception types"):
        flaky.options(retry_exceptions=["ValueError"]).remote("", 0, ValueError)


@prism.remote(num_returns="streaming")
def count_to(n, fail_at=None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"failed at {i}")
        yield i * 10


@prism.remote
def squares(n):  # a generator function: streaming by default, as in Ray
    for i in range(n):
        yield i * i


def test_streaming_generator_refs_in_order():
    gen = count_to.remote(5)
    assert isinstance(gen, prism.ObjectRefGenerator)
    assert [prism.get(ref) for ref in gen] == [0, 10, 20, 30, 40]
    gen = squares.remote(3)
    first = next(gen)
    assert isinstance(first, prism.ObjectRef) and prism.get(first) == 0
    assert [prism.get(r) for r in gen] == [1, 4]
    with pytest.raises(StopIteration):
        next(gen)


def test_streaming_generator_error_after_its_values():
    gen = count_to.options(max_retries=0).remote(5, fail_at=2)
    assert prism.get(next(gen)) == 0
    assert prism.get(next(gen)) == 10
    with pytest.raises(ValueError, match="failed at 2"):
        next(gen)


@prism.remote(num_returns="streaming")
def endless(path):
    try:
        i = 0
        while True:
            yield i
            i += 1
    finally:
        with open(path, "w") as f:
            f.write(f"closed after {i}")


def test_dropping_a_streaming_generator_stops_it(tmp_path):
    gen = endless.remote(str(tmp_path / "closed"))
    assert prism.get(next(gen)) == 0
    del gen  # the producer is told to stop: its generator is closed
    deadline = time.monotonic() + 20
    while not (tmp_path / "closed").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / "closed").read_text().startswith("closed after")
    assert prism.get(pair.remote(1)) == (1, -1)


@prism.remote
class Producer:
    def items(self, n):
        for i in range(n):
            yield f"item {i}"


def test_streaming_actor_method():
    p = Producer.remote()
    assert [prism.get(r) for r in p.items.remote(3)] == ["item 0", "item 1", "item 2"]


def test_streaming_needs_a_generator():
    gen = pair.options(num_returns="streaming", max_retries=0).remote(1)
    with pytest.raises(TypeError, match="not a generator function"):
        next(gen)


def test_async_for_over_a_streaming_generator():
    import asyncio

    async def collect():
        return [prism.get(ref) async for ref in count_to.remote(4)]
    assert asyncio.run(collect()) == [0, 10, 20, 30]
    gen = count_to.remote(2)
    assert [prism.get(r) for r in gen] == [0, 10]
    assert prism.get(gen.completed(), timeout=30) is None
