"""Class trainables (Ray's tune.Trainable) and how the engine runs them.

The engine runs function trainables only: a Trainable subclass runs as the function
_ClassTrainable(config, **with_parameters), which builds the object (setup), restores it
from the trial's checkpoint when the trial resumes (a retry, a pause, PBT's exploit,
Tuner.restore), then loops step() -> tune.report(result, checkpoint=...) until step returns
done=True or the Tuner ends the trial (report raises the engine's stop, a BaseException), and
calls cleanup() however the trial ends.

A checkpoint is saved (save_checkpoint into a fresh directory, which report commits into the
trial's storage) every CheckpointConfig.checkpoint_frequency steps, at the trial's own end with
checkpoint_at_end (done=True, or a RunConfig.stop dict reached at this result), and at every
step under a scheduler that pauses trials or copies their checkpoints (PopulationBasedTraining,
HyperBandScheduler), since Ray saves a class trainable when it pauses it and the engine stops a
trial at a report, keeping the checkpoint passed there. The directory holds what
save_checkpoint wrote, the dict it returned (pickled) and the trainable's counters
(.prism_trainable.json), so a restored trainable goes on with its iteration count."""

import copy
import inspect
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import warnings

import cloudpickle

from . import _session
from ._checkpoint import Checkpoint

_META = ".prism_trainable.json"
_DICT = "prism_checkpoint_dict.pkl"
_ENGINE_KEYS = ("training_iteration", "time_total_s", "time_this_iter_s")  # the engine counts them itself
_local = threading.local()  # the with_parameters inputs on their way to setup


