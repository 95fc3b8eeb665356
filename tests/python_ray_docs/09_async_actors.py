# After Ray's "AsyncIO / Concurrency for Actors" page, https://docs.ray.io/en/latest/ray-core/actors/async_api.html (and doc_code/pattern_async_actor.py).
import asyncio
import concurrent.futures
import time

import prism as ray


@ray.remote
class AsyncActor:
    def __init__(self, expected_num_tasks: int):
        self._event = asyncio.Event()
        self._curr_num_tasks = 0
        self._expected_num_tasks = expected_num_tasks

    # Multiple invocations of this method can run concurrently on the same event loop.
    async def run_concurrent(self):
        self._curr_num_tasks += 1
        if self._curr_num_tasks == self._expected_num_tasks:
            print("All coroutines are executing concurrently, unblocking.")
            self._event.set()
        else:
            print("Waiting for other coroutines to start.")

        await self._event.wait()
        print("All coroutines ran concurrently.")
        return self._curr_num_tasks


actor = AsyncActor.remote(4)
refs = [actor.run_concurrent.remote() for _ in range(4)]

# Fetch results using regular `ray.get`.
assert ray.get(refs, timeout=10) == [4, 4, 4, 4]


# Fetch results using `asyncio` APIs.
async def get_async():
    return await actor.run_concurrent.remote()


assert asyncio.run(get_async()) == 5


# ObjectRefs as asyncio.Futures.
@ray.remote
def some_task():
    return 1


async def await_obj_ref():
    assert await some_task.remote() == 1
    done, _ = await asyncio.wait([asyncio.wrap_future(some_task.remote().future())])
    assert [d.result() for d in done] == [1]
    return await asyncio.gather(*[some_task.remote() for _ in range(4)])


assert asyncio.run(await_obj_ref()) == [1, 1, 1, 1]

# ObjectRefs as concurrent.futures.Futures.
refs = [some_task.remote() for _ in range(4)]
futs = [ref.future() for ref in refs]
results = []
for fut in concurrent.futures.as_completed(futs, timeout=10):
    assert fut.done()
    results.append(fut.result())
assert results == [1, 1, 1, 1]


# Setting concurrency in Async Actors.
@ray.remote
class AsyncActor:
    def __init__(self):
        self.running = 0
        self.peak = 0

    async def run_task(self):
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.3)  # Network, I/O task here
        self.running -= 1

    def peak_concurrency(self):
        return self.peak


actor = AsyncActor.remote()
# All 50 tasks should start at once. After 0.3 seconds they should all finish.
start = time.time()
ray.get([actor.run_task.remote() for _ in range(50)], timeout=20)
assert ray.get(actor.peak_concurrency.remote()) == 50
assert time.time() - start < 3, time.time() - start

actor = AsyncActor.options(max_concurrency=10).remote()
# Only 10 tasks will be running concurrently. Once 10 finish, the next 10 should run.
ray.get([actor.run_task.remote() for _ in range(50)], timeout=20)
assert ray.get(actor.peak_concurrency.remote()) == 10


# Pattern: an async actor awaits other actors' results without blocking its other calls.
@ray.remote
class TaskStore:
    def get_next_task(self):
        return "task"


@ray.remote
class AsyncTaskExecutor:
    def __init__(self, task_store):
        self.task_store = task_store
        self.num_executed_tasks = 0

    async def run(self, n):
        for _ in range(n):
            # Here we use await instead of ray.get() to
            # wait for the next task and it will yield
            # the control while waiting.
            task = await self.task_store.get_next_task.remote()
            self._execute_task(task)
            await asyncio.sleep(0.01)
        return self.num_executed_tasks

    def _execute_task(self, task):
        # Executing the task
        self.num_executed_tasks = self.num_executed_tasks + 1

    def get_num_executed_tasks(self):
        return self.num_executed_tasks


task_store = TaskStore.remote()
async_task_executor = AsyncTaskExecutor.remote(task_store)
run_ref = async_task_executor.run.remote(100)
# We are able to run get_num_executed_tasks while run method is running.
num_executed_tasks = ray.get(async_task_executor.get_num_executed_tasks.remote(), timeout=10)
print(f"num of executed tasks so far: {num_executed_tasks}")
assert 0 <= num_executed_tasks < 100
assert ray.get(run_ref, timeout=20) == 100


# AsyncIO for remote tasks: wrap the async function.
async def f():
    await asyncio.sleep(0.01)
    return "from the coroutine"


@ray.remote
def wrapper():
    import asyncio
    return asyncio.run(f())


assert ray.get(wrapper.remote()) == "from the coroutine"

print("OK async_actors")
