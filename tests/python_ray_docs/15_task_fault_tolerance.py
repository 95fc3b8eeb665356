# After Ray's "Task Fault Tolerance" page, https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html (doc_code/tasks_fault_tolerance.py).
# With failure probabilities of 0 and 1 added, whose outcomes are known.
import os
import tempfile
import time

import numpy as np

import prism as ray

ray.init(ignore_reinit_error=True)


@ray.remote(max_retries=1)
def potentially_fail(failure_probability):
    time.sleep(0.02)
    if np.random.random() < failure_probability:
        os._exit(0)
    return 0


for _ in range(3):
    try:
        # If this task crashes, Ray will retry it up to one additional
        # time. If either of the attempts succeeds, the call to ray.get
        # below will return normally. Otherwise, it will raise an
        # exception.
        ray.get(potentially_fail.remote(0.5))
        print('SUCCESS')
    except ray.exceptions.WorkerCrashedError:
        print('FAILURE')

assert ray.get(potentially_fail.remote(0.0)) == 0
try:
    ray.get(potentially_fail.remote(1.0))
except ray.exceptions.WorkerCrashedError:
    pass
else:
    raise AssertionError("a task that always crashes returned")


# Ray's own tests (python/ray/tests/test_failure*.py) count the attempts with a file: this task
# crashes on its first attempt only, so it fails with max_retries=0 and succeeds with 1.
@ray.remote(max_retries=0)
def crash_once(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(0)
    return "second attempt"


marker_dir = tempfile.mkdtemp()
try:
    ray.get(crash_once.remote(os.path.join(marker_dir, "a")))
except ray.exceptions.WorkerCrashedError:
    pass
else:
    raise AssertionError("a crashed task with max_retries=0 returned")
assert ray.get(crash_once.options(max_retries=1).remote(os.path.join(marker_dir, "b"))) == "second attempt"


class RandomError(Exception):
    pass


@ray.remote(max_retries=1, retry_exceptions=True)
def potentially_fail(failure_probability):
    if failure_probability < 0 or failure_probability > 1:
        raise ValueError(
            "failure_probability must be between 0 and 1, but got: "
            f"{failure_probability}"
        )
    time.sleep(0.02)
    if np.random.random() < failure_probability:
        raise RandomError("Failed!")
    return 0


for _ in range(3):
    try:
        # If this task crashes, Ray will retry it up to one additional
        # time. If either of the attempts succeeds, the call to ray.get
        # below will return normally. Otherwise, it will raise an
        # exception.
        ray.get(potentially_fail.remote(0.5))
        print('SUCCESS')
    except RandomError:
        print('FAILURE')

try:
    ray.get(potentially_fail.remote(1.0))
except RandomError:
    pass
else:
    raise AssertionError("a task that always raises returned")

# Provide the exceptions that we want to retry as an allowlist.
retry_on_exception = potentially_fail.options(retry_exceptions=[RandomError])
try:
    # This will fail since we're passing in -1 for the failure_probability,
    # which will raise a ValueError in the task and does not match the RandomError
    # exception that we provided.
    ray.get(retry_on_exception.remote(-1))
except ValueError:
    print("FAILED AS EXPECTED")
else:
    raise RuntimeError("An exception should be raised so this shouldn't be reached.")

# These will retry on the RandomError exception.
for _ in range(3):
    try:
        # If this task crashes, Ray will retry it up to one additional
        # time. If either of the attempts succeeds, the call to ray.get
        # below will return normally. Otherwise, it will raise an
        # exception.
        ray.get(retry_on_exception.remote(0.5))
        print('SUCCESS')
    except RandomError:
        print('FAILURE AFTER RETRIES')

assert ray.get(retry_on_exception.remote(0.0)) == 0

print("OK task_fault_tolerance")
