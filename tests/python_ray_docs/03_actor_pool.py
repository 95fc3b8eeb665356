# After Ray's "Utility Classes" page, https://docs.ray.io/en/latest/ray-core/actors/actor-utils.html (doc_code/actor-pool.py), and the ActorPool reference.
import prism as ray
from prism.util import ActorPool


@ray.remote
class Actor:
    def double(self, n):
        return n * 2


a1, a2 = Actor.remote(), Actor.remote()
pool = ActorPool([a1, a2])

# pool.map(..) returns a Python generator object ActorPool.map
gen = pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4])
print([v for v in gen])
# [2, 4, 6, 8]
assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]

# map_unordered: the same results, in the order they finish.
unordered = list(pool.map_unordered(lambda a, v: a.double.remote(v), range(10)))
assert sorted(unordered) == [2 * v for v in range(10)]

# submit / get_next: results in submission order.
pool.submit(lambda a, v: a.double.remote(v), 1)
pool.submit(lambda a, v: a.double.remote(v), 2)
assert pool.get_next() == 2
assert pool.get_next() == 4
assert not pool.has_next()

# get_next_unordered.
pool.submit(lambda a, v: a.double.remote(v), 5)
pool.submit(lambda a, v: a.double.remote(v), 6)
assert sorted([pool.get_next_unordered(), pool.get_next_unordered()]) == [10, 12]

# has_free / pop_idle / push, one actor at a time.
pool = ActorPool([a1])
pool.submit(lambda a, v: a.double.remote(v), 1)
assert not pool.has_free()
assert pool.pop_idle() is None
assert pool.get_next() == 2
assert pool.has_free()
assert pool.pop_idle() == a1
assert pool.pop_idle() is None
pool.push(a2)
pool.submit(lambda a, v: a.double.remote(v), 21)
assert pool.get_next() == 42

print("OK actor_pool")
