"""Ray's Python core semantics a Ray program relies on (issue 41), written for Prism from
Ray's documentation: starting on first use, wait([]), arguments checked at .remote(),
get_if_exists, pg.ready() and placement_group_table, Ray's exception and module names."""
import pytest

import prism
from prism.util import placement_group, placement_group_table, remove_placement_group
from prism.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from helpers import add, own_driver


def test_a_program_that_never_calls_init_starts_at_its_first_remote(world_size, tmp_path):
    done = own_driver(world_size, tmp_path, (
        "import prism\n"
        "@prism.remote\n"
        "def square(x):\n"
        "    return x * x\n"
        "assert not prism.is_initialized()\n"
        "print(prism.get([square.remote(i) for i in range(4)]))\n"
        "print(prism.get(prism.put('stored')))\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0, 1, 4, 9]", "stored"]


def test_put_starts_prism_too(world_size, tmp_path):
    done = own_driver(world_size, tmp_path, "import prism\nprint(prism.get(prism.put(41)) + 1)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"


def test_wait_of_no_refs_is_empty():
    assert prism.wait([]) == ([], [])
    assert prism.wait([], num_returns=0, timeout=0) == ([], [])


def test_wrong_arguments_are_refused_at_remote():
    with pytest.raises(TypeError, match=r"add.remote\(a, b\): missing a required argument: 'b'"):
        add.remote(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        add.remote(1, 2, c=3)

    @prism.remote
    class Box:
        def __init__(self, value, *, label=""):
            self.value = value

        def get(self):
            return self.value

    with pytest.raises(TypeError, match=r"Box.remote\(value, \*, label=''\): missing a required argument"):
        Box.remote()
    assert prism.get(Box.remote(5, label="x").get.remote()) == 5


def test_get_if_exists_returns_the_live_actor():
    @prism.remote
    class Counter:
        def __init__(self):
            self.n = 0

        def incr(self):
            self.n += 1
            return self.n

    a = Counter.options(name="parity_counter", get_if_exists=True).remote()
    assert prism.get(a.incr.remote()) == 1
    b = Counter.options(name="parity_counter", get_if_exists=True).remote()
    assert prism.get(b.incr.remote()) == 2  # the same actor
    with pytest.raises(ValueError, match="get_if_exists=True\\) needs a name"):
        Counter.options(get_if_exists=True).remote()
    prism.kill(a)


def test_placement_group_ready_and_table():
    pg = placement_group([{"CPU": 1}], strategy="PACK", name="parity_pg", lifetime="detached")
    assert prism.get(pg.ready(), timeout=30).id == pg.id
    ready, _ = prism.wait([pg.ready()], timeout=30)
    assert len(ready) == 1
    entry = placement_group_table(pg)
    assert entry["state"] == "CREATED" and entry["name"] == "parity_pg"
    assert entry["bundles"] == {0: {"CPU": 1.0}} and pg.id in placement_group_table()

    @prism.remote(num_cpus=1)
    def inside():
        return "ran"
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    assert prism.get(inside.options(scheduling_strategy=strategy).remote()) == "ran"
    remove_placement_group(pg)
    with pytest.raises(ValueError, match="lifetime must be None or 'detached'"):
        placement_group([{"CPU": 1}], lifetime="forever")


def test_rays_names():
    from prism import exceptions
    from prism.actor import ActorClass, ActorHandle

    assert exceptions.RayTaskError is exceptions.TaskError
    assert exceptions.RayError is exceptions.PrismError
    assert issubclass(exceptions.ActorDiedError, exceptions.RayActorError)

    @prism.remote
    def fails():
        raise KeyError("k")

    with pytest.raises(exceptions.RayTaskError) as info:
        prism.get(fails.remote())
    assert isinstance(info.value, KeyError) and isinstance(info.value, exceptions.RayError)

    @prism.remote
    class A:
        def f(self):
            return 1

    assert isinstance(A, ActorClass)
    assert isinstance(A.remote(), ActorHandle)
