# After Ray's "Actor Fault Tolerance" page, https://docs.ray.io/en/latest/ray-core/fault_tolerance/actors.html (doc_code/actor_restart.py).
import os

import prism as ray

ray.init()


# This actor kills itself after executing 10 tasks.
@ray.remote(max_restarts=4, max_task_retries=-1)
class Actor:
    def __init__(self):
        self.counter = 0

    def increment_and_possibly_fail(self):
        # Exit after every 10 tasks.
        if self.counter == 10:
            os._exit(0)
        self.counter += 1
        return self.counter


actor = Actor.remote()

# The actor will be reconstructed up to 4 times, so we can execute up to 50
# tasks successfully. The actor is reconstructed by rerunning its constructor.
# Methods that were executing when the actor died will be retried and will not
# raise a `RayActorError`. Retried methods may execute twice, once on the
# failed actor and a second time on the restarted actor.
counters = []
for _ in range(50):
    counter = ray.get(actor.increment_and_possibly_fail.remote(), timeout=30)
    print(counter)  # Prints the sequence 1-10 5 times.
    counters.append(counter)
assert counters == list(range(1, 11)) * 5, counters

# After the actor has been restarted 4 times, all subsequent methods will
# raise a `RayActorError`.
failures = 0
for _ in range(10):
    try:
        counter = ray.get(actor.increment_and_possibly_fail.remote(), timeout=30)
        print(counter)  # Unreachable.
    except ray.exceptions.RayActorError:
        print('FAILURE')  # Prints 10 times.
        failures += 1
assert failures == 10

print("OK actor_fault_tolerance")
