"""Ray Tune's stoppers (ray.tune.stopper) over the engine's (prism/tune/stopper.h).

    from prism import tune
    from prism.tune.stopper import CombinedStopper, MaximumIterationStopper, TrialPlateauStopper

    stopper = CombinedStopper(MaximumIterationStopper(max_iter=20),
                              TrialPlateauStopper(metric="loss", std=0.01))
    tune.Tuner(objective, run_config=tune.RunConfig(stop=stopper)).fit()

RunConfig(stop=...) takes a dict (metric -> value at which a trial stops), a function
(trial_id, result) -> bool, a Stopper, or a list of Stoppers. The Tuner asks the stopper on
its driver for every result (a true __call__ stops that trial) and after each batch of
results (a true stop_all ends the experiment: running trials stop, pending ones never start,
fit() returns). The built-ins run in the engine, without Python; a Stopper subclass of yours
is called with the GIL. If it raises, the experiment ends and fit() raises TuneError with
its traceback. A stopper's state is saved with the experiment, so Tuner.restore resumes it
(it must pickle, as in Ray).
"""

import base64
import datetime
import numbers
import traceback

import cloudpickle

from .. import _tune

__all__ = ["Stopper", "CombinedStopper", "ExperimentPlateauStopper", "FunctionStopper", "MaximumIterationStopper",
           "NoopStopper", "TimeoutStopper", "TrialPlateauStopper"]


class Stopper:
    """Base class of stoppers (Ray's ray.tune.Stopper): implement __call__(trial_id, result)
    -> bool (True stops that trial) and stop_all() -> bool (True ends the experiment). Both
    run on the driver, one call at a time."""

    def __call__(self, trial_id, result):
        """Whether the trial should stop after this result."""
        raise NotImplementedError

    def stop_all(self):
        """Whether the experiment should end."""
        raise NotImplementedError


class _Native(Stopper):
    """A built-in: the engine's stopper (self._handle), which the Tuner asks without Python.
    It pickles as its arguments and the engine's state."""

    def __init__(self, *args):
        self._args = args
        self._handle = self._build(*args)

    @staticmethod
    def _build(*args):
        raise NotImplementedError

    def __call__(self, trial_id, result):
        return self._handle.should_stop(str(trial_id), dict(result))

    def stop_all(self):
        return self._handle.stop_all()

    def __getstate__(self):
        return {"args": self._args, "state": self._handle.save_state()}

    def __setstate__(self, state):
        self._args = state["args"]
        self._handle = self._build(*self._args)
        self._handle.restore_state(state["state"])


def _int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what} must be an integer, not {value!r}")
    return int(value)


def _float(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, not {value!r}")
    return float(value)


class MaximumIterationStopper(_Native):
    """Stops a trial after max_iter results (Ray counts results, not training_iteration)."""

    def __init__(self, max_iter):
        super().__init__(_int(max_iter, "MaximumIterationStopper: max_iter"))

    @staticmethod
    def _build(max_iter):
        return _tune.maximum_iteration_stopper(max_iter)


class TrialPlateauStopper(_Native):
    """Stops a trial whose `metric` plateaued: the standard deviation of its last
    num_results values is below `std`, after grace_period results; with metric_threshold,
    only once the value is past it in `mode` ("max": >= it, "min": <= it). Raises
    ValueError for a mode other than "max"/"min" or a threshold without one."""

    def __init__(self, metric, std=0.01, num_results=4, grace_period=4, metric_threshold=None, mode=None):
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"TrialPlateauStopper: metric must name a reported metric, not {metric!r}")
        if mode is not None and mode not in ("min", "max"):
            raise ValueError(f"TrialPlateauStopper: mode must be 'min' or 'max', not {mode!r}")
        threshold = None if metric_threshold is None else _float(metric_threshold, "TrialPlateauStopper: "
                                                                                    "metric_threshold")
        super().__init__(metric, _float(std, "TrialPlateauStopper: std"),
                         _int(num_results, "TrialPlateauStopper: num_results"),
                         _int(grace_period, "TrialPlateauStopper: grace_period"), threshold, mode or "")

    @staticmethod
    def _build(metric, std, num_results, grace_period, metric_threshold, mode):
        return _tune.trial_plateau_stopper(metric, std, num_results, grace_period, metric_threshold, mode)


