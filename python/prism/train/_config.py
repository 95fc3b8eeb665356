"""Ray Train's config classes (ScalingConfig, RunConfig, FailureConfig, CheckpointConfig),
checked when made: an unknown keyword is a TypeError naming it (and the closest known one),
a bad value a ValueError or TypeError saying what is allowed. They map one to one onto the
C++ engine's prism::train::ScalingConfig / RunConfig / FailureConfig / CheckpointConfig."""

import difflib
import numbers
import os


def _check_kwargs(cls_name, given, known):
    unknown = [k for k in given if k not in known]
    if not unknown:
        return
    hints = []
    for k in unknown:
        close = difflib.get_close_matches(k, known, n=1)
        hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise TypeError(f"{cls_name} got unknown argument(s) {', '.join(hints)}; it takes "
                    f"{', '.join(known)}")


class _Config:
    """Keyword-only fields with defaults (_FIELDS), checked by _check."""
    _FIELDS = {}

    def __init__(self, *args, **kwargs):
        names = list(self._FIELDS)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional "
                            f"arguments ({len(args)} given)")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__} got two values for {name!r}")
            kwargs[name] = value
        _check_kwargs(type(self).__name__, kwargs, names)
        for name, default in self._FIELDS.items():
            value = kwargs.get(name, default() if callable(default) else default)
            setattr(self, name, value)
        self._check()

    def _check(self):
        pass

    def __eq__(self, other):
        return type(other) is type(self) and all(
            getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    def __repr__(self):
        parts = [f"{f}={getattr(self, f)!r}" for f in self._FIELDS
                 if getattr(self, f) != (self._FIELDS[f]() if callable(self._FIELDS[f]) else self._FIELDS[f])]
        return f"{type(self).__name__}({', '.join(parts)})"


def _int(cls, name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{cls}: {name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{cls}: {name} is {value}; it must be at least {minimum}")
    return int(value)


class ScalingConfig(_Config):
    """How many workers and what each holds (Ray's ScalingConfig). Workers sit on distinct
    ranks (one per MPI rank), so num_workers is at most the job's rank count.
    resources_per_worker defaults to {"CPU": 1} ({"CPU": 1, "GPU": 1} with use_gpu);
    placement_strategy is PACK, SPREAD, STRICT_PACK or STRICT_SPREAD."""
    _FIELDS = {"num_workers": 1, "use_gpu": False, "resources_per_worker": None,
               "placement_strategy": "PACK", "trainer_resources": None}
    _STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

    def _check(self):
        if self.num_workers is None:
            self.num_workers = 1
        self.num_workers = _int("ScalingConfig", "num_workers", self.num_workers, 1)
        if not isinstance(self.use_gpu, bool):
            raise TypeError(f"ScalingConfig: use_gpu must be a bool, not {type(self.use_gpu).__name__}")
        if self.resources_per_worker is not None:
            if not isinstance(self.resources_per_worker, dict):
                raise TypeError("ScalingConfig: resources_per_worker must be a dict such as "
                                "{'CPU': 1}")
            for k, v in self.resources_per_worker.items():
                if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, numbers.Real) or v < 0:
                    raise ValueError(f"ScalingConfig: resources_per_worker[{k!r}] = {v!r}; each "
                                     "resource is a name and a number >= 0")
        if self.placement_strategy not in self._STRATEGIES:
            raise ValueError(f"ScalingConfig: placement_strategy {self.placement_strategy!r} is "
                             f"not one of {', '.join(self._STRATEGIES)}")
        if self.trainer_resources not in (None, {}):
            raise ValueError("ScalingConfig: trainer_resources is not supported: Prism's "
                             "trainer runs on the driver and holds nothing")

    @property
    def total_resources(self):
        per = self._per_worker()
        return {k: v * self.num_workers for k, v in per.items()}

    def _per_worker(self):
        if self.resources_per_worker:
            return {k: float(v) for k, v in self.resources_per_worker.items()}
        return {"CPU": 1.0, "GPU": 1.0} if self.use_gpu else {"CPU": 1.0}


class FailureConfig(_Config):
    """Restarts of the worker group (from the newest checkpoint) before fit fails; -1:
    unlimited (Ray's FailureConfig)."""
    _FIELDS = {"max_failures": 0, "fail_fast": False}

    def _check(self):
        self.max_failures = _int("FailureConfig", "max_failures", self.max_failures, -1)
        if self.fail_fast not in (False, True):
            raise ValueError("FailureConfig: fail_fast must be a bool")


class CheckpointConfig(_Config):
    """Retention of a run's checkpoints (Ray's CheckpointConfig): keep num_to_keep (None:
    all), the best by checkpoint_score_attribute ("max" or "min"), else the newest. The
    newest is always kept too (a resume needs it)."""
    _FIELDS = {"num_to_keep": None, "checkpoint_score_attribute": None,
               "checkpoint_score_order": "max", "checkpoint_frequency": 0,
               "checkpoint_at_end": None}

    def _check(self):
        if self.num_to_keep is not None:
            self.num_to_keep = _int("CheckpointConfig", "num_to_keep", self.num_to_keep, 1)
        if self.checkpoint_score_attribute is not None and not isinstance(self.checkpoint_score_attribute, str):
            raise TypeError("CheckpointConfig: checkpoint_score_attribute must be a metric's name")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(f"CheckpointConfig: checkpoint_score_order is "
                             f"{self.checkpoint_score_order!r}; it must be 'max' or 'min'")
        if self.checkpoint_frequency not in (0, None) or self.checkpoint_at_end:
            raise ValueError("CheckpointConfig: checkpoint_frequency and checkpoint_at_end are for "
                             "class trainables (Tune); a training loop checkpoints by "
                             "report(metrics, checkpoint=...)")


class RunConfig(_Config):
    """A run's name and storage (Ray's RunConfig): storage_path/name holds result.json,
    progress.csv and checkpoint_NNNNNN/ (default storage: $PRISM_STORAGE_PATH, else
    ~/prism_results; default name: TorchTrainer_<Slurm job id or timestamp>). A run of the
    same name and storage_path resumes from its newest intact checkpoint. stop: a dict
    {metric: threshold} (stop once a report's metric >= threshold; training_iteration
    counts reports) or a callable(trial_id, result) -> bool."""
    _FIELDS = {"name": None, "storage_path": None, "failure_config": None,
               "checkpoint_config": None, "stop": None, "verbose": None,
               "callbacks": None, "log_to_file": False, "sync_config": None,
               "storage_filesystem": None}

    def _check(self):
        if self.name is not None and (not isinstance(self.name, str) or not self.name or "/" in self.name):
            raise ValueError(f"RunConfig: name {self.name!r} must be a non-empty str without '/'")
        if self.storage_path is not None:
            if not isinstance(self.storage_path, (str, os.PathLike)):
                raise TypeError("RunConfig: storage_path must be a path")
            sp = os.fspath(self.storage_path)
            if "://" in sp:
                raise ValueError(f"RunConfig: storage_path {sp!r}: Prism stores runs on a (shared) "
                                 "POSIX file system, not URIs; give a directory")
            self.storage_path = os.path.abspath(os.path.expanduser(sp))
        if self.failure_config is None:
            self.failure_config = FailureConfig()
        if not isinstance(self.failure_config, FailureConfig):
            raise TypeError("RunConfig: failure_config must be a prism.train.FailureConfig")
        if self.checkpoint_config is None:
            self.checkpoint_config = CheckpointConfig()
        if not isinstance(self.checkpoint_config, CheckpointConfig):
            raise TypeError("RunConfig: checkpoint_config must be a prism.train.CheckpointConfig")
        if self.stop is not None and not isinstance(self.stop, dict) and not callable(self.stop):
            raise TypeError("RunConfig: stop must be a dict {metric: threshold} or a "
                            "callable(trial_id, result) -> bool")
        if self.callbacks:
            raise ValueError("RunConfig: callbacks are not supported by prism.train yet")
        if self.sync_config is not None or self.storage_filesystem is not None:
            raise ValueError("RunConfig: sync_config/storage_filesystem are not supported: use a "
                             "storage_path on a shared file system")
