"""The core API from Python: tasks, actors, objects, options, nested tasks, placement
groups, resources, runtime context, KV, state API, ActorPool."""
import time

import pytest

import prism
from prism.util import ActorPool, placement_group, remove_placement_group

from helpers import Counter, add, fan_out, rank_of


def test_tasks_by_reference():
    assert prism.get([add.remote(i, 1) for i in range(20)], timeout=60) == list(range(1, 21))
    assert prism.get(add.remote(a=2, b=3), timeout=60) == 5


def test_refs_as_arguments_are_resolved():
    x = add.remote(1, 2)
    y = add.remote(x, b=add.remote(3, 4))
    assert prism.get(y, timeout=60) == 10


def test_nested_refs_travel_as_refs():
    inner = prism.put([1, 2, 3])
    got = prism.get(prism.remote(lambda box: prism.get(box[0], timeout=30)).remote([inner]), timeout=60)
    assert got == [1, 2, 3]


def test_nested_tasks():
    assert prism.get(fan_out.remote(10), timeout=60) == sum(2 * i for i in range(10))


def test_closures_and_lambdas_travel_by_value():
    k = 7
    scale = prism.remote(lambda x: x * k)
    assert prism.get(scale.remote(6), timeout=60) == 42

    def make_adder(n):
        @prism.remote
        def adder(x):
            return x + n
        return adder

    assert prism.get(make_adder(100).remote(1), timeout=60) == 101


def test_put_get_values():
    value = {"a": [1, 2.5, "three"], "b": (None, b"bytes")}
    assert prism.get(prism.put(value), timeout=30) == value
    with pytest.raises(TypeError):
        prism.put(prism.put(1))


def test_wait():
    fast = add.remote(1, 1)
    slow = prism.remote(lambda: time.sleep(2) or 1).remote()
    ready, not_ready = prism.wait([slow, fast], num_returns=1, timeout=30)
    assert ready == [fast] and not_ready == [slow]
    ready, not_ready = prism.wait([slow, fast], num_returns=2, timeout=30)
    assert len(ready) == 2 and not not_ready
    with pytest.raises(ValueError):
        prism.wait([fast], num_returns=2)


def test_get_timeout():
    slow = prism.remote(lambda: time.sleep(3)).remote()
    t = time.monotonic()
    with pytest.raises(prism.exceptions.GetTimeoutError):
        prism.get(slow, timeout=0.2)
    assert time.monotonic() - t < 2.5
    prism.get(slow, timeout=30)


def test_actor_state_and_order():
    c = Counter.remote(10)
    refs = [c.add.remote(1) for _ in range(20)]
    assert prism.get(refs, timeout=60) == list(range(11, 31))
    assert prism.get(c.get.remote(), timeout=30) == 30


def test_actor_from_main_style_class_by_value():
    @prism.remote
    class Acc:
        def __init__(self):
            self.items = []

        def push(self, x):
            self.items.append(x)
            return len(self.items)

    a = Acc.remote()
    assert prism.get([a.push.remote(i) for i in range(5)], timeout=60) == [1, 2, 3, 4, 5]


def test_actor_handle_passed_to_task():
    c = Counter.remote(0)
    bump = prism.remote(lambda h: prism.get(h.add.remote(5), timeout=30))
    assert prism.get(bump.remote(c), timeout=60) == 5
    assert prism.get(c.get.remote(), timeout=30) == 5


def test_named_actor_get_actor_and_kill():
    c = Counter.options(name="py-counter").remote(1)
    assert prism.get(c.add.remote(1), timeout=30) == 2
    same = prism.get_actor("py-counter")
    assert prism.get(same.get.remote(), timeout=30) == 2
    prism.kill(same)
    with pytest.raises(prism.exceptions.PrismError):
        prism.get(c.add.remote(1), timeout=30)
    with pytest.raises(ValueError):
        prism.get_actor("no-such-actor")


def test_options():
    assert prism.get(add.options(num_cpus=1, name="named-add", max_retries=0).remote(1, 2), timeout=30) == 3
    with pytest.raises(ValueError, match="unknown option"):
        add.options(num_cpu=1)
    with pytest.raises(prism.exceptions.ResourceError):
        prism.get(add.options(num_gpus=64).remote(1, 2), timeout=30)
    c = Counter.options(max_concurrency=4, max_restarts=1, num_cpus=0).remote(0)
    assert prism.get(c.add.remote(2), timeout=30) == 2


