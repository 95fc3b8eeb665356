"""Functions the tests run by reference (an importable module, not __main__)."""
import os
import subprocess
import sys

import pytest

import prism


def own_driver(world_size, tmp_path, source, env=None, timeout=120):
    """Runs `source` as a driver of its own (one rank, outside MPI); its CompletedProcess."""
    if world_size > 1:
        pytest.skip("the child cluster runs outside MPI: run at one rank")
    script = tmp_path / "driver.py"
    script.write_text(source)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    clean.update(env or {})
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=clean,
                          timeout=timeout)


@prism.remote
def add(a, b):
    return a + b


@prism.remote
def rank_of():
    return prism.get_runtime_context().rank


@prism.remote
def fan_out(n):
    # Nested tasks: submitted from inside a task, gathered there.
    return sum(prism.get([add.remote(i, i) for i in range(n)], timeout=60))


@prism.remote
class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, x=1):
        self.value += x
        return self.value

    def get(self):
        return self.value

    def pid(self):
        return os.getpid()


class CustomError(Exception):
    def __init__(self, code, detail):
        super().__init__(f"code {code}: {detail}")
        self.code = code


@prism.remote
def raise_custom(code):
    raise CustomError(code, "from a helper")
