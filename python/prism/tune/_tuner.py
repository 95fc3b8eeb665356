"""Tuner, its configs and its results (Ray's ray.tune.Tuner, TuneConfig, RunConfig,
ResultGrid, Result), over the C++ Tuner (prism/tune/tuner.h)."""

import functools
import math
import os
import warnings

import cloudpickle

import prism
from .. import _remote, _tune
from . import _trainable
from ._checkpoint import Checkpoint
from ._errors import TrialError, TuneError
from ._space import compile_space, decode_config
from .stopper import _run_config_stop

_STATE_FILE = "prism_tune_python.pkl"  # what Tuner.restore needs besides the journal
_INT_METRICS = ("training_iteration", "iterations_since_restore", "timesteps_total", "episodes_total")


def _kwargs_init(obj, cls_name, fields, kwargs, ignored=()):
    unknown = sorted(k for k in kwargs if k not in fields and k not in ignored)
    if unknown:
        raise TypeError(f"{cls_name} got unknown argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(unknown)}; it takes {', '.join(fields)}")
    for k, default in fields.items():
        setattr(obj, k, kwargs.get(k, default))
    for k in ignored:
        if kwargs.get(k) not in (None, False):
            warnings.warn(f"{cls_name}: {k} is accepted for Ray compatibility and ignored", stacklevel=3)


class _Config:
    _fields = {}
    _ignored = ()

    def __init__(self, **kwargs):
        _kwargs_init(self, type(self).__name__, self._fields, kwargs, self._ignored)

    def __repr__(self):
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({args})"


class TuneConfig(_Config):
    """metric, mode ("max"/"min"), num_samples (-1: until the searcher or time budget ends;
    a grid runs num_samples times), search_alg, scheduler, max_concurrent_trials (None/0:
    as many as the resources allow), time_budget_s, seed (Prism: the searcher's and
    schedulers' draws)."""
    _fields = {"metric": None, "mode": None, "search_alg": None, "scheduler": None, "num_samples": 1,
               "max_concurrent_trials": None, "time_budget_s": None, "seed": 0}
    _ignored = ("reuse_actors", "trial_name_creator", "trial_dirname_creator", "chdir_to_trial_dir")


class FailureConfig(_Config):
    """max_failures: retries of a failed trial from its latest checkpoint (-1: no limit);
    fail_fast: the first trial error ends the experiment."""
    _fields = {"max_failures": 0, "fail_fast": False}


class CheckpointConfig(_Config):
    """Per trial: num_to_keep (None: all), ranked by checkpoint_score_attribute in
    checkpoint_score_order (default: the newest); for class trainables (tune.Trainable) a
    checkpoint every checkpoint_frequency steps and at the end with checkpoint_at_end."""
    _fields = {"num_to_keep": None, "checkpoint_score_attribute": None, "checkpoint_score_order": "max",
               "checkpoint_frequency": 0, "checkpoint_at_end": None}


class RunConfig(_Config):
    """name (default tune_<job id or timestamp>), storage_path (default $PRISM_STORAGE_PATH
    or ~/prism_results), stop (a dict: metric -> value at which a trial stops; a function
    (trial_id, result) -> bool; a prism.tune.stopper.Stopper or a list of them),
    failure_config, checkpoint_config, verbose (0: no status table)."""
    _fields = {"name": None, "storage_path": None, "stop": None, "failure_config": None,
               "checkpoint_config": None, "verbose": 1}
    _ignored = ("callbacks", "progress_reporter", "log_to_file", "sync_config", "local_dir")


# ---- trainables -------------------------------------------------------------------------

class _Wrapped:
    """A trainable with resources (with_resources) and shared inputs (with_parameters)."""

    def __init__(self, fn, resources=None, parameters=None):
        self.fn = fn
        self.resources = dict(resources or {})
        self.parameters = dict(parameters or {})  # name -> ObjectRef
        self.__name__ = getattr(fn, "__name__", "trainable")

    def __call__(self, config, **kwargs):
        return self.fn(config, **{**{k: prism.get(r) for k, r in self.parameters.items()}, **kwargs})