def test_resources_and_pinning(world_size):
    res = prism.cluster_resources()
    assert res["CPU"] >= 1 and f"rank:{world_size - 1}" in res
    last = world_size - 1
    assert prism.get(rank_of.options(resources={f"rank:{last}": 0.01}).remote(), timeout=30) == last


def test_placement_group(world_size):
    pg = placement_group([{"CPU": 1}] * world_size, strategy="SPREAD")
    assert pg.wait(30)
    ranks = prism.get([rank_of.options(placement_group=pg, bundle_index=i).remote()
                       for i in range(world_size)], timeout=60)
    assert sorted(ranks) == list(range(world_size))
    remove_placement_group(pg)
    with pytest.raises(ValueError, match="strategy"):
        placement_group([{"CPU": 1}], strategy="NOPE")


def test_runtime_context(world_size):
    ctx = prism.get_runtime_context()
    assert ctx.rank == 0 and ctx.is_driver() and ctx.world_size == world_size
    assert ctx.get_job_id()
    in_task = prism.get(prism.remote(lambda: prism.get_runtime_context().get_task_id()).remote(), timeout=30)
    assert in_task != "0000000000000000"


def test_kv():
    assert not prism.kv.put("py/key", b"value")  # new key
    assert prism.kv.put("py/key", b"value")  # existed
    assert prism.kv.get("py/key") == b"value"
    assert prism.kv.exists("py/key")
    assert "py/key" in prism.kv.list("py/")
    from_task = prism.get(prism.remote(lambda: prism.kv.get("py/key")).remote(), timeout=30)
    assert from_task == b"value"
    assert prism.kv.delete("py/", by_prefix=True) == 1
    assert prism.kv.get("py/key") is None


def test_state_api(world_size):
    from prism.util import state
    prism.get(add.options(name="state-probe").remote(1, 1), timeout=30)
    names = {t["name"] for t in state.list_tasks()}
    assert "state-probe" in names
    assert state.summarize_tasks()["summary"]["state-probe"]["state_counts"]["FINISHED"] >= 1
    nodes = state.list_nodes()
    assert sorted(n["rank"] for n in nodes) == list(range(world_size))
    assert [n["rank"] for n in nodes if n["is_head"]] == [0]
    c = Counter.options(name="state-actor").remote(0)
    prism.get(c.get.remote(), timeout=30)
    assert any(a["name"] == "state-actor" and a["state"] == "ALIVE" for a in state.list_actors())
    prism.kill(c)


def test_actor_pool():
    pool = ActorPool([Counter.remote(0) for _ in range(3)])
    out = list(pool.map(lambda a, v: a.add.remote(v), [1] * 9))
    assert len(out) == 9 and sum(out) == 3 * (1 + 2 + 3)  # each actor counts 1, 2, 3
    unordered = sorted(pool.map_unordered(lambda a, v: a.get.remote(), range(3)))
    assert unordered == [3, 3, 3]


def test_init_twice_is_a_clear_error():
    with pytest.raises(prism.exceptions.PrismRuntimeError, match="called twice"):
        prism.init()
    prism.init(ignore_reinit_error=True)


def test_retry_exceptions():
    # Fails on its first attempt (a KV key marks it), succeeds on the retry.
    @prism.remote
    def flaky():
        if not prism.kv.exists("py/flaky"):
            prism.kv.put("py/flaky", b"1")
            raise OSError("first attempt fails")
        return "second attempt"

    prism.kv.delete("py/flaky")
    assert prism.get(flaky.options(max_retries=2, retry_exceptions=True).remote(), timeout=60) == "second attempt"
    prism.kv.delete("py/flaky")
    with pytest.raises(OSError, match="first attempt fails"):
        prism.get(flaky.options(max_retries=2).remote(), timeout=60)  # exceptions not retried
    prism.kv.delete("py/flaky")


def test_named_actor_in_a_namespace():
    c = Counter.options(name="ns-counter", namespace="py-ns").remote(3)
    assert prism.get(prism.get_actor("ns-counter", namespace="py-ns").get.remote(), timeout=30) == 3
    with pytest.raises(ValueError):
        prism.get_actor("ns-counter")  # not in the job's namespace
    prism.kill(c)


def test_refs_returned_inside_values_stay_alive(world_size):
    # The task's own handle to the inner object is gone when it returns: the result keeps it.
    make = prism.remote(lambda n: [prism.put(list(range(n)))])
    for rank in {0, world_size - 1}:
        outer = make.options(resources={f"rank:{rank}": 0.01}).remote(5)
        inner = prism.get(outer, timeout=30)[0]
        del outer
        assert prism.get(inner, timeout=30) == [0, 1, 2, 3, 4]
