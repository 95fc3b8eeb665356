# After Ray's "Pattern: pipelining", https://docs.ray.io/en/latest/ray-core/patterns/pipelining.html (doc_code/pattern_pipelining.py).
import prism as ray


@ray.remote
class WorkQueue:
    def __init__(self):
        self.queue = [i for i in range(10)]

    def get_work_item(self):
        if self.queue:
            return self.queue.pop(0)
        else:
            return None


@ray.remote
class WorkerWithoutPipelining:
    def __init__(self, work_queue):
        self.work_queue = work_queue
        self.processed = []

    def process(self, work_item):
        print(work_item)
        self.processed.append(work_item)

    def run(self):
        while True:
            # Get work from the remote queue.
            work_item = ray.get(self.work_queue.get_work_item.remote())

            if work_item is None:
                break

            # Do work.
            self.process(work_item)
        return self.processed


@ray.remote
class WorkerWithPipelining:
    def __init__(self, work_queue):
        self.work_queue = work_queue
        self.processed = []

    def process(self, work_item):
        print(work_item)
        self.processed.append(work_item)

    def run(self):
        self.work_item_ref = self.work_queue.get_work_item.remote()

        while True:
            # Get work from the remote queue.
            work_item = ray.get(self.work_item_ref)

            if work_item is None:
                break

            self.work_item_ref = self.work_queue.get_work_item.remote()

            # Do work while we are fetching the next work item.
            self.process(work_item)
        return self.processed


work_queue = WorkQueue.remote()
worker_without_pipelining = WorkerWithoutPipelining.remote(work_queue)
assert ray.get(worker_without_pipelining.run.remote()) == list(range(10))

work_queue = WorkQueue.remote()
worker_with_pipelining = WorkerWithPipelining.remote(work_queue)
assert ray.get(worker_with_pipelining.run.remote()) == list(range(10))

print("OK pipelining")
