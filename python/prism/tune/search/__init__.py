"""Searchers (Ray's ray.tune.search), each the C++ engine's own (prism/tune/searcher.h):
BasicVariantGenerator (random and grid search, the default), TPESearch (a native
Tree-structured Parzen Estimator, Optuna's default sampler) and ConcurrencyLimiter."""

from ... import _tune


class Searcher:
    """Base of prism.tune's searchers: holds the arguments; the engine's searcher is made
    fresh for each fit."""

    def _make(self):
        raise NotImplementedError


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

    def _make(self):
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

    def _make(self):
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

    def _make(self):
        return _tune.concurrency_limiter(self.searcher._make(), int(self.max_concurrent))


__all__ = ["Searcher", "BasicVariantGenerator", "TPESearch", "ConcurrencyLimiter"]
