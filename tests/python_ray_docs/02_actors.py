# After Ray's "Actors" page, https://docs.ray.io/en/latest/ray-core/actors.html (and actors/task-orders.html).
import time

import prism as ray

ray.init()


@ray.remote
class Counter:
    def __init__(self):
        self.value = 0

    def increment(self):
        self.value += 1
        return self.value

    def get_counter(self):
        return self.value


# Create an actor from this class.
counter = Counter.remote()

# Call the actor.
obj_ref = counter.increment.remote()
assert ray.get(obj_ref) == 1

# Create ten Counter actors.
counters = [Counter.remote() for _ in range(10)]

# Increment each Counter once and get the results. These tasks all happen in
# parallel.
results = ray.get([c.increment.remote() for c in counters])
print(results)  # prints [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
assert results == [1] * 10

# Increment the first Counter five times. These tasks are executed serially
# and share state.
results = ray.get([counters[0].increment.remote() for _ in range(5)])
print(results)  # prints [2, 3, 4, 5, 6]
assert results == [2, 3, 4, 5, 6]


# Passing around actor handles.
@ray.remote
def f(counter):
    for _ in range(10):
        time.sleep(0.01)
        counter.increment.remote()


counter = Counter.remote()

# Start some tasks that use the actor.
tasks = [f.remote(counter) for _ in range(3)]

# Print the counter value.
seen = []
for _ in range(10):
    seen.append(ray.get(counter.get_counter.remote()))
    time.sleep(0.01)
print(seen)
assert seen == sorted(seen) and all(0 <= v <= 30 for v in seen)
ray.get(tasks)
deadline = time.time() + 10
while ray.get(counter.get_counter.remote()) < 30 and time.time() < deadline:
    time.sleep(0.01)
assert ray.get(counter.get_counter.remote()) == 30


# Actor task execution order: tasks from one submitter run in submission order.
@ray.remote
class Counter:
    def __init__(self):
        self.value = 0

    def add(self, addition):
        self.value += addition
        return self.value


counter = Counter.remote()

# For tasks from the same submitter,
# they are executed according to submission order.
value0 = counter.add.remote(1)
value1 = counter.add.remote(2)

# Output: 1. The first submitted task is executed first.
assert ray.get(value0) == 1
# Output: 3. The later submitted task is executed later.
assert ray.get(value1) == 3

# Terminating actors: after ray.kill, calls on the actor fail.
ray.kill(counter)
try:
    ray.get(counter.add.remote(1), timeout=10)
except ray.exceptions.RayActorError:
    print("the killed actor refused the call")
else:
    raise AssertionError("a call on a killed actor returned")

print("OK actors")
