"""Inside a trial: run_trial (called by the C++ trampoline on the trial's executor thread,
holding the GIL), report, get_checkpoint and get_context."""

import itertools
import numbers
import os
import shutil
import threading
import traceback
import warnings

import cloudpickle

from .. import _tune, _worker
from ._checkpoint import Checkpoint
from ._space import decode_config


class _TrialStop(BaseException):
    """The Tuner stopped or paused this trial (or the job is being preempted): raised by
    report after its checkpoint is committed. A BaseException, so that a trainable's
    `except Exception` does not swallow it; let it pass."""


_local = threading.local()
_args_cache = {}  # trainable args bytes -> decoded dict
_params_cache = {}  # object id -> value (with_parameters inputs, fetched once per rank)
_params_lock = threading.Lock()
_staging = itertools.count()
_dropped_warned = set()


class _Session:
    def __init__(self, config):
        self.config = config
        self.trial_id = _tune.trial_id()
        self.trial_dir = _tune.trial_dir()


def _args():
    raw = _tune.trainable_args()
    args = _args_cache.get(raw)
    if args is None:
        args = cloudpickle.loads(raw)
        if len(_args_cache) > 64:
            _args_cache.clear()
        _args_cache[raw] = args
    return args


def _parameter(name):
    import prism
    oid = _tune.parameter_id(name)
    with _params_lock:
        if oid in _params_cache:
            return _params_cache[oid]
    value = prism.get(prism._prism._ref_from_id(oid, ""))
    with _params_lock:
        _params_cache[oid] = value
    return value


def run_trial(config_text):
    """The trial: ("ok", ""), ("stop", "") or ("error", traceback)."""
    try:
        args = _args()
        fn = _worker.resolve(args["fn"])
        config = decode_config(config_text, args["codecs"])
        kwargs = {name: _parameter(name) for name in args["params"]}
    except BaseException:
        return ("error", "prism.tune: the trial could not start:\n" + traceback.format_exc())
    _local.session = _Session(config)
    try:
        result = _worker._call(fn, (config,), kwargs)
        if isinstance(result, dict) and result:
            report(result)  # Ray: a function's returned dict is its last result
        return ("ok", "")
    except _TrialStop:
        return ("stop", "")
    except BaseException:
        return ("error", traceback.format_exc())
    finally:
        _local.session = None


def _session(what):
    s = getattr(_local, "session", None)
    if s is None:
        raise RuntimeError(
            f"prism.tune.{what}() was called outside a trial: only a trainable that a "
            "prism.tune.Tuner (or tune.run) runs can call it, on the thread the trial runs on")
    return s


def _flatten_metrics(metrics, prefix=""):
    if not prefix:  # a flat dict of str: float or int goes as it is (0.3 us, not 1.8)
        for key, value in metrics.items():
            if (type(value) is not float and type(value) is not int) or type(key) is not str:
                break
        else:
            return metrics
    out = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten_metrics(value, name + "/"))
        elif isinstance(value, (bool, numbers.Real)) or (hasattr(value, "item") and getattr(value, "size", 0) == 1):
            out[name] = float(value)
        elif value is None:
            continue
        elif name not in _dropped_warned:
            _dropped_warned.add(name)
            warnings.warn(f"prism.tune.report: metric {name!r} is a {type(value).__name__}, not a "
                          "number; the engine keeps numbers only, so it is left out", stacklevel=3)
    return out


def report(metrics=None, *, checkpoint=None, **kwargs):
    """Reports a result of the running trial (Ray's tune.report(metrics, checkpoint=) /
    train.report; the legacy tune.report(**kwargs) too). training_iteration grows by one.
    A checkpoint's files are copied into the trial's storage and committed. When the
    scheduler stops or pauses the trial, this raises a BaseException the trainable must let
    pass. Under a FIFO scheduler with no stopper, a result without a checkpoint from a trial
    on the driver's rank reaches the driver up to 0.1 s later, with the next ones. Raises
    RuntimeError outside a trial, TypeError for metrics that are not a dict."""
    s = _session("report")
    if metrics is None:
        metrics = {}
    elif isinstance(metrics, Checkpoint) and checkpoint is None:
        metrics, checkpoint = {}, metrics
    elif not isinstance(metrics, dict):
        raise TypeError(f"prism.tune.report: metrics must be a dict, not {type(metrics).__name__}")
    if kwargs:
        metrics = {**metrics, **kwargs}
    flat = _flatten_metrics(metrics)
    staged = None
    if checkpoint is not None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"prism.tune.report: checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")
        if not os.path.isdir(checkpoint.path):
            raise ValueError(f"prism.tune.report: the checkpoint directory {checkpoint.path!r} does not exist")
        # Ray leaves the caller's directory as it was: commit a copy, made beside the
        # trial's checkpoints so the engine's commit is a rename.
        staged = os.path.join(s.trial_dir, f".prism-py-staging-{os.getpid()}-{next(_staging)}")
        shutil.copytree(checkpoint.path, staged, symlinks=True)
    try:
        _tune.report(flat, staged)
    finally:
        if staged is not None and os.path.exists(staged):
            shutil.rmtree(staged, ignore_errors=True)


def get_checkpoint():
    """The checkpoint the trial resumes from (after a pause, a retry, PBT's exploit or a
    restore), or None for a fresh start (and outside a trial)."""
    if getattr(_local, "session", None) is None:
        return None
    path = _tune.get_checkpoint()
    return None if path is None else Checkpoint(path)


class TuneContext:
    """Ray's tune.get_context(): where the trial runs."""

    def __init__(self, s):
        self._s = s

    def get_trial_id(self):
        return self._s.trial_id

    def get_trial_name(self):
        return self._s.trial_id

    def get_trial_dir(self):
        return self._s.trial_dir

    def get_experiment_name(self):
        return os.path.basename(os.path.dirname(self._s.trial_dir))

    def get_world_rank(self):
        return 0

    def get_local_rank(self):
        return 0

    def get_world_size(self):
        return 1


def get_context():
    return TuneContext(_session("get_context"))


def in_trial():
    return getattr(_local, "session", None) is not None