def _unwrap(trainable):
    if isinstance(trainable, _Wrapped):
        return trainable
    return _Wrapped(trainable)


def with_parameters(trainable, **kwargs):
    """`trainable` called as trainable(config, **kwargs), each value put in the object store
    once and fetched at most once per rank (Ray's tune.with_parameters)."""
    if not callable(trainable):
        raise TypeError(f"tune.with_parameters takes a trainable function, not {type(trainable).__name__}")
    if not prism.is_initialized():
        prism.init()
    w = _unwrap(trainable)
    params = dict(w.parameters)
    for name, value in kwargs.items():
        params[name] = prism.put(value)
    return _Wrapped(w.fn, w.resources, params)


def with_resources(trainable, resources):
    """`trainable` with each trial reserving `resources` (Ray's tune.with_resources):
    {"cpu": 2, "gpu": 1} or {"CPU": 2, "custom": 1}."""
    if callable(resources) and not isinstance(resources, dict):
        raise TypeError("tune.with_resources: a function of the config is not supported yet; pass a dict")
    if hasattr(resources, "bundles"):  # a PlacementGroupFactory: its bundles summed
        total = {}
        for b in resources.bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0) + v
        resources = total
    if not isinstance(resources, dict):
        raise TypeError(f"tune.with_resources takes a dict, not {type(resources).__name__}")
    res = {}
    for k, v in resources.items():
        key = {"cpu": "CPU", "gpu": "GPU", "memory": "memory"}.get(k, k)
        if not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"tune.with_resources: {k} = {v!r}; amounts must be numbers >= 0")
        res[key] = float(v)
    w = _unwrap(trainable)
    return _Wrapped(w.fn, {**w.resources, **res}, w.parameters)


# Trainables by name (Ray's tune.register_trainable): prism.rllib registers "PPO" and "DQN".
# A trainable with _tune_resolve(param_space) -> (trainer, param_space) turns its own kind of
# param_space (an RLlib AlgorithmConfig) into a trainer and the space to search.
_named_trainables = {}


