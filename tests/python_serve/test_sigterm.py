"""SIGTERM (Slurm's time limit, a preemption) drains: requests in flight are answered, then
serve.run(blocking=True) returns and the job ends cleanly. And prism.serve imported after
prism.init() is refused at more than one rank, with what to do."""
import concurrent.futures
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from conftest import run_child

HERE = os.path.dirname(os.path.abspath(__file__))


def test_sigterm_drains_requests_in_flight():
    child = run_child(os.path.join(HERE, "sigterm_child.py"))
    try:
        address = child.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:"), (address, child.stderr.read() if child.poll() else "")
        assert requests.get(address + "/slow?s=0", timeout=30).text == "done"
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            calls = [pool.submit(requests.get, address + "/slow?s=1", timeout=30) for _ in range(5)]
            time.sleep(0.4)  # in flight
            child.send_signal(signal.SIGTERM)
            answers = [c.result() for c in calls]
        assert [a.status_code for a in answers] == [200] * 5
        assert [a.text for a in answers] == ["done"] * 5
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        assert "drained and stopped" in out
        assert "Serve stops accepting requests and drains" in err
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def test_import_after_init_is_refused_at_several_ranks(world_size):
    if world_size > 1:
        pytest.skip("starts an mpirun of its own: run at one rank only (not mpirun inside mpirun)")
    script = ("import prism; prism.init(); from prism import serve\n"
              "@serve.deployment\n"
              "def f(x): return x\n"
              "try:\n"
              "    serve.run(f.bind(), route_prefix=None)\n"
              "except RuntimeError as e:\n"
              "    print('refused:', e)\n"
              "prism.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    out = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, "-c", script],
                         capture_output=True, text=True, env=env, timeout=60)
    assert "refused: prism.serve was imported after prism.init()" in out.stdout, out.stdout + out.stderr
    assert "before prism.init()" in out.stdout
