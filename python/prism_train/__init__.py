"""prism_train: what a training script run by Prism's ScriptTrainer (prism-train-script)
calls, like Ray Train's ray.train functions. Pure Python, standard library only.

    import prism_train
    ckpt = prism_train.get_checkpoint()           # a directory to resume from, or None
    for epoch in range(start, epochs):
        ...
        prism_train.report({"loss": loss}, checkpoint_dir=d)   # d: a directory you wrote
        if prism_train.should_stop():              # SIGUSR1/SIGTERM: checkpointed, so return
            break

The module talks to its Prism worker over two pipes the worker opened for it (fds named by
PRISM_TRAIN_TO_WORKER_FD and PRISM_TRAIN_FROM_WORKER_FD), one JSON object per line; no
network port. Run without Prism (plain python3, torchrun), report() only records the
metrics locally, get_checkpoint() returns None unless PRISM_TRAIN_CHECKPOINT is set, and
get_context() reads torchrun's variables, so one script runs both ways.
"""

import json
import math
import os
import select
import signal
import threading
import time

__all__ = ["report", "get_checkpoint", "get_context", "should_stop", "TrainContext"]

_lock = threading.Lock()
_stop = threading.Event()
_stopping_sent = False
_reports = []  # without a worker: what report() was given, for the script to look at
_to_worker = None
_from_worker = None
_pending = b""  # bytes read from the worker after the last whole line


class TrainContext:
    """Who this worker is (Ray's TrainContext)."""

    def __init__(self, env):
        def num(key, *fallbacks, default=0):
            for k in (key,) + fallbacks:
                if env.get(k, "") != "":
                    return int(env[k])
            return default

        self.world_rank = num("PRISM_TRAIN_WORLD_RANK", "RANK")
        self.world_size = num("PRISM_TRAIN_WORLD_SIZE", "WORLD_SIZE", default=1)
        self.local_rank = num("PRISM_TRAIN_LOCAL_RANK", "LOCAL_RANK")
        self.local_world_size = num("PRISM_TRAIN_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", default=1)
        self.node_rank = num("PRISM_TRAIN_NODE_RANK", "NODE_RANK", "GROUP_RANK")
        self.attempt = num("PRISM_TRAIN_ATTEMPT", "TORCHELASTIC_RESTART_COUNT")
        self.trial_name = env.get("PRISM_TRAIN_TRIAL_NAME", "")
        self.run_dir = env.get("PRISM_TRAIN_RUN_DIR", "")
        self.backend = env.get("PRISM_TRAIN_BACKEND", "")
        self.under_prism = env.get("PRISM_TRAIN_TO_WORKER_FD", "") != ""

    def get_world_rank(self):
        return self.world_rank

    def get_world_size(self):
        return self.world_size

    def get_local_rank(self):
        return self.local_rank

    def get_local_world_size(self):
        return self.local_world_size

    def get_node_rank(self):
        return self.node_rank

    def get_trial_name(self):
        return self.trial_name

    def get_trial_dir(self):
        return self.run_dir

    def __repr__(self):
        return ("TrainContext(world_rank=%d, world_size=%d, local_rank=%d, local_world_size=%d, "
                "node_rank=%d, attempt=%d, trial_name=%r, run_dir=%r)" % (
                    self.world_rank, self.world_size, self.local_rank, self.local_world_size,
                    self.node_rank, self.attempt, self.trial_name, self.run_dir))


def get_context():
    """This worker's TrainContext (ranks, the run's name and directory, the attempt)."""
    return TrainContext(os.environ)


def get_checkpoint():
    """The checkpoint directory to resume from (the run's latest committed checkpoint, on
    every worker), or None when the run starts fresh."""
    path = os.environ.get("PRISM_TRAIN_CHECKPOINT", "")
    return path or None


def should_stop():
    """True once this process got SIGUSR1 or SIGTERM (a Slurm time-limit warning or
    preemption, forwarded by Prism) or its worker asked it to stop. Check it after each
    report with a checkpoint and return from training when it is true: Prism then ends the
    run as preempted, and the requeued job resumes from that checkpoint. In DDP, agree
    across ranks before stopping (e.g. all_reduce a flag with MAX), or ranks may stop at
    different steps."""
    global _stopping_sent
    with _lock:
        _poll_worker(0.0)
        if not _stop.is_set():
            return False
        if not _stopping_sent and _to_worker is not None:
            _stopping_sent = True
            _send({"op": "stopping"})
    return True


