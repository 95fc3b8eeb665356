# After Ray's "Threaded Actors", https://docs.ray.io/en/latest/ray-core/actors/async_api.html#threaded-actors.
import threading
import time

import prism as ray


@ray.remote
class ThreadedActor:
    def __init__(self):
        self.both_running = threading.Barrier(2, timeout=10)

    def task_1(self):
        print("I'm running in a thread!")
        self.both_running.wait()  # returns only once task_2 runs too
        return threading.get_ident()

    def task_2(self):
        print("I'm running in another thread!")
        self.both_running.wait()
        return threading.get_ident()


a = ThreadedActor.options(max_concurrency=2).remote()
thread_1, thread_2 = ray.get([a.task_1.remote(), a.task_2.remote()], timeout=20)
assert thread_1 != thread_2


# Each invocation of the threaded actor runs in a thread pool, whose size is max_concurrency.
@ray.remote
class Sleeper:
    def __init__(self):
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def sleep(self):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1

    def peak_concurrency(self):
        return self.peak


sleeper = Sleeper.options(max_concurrency=3).remote()
ray.get([sleeper.sleep.remote() for _ in range(9)], timeout=20)
assert ray.get(sleeper.peak_concurrency.remote()) == 3

print("OK threaded_actors")
