# After Ray's "Cancelling tasks", https://docs.ray.io/en/latest/ray-core/tasks.html#cancelling-tasks (and actors.html#cancelling-actor-tasks).
import asyncio
import time

import prism as ray


@ray.remote
def blocking_operation():
    time.sleep(10e6)


obj_ref = blocking_operation.remote()
time.sleep(0.5)  # let it start: cancel must interrupt a running task
ray.cancel(obj_ref)

try:
    ray.get(obj_ref, timeout=10)
except ray.exceptions.TaskCancelledError:
    print("Object reference was cancelled.")
else:
    raise AssertionError("a cancelled task returned")


@ray.remote
class Actor:
    async def f(self):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            print("Actor task canceled.")


actor = Actor.remote()
ref = actor.f.remote()

# Wait until task is scheduled.
time.sleep(0.5)
start = time.time()
ray.cancel(ref)

try:
    ray.get(ref, timeout=10)
except (ray.exceptions.RayTaskError, ray.exceptions.TaskCancelledError):
    print("Object reference was cancelled.")
else:
    raise AssertionError("a cancelled async actor task returned")
assert time.time() - start < 4, "the cancelled actor task ran to its end"


@ray.remote
class SyncActor:
    def __init__(self):
        self.is_canceled = False

    def long_running_method(self):
        """A sync actor method that checks for cancellation periodically."""
        for i in range(1000):
            # For sync actor tasks, is_canceled() can be checked in the task body
            if ray.get_runtime_context().is_canceled():
                self.is_canceled = True
                print("Actor task canceled, cleaning up...")
                return "canceled"
            time.sleep(0.01)
        return "completed"

    def get_cancel_status(self):
        return self.is_canceled


# Sync actor task cancellation with periodic checking
actor = SyncActor.remote()
actor_task_ref = actor.long_running_method.remote()
time.sleep(0.5)  # let it start

ray.cancel(actor_task_ref)

# The TaskCancelledError will be raised when calling ray.get
try:
    result = ray.get(actor_task_ref, timeout=20)
except ray.exceptions.TaskCancelledError:
    print("Actor task was cancelled")
else:
    raise AssertionError(f"a cancelled actor task returned {result!r}")

# The get_cancel_status will return True after cancellation
cancel_status = ray.get(actor.get_cancel_status.remote(), timeout=20)
print(f"Actor detected cancellation: {cancel_status}")
assert cancel_status is True

print("OK task_cancellation")
