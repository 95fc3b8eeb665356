# After Ray's "Actor Synchronization", https://docs.ray.io/en/latest/ray-core/actors/actor-utils.html (doc_code/actor-sync.py).
import asyncio

import prism as ray


# We set num_cpus to zero because this actor will mostly just block on I/O.
@ray.remote(num_cpus=0)
class SignalActor:
    def __init__(self):
        self.ready_event = asyncio.Event()

    def send(self, clear=False):
        self.ready_event.set()
        if clear:
            self.ready_event.clear()

    async def wait(self, should_wait=True):
        if should_wait:
            await self.ready_event.wait()


@ray.remote
def wait_and_go(signal):
    ray.get(signal.wait.remote())

    print("go!")
    return "go!"


signal = SignalActor.remote()
tasks = [wait_and_go.remote(signal) for _ in range(4)]
print("ready...")
# Tasks will all be waiting for the signals.
ready, not_ready = ray.wait(tasks, num_returns=len(tasks), timeout=1)
assert ready == [], "a task went before the signal"
print("set..")
ray.get(signal.send.remote(), timeout=10)

# Tasks are unblocked.
assert ray.get(tasks, timeout=10) == ["go!"] * 4

print("OK actor_sync")