class Trainable:
    """Ray's tune.Trainable: subclass it and define setup(config), step() -> dict of metrics
    (done=True ends the trial), save_checkpoint(checkpoint_dir) -> dict or None,
    load_checkpoint(checkpoint) (the dict save_checkpoint returned, else the directory) and
    cleanup(). self.config, self.iteration, self.trial_id, self.trial_name, self.logdir
    (self.trial_dir) are set for you. Pass the class itself to tune.Tuner (or tune.run);
    outside a trial, train()/save()/restore()/stop() drive it by hand."""

    def __init__(self, config=None, logger_creator=None, storage=None):
        setup_kwargs = getattr(_local, "setup_kwargs", None) or {}
        _local.setup_kwargs = None
        self.config = config if config is not None else {}
        self._iteration = 0
        self._time_total = 0.0
        self._timesteps_total = None
        self._episodes_total = None
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0
        self._restored = False
        session = getattr(_session._local, "session", None)
        self._trial_id = session.trial_id if session is not None else "default"
        self._logdir = session.trial_dir if session is not None else None
        self.setup(copy.deepcopy(self.config), **setup_kwargs)

    # ---- what a subclass defines ---------------------------------------------------------

    def setup(self, config):
        """Called once, with a copy of the trial's config (and with_parameters inputs)."""

    def step(self):
        """One iteration of training: returns a dict of metrics."""
        raise NotImplementedError(f"{type(self).__name__}.step: a tune.Trainable subclass must define step()")

    def save_checkpoint(self, checkpoint_dir):
        """Writes the state into checkpoint_dir and/or returns it as a dict."""
        raise NotImplementedError(f"{type(self).__name__}.save_checkpoint: define it to checkpoint this "
                                  "trainable (CheckpointConfig.checkpoint_frequency/checkpoint_at_end)")

    def load_checkpoint(self, checkpoint):
        """Restores what save_checkpoint saved: its dict, or the checkpoint directory."""
        raise NotImplementedError(f"{type(self).__name__}.load_checkpoint: define it to resume this "
                                  "trainable from a checkpoint")

    def cleanup(self):
        """Called when the trial ends, however it ends."""

    def reset_config(self, new_config):
        """Ray's actor reuse; prism.tune makes a new object per trial run."""
        return False

    @classmethod
    def default_resource_request(cls, config):
        return None

    # ---- what Ray gives ------------------------------------------------------------------

    @property
    def iteration(self):
        """Steps done (restored with a checkpoint)."""
        return self._iteration

    @property
    def training_iteration(self):
        return self._iteration

    @property
    def trial_id(self):
        return self._trial_id

    @property
    def trial_name(self):
        return self._trial_id

    @property
    def logdir(self):
        """The trial's directory (outside a trial, a temporary one)."""
        if self._logdir is None:
            self._logdir = tempfile.mkdtemp(prefix=f"{type(self).__name__}_")
        return self._logdir

    trial_dir = logdir

    def get_config(self):
        return self.config

    def train(self):
        """Runs one step and returns its result with Ray's counters added (done,
        training_iteration, time_this_iter_s, time_total_s, iterations_since_restore, ...)."""
        result = self._prism_step()
        full = dict(result)
        full.update(training_iteration=self._iteration, time_total_s=self._time_total, trial_id=self._trial_id,
                    config=self.config, pid=os.getpid(), hostname=socket.gethostname(),
                    timestamp=int(time.time()), date=time.strftime("%Y-%m-%d_%H-%M-%S"))
        return full

    def _prism_step(self):
        """step() with the counters a report carries (the engine adds training_iteration and
        the times of its own)."""
        start = time.time()
        result = self.step()
        if not isinstance(result, dict):
            raise TypeError(f"{type(self).__name__}.step() returned a {type(result).__name__}; it must return "
                            "a dict of metrics")
        result = dict(result)
        took = time.time() - start
        self._iteration += 1
        self._iterations_since_restore += 1
        self._time_total += took
        self._time_since_restore += took
        if "timesteps_this_iter" in result:
            self._timesteps_total = (self._timesteps_total or 0) + result["timesteps_this_iter"]
        if "episodes_this_iter" in result:
            self._episodes_total = (self._episodes_total or 0) + result["episodes_this_iter"]
        result.setdefault("done", False)
        result.setdefault("time_this_iter_s", took)
        result["iterations_since_restore"] = self._iterations_since_restore
        result["time_since_restore"] = self._time_since_restore
        if self._timesteps_total is not None:
            result.setdefault("timesteps_total", self._timesteps_total)
        if self._episodes_total is not None:
            result.setdefault("episodes_total", self._episodes_total)
        return result

    def save(self, checkpoint_dir=None):
        """Saves a checkpoint into checkpoint_dir (default: a new directory in logdir) and
        returns its path."""
        path = checkpoint_dir or tempfile.mkdtemp(prefix="checkpoint_", dir=self.logdir)
        os.makedirs(path, exist_ok=True)
        saved = self.save_checkpoint(path)
        meta = {"iteration": self._iteration, "time_total": self._time_total,
                "timesteps_total": self._timesteps_total, "episodes_total": self._episodes_total}
        if isinstance(saved, dict):
            with open(os.path.join(path, _DICT), "wb") as f:
                cloudpickle.dump(saved, f)
            meta["dict"] = True
        elif isinstance(saved, (str, os.PathLike)):  # Ray 1.x: a path inside checkpoint_dir
            rel = os.path.relpath(os.path.abspath(saved), os.path.abspath(path))
            if rel.startswith(".."):
                raise ValueError(f"{type(self).__name__}.save_checkpoint returned {saved!r}, outside "
                                 f"checkpoint_dir {path!r}; write into checkpoint_dir")
            meta["path"] = rel
        elif saved is not None:
            raise TypeError(f"{type(self).__name__}.save_checkpoint returned a {type(saved).__name__}; return "
                            "a dict, or None after writing into checkpoint_dir")
        with open(os.path.join(path, _META), "w") as f:
            json.dump(meta, f)
        return path

    def restore(self, checkpoint_path):
        """Restores from a checkpoint save() wrote (its path or a tune.Checkpoint)."""
        path = checkpoint_path.path if isinstance(checkpoint_path, Checkpoint) else os.fspath(checkpoint_path)
        meta = {}
        if os.path.exists(os.path.join(path, _META)):
            with open(os.path.join(path, _META)) as f:
                meta = json.load(f)
        # The counters first, as Ray: load_checkpoint sees the restored self.iteration.
        self._iteration = meta.get("iteration", self._iteration)
        self._time_total = meta.get("time_total", self._time_total)
        self._timesteps_total = meta.get("timesteps_total", self._timesteps_total)
        self._episodes_total = meta.get("episodes_total", self._episodes_total)
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0
        self._restored = True
        if meta.get("dict"):
            with open(os.path.join(path, _DICT), "rb") as f:
                self.load_checkpoint(cloudpickle.load(f))
        else:
            self.load_checkpoint(os.path.normpath(os.path.join(path, meta.get("path", "."))))

    def stop(self):
        """Ends the trainable: cleanup()."""
        self.cleanup()


def _overrides(cls, name):
    return inspect.getattr_static(cls, name) is not inspect.getattr_static(Trainable, name)


