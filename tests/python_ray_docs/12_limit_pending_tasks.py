# After Ray's "Pattern: limit pending tasks", https://docs.ray.io/en/latest/ray-core/patterns/limit-pending-tasks.html (doc_code/limit_pending_tasks.py).
import prism as ray

ray.init()


@ray.remote
class Actor:
    def __init__(self):
        self.num_calls = 0

    async def heavy_compute(self):
        # taking a long time...
        # await asyncio.sleep(5)
        self.num_calls += 1
        return self.num_calls

    def get_num_calls(self):
        return self.num_calls


actor = Actor.remote()

NUM_TASKS = 1000
result_refs = []
# When NUM_TASKS is large enough, this will eventually OOM.
for _ in range(NUM_TASKS):
    result_refs.append(actor.heavy_compute.remote())
assert sorted(ray.get(result_refs)) == list(range(1, NUM_TASKS + 1))

MAX_NUM_PENDING_TASKS = 100
result_refs = []
results = []
most_pending = 0
for _ in range(NUM_TASKS):
    if len(result_refs) > MAX_NUM_PENDING_TASKS:
        # update result_refs to only
        # track the remaining tasks.
        ready_refs, result_refs = ray.wait(result_refs, num_returns=1)
        assert len(ready_refs) == 1
        results += ray.get(ready_refs)

    result_refs.append(actor.heavy_compute.remote())
    most_pending = max(most_pending, len(result_refs))

results += ray.get(result_refs)
assert most_pending == MAX_NUM_PENDING_TASKS + 1, most_pending
assert sorted(results) == list(range(NUM_TASKS + 1, 2 * NUM_TASKS + 1))
assert ray.get(actor.get_num_calls.remote()) == 2 * NUM_TASKS

print("OK limit_pending_tasks")
