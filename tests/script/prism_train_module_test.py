"""The prism_train module against a fake worker (the pipes of src/train/script_worker.h),
and on its own (no Prism). Run: python3 prism_train_module_test.py <python dir>."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

PYDIR = os.path.abspath(sys.argv.pop(1))

SCRIPT = r"""
import math, os, prism_train, sys
print("ctx", prism_train.get_context().world_rank, prism_train.get_checkpoint(), flush=True)
print("committed", prism_train.report({"loss": 0.5, "bad": math.nan, "up": math.inf, "n": 3},
                                      checkpoint_dir=sys.argv[1]), flush=True)
try:
    prism_train.report({"x": 1})
except RuntimeError as e:
    print("refused", e, flush=True)
print("stop", prism_train.should_stop(), flush=True)
"""


class FakeWorker(unittest.TestCase):
    def test_reports_replies_stop_and_stopping(self):
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        ckpt = tempfile.mkdtemp()
        env = dict(os.environ, PYTHONPATH=PYDIR, PRISM_TRAIN_TO_WORKER_FD=str(to_worker_w),
                   PRISM_TRAIN_FROM_WORKER_FD=str(from_worker_r), PRISM_TRAIN_WORLD_RANK="1",
                   PRISM_TRAIN_CHECKPOINT="/ckpt/7", PRISM_TRAIN_WORKER_PID=str(os.getpid()))
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, ckpt], env=env, stdout=subprocess.PIPE,
                                 text=True, pass_fds=(to_worker_w, from_worker_r))
        os.close(to_worker_w)
        os.close(from_worker_r)
        lines = os.fdopen(to_worker_r, "r")
        replies = os.fdopen(from_worker_w, "w")
        first = json.loads(lines.readline())
        self.assertEqual(first["op"], "report")
        self.assertEqual(first["metrics"], {"loss": 0.5, "bad": "nan", "up": "inf", "n": 3.0})
        self.assertEqual(first["checkpoint_dir"], ckpt)
        replies.write(json.dumps({"op": "reply", "ok": True, "iteration": 1, "checkpoint": "/run/checkpoint_000001"}) + "\n")
        replies.flush()
        second = json.loads(lines.readline())
        self.assertIsNone(second["checkpoint_dir"])
        # A stop request may come before a reply: the module notes it and reads on.
        replies.write('{"op": "stop"}\n' + json.dumps({"op": "reply", "ok": False, "error": "no room"}) + "\n")
        replies.flush()
        self.assertEqual(json.loads(lines.readline()), {"op": "stopping"})
        out, _ = child.communicate(timeout=30)
        lines.close()
        replies.close()
        self.assertEqual(child.returncode, 0, out)
        self.assertIn("ctx 1 /ckpt/7", out)
        self.assertIn("committed /run/checkpoint_000001", out)
        self.assertIn("refused no room", out)
        self.assertIn("stop True", out)

    def test_a_signal_before_import_waits_for_the_handler(self):
        # The worker starts scripts with SIGUSR1 blocked; one sent early must not kill Python.
        code = ("import os, signal, time; os.kill(os.getpid(), signal.SIGUSR1); time.sleep(0.2); "
                "import prism_train; print('stop', prism_train.should_stop())")
        env = dict(os.environ, PYTHONPATH=PYDIR, PRISM_TRAIN_TO_WORKER_FD="", PRISM_TRAIN_FROM_WORKER_FD="")
        blocked = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30,
                                 preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1]))
        self.assertEqual(blocked.returncode, 0, blocked.stderr)
        self.assertIn("stop True", blocked.stdout)


class WithoutPrism(unittest.TestCase):
    def test_standalone(self):
        code = ("import prism_train as p; c = p.get_context(); "
                "print(c.world_rank, c.world_size, p.get_checkpoint(), p.report({'a': 1}), p.should_stop())")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_TRAIN")}
        env.update(PYTHONPATH=PYDIR, RANK="3", WORLD_SIZE="4")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout.strip(), "3 4 None None False", r.stderr)

    def test_bad_arguments(self):
        sys.path.insert(0, PYDIR)
        import prism_train
        with self.assertRaisesRegex(TypeError, "metric 'acc' is str"):
            prism_train.report({"acc": "high"})
        with self.assertRaisesRegex(TypeError, "must be a dict"):
            prism_train.report([1])
        with self.assertRaisesRegex(ValueError, "is not a directory"):
            prism_train.report({"a": 1}, checkpoint_dir="/nonexistent/dir")


if __name__ == "__main__":
    unittest.main(verbosity=2)
