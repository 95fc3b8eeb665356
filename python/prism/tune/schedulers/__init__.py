"""Trial schedulers (Ray's ray.tune.schedulers), each the C++ engine's own
(prism/tune/schedulers.h) with Ray's constructor arguments and defaults."""

from ... import _tune
from .._space import compile_space


class TrialScheduler:
    """Base of prism.tune's schedulers: holds Ray's arguments; the engine's scheduler is
    made fresh for each fit (and checked when constructed, so bad arguments raise
    ValueError here)."""

    def __init__(self):
        self._make()

    def _make(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class FIFOScheduler(TrialScheduler):
    """Runs every trial to the end, in order (the default)."""

    def _make(self):
        return _tune.fifo()


def _mode(mode, who):
    if mode not in (None, "max", "min"):
        raise ValueError(f"{who}: mode must be 'max' or 'min', not {mode!r}")
    return mode or ""


class AsyncHyperBandScheduler(TrialScheduler):
    """ASHA: rungs at grace_period * reduction_factor^k up to max_t; a trial that first
    reaches a rung below its (1 - 1/reduction_factor) quantile stops (Ray's rule)."""

    def __init__(self, time_attr="training_iteration", metric=None, mode=None, max_t=100, grace_period=1,
                 reduction_factor=4, brackets=1, stop_last_trials=True, seed=0):
        self.time_attr, self.metric, self.mode = time_attr, metric, _mode(mode, "ASHAScheduler")
        self.max_t, self.grace_period, self.reduction_factor = max_t, grace_period, reduction_factor
        self.brackets, self.stop_last_trials, self.seed = brackets, stop_last_trials, seed
        TrialScheduler.__init__(self)

    def _make(self):
        return _tune.asha(self.time_attr, self.metric or "", self.mode, float(self.max_t), float(self.grace_period),
                          float(self.reduction_factor), int(self.brackets), bool(self.stop_last_trials),
                          int(self.seed))

    def rungs(self):
        """The rung milestones of each bracket, highest first."""
        return _tune.asha_rungs(self._make())


ASHAScheduler = AsyncHyperBandScheduler


class HyperBandScheduler(TrialScheduler):
    """Synchronous HyperBand (Ray's): brackets of trials that pause at each rung until the
    bracket reaches it; the top 1/reduction_factor go on."""

    def __init__(self, time_attr="training_iteration", metric=None, mode=None, max_t=81, reduction_factor=3,
                 stop_last_trials=True):
        self.time_attr, self.metric, self.mode = time_attr, metric, _mode(mode, "HyperBandScheduler")
        self.max_t, self.reduction_factor, self.stop_last_trials = max_t, reduction_factor, stop_last_trials
        TrialScheduler.__init__(self)

    def _make(self):
        return _tune.hyperband(self.time_attr, self.metric or "", self.mode, float(self.max_t),
                               float(self.reduction_factor), bool(self.stop_last_trials))


class MedianStoppingRule(TrialScheduler):
    """Stops a trial whose best result is worse than the median of the other trials'
    running averages at the same time (after grace_period of time_attr)."""

    def __init__(self, time_attr="time_total_s", metric=None, mode=None, grace_period=60.0,
                 min_samples_required=3, min_time_slice=0, hard_stop=True):
        self.time_attr, self.metric, self.mode = time_attr, metric, _mode(mode, "MedianStoppingRule")
        self.grace_period, self.min_samples_required = grace_period, min_samples_required
        self.min_time_slice, self.hard_stop = min_time_slice, hard_stop
        TrialScheduler.__init__(self)

    def _make(self):
        return _tune.median_stopping(self.time_attr, self.metric or "", self.mode, float(self.grace_period),
                                     int(self.min_samples_required), int(self.min_time_slice),
                                     bool(self.hard_stop))


class PopulationBasedTraining(TrialScheduler):
    """PBT: every perturbation_interval of time_attr, a bottom-quantile trial takes a
    top-quantile trial's checkpoint and config, then perturbs hyperparam_mutations
    (a domain resamples or scales by perturbation_factors; a list is a choice stepped
    through). The trainable must checkpoint and resume from get_checkpoint()."""

    def __init__(self, time_attr="time_total_s", metric=None, mode=None, perturbation_interval=60.0,
                 burn_in_period=0.0, hyperparam_mutations=None, quantile_fraction=0.25,
                 resample_probability=0.25, perturbation_factors=(1.2, 0.8), custom_explore_fn=None,
                 log_config=True, require_attrs=True, synch=False, seed=0):
        if custom_explore_fn is not None:
            raise TypeError("PopulationBasedTraining: custom_explore_fn is not supported (the engine's "
                            "explore step is C++); use hyperparam_mutations")
        if synch:
            raise ValueError("PopulationBasedTraining: synch=True is not supported; the engine's PBT is "
                             "asynchronous")
        if not hyperparam_mutations:
            raise ValueError("PopulationBasedTraining: hyperparam_mutations is empty; name the "
                             "hyperparameters to perturb")
        for k, v in hyperparam_mutations.items():
            if callable(v) and not hasattr(v, "_cpp"):
                raise TypeError(f"PopulationBasedTraining: hyperparam_mutations[{k!r}] is a function; "
                                "pass a domain (tune.uniform, ...) or a list")
        self.time_attr, self.metric, self.mode = time_attr, metric, _mode(mode, "PopulationBasedTraining")
        self.perturbation_interval, self.burn_in_period = perturbation_interval, burn_in_period
        self.hyperparam_mutations = hyperparam_mutations
        self.quantile_fraction, self.resample_probability = quantile_fraction, resample_probability
        self.perturbation_factors, self.seed = tuple(perturbation_factors), seed
        self._last = None
        TrialScheduler.__init__(self)

    def _make(self):
        from .._space import Categorical
        mutations = {k: (Categorical(v) if isinstance(v, (list, tuple)) else v)
                     for k, v in self.hyperparam_mutations.items()}
        items, _ = compile_space(mutations, "PopulationBasedTraining.hyperparam_mutations")
        self._last = _tune.pbt(self.time_attr, self.metric or "", self.mode, float(self.perturbation_interval),
                               float(self.burn_in_period), items, float(self.quantile_fraction),
                               float(self.resample_probability),
                               (float(self.perturbation_factors[0]), float(self.perturbation_factors[1])),
                               int(self.seed))
        return self._last

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_last"] = None
        return d

    def policy_log(self):
        """The last fit's perturbations: (time, trial, source, source checkpoint, old config,
        new config) each, configs as the engine's text."""
        return [] if self._last is None else _tune.pbt_policy_log(self._last)


__all__ = ["TrialScheduler", "FIFOScheduler", "AsyncHyperBandScheduler", "ASHAScheduler",
           "HyperBandScheduler", "MedianStoppingRule", "PopulationBasedTraining"]
