"""apps/python_train/train_fashion_mnist.py small under mpirun -n 3 (2 DDP workers),
preempted and resumed (ctest python_train_app_3ranks):

1. 3 short epochs; once the first checkpoint is committed, SIGUSR1 to mpirun (which
   forwards it to every rank): the run stops at the next epoch's checkpoint and exits 75.
2. The same command again: it resumes after that epoch and finishes; result.json then
   holds epochs 0, 1, 2 once each.

    app_preempted.py --mpirun="mpirun --allow-run-as-root --oversubscribe" --app=... --work=DIR
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

EPOCHS = 3


def fail(message, *outputs):
    for out in outputs:
        print(out)
    print(f"FAIL: {message}")
    sys.exit(1)


def finish(proc, timeout):
    """proc's output once it ends; the whole process group is killed after `timeout` s."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        fail(f"the app did not end within {timeout} s", proc.communicate()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--app", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    runs = os.path.join(args.work, "runs")
    shutil.rmtree(runs, ignore_errors=True)
    cmd = shlex.split(args.mpirun) + [
        "-n", "3", args.python, args.app, f"--epochs={EPOCHS}", "--train-samples=256",
        "--test-samples=128", "--batch-size=64", f"--storage-path={runs}", "--name=app",
        f"--data-root={os.path.join(args.work, 'fashion_mnist')}"]
    print("$", shlex.join(cmd), flush=True)

    start = time.time()
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.time() + 120
    while not glob.glob(os.path.join(runs, "app", "checkpoint_*")):
        if first.poll() is not None or time.time() > deadline:
            fail("no checkpoint within 120 s", finish(first, 10))
        time.sleep(0.05)
    first.send_signal(signal.SIGUSR1)
    out = finish(first, 120)
    print(out)
    if first.returncode != 75 or "preempted after" not in out:
        fail(f"SIGUSR1 after the first checkpoint: exit status {first.returncode}, expected 75 "
             "and 'preempted after <checkpoint>'")
    print(f"-- preempted: exit status 75 after {time.time() - start:.1f} s; running it again", flush=True)

    again = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    out = finish(again, 180)
    print(out)
    if again.returncode != 0 or "resuming after epoch" not in out:
        fail(f"the second run exited {again.returncode}; it should resume and finish")
    if f"trained {EPOCHS} epochs on 2 worker(s); the checkpoint of epoch {EPOCHS - 1} classifies" not in out:
        fail("the second run did not score its last checkpoint")
    with open(os.path.join(runs, "app", "result.json")) as f:
        epochs = [int(json.loads(line)["epoch"]) for line in f if line.strip()]
    if epochs != list(range(EPOCHS)):
        fail(f"result.json has epochs {epochs}, expected 0..{EPOCHS - 1} once each")
    print(f"PASS: preempted, resumed, epochs {epochs} once each ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
