# After Ray's "Tasks" page, https://docs.ray.io/en/latest/ray-core/tasks.html (doc_code/tasks.py).
import time

import prism as ray

ray.init()


# A regular Python function.
def normal_function():
    return 1


# By adding the `@ray.remote` decorator, a regular Python function
# becomes a Ray remote function.
@ray.remote
def my_function():
    return 1


# To invoke this remote function, use the `remote` method.
# This will immediately return an object ref (a future) and then create
# a task that will be executed on a worker process.
obj_ref = my_function.remote()

# The result can be retrieved with ``ray.get``.
assert ray.get(obj_ref) == 1


@ray.remote
def slow_function():
    time.sleep(0.5)
    return 1


# Ray tasks are executed in parallel.
start = time.time()
slow_refs = []
for _ in range(4):
    # This doesn't block.
    slow_refs.append(slow_function.remote())
submitted = time.time() - start
assert ray.get(slow_refs) == [1, 1, 1, 1]
elapsed = time.time() - start
assert submitted < 0.5, f"submitting four tasks blocked for {submitted:.2f} s"
assert elapsed < 1.9, f"four 0.5 s tasks took {elapsed:.2f} s: they did not run in parallel"


@ray.remote
def function_with_an_argument(value):
    return value + 1


obj_ref1 = my_function.remote()
assert ray.get(obj_ref1) == 1

# You can pass an object ref as an argument to another Ray task.
obj_ref2 = function_with_an_argument.remote(obj_ref1)
assert ray.get(obj_ref2) == 2

object_refs = [slow_function.remote() for _ in range(2)]
# Return as soon as one of the tasks finished execution.
ready_refs, remaining_refs = ray.wait(object_refs, num_returns=1, timeout=None)
assert len(ready_refs) == 1 and len(remaining_refs) == 1
assert ready_refs[0] in object_refs and remaining_refs[0] in object_refs
assert ray.get(ready_refs + remaining_refs) == [1, 1]


# By default, a Ray task only returns a single Object Ref.
@ray.remote
def return_single():
    return 0, 1, 2


object_ref = return_single.remote()
assert ray.get(object_ref) == (0, 1, 2)


# However, you can configure Ray tasks to return multiple Object Refs.
@ray.remote(num_returns=3)
def return_multiple():
    return 0, 1, 2


object_ref0, object_ref1, object_ref2 = return_multiple.remote()
assert ray.get(object_ref0) == 0
assert ray.get(object_ref1) == 1
assert ray.get(object_ref2) == 2


@ray.remote(num_returns=3)
def return_multiple_as_generator():
    for i in range(3):
        yield i


# NOTE: Similar to normal functions, these objects will not be available
# until the full task is complete and all returns have been generated.
a, b, c = return_multiple_as_generator.remote()
assert ray.get([a, b, c]) == [0, 1, 2]

print("OK tasks")