def check_class(cls, who="Tuner"):
    """Raises TypeError unless `cls` is a usable tune.Trainable subclass."""
    if not (isinstance(cls, type) and issubclass(cls, Trainable)):
        raise TypeError(f"{who}: class trainables must subclass prism.tune.Trainable (Ray's tune.Trainable); "
                        f"{getattr(cls, '__name__', cls)!r} does not. Or pass a function of the config that calls "
                        "tune.report")
    if not _overrides(cls, "step"):
        raise TypeError(f"{who}: {cls.__name__} does not define step(); a tune.Trainable subclass defines "
                        "step() -> dict of metrics (and setup, save_checkpoint, load_checkpoint as needed)")
    if _overrides(cls, "default_resource_request"):
        raise TypeError(f"{who}: {cls.__name__}.default_resource_request is not supported; give the resources "
                        "with tune.with_resources(cls, {...})")


def options(trainable, checkpoint_config, run_config, scheduler):
    """What a class trainable's runs need from the configs (kept for Tuner.restore), or None
    for a function; warns that checkpoint_frequency/checkpoint_at_end are ignored for one."""
    freq = getattr(checkpoint_config, "checkpoint_frequency", 0) or 0
    at_end = bool(getattr(checkpoint_config, "checkpoint_at_end", False))
    if not isinstance(trainable, type):
        if freq or at_end:
            warnings.warn("CheckpointConfig: checkpoint_frequency and checkpoint_at_end apply to class trainables "
                          "(tune.Trainable); a function trainable checkpoints with tune.report(..., checkpoint=...), "
                          "so they are ignored here", stacklevel=3)
        return None
    check_class(trainable)
    if isinstance(freq, bool) or not isinstance(freq, int) or freq < 0:
        raise ValueError(f"CheckpointConfig: checkpoint_frequency must be an int >= 0, not {freq!r}")
    stop = getattr(run_config, "stop", None)
    from .schedulers import HyperBandScheduler, PopulationBasedTraining
    every = isinstance(scheduler, (PopulationBasedTraining, HyperBandScheduler)) and _overrides(trainable,
                                                                                                 "save_checkpoint")
    return {"checkpoint_frequency": freq, "checkpoint_at_end": at_end,
            "stop": dict(stop) if isinstance(stop, dict) else {}, "checkpoint_every_step": every}


def adapt(wrapped, opts):
    """`wrapped` (a tuner._Wrapped) with a Trainable subclass replaced by the function that
    runs it; a function is returned as it is."""
    cls = wrapped.fn
    if not isinstance(cls, type):
        return wrapped
    check_class(cls)
    runner = _ClassTrainable(cls, **(opts or {}))
    return type(wrapped)(runner, wrapped.resources, wrapped.parameters)


class _ClassTrainable:
    """The function the engine runs for a Trainable subclass (see the module's docstring)."""

    def __init__(self, cls, checkpoint_frequency=0, checkpoint_at_end=False, stop=None,
                 checkpoint_every_step=False):
        self.cls = cls
        self.checkpoint_frequency = checkpoint_frequency
        self.checkpoint_at_end = checkpoint_at_end
        self.stop = stop or {}
        self.checkpoint_every_step = checkpoint_every_step
        self.__name__ = cls.__name__

    def __call__(self, config, **setup_kwargs):
        _local.setup_kwargs = setup_kwargs
        try:
            trainable = self.cls(config)
        finally:
            _local.setup_kwargs = None
        try:
            checkpoint = _session.get_checkpoint()
            if checkpoint is not None:
                trainable.restore(checkpoint.path)
            done = False
            while not done:
                result = trainable._prism_step()
                done = bool(result.get("done"))
                due = (self.checkpoint_every_step
                       or (self.checkpoint_frequency and trainable.iteration % self.checkpoint_frequency == 0)
                       or (self.checkpoint_at_end and (done or self._stops(trainable, result))))
                self._report(trainable, result, due)
        except BaseException:  # a stop from the Tuner (report raises it), or an error
            try:
                trainable.stop()
            except Exception:  # the trial's own end is what it reports
                warnings.warn(f"{self.cls.__name__}.cleanup raised while the trial ended", stacklevel=1)
            raise
        trainable.stop()

    def _stops(self, trainable, result):
        """Whether RunConfig.stop (a dict) ends the trial at this result, as the engine checks
        it right after the report."""
        for key, bound in self.stop.items():
            if key == "training_iteration":
                value = trainable.iteration
            elif key == "time_total_s":
                value = trainable._time_total
            else:
                value = result.get(key)
            if isinstance(value, (int, float)) and value >= bound:
                return True
        return False

    def _report(self, trainable, result, checkpoint_due):
        metrics = {k: v for k, v in result.items() if k not in _ENGINE_KEYS}
        if not checkpoint_due:
            _session.report(metrics)
            return
        directory = tempfile.mkdtemp(prefix="prism-trainable-")
        try:
            trainable.save(directory)
            _session.report(metrics, checkpoint=Checkpoint.from_directory(directory))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