class ExperimentPlateauStopper(_Native):
    """Ends the experiment when the `top` best values of `metric` over all trials have a
    standard deviation <= `std`, for `patience` results in a row. Raises ValueError for a
    mode other than "min"/"max", top <= 1, patience < 0 or std <= 0 (Ray's checks)."""

    def __init__(self, metric, std=0.001, top=10, mode="min", patience=0):
        if mode not in ("min", "max"):
            raise ValueError(f"ExperimentPlateauStopper: mode must be 'min' or 'max', not {mode!r}")
        super().__init__(metric, _float(std, "ExperimentPlateauStopper: std"),
                         _int(top, "ExperimentPlateauStopper: top"), mode,
                         _int(patience, "ExperimentPlateauStopper: patience"))

    @staticmethod
    def _build(metric, std, top, mode, patience):
        return _tune.experiment_plateau_stopper(metric, std, top, mode, patience)


class TimeoutStopper(_Native):
    """Ends the experiment `timeout` seconds (a number or a datetime.timedelta) after its
    first check. After Tuner.restore it has the budget it had left."""

    def __init__(self, timeout):
        if isinstance(timeout, datetime.timedelta):
            seconds = timeout.total_seconds()
        elif isinstance(timeout, numbers.Real) and not isinstance(timeout, bool):
            seconds = float(timeout)
        else:
            raise ValueError("TimeoutStopper: `timeout` has to be either a number or a datetime.timedelta, not "
                             f"{type(timeout).__name__}")
        super().__init__(seconds)

    @staticmethod
    def _build(seconds):
        return _tune.timeout_stopper(seconds)


class FunctionStopper(_Native):
    """Stops a trial when function(trial_id, result) is true; never the experiment."""

    def __init__(self, function):
        if not callable(function):
            raise TypeError(f"FunctionStopper takes a function (trial_id, result) -> bool, not "
                            f"{type(function).__name__}")
        super().__init__(function)

    @staticmethod
    def _build(function):
        return _tune.function_stopper(function)

    @classmethod
    def is_valid_function(cls, fn):
        """Whether `fn` is a plain function to wrap (Ray's check: a callable with a stop_all
        that is not a Stopper raises ValueError)."""
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ValueError("Stop object must be a prism.tune.Stopper subclass to be detected correctly.")
        return is_function


class CombinedStopper(_Native):
    """Any of `stoppers` (OR), asked in order until one says yes."""

    def __init__(self, *stoppers):
        bad = [type(s).__name__ for s in stoppers if not isinstance(s, Stopper)]
        if bad:
            raise TypeError(f"CombinedStopper takes Stoppers, not {', '.join(bad)}")
        super().__init__(*stoppers)

    @staticmethod
    def _build(*stoppers):
        return _tune.combined_stopper([_handle(s) for s in stoppers])


class NoopStopper(_Native):
    """Stops nothing."""

    def __init__(self):
        super().__init__()

    @staticmethod
    def _build():
        return _tune.combined_stopper([])


# ---- for the Tuner ----------------------------------------------------------------------

def _handle(stopper):
    """The engine's stopper for `stopper`: a built-in's own, or a trampoline to Python."""
    if (isinstance(stopper, _Native) and type(stopper).__call__ is _Native.__call__
            and type(stopper).stop_all is _Native.stop_all):
        return stopper._handle
    return _tune.python_stopper(stopper)


def _run_config_stop(stop):
    """RunConfig.stop as the engine takes it: (dict of metric -> value, Stopper handle or
    None). Raises ValueError for anything else, as Ray does."""
    if stop is None or (isinstance(stop, (dict, list)) and not stop):
        return {}, None
    if isinstance(stop, dict):
        return stop, None
    if isinstance(stop, list):
        bad = [type(s).__name__ for s in stop if not isinstance(s, Stopper)]
        if bad:
            raise ValueError(f"RunConfig.stop: each element of a list must be a prism.tune.Stopper, not "
                             f"{', '.join(bad)}")
        return {}, _handle(CombinedStopper(*stop))
    if isinstance(stop, Stopper):
        return {}, _handle(stop)
    if isinstance(stop, type):
        raise ValueError(f"RunConfig.stop: pass an instance of {stop.__name__}, not the class")
    if FunctionStopper.is_valid_function(stop):
        return {}, _handle(FunctionStopper(stop))
    raise ValueError(f"RunConfig.stop must be a dict (metric -> value), a function (trial_id, result) -> bool "
                     f"or a prism.tune.Stopper, not {type(stop).__name__}")


def _invoke(fn, *args):
    """fn(*args) for the engine's trampoline: (True, its truth) or (False, the traceback)."""
    try:
        return True, bool(fn(*args))
    except Exception:  # noqa: BLE001 - reported to the Tuner, which ends the experiment
        return False, traceback.format_exc()


def _save(stopper):
    return base64.b64encode(cloudpickle.dumps(stopper)).decode("ascii")


def _load(text):
    return cloudpickle.loads(base64.b64decode(text))