def report(metrics, checkpoint_dir=None):
    """Reports this step's metrics (a dict of numbers) and, optionally, a directory holding
    a checkpoint. Call it on every worker (each call also tells Prism the script is alive:
    report_timeout_s counts from the last one). World rank 0's metrics are recorded in the
    run (result.json, progress.csv) and shown on the driver's console, and its
    checkpoint_dir is copied into the run as checkpoint_NNNNNN before report returns (the
    directory stays the script's). Returns the committed checkpoint's path on world rank 0,
    else None. Raises TypeError/ValueError on bad arguments, RuntimeError when the worker
    refuses the report or is gone."""
    if not isinstance(metrics, dict):
        raise TypeError("prism_train.report: metrics must be a dict of name -> number, not %s"
                        % type(metrics).__name__)
    clean = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError("prism_train.report: metric names must be str, not %r" % (key,))
        if isinstance(value, (str, bytes)) or value is None:
            raise TypeError("prism_train.report: metric %r is %s, not a number" % (key, type(value).__name__))
        try:
            number = float(value)  # int, float, bool, numpy and 0-d torch scalars
        except (TypeError, ValueError):
            raise TypeError("prism_train.report: metric %r is %s, not a number"
                            % (key, type(value).__name__)) from None
        if math.isnan(number):
            clean[key] = "nan"
        elif math.isinf(number):
            clean[key] = "inf" if number > 0 else "-inf"
        else:
            clean[key] = number
    if checkpoint_dir is not None:
        checkpoint_dir = os.fspath(checkpoint_dir)
        if not os.path.isdir(checkpoint_dir):
            raise ValueError("prism_train.report: checkpoint_dir '%s' is not a directory: pass the "
                             "directory the script saved its checkpoint files into" % checkpoint_dir)
        checkpoint_dir = os.path.abspath(checkpoint_dir)
    if not _connect():
        _reports.append((dict(metrics), checkpoint_dir))
        return None
    with _lock:
        _send({"op": "report", "metrics": clean, "checkpoint_dir": checkpoint_dir})
        timeout = float(os.environ.get("PRISM_TRAIN_REPORT_TIMEOUT_S", "0") or 0)
        reply = _read_reply(timeout if timeout > 0 else 3600.0)
    if not reply.get("ok"):
        raise RuntimeError(reply.get("error", "prism_train.report: the worker refused the report"))
    return reply.get("checkpoint")


# ---- The pipe to the worker ---------------------------------------------------------------

def _connect():
    global _to_worker, _from_worker
    if _to_worker is not None:
        return True
    out_fd = os.environ.get("PRISM_TRAIN_TO_WORKER_FD", "")
    in_fd = os.environ.get("PRISM_TRAIN_FROM_WORKER_FD", "")
    if not out_fd or not in_fd:
        return False
    _to_worker, _from_worker = int(out_fd), int(in_fd)
    # Data-loader processes forked later must not hold the worker's pipes.
    os.set_inheritable(_to_worker, False)
    os.set_inheritable(_from_worker, False)
    return True


def _send(message):
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(_to_worker, data):]
    except OSError as e:
        raise RuntimeError("prism_train: the Prism worker is gone (%s)" % e) from None


def _handle_line(line):
    """A line from the worker: a reply is returned; a stop request is noted."""
    message = json.loads(line)
    if message.get("op") == "stop":
        _stop.set()
        return None
    return message


def _poll_worker(timeout):
    """Reads what the worker sent, waiting up to `timeout` s; returns the first reply."""
    global _pending
    if not _connect():
        return None
    deadline = time.monotonic() + timeout
    while True:
        while b"\n" in _pending:
            line, _pending = _pending.split(b"\n", 1)
            if line.strip():
                reply = _handle_line(line)
                if reply is not None:
                    return reply
        left = deadline - time.monotonic()
        ready, _, _ = select.select([_from_worker], [], [], max(0.0, left))
        if not ready:
            return None
        chunk = os.read(_from_worker, 65536)
        if not chunk:
            raise RuntimeError("prism_train: the Prism worker closed the pipe (it is gone)")
        _pending += chunk


def _read_reply(timeout):
    reply = _poll_worker(timeout)
    if reply is None:
        raise RuntimeError("prism_train.report: no answer from the Prism worker within %.0f s" % timeout)
    return reply


# ---- Signals and the worker's life --------------------------------------------------------

def _on_signal(signum, frame):
    _stop.set()


def _install():
    under_prism = os.environ.get("PRISM_TRAIN_TO_WORKER_FD", "") != ""
    if threading.current_thread() is threading.main_thread():
        # Outside Prism only SIGUSR1: a launcher such as torchrun ends its workers with
        # SIGTERM, which should still end them.
        signals = [signal.SIGUSR1, signal.SIGTERM] if under_prism else [signal.SIGUSR1]
        for sig in signals:
            signal.signal(sig, _on_signal)
        # The worker starts the script with both blocked, so that one sent before this
        # handler existed waits instead of killing the interpreter: let it in now.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    if under_prism:
        _connect()  # now, so that programs the script starts never get the pipes
    worker_pid = os.environ.get("PRISM_TRAIN_WORKER_PID", "")
    if under_prism and worker_pid:
        # Die with the worker: a rank killed outright must not leave its script running.
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != int(worker_pid):  # the worker died before prctl took effect
            os._exit(1)


_install()
