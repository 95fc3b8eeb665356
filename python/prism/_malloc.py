"""glibc malloc settings for the threads Prism runs user code on.

A task runs on an executor thread, and glibc gives each thread other than the main one an
arena of its own, which returns the memory a step frees to the kernel (a heap that empties
is deleted, whatever the thresholds) and faults it in again at the next step: about 14 us a
page on a VM. An MLP's training step ran at 173 steps/s in a task against 402 in a plain
process (perf/README.md, "After a pause, and beside the user's compute"). One arena for
the process, and thresholds that keep what a step frees (up to 1 GiB) for the next, set at
``import prism`` before the rank's threads start: 400 steps/s in the task, and a CNN's 62
(20 on a plain process's main thread, whose arena trims and re-faults the same way).

Left alone when the user chose: any of glibc's MALLOC_* variables or a glibc.malloc
tunable set, or ``PRISM_MALLOC=default`` (``PRISM_TRAIN_MALLOC=default`` too, as before).
"""
import os

_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_WANTED = {"arena_max": (_M_ARENA_MAX, 1), "mmap_threshold": (_M_MMAP_THRESHOLD, 32 << 20),
           "trim_threshold": (_M_TRIM_THRESHOLD, 1 << 30)}


def keep_freed_memory():
    """Sets the three (mallopt) unless the user chose; returns what it set ({} when malloc
    is not glibc's)."""
    if "default" in (os.environ.get("PRISM_MALLOC"), os.environ.get("PRISM_TRAIN_MALLOC")):
        return {}
    if any(v in os.environ for v in _VARIABLES) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return {}
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return {}
    return {name: value for name, (param, value) in _WANTED.items() if mallopt(param, value) == 1}