def register_trainable(name, trainable):
    """Registers `trainable` under `name`, for Tuner(name, ...) (Ray's tune.register_trainable)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_trainable: the name must be a non-empty str, not {name!r}")
    _named_trainables[name] = trainable


def _resolve_named(trainable, param_space):
    if isinstance(trainable, str):
        if trainable not in _named_trainables:
            known = ", ".join(sorted(_named_trainables)) or "none"
            raise ValueError(f"Tuner: no trainable named {trainable!r} (registered: {known}; import prism.rllib "
                             "for 'PPO' and 'DQN', or tune.register_trainable(name, fn))")
        trainable = _named_trainables[trainable]
    resolve = getattr(trainable, "_tune_resolve", None)
    return resolve(param_space) if resolve is not None else (trainable, param_space)


def _is_trainer(trainable):
    """A prism.train trainer (TorchTrainer & co.), which runs each trial as a training run."""
    return hasattr(trainable, "_tune_trainable")


def _check_trainer_space(trainable, param_space):
    if not _is_trainer(trainable) or not param_space or getattr(trainable, "_tune_any_space", False):
        return
    other = sorted(k for k in param_space if k != "train_loop_config")
    if other:
        raise ValueError(f"Tuner({type(trainable).__name__}): param_space may only hold train_loop_config "
                         f"here, not {', '.join(map(repr, other))}; set scaling_config and run_config on "
                         "the trainer")
    if not isinstance(param_space["train_loop_config"], dict):
        raise TypeError(f"Tuner({type(trainable).__name__}): param_space['train_loop_config'] must be a dict "
                        "of hyperparameters")


# ---- results ----------------------------------------------------------------------------

def _metric_value(k, v):
    if k in _INT_METRICS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


class Result:
    """One trial's outcome (Ray's ray.tune.Result): metrics (its last report, with
    training_iteration, time_total_s, trial_id and config), config, checkpoint (the latest, or
    None), path (the trial's directory), error (a TrialError with the traceback, or None),
    metrics_dataframe (every report)."""

    def __init__(self, d, codecs, history=None):
        self.trial_id = d["trial_id"]
        self.config = decode_config(d["config"], codecs)
        self.metrics = {k: _metric_value(k, v) for k, v in d["metrics"].items()}
        if self.metrics:
            self.metrics["trial_id"] = self.trial_id
            self.metrics["config"] = self.config
        self._read_history = history  # (last_only) -> the engine's reports, read when asked
        self._cached_history = None
        self.checkpoint = Checkpoint(d["checkpoint"]) if d["checkpoint"] else None
        self.path = d["path"]
        self.error = TrialError(d["error"]) if d["error"] else None
        self.status = d["status"]

    @staticmethod
    def _rows(raw):
        return [{k: _metric_value(k, v) for k, v in m.items()} for m in raw]

    @property
    def _history(self):
        if self._cached_history is None:
            self._cached_history = self._rows(self._read_history(False)) if self._read_history else []
        return self._cached_history

    def _last_row(self):
        if self._cached_history is not None or self._read_history is None:
            return self._history[-1] if self._history else None
        rows = self._rows(self._read_history(True))
        return rows[0] if rows else None

    @property
    def metrics_dataframe(self):
        import pandas as pd
        return pd.DataFrame(self._history)

    @property
    def best_checkpoints(self):
        return [(self.checkpoint, self.metrics)] if self.checkpoint else []

    def __repr__(self):
        shown = {k: v for k, v in self.metrics.items() if k != "config"}
        return (f"Result(metrics={shown!r}, path={self.path!r}, "
                f"checkpoint={self.checkpoint!r}" + (f", error={type(self.error).__name__}" if self.error else "") + ")")


class ResultGrid:
    """Every trial's Result (Ray's ResultGrid): len, [i], iteration; get_best_result,
    get_dataframe, errors, num_errors, num_terminated, experiment_path."""

    def __init__(self, cpp_grid, results, experiment_path, metric, mode):
        self._cpp = cpp_grid
        self._results = results
        self.experiment_path = experiment_path
        self._metric, self._mode = metric, mode

    def __len__(self):
        return len(self._results)

    def __getitem__(self, i):
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self):
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self):
        return sum(1 for r in self._results if r.status == "ERROR")

    @property
    def num_terminated(self):
        return sum(1 for r in self._results if r.status == "TERMINATED")

    def get_best_result(self, metric=None, mode=None, scope="last", filter_nan_and_inf=True):
        """The trial best by `metric` in `mode` (default: TuneConfig's); scope "last", "all",
        "avg", "last-5-avg" or "last-10-avg" (the engine's GetBestResult). Raises
        RuntimeError if no trial reported the metric, ValueError for a bad mode or scope."""
        metric = metric or self._metric
        mode = mode or self._mode
        if not metric or not mode:
            raise ValueError("ResultGrid.get_best_result: no metric and mode; pass them, or set them in "
                             "TuneConfig")
        if mode not in ("max", "min"):
            raise ValueError(f"ResultGrid.get_best_result: mode must be 'max' or 'min', not {mode!r}")
        try:
            i = self._cpp.best_index(metric, mode, scope)
        except ValueError as e:
            if "no trial" in str(e).lower() or "reported" in str(e):
                raise RuntimeError(str(e)) from None
            raise
        return self._results[i]

    def get_dataframe(self, filter_metric=None, filter_mode=None):
        """One row per trial: its last result (or, with filter_metric and filter_mode, its best
        one), the config as config/<name> columns, trial_id and path (pandas)."""
        import pandas as pd
        rows = []
        for r in self._results:
            last = r._last_row()
            row = dict(last) if last else {}
            if filter_metric and r._history:
                values = [h for h in r._history if filter_metric in h and not math.isnan(h[filter_metric])]
                if values:
                    pick = max if filter_mode == "max" else min
                    row = dict(pick(values, key=lambda h: h[filter_metric]))
            row["trial_id"] = r.trial_id
            for k, v in _flat_config(r.config).items():
                row[f"config/{k}"] = v
            row["logdir"] = r.path
            row["path"] = r.path
            row["status"] = r.status
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self):
        return f"ResultGrid<{len(self)} trials, {self.num_errors} errors, {self.experiment_path}>"


def _flat_config(config, prefix=""):
    out = {}
    for k, v in config.items():
        if isinstance(v, dict) and v:
            out.update(_flat_config(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


# ---- the Tuner --------------------------------------------------------------------------

def _searcher_handle(search_alg, param_space):
    if search_alg is None:
        return None
    make = getattr(search_alg, "_make", None)
    if make is None:
        raise TypeError(f"TuneConfig.search_alg: {type(search_alg).__name__} is not a prism.tune.search "
                        "searcher (BasicVariantGenerator, TPESearch, OptunaSearch, ConcurrencyLimiter, or a "
                        "prism.tune.search.Searcher subclass)")
    return make(param_space)


def _scheduler_handle(scheduler):
    if scheduler is None:
        return None
    make = getattr(scheduler, "_make", None)
    if make is None:
        raise TypeError(f"TuneConfig.scheduler: {type(scheduler).__name__} is not a prism.tune.schedulers "
                        "scheduler")
    return make()


def _sub(config, cls, what):
    if config is None:
        return cls()
    return config


def _number_map(d, what):
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{what}: {k!r} must map to a number, not {type(v).__name__}")
        out[k] = float(v)
    return out


class Tuner:
    """Ray's Tuner: Tuner(trainable, param_space=, tune_config=, run_config=).fit() ->
    ResultGrid. The trainable is a function of the config that calls tune.report, or a
    tune.Trainable subclass; trials run as tasks on the job's ranks (default one CPU each)."""

    def __init__(self, trainable=None, *, param_space=None, tune_config=None, run_config=None, _restore=None):
        if _restore is not None:
            self._cpp, self._state = _restore
            return
        named_space = param_space
        trainable, param_space = _resolve_named(trainable, param_space)
        if trainable is None or not (callable(trainable) or _is_trainer(trainable)):
            raise TypeError(f"Tuner: the trainable must be a function taking the config or a "
                            f"prism.train trainer, not {type(trainable).__name__}")
        tc = tune_config if tune_config is not None else TuneConfig()
        rc = run_config if run_config is not None else RunConfig()
        if isinstance(tc, dict):
            tc = TuneConfig(**tc)
        if isinstance(rc, dict):
            rc = RunConfig(**rc)
        if not prism.is_initialized():
            prism.init()
        w = _unwrap(trainable)
        _check_trainer_space(w.fn, param_space)
        space_items, codecs = compile_space(param_space)
        self._state = {"param_space": named_space, "search_alg": tc.search_alg, "scheduler": tc.scheduler,
                       "metric": tc.metric, "mode": tc.mode}
        fc = getattr(rc, "failure_config", None) or FailureConfig()
        cc = getattr(rc, "checkpoint_config", None) or CheckpointConfig()
        self._state["class_trainable"] = _trainable.options(w.fn, cc, rc, tc.scheduler)
        w = _trainable.adapt(w, self._state["class_trainable"])  # a tune.Trainable subclass: its step loop
        stop, stopper = _run_config_stop(getattr(rc, "stop", None))  # a dict, and a Stopper's handle
        self._state["stopper"] = None if stopper is None else rc.stop  # Tuner.restore rebuilds it
        trainable_handle = self._trainable_handle(w, codecs)
        num_samples = tc.num_samples
        if not isinstance(num_samples, int) or isinstance(num_samples, bool):
            raise TypeError(f"TuneConfig.num_samples must be an int, not {type(num_samples).__name__}")
        self._cpp = _tune.Tuner(
            trainable_handle, space_items, tc.metric or "", tc.mode or "", num_samples,
            _searcher_handle(tc.search_alg, param_space), _scheduler_handle(tc.scheduler),
            int(tc.max_concurrent_trials or 0), float(tc.time_budget_s or 0), int(tc.seed or 0),
            getattr(rc, "name", None) or "", os.fspath(getattr(rc, "storage_path", None) or ""),
            _number_map(stop, "RunConfig.stop"), int(fc.max_failures), bool(fc.fail_fast),
            int(cc.num_to_keep or 0), cc.checkpoint_score_attribute or "", cc.checkpoint_score_order or "max",
            int(getattr(rc, "verbose", 1) or 0), 5.0,
            stopper)  # prism.tune.stopper (None: none)
        self._codecs = codecs
        self._keep = w  # the with_parameters refs live as long as the Tuner

    def _trainable_handle(self, w, codecs):
        if _is_trainer(w.fn):
            if w.resources or w.parameters:
                raise TypeError("Tuner: with_resources and with_parameters take a function; a trainer's "
                                "trials reserve its ScalingConfig (num_workers x resources_per_worker)")
            return w.fn._tune_trainable(codecs)
        blob = _remote.function_blob(w.fn, w.fn)
        args = cloudpickle.dumps({"fn": blob, "codecs": codecs, "params": sorted(w.parameters)})
        params = {name: ref.id() for name, ref in w.parameters.items()}
        return _tune.python_trainable(args, w.resources, params)

    def _write_state(self, path):
        journal = os.path.join(path, "experiment_state.jsonl")
        if os.path.exists(journal) and os.path.getsize(journal) > 0:
            return  # an experiment is there: fit refuses it, restore keeps its state
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, f".{_STATE_FILE}.{os.getpid()}")
        with open(tmp, "wb") as f:
            cloudpickle.dump(self._state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, _STATE_FILE))

    def fit(self):
        """Runs the experiment to the end and returns every trial's result. A trial's error
        is in its Result (and ResultGrid.errors), not raised; raises TuneError for fail_fast
        or a metric the scheduler needs that no trial reports, TunePreemptedError on
        SIGUSR1/SIGTERM (exit with status 75 and restore)."""
        if not getattr(self, "_restored", False):
            self._write_state(self._cpp.experiment_path())
        grid, path = self._cpp.fit()
        results = [Result(d, self._codecs, functools.partial(grid.history, i))
                   for i, d in enumerate(grid.results())]
        return ResultGrid(grid, results, path, self._state.get("metric"), self._state.get("mode"))

    def get_results(self):
        raise NotImplementedError("Tuner.get_results: call fit() (or restore and fit)")

    @classmethod
    def can_restore(cls, path):
        """Whether `path` (storage_path/name) holds an experiment restore can resume."""
        path = os.fspath(path)
        return os.path.exists(os.path.join(path, _STATE_FILE)) and _tune.Tuner.can_restore(path)

    @classmethod
    def restore(cls, path, trainable, *, param_space=None, resume_unfinished=True, resume_errored=False,
                restart_errored=False):
        """Resumes the experiment in `path` with the same trainable: finished trials stay,
        unfinished ones resume from their latest checkpoint, errored ones as the flags say;
        the searcher and scheduler come back with their state. param_space defaults to the
        experiment's own. Raises ValueError if the path holds no experiment to restore."""
        path = os.path.abspath(os.fspath(path))
        state_file = os.path.join(path, _STATE_FILE)
        if not os.path.exists(state_file):
            raise ValueError(f"Tuner.restore: {path} holds no prism.tune experiment (no {_STATE_FILE}); "
                             "pass storage_path/name of an experiment a Tuner ran")
        with open(state_file, "rb") as f:
            state = cloudpickle.load(f)
        if param_space is not None:
            state["param_space"] = param_space
        if not prism.is_initialized():
            prism.init()
        trainable, space = _resolve_named(trainable, state["param_space"])
        w = _trainable.adapt(_unwrap(trainable), state.get("class_trainable"))
        space_items, codecs = compile_space(space)
        self = cls.__new__(cls)
        self._state = state
        self._codecs = codecs
        self._keep = w
        try:
            self._cpp = _tune.Tuner.restore(path, self._trainable_handle(w, codecs), space_items, resume_unfinished,
                                            resume_errored, restart_errored,
                                            _searcher_handle(state["search_alg"], state["param_space"]),
                                            _scheduler_handle(state["scheduler"]),
                                            _run_config_stop(state.get("stopper"))[1])  # gets its saved state
        except TuneError as e:
            raise ValueError(str(e)) from None
        self._restored = True
        return self
