"""Gaps that Ray's own programs (tests/python_ray_docs) found in prism, one test each."""
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
