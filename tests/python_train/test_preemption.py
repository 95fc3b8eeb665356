"""SIGUSR1 ends a Python TorchTrainer at a checkpoint with exit status 75; the same program
run again resumes there (a one-rank program of its own, started by the test)."""
import json
import os
import signal
import subprocess
import sys
import time

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preempt_app.py")


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    return env  # a one-rank program, not a member of this test's MPI job


def test_sigusr1_exits_75_at_a_checkpoint_and_the_rerun_resumes(tmp_path):
    storage = str(tmp_path / "runs")
    proc = subprocess.Popen([sys.executable, APP, storage, "20"], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = os.path.join(storage, "app", "checkpoint_000001")
    deadline = time.time() + 60
    while not os.path.exists(first) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert os.path.exists(first), proc.communicate(timeout=30)
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "stopped on SIGUSR1" in err
    assert "DONE" not in out
    kept = sorted(d for d in os.listdir(os.path.join(storage, "app")) if d.startswith("checkpoint_"))
    with open(os.path.join(storage, "app", kept[-1], "s.json")) as f:
        last_step = json.load(f)["step"]
    assert last_step < 19

    again = subprocess.run([sys.executable, APP, storage, "20"], env=_env(), capture_output=True,
                           text=True, timeout=90)
    assert again.returncode == 0, again.stderr
    metrics = json.loads(again.stdout.split("DONE", 1)[1])
    assert metrics["step"] == 19
    assert metrics["start"] == last_step + 1  # resumed after the checkpoint, not from 0
