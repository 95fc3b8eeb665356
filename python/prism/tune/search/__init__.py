"""Searchers (Ray's ray.tune.search): BasicVariantGenerator (random and grid search, the
default), TPESearch (a native Tree-structured Parzen Estimator, Optuna's default sampler) and
ConcurrencyLimiter are the C++ engine's own (prism/tune/searcher.h); OptunaSearch
(prism.tune.search.optuna, over the optuna package) and your own Searcher subclasses run in
Python on the driver, asked by the engine through prism._tune.python_searcher."""

from ... import _tune


class Searcher:
    """Base of prism.tune's searchers. The engine's own hold their arguments and make the
    engine's searcher fresh for each fit. A subclass of your own is Ray's Searcher: it
    implements suggest(trial_id) -> config dict, None (ask again later) or
    Searcher.FINISHED, and may implement on_trial_result(trial_id, result),
    on_trial_complete(trial_id, result=None, error=False), set_search_properties(metric,
    mode, config) (called once before the first suggest with TuneConfig's metric and mode and
    the param_space) and save(path)/restore(path) for Tuner.restore. The engine asks it on the
    driver; an exception it raises ends the experiment with a TuneError holding the
    traceback. After a restore, on_trial_complete is called again for trials that ended before
    it: ignore trial ids you do not know."""

    FINISHED = "FINISHED"

    def __init__(self, metric=None, mode=None):
        if mode not in (None, "max", "min"):
            raise ValueError(f"{type(self).__name__}: mode must be 'max' or 'min', not {mode!r}")
        self._metric, self._mode = metric, mode

    @property
    def metric(self):
        return getattr(self, "_metric", None)

    @metric.setter
    def metric(self, value):
        self._metric = value

    @property
    def mode(self):
        return getattr(self, "_mode", None)

    @mode.setter
    def mode(self, value):
        self._mode = value

    def set_search_properties(self, metric, mode, config, **spec):
        """Ray: takes TuneConfig's metric and mode where the searcher has none; returns True."""
        if metric and not self.metric:
            self._metric = metric
        if mode and not self.mode:
            self._mode = mode
        return True

    def suggest(self, trial_id):
        raise NotImplementedError(f"{type(self).__name__}.suggest: a Searcher subclass implements suggest")

    def on_trial_result(self, trial_id, result):
        pass

    def on_trial_complete(self, trial_id, result=None, error=False):
        pass

    def save(self, checkpoint_path):
        pass

    def restore(self, checkpoint_path):
        pass

    def _make(self, param_space=None):
        """The engine's searcher for one fit over `param_space`."""
        if type(self).suggest is Searcher.suggest:
            raise TypeError(f"{type(self).__name__}: a prism.tune.search.Searcher subclass must implement "
                            "suggest(trial_id)")
        from ._python_searcher import make
        return make(self, param_space)


class BasicVariantGenerator(Searcher):
    """Random and grid search: the grids' cross product, num_samples times, the other
    parameters drawn per trial. max_concurrent > 0 limits trials at once."""

    def __init__(self, points_to_evaluate=None, max_concurrent=0, constant_grid_search=False, random_state=None):
        if points_to_evaluate:
            raise TypeError("BasicVariantGenerator: points_to_evaluate is not supported yet")
        if random_state is not None:
            raise TypeError("BasicVariantGenerator: random_state is not supported; set TuneConfig(seed=...)")
        self.max_concurrent = int(max_concurrent)
        self._make()

    def _make(self, param_space=None):
        s = _tune.basic_variant()
        return _tune.concurrency_limiter(s, self.max_concurrent) if self.max_concurrent > 0 else s


class TPESearch(Searcher):
    """Tree-structured Parzen Estimator (Bergstra et al. 2011; Optuna's TPESampler): after
    n_startup_trials random configs, proposes where good results are dense relative to bad
    ones. Works on uniform/loguniform/randint/lograndint (and q-forms), randn, choice and
    constants, not grid_search or sample_from."""

    def __init__(self, metric=None, mode=None, n_startup_trials=10, n_ei_candidates=24, gamma=0.1, max_good=25):
        if mode not in (None, "max", "min"):
            raise ValueError(f"TPESearch: mode must be 'max' or 'min', not {mode!r}")
        self.metric, self.mode = metric, mode
        self.n_startup_trials, self.n_ei_candidates = n_startup_trials, n_ei_candidates
        self.gamma, self.max_good = gamma, max_good
        self._make()

    def _make(self, param_space=None):
        return _tune.tpe(int(self.n_startup_trials), int(self.n_ei_candidates), float(self.gamma),
                         int(self.max_good), self.metric or "", self.mode or "")


class ConcurrencyLimiter(Searcher):
    """At most max_concurrent of `searcher`'s trials running at once."""

    def __init__(self, searcher, max_concurrent, batch=False):
        if not isinstance(searcher, Searcher):
            raise TypeError(f"ConcurrencyLimiter wraps a prism.tune.search searcher, not {type(searcher).__name__}")
        if batch:
            raise TypeError("ConcurrencyLimiter: batch=True is not supported")
        self.searcher, self.max_concurrent = searcher, max_concurrent
        self._make()

    def _make(self, param_space=None):
        return _tune.concurrency_limiter(self.searcher._make(param_space), int(self.max_concurrent))


def __getattr__(name):
    # prism.tune.search.OptunaSearch without importing optuna (slow) with prism.tune.
    if name == "OptunaSearch":
        from .optuna import OptunaSearch
        return OptunaSearch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Searcher", "BasicVariantGenerator", "TPESearch", "ConcurrencyLimiter", "OptunaSearch"]
