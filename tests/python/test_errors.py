"""Failures from Python: a task's exception as its own type with the worker's traceback,
and bad input as clear errors, never a hang."""
import sys
import threading
import types

import pytest

import prism
from helpers import CustomError, raise_custom


def test_exception_keeps_type_and_traceback():
    with pytest.raises(CustomError) as info:
        prism.get(raise_custom.remote(7), timeout=30)
    err = info.value
    assert isinstance(err, prism.exceptions.TaskError)
    assert err.cause.code == 7
    assert "raise CustomError(code" in str(err)      # the worker's source line
    assert "helpers.py" in err.traceback_str
    assert "_worker.py" not in err.traceback_str  # Prism's own frame is left out
    assert err.task_name == "raise_custom"


def test_builtin_exception_from_a_closure():
    @prism.remote
    def divide(a, b):
        return a / b
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        prism.get(divide.remote(1, 0), timeout=30)


def test_dependent_task_fails_with_the_cause():
    bad = raise_custom.remote(3)
    after = prism.remote(lambda x: x).remote(bad)
    with pytest.raises(CustomError):
        prism.get(after, timeout=30)


@prism.remote
def _calls_down(levels):
    if levels == 0:
        return prism.get(raise_custom.remote(5), timeout=60)
    return prism.get(_calls_down.remote(levels - 1), timeout=60)


def test_a_cause_keeps_its_type_and_its_size_through_nested_tasks():
    # Depth 0 kept the type; one level up it was a plain TaskError, and the message grew by
    # the whole traceback at every level (6 KB at depth 10).
    sizes = []
    for levels in (0, 1, 3):
        with pytest.raises(CustomError) as info:
            prism.get(_calls_down.remote(levels), timeout=120)
        err = info.value
        assert isinstance(err, prism.exceptions.TaskError)
        assert err.cause.code == 5
        assert "raise CustomError(code" in str(err)
        assert str(err).count("raise CustomError(code") == 1  # the innermost traceback once
        sizes.append(len(str(err)))
    assert sizes[2] - sizes[1] < 200 * 2, sizes  # a line a level, not a traceback


def test_actor_constructor_and_method_errors():
    @prism.remote
    class Broken:
        def __init__(self):
            raise KeyError("no config")

        def ping(self):
            return 1

    b = Broken.remote()
    with pytest.raises(prism.exceptions.PrismError, match="no config"):
        prism.get(b.ping.remote(), timeout=30)

    @prism.remote
    class Fine:
        def ping(self):
            return 1
    f = Fine.remote()
    with pytest.raises(AttributeError, match="no method 'pong'"):
        prism.get(f.pong.remote(), timeout=30)


def test_unpicklable_argument():
    lock = threading.Lock()
    with pytest.raises(prism.exceptions.SerializationError, match="cannot pickle"):
        prism.remote(lambda x: x).remote(lock)


def test_unpicklable_result():
    with pytest.raises(prism.exceptions.SerializationError, match="cannot pickle"):
        prism.get(prism.remote(lambda: threading.Lock()).remote(), timeout=30)


def test_function_missing_on_a_worker(world_size):
    # A module that exists only in the driver's process: workers cannot import it.
    mod = types.ModuleType("prism_driver_only")
    exec("import prism\n@prism.remote\ndef f():\n    return 1\n", mod.__dict__)
    sys.modules["prism_driver_only"] = mod
    f = mod.f.options(resources={f"rank:{world_size - 1}": 0.01})
    f._make_template()  # the function's reference is fixed here
    del sys.modules["prism_driver_only"]
    with pytest.raises(prism.exceptions.FunctionNotFoundError, match="prism_driver_only"):
        prism.get(f.remote(), timeout=30)


def test_direct_call_and_bad_get():
    from helpers import add
    with pytest.raises(TypeError, match="remote"):
        add(1, 2)
    with pytest.raises(TypeError, match="ObjectRef"):
        prism.get(42)
    with pytest.raises(ValueError):
        prism.get(prism.put(1), timeout=-1)


def test_ctrl_c_interrupts_a_long_get(world_size, tmp_path):
    # A driver of its own (one rank, in a child process) blocked in get on a 60 s task:
    # SIGINT must end the get with KeyboardInterrupt at once, and the job must end cleanly.
    if world_size > 1:
        pytest.skip("the child cluster runs outside MPI: run at one rank")
    import os
    import signal
    import subprocess
    import time
    script = tmp_path / "driver.py"
    script.write_text(
        "import time, prism\n"
        "prism.init()\n"
        "ref = prism.remote(lambda: time.sleep(60)).remote()\n"
        "print('waiting', flush=True)\n"
        "try:\n"
        "    prism.get(ref)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        t = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
        assert "interrupted" in out
        assert time.monotonic() - t < 10  # not the task's 60 s
    finally:
        child.kill()
