# After Ray's "Pattern: nested tasks", https://docs.ray.io/en/latest/ray-core/patterns/nested-tasks.html (doc_code/pattern_tree_of_tasks.py).
# At a hundredth of its sizes.
import time

from numpy import random

import prism as ray

ray.init()


def partition(collection):
    # Use the last element as the pivot
    pivot = collection.pop()
    greater, lesser = [], []
    for element in collection:
        if element > pivot:
            greater.append(element)
        else:
            lesser.append(element)
    return lesser, pivot, greater


def quick_sort(collection):
    if len(collection) <= 2000:  # magic number
        return sorted(collection)
    else:
        lesser, pivot, greater = partition(collection)
        lesser = quick_sort(lesser)
        greater = quick_sort(greater)
    return lesser + [pivot] + greater


@ray.remote
def quick_sort_distributed(collection):
    # Tiny tasks are an antipattern.
    # Thus, in our example we have a "magic number" to
    # toggle when distributed recursion should be used vs
    # when the sorting should be done in place. The rule
    # of thumb is that the duration of an individual task
    # should be at least 1 second.
    if len(collection) <= 2000:  # magic number
        return sorted(collection)
    else:
        lesser, pivot, greater = partition(collection)
        lesser = quick_sort_distributed.remote(lesser)
        greater = quick_sort_distributed.remote(greater)
        return ray.get(lesser) + [pivot] + ray.get(greater)


for size in [2000, 40000, 80000]:
    print(f"Array size: {size}")
    unsorted = random.randint(1000000, size=(size)).tolist()
    expected = sorted(unsorted)
    s = time.time()
    assert quick_sort(list(unsorted)) == expected
    print(f"Sequential execution: {(time.time() - s):.3f}")
    s = time.time()
    assert ray.get(quick_sort_distributed.remote(unsorted)) == expected
    print(f"Distributed execution: {(time.time() - s):.3f}")
    print("--" * 10)

print("OK tree_of_tasks")
