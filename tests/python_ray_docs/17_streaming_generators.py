# After Ray's "Ray Generators" page, https://docs.ray.io/en/latest/ray-core/ray-generator.html (doc_code/streaming_generator.py).
# Its 1 and 5 s sleeps are 0.05 and 0.5 s here.
import asyncio
import time

import prism as ray


@ray.remote
def task():
    for i in range(5):
        time.sleep(0.05)
        yield i


gen = task.remote()
# Blocks for 0.05 seconds.
ref = next(gen)
# return 0
assert ray.get(ref) == 0
# Blocks for 0.05 seconds.
ref = next(gen)
# Return 1
assert ray.get(ref) == 1

# Returns 2~4 every 0.05 seconds.
rest = []
for ref in gen:
    print(ray.get(ref))
    rest.append(ray.get(ref))
assert rest == [2, 3, 4]


@ray.remote
def task():
    for i in range(5):
        time.sleep(0.05)
        if i == 1:
            raise ValueError
        yield i


gen = task.remote()
# it's okay.
assert ray.get(next(gen)) == 0

# Raises an exception
try:
    ray.get(next(gen))
except ValueError as e:
    print(f"Exception is raised when i == 1 as expected {e}")
else:
    raise AssertionError("the generator's exception did not reach the caller")


@ray.remote
class Actor:
    def f(self):
        for i in range(5):
            yield i


@ray.remote
class AsyncActor:
    async def f(self):
        for i in range(5):
            yield i


@ray.remote(max_concurrency=5)
class ThreadedActor:
    def f(self):
        for i in range(5):
            yield i


actor = Actor.remote()
assert [ray.get(ref) for ref in actor.f.remote()] == [0, 1, 2, 3, 4]

actor = AsyncActor.remote()
assert [ray.get(ref) for ref in actor.f.remote()] == [0, 1, 2, 3, 4]

actor = ThreadedActor.remote()
assert [ray.get(ref) for ref in actor.f.remote()] == [0, 1, 2, 3, 4]


@ray.remote
def task():
    for i in range(5):
        time.sleep(0.05)
        yield i


async def main():
    values = []
    async for ref in task.remote():
        values.append(await ref)
    return values


assert asyncio.run(main()) == [0, 1, 2, 3, 4]

# Garbage collection: dropping the generator frees what it did not hand out.
gen = task.remote()
ref1 = next(gen)
del gen
assert ray.get(ref1) == 0


# Two generators consumed concurrently on one event loop.
async def async_task():
    values = []
    async for ref in task.remote():
        values.append(await ref)
    return values


async def main():
    t1 = async_task()
    t2 = async_task()
    return await asyncio.gather(t1, t2)


assert asyncio.run(main()) == [[0, 1, 2, 3, 4]] * 2


@ray.remote
def task():
    for i in range(5):
        time.sleep(0.5)
        yield i


gen = task.remote()

# Because it takes 0.5 seconds to make the first yield,
# with 0 timeout, the generator is unready.
ready, unready = ray.wait([gen], timeout=0)
print("timeout 0, nothing is ready.")
print(ready)
assert len(ready) == 0
assert len(unready) == 1

# Without a timeout argument, ray.wait waits until the given argument
# is ready. When a next item is ready, it returns.
ready, unready = ray.wait([gen])
print("Wait for 0.5 seconds. The next item is ready.")
assert len(ready) == 1
assert len(unready) == 0
next(gen)

# Because the second yield hasn't happened yet,
ready, unready = ray.wait([gen], timeout=0)
print("Wait for 0 seconds. The next item is not ready.")
print(ready, unready)
assert len(ready) == 0
assert len(unready) == 1

# ray.wait over a generator and a regular task together.
from prism import ObjectRefGenerator


@ray.remote
def generator_task():
    for i in range(5):
        time.sleep(0.05)
        yield i


@ray.remote
def regular_task():
    for i in range(5):
        time.sleep(0.05)
    return


gen = [generator_task.remote()]
ref = [regular_task.remote()]
ready, unready = [], [*gen, *ref]
result = []

while unready:
    ready, unready = ray.wait(unready)
    for r in ready:
        if isinstance(r, ObjectRefGenerator):
            try:
                ref = next(r)
                result.append(ray.get(ref))
            except StopIteration:
                pass
            else:
                unready.append(r)
        else:
            result.append(ray.get(r))

assert sorted(result, key=repr) == sorted([0, 1, 2, 3, 4, None], key=repr), result

print("OK streaming_generators")
