"""OptunaSearch (Ray's ray.tune.search.optuna.OptunaSearch) over the optuna package (Debian:
python3-optuna): Optuna's ask/tell interface on an in-memory study, asked by the C++ Tuner on
the driver (prism._tune.python_searcher).

prism.tune's search space becomes Optuna distributions as Ray converts it:

    uniform(a, b)          FloatDistribution(a, b)
    quniform(a, b, q)      FloatDistribution(a, b, step=q)
    loguniform(a, b)       FloatDistribution(a, b, log=True)      (any base: the same law)
    randint(a, b)          IntDistribution(a, b - 1)               (Ray's upper bound excluded)
    qrandint(a, b, q)      IntDistribution(a, b, step=q)
    lograndint(a, b)       IntDistribution(a, b - 1, log=True)
    choice(values)         CategoricalDistribution(values)
    qloguniform, qlograndint  the log distribution, its suggestion rounded to a multiple of q
                           (Optuna has no quantized log law; Ray drops q for qloguniform and
                           fails for qlograndint)
    constants              not searched: added to every config
    grid_search, sample_from, randn, qrandn   ValueError, as Ray

State for Tuner.restore: the engine saves the searcher's state with each new trial and, on
restore, tells it again every trial that ended (OnTrialComplete with the config), so the
state is only what those do not give back: the sampler (its random generator), the
points_to_evaluate not yet suggested, and the distributions a define-by-run space used. The
study is rebuilt from the replayed trials (optuna's create_trial), which keeps the saved
state small however many trials ran."""

import warnings

try:
    import optuna as ot
    from optuna.trial import TrialState as _OtState
except ImportError:  # pragma: no cover - python3-optuna missing
    ot = None

from .._space import Categorical, Domain, Function, _Call, _is_grid, flatten, unflatten
from . import Searcher
from ._python_searcher import is_constant, make, pickle_text, unpickle_text

_STATE_VERSION = 1


def _require_optuna():
    if ot is None:
        raise ImportError("OptunaSearch needs the optuna package: apt-get install python3-optuna "
                          "(or pip install optuna)")


class _Quantized:
    """A quantized log distribution Optuna cannot express: the suggestion rounded to q."""

    def __init__(self, q, lower, upper, integer):
        self.q, self.lower, self.upper, self.integer = q, lower, upper, integer

    def __call__(self, x):
        v = round(x / self.q) * self.q
        if self.integer:
            v = int(v)
            while v > self.upper:
                v -= self.q
            while v < self.lower:
                v += self.q
            return v
        return float(min(max(v, self.lower), self.upper))


def _convert(key, value):
    """(Optuna distribution, post-processing or None) of one flattened param_space entry."""
    if isinstance(value, Function) or (callable(value) and not isinstance(value, (type, Domain))):
        raise ValueError(f"OptunaSearch: {key!r} is a sample_from function, which Optuna cannot search "
                         "(Ray refuses it too); use uniform/loguniform/randint/choice, or a define-by-run "
                         "space function as OptunaSearch(space=...)")
    if _is_grid(value):
        raise ValueError(f"OptunaSearch: grid search parameters ({key!r}) cannot be converted to an Optuna "
                         "search space (as in Ray); use tune.choice, or the default searcher for a grid")
    if isinstance(value, Categorical):
        return ot.distributions.CategoricalDistribution(value.categories), None
    if not isinstance(value, _Call):
        raise ValueError(f"OptunaSearch: cannot convert {key!r} = {value!r} to an Optuna distribution")
    maker, args = value._maker, value._args
    dists = ot.distributions
    if maker == "uniform":
        return dists.FloatDistribution(args[0], args[1]), None
    if maker == "quniform":
        return dists.FloatDistribution(args[0], args[1], step=args[2]), None
    if maker == "loguniform":
        return dists.FloatDistribution(args[0], args[1], log=True), None
    if maker == "qloguniform":
        return dists.FloatDistribution(args[0], args[1], log=True), _Quantized(args[2], args[0], args[1], False)
    if maker == "randint":
        return dists.IntDistribution(args[0], args[1] - 1), None
    if maker == "qrandint":
        return dists.IntDistribution(args[0], args[1], step=args[2]), None
    if maker == "lograndint":
        return dists.IntDistribution(args[0], args[1] - 1, log=True), None
    if maker == "qlograndint":
        return dists.IntDistribution(args[0], args[1], log=True), _Quantized(args[2], args[0], args[1], True)
    raise ValueError(f"OptunaSearch: {key!r} is {maker}(...), which Optuna has no distribution for (Ray "
                     "refuses randn/qrandn too); use uniform or loguniform")


def convert_search_space(spec):
    """({name: Optuna distribution}, {name: quantizer}) of a prism.tune param_space (nested
    dicts flattened to "a/b" names); constants are left out. Raises ValueError for
    grid_search, sample_from and randn, as Ray's OptunaSearch.convert_search_space."""
    _require_optuna()
    dists, post = {}, {}
    for key, value in flatten(spec or {}).items():
        if is_constant(value):
            continue
        dists[key], q = _convert(key, value)
        if q is not None:
            post[key] = q
    return dists, post


def _has_domains(spec):
    return any(not is_constant(v) for v in flatten(spec or {}).values())


def _direction(mode):
    return "minimize" if mode == "min" else "maximize"


class OptunaSearch(Searcher):
    """Ray's OptunaSearch: Optuna's sampler (default TPESampler(seed=seed)) proposes each
    trial's config. space: None (convert the Tuner's param_space), a dict of
    optuna.distributions, or a define-by-run function of an optuna Trial (returning None or a
    dict of constants). metric/mode: a name and "max"/"min", or lists of them for
    multi-objective search (then set them here, not in TuneConfig). points_to_evaluate run
    first; with evaluated_rewards they are told to the study without running. Failed trials
    are Optuna FAIL trials, trials that ended without the metric PRUNED. Runs on the driver;
    intermediate results are reported to the Optuna trial (ot_trial.report), the last one is
    told.

    Differences from Ray: seed=None uses TuneConfig(seed=...) (0 by default), as prism's
    other searchers, so a run is reproducible; a failed trial is FAIL even if it reported the
    metric (Ray tells its last value); storage (another Optuna storage) is not supported: the
    study lives in memory and its state in the experiment's journal."""

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, sampler=None, seed=None,
                 evaluated_rewards=None, study_name=None, storage=None):
        _require_optuna()
        if isinstance(mode, (list, tuple)):
            if any(m not in ("max", "min") for m in mode):
                raise ValueError(f"OptunaSearch: each mode must be 'max' or 'min', not {mode!r}")
            if not isinstance(metric, (list, tuple)) or len(metric) != len(mode):
                raise ValueError("OptunaSearch: with a list of modes (multi-objective search), metric must be "
                                 "a list of as many metric names")
        elif mode not in (None, "max", "min"):
            raise ValueError(f"OptunaSearch: mode must be 'max' or 'min', not {mode!r}")
        if isinstance(metric, (list, tuple)) and not isinstance(mode, (list, tuple)):
            raise ValueError("OptunaSearch: with a list of metrics (multi-objective search), mode must be a "
                             "list of as many 'max'/'min'")
        self._metric = list(metric) if isinstance(metric, (list, tuple)) else metric
        self._mode = list(mode) if isinstance(mode, (list, tuple)) else mode
        self._own_metric_mode = (self._metric, self._mode)  # _metric/_mode: what a fit uses
        if sampler is not None and not isinstance(sampler, ot.samplers.BaseSampler):
            raise TypeError(f"OptunaSearch: sampler must be an optuna.samplers.BaseSampler, not "
                            f"{type(sampler).__name__}")
        if sampler is not None and seed is not None:
            warnings.warn("OptunaSearch: you passed a sampler and a seed; the seed is ignored (seed the "
                          "sampler itself), as in Ray", stacklevel=2)
        if storage is not None:
            raise TypeError("OptunaSearch: storage is not supported; the study lives in memory on the driver "
                            "and its state in the experiment's journal (Tuner.restore rebuilds it)")
        self._post = {}
        if isinstance(space, dict) and space:
            if _has_domains(space):
                self._space, self._post = convert_search_space(space)
            else:
                self._space = flatten(space)
                bad = [k for k, v in self._space.items() if not isinstance(v, ot.distributions.BaseDistribution)]
                if bad:
                    raise TypeError(f"OptunaSearch: space values must be optuna distributions or prism.tune "
                                    f"domains; {', '.join(map(repr, bad))} are neither")
        elif space is None or (isinstance(space, dict) and not space) or callable(space):
            self._space = space or None
        else:
            raise TypeError(f"OptunaSearch: space must be a dict of optuna distributions, a define-by-run "
                            f"function or None, not {type(space).__name__}")
        self._points_to_evaluate = [dict(p) for p in (points_to_evaluate or [])]
        if evaluated_rewards is not None:
            if not self._points_to_evaluate or len(evaluated_rewards) != len(self._points_to_evaluate):
                raise ValueError("OptunaSearch: evaluated_rewards must hold one reward per point of "
                                 "points_to_evaluate")
            if callable(self._space):
                raise TypeError("OptunaSearch: evaluated_rewards needs a space of optuna distributions (or the "
                                "Tuner's param_space), not a define-by-run function (as in Ray)")
        self._evaluated_rewards = list(evaluated_rewards) if evaluated_rewards is not None else None
        self._sampler, self._seed = sampler, seed
        self._study_name = study_name or "optuna"
        self._reset()

    def _reset(self):
        self._ot_study = None
        self._ot_trials = {}       # trial id -> optuna Trial, asked and not yet told
        self._last_step = {}       # trial id -> the last step reported to it
        self._completed = set()    # trial ids told in this session
        self._queue = []           # points_to_evaluate not yet suggested
        self._dists = {}           # every distribution a suggestion used (define-by-run: learned)
        self._search_space = None  # what this fit searches: distributions or a function

    def __getstate__(self):  # the Tuner pickles its searcher for restore: no study in it
        state = dict(self.__dict__)
        state.update(_ot_study=None, _ot_trials={}, _last_step={}, _completed=set())
        return state

    # ---- the engine's calls (through prism.tune.search._python_searcher) -----------------

    def _make(self, param_space=None):
        self._space_for(param_space)  # a space Optuna cannot search raises ValueError now
        return make(self, param_space)

    def _space_for(self, param_space):
        if self._space is not None:
            if _has_domains(param_space):
                raise ValueError("OptunaSearch: it was given its own space, and the Tuner's param_space holds "
                                 "parameters to search too; put them in one of the two (as in Ray)")
            return self._space, self._post
        return convert_search_space(param_space)

    def _prism_setup(self, metric, mode, num_samples, seed, param_space):
        own_metric, own_mode = self._own_metric_mode
        if isinstance(own_metric, list) and (metric or mode):
            raise ValueError("OptunaSearch: it searches several metrics (multi-objective); set metric and mode "
                             "on OptunaSearch only, not in TuneConfig")
        for what, own, tc in (("metric", own_metric, metric), ("mode", own_mode, mode)):
            if own and tc and own != tc:
                raise ValueError(f"OptunaSearch: its {what} {own!r} differs from TuneConfig's {tc!r}; set it in "
                                 "one place (or the same in both)")
        self._metric = own_metric or metric
        self._mode = own_mode or mode
        if self._metric is None and self._mode is not None:
            self._metric = "_metric"  # Ray's anonymous metric
        if not self._metric or not self._mode:
            raise ValueError("OptunaSearch needs a metric and a mode: pass them to OptunaSearch or to "
                             "TuneConfig(metric=..., mode=...)")
        space, post = self._space_for(param_space)
        if not space:
            raise ValueError("OptunaSearch: there is nothing to search: give OptunaSearch(space=...) or "
                             "distributions (tune.uniform, tune.choice, ...) in the Tuner's param_space")
        self._reset()
        self._search_space, self._post = space, post
        if not callable(space):
            self._dists = dict(space)
        sampler = self._sampler or ot.samplers.TPESampler(seed=self._seed if self._seed is not None else seed)
        directions = ({"directions": [_direction(m) for m in self._mode]} if isinstance(self._mode, list)
                      else {"direction": _direction(self._mode)})
        self._ot_study = ot.create_study(sampler=sampler, pruner=ot.pruners.NopPruner(),
                                         study_name=self._study_name, **directions)
        if self._evaluated_rewards is not None:
            for point, reward in zip(self._points_to_evaluate, self._evaluated_rewards):
                self.add_evaluated_point(point, reward)
        else:
            self._queue = [flatten(p) for p in self._points_to_evaluate]

    def _prism_on_trial_complete(self, trial_id, config, result, error):
        if trial_id in self._ot_trials:
            self.on_trial_complete(trial_id, result, error)
        elif trial_id not in self._completed:
            # A trial from before a Tuner.restore (the engine replays them): into the study.
            self._add_replayed(trial_id, config, result, error)

    def _prism_save_state(self):
        state = {"v": _STATE_VERSION, "queue": len(self._queue), "dists": self._dists, "sampler": None}
        if self._ot_study is not None:
            try:
                state["sampler"] = pickle_text(self._ot_study.sampler)
            except Exception as e:  # a sampler of the user's that does not pickle
                if not getattr(self, "_sampler_warned", False):
                    self._sampler_warned = True
                    warnings.warn(f"OptunaSearch: the sampler cannot be pickled ({type(e).__name__}: {e}); "
                                  "Tuner.restore starts it fresh", stacklevel=2)
        return pickle_text(state)

    def _prism_restore_state(self, text):
        try:
            state = unpickle_text(text)
            assert isinstance(state, dict) and state.get("v") == _STATE_VERSION
        except Exception:
            raise ValueError("OptunaSearch: the saved searcher state is not one OptunaSearch wrote; restore "
                             "with the searcher the experiment ran") from None
        if self._ot_study is None:
            raise RuntimeError("OptunaSearch: restore_state before setup")
        if state["sampler"] is not None:
            self._ot_study.sampler = unpickle_text(state["sampler"])
        n = state["queue"]
        self._queue = self._queue[len(self._queue) - n:] if n else []
        self._dists.update(state["dists"])

    # ---- Ray's Searcher methods ----------------------------------------------------------

    def suggest(self, trial_id):
        if self._ot_study is None:
            raise RuntimeError("OptunaSearch.suggest before the Tuner set it up (it runs inside Tuner.fit)")
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None:
            if self._queue:
                self._ot_study.enqueue_trial(self._queue.pop(0))
            space = self._search_space
            ot_trial = self._ot_study.ask() if callable(space) else self._ot_study.ask(fixed_distributions=space)
            self._ot_trials[trial_id] = ot_trial
        if callable(self._search_space):
            params = self._define_by_run(ot_trial)
        else:
            params = dict(ot_trial.params)
        self._dists.update(ot_trial.distributions)
        for key, q in self._post.items():
            if key in params:
                params[key] = q(params[key])
        return unflatten(params)

    def _define_by_run(self, ot_trial):
        constants = self._search_space(ot_trial)
        if constants is not None and not isinstance(constants, dict):
            raise TypeError("OptunaSearch: the define-by-run space function must return None or a dict of "
                            f"constants, not {type(constants).__name__}")
        return {**ot_trial.params, **(constants or {})}

    def on_trial_result(self, trial_id, result):
        if isinstance(self._metric, list):
            return  # Optuna takes no intermediate values in multi-objective studies
        ot_trial = self._ot_trials.get(trial_id)
        value = (result or {}).get(self._metric)
        if ot_trial is None or value is None:
            return
        step = int(result.get("training_iteration", 0))
        if step <= self._last_step.get(trial_id, -1):
            return  # a retried trial repeats its steps; Optuna takes each step once
        self._last_step[trial_id] = step
        ot_trial.report(float(value), step)

    def on_trial_complete(self, trial_id, result=None, error=False):
        ot_trial = self._ot_trials.pop(trial_id, None)
        self._last_step.pop(trial_id, None)
        if ot_trial is None:
            return
        self._completed.add(trial_id)
        state, values = self._outcome(result, error)
        try:
            self._ot_study.tell(ot_trial, values, state=state)
        except Exception as e:  # a NaN or inf, say: as Ray, a warning
            warnings.warn(f"OptunaSearch: optuna refused trial {trial_id}'s result ({e})", stacklevel=2)

    def _outcome(self, result, error):
        if isinstance(self._metric, list):
            values = [(result or {}).get(m) for m in self._metric]
            values = None if any(v is None for v in values) else [float(v) for v in values]
        else:
            v = (result or {}).get(self._metric)
            values = None if v is None else float(v)
        if error:
            return _OtState.FAIL, None
        if values is None:
            return _OtState.PRUNED, None
        return _OtState.COMPLETE, values

    def add_evaluated_point(self, parameters, value, error=False, pruned=False, intermediate_values=None):
        """Tells the study a config evaluated elsewhere (Ray's add_evaluated_point)."""
        if self._ot_study is None or callable(self._search_space):
            raise RuntimeError("OptunaSearch.add_evaluated_point needs a set-up searcher with a space of "
                               "distributions (it runs inside Tuner.fit; pass evaluated_rewards instead)")
        state = _OtState.FAIL if error else _OtState.PRUNED if pruned else _OtState.COMPLETE
        multi = isinstance(self._metric, list)
        values = None if state != _OtState.COMPLETE else ([float(v) for v in value] if multi else [float(value)])
        params = flatten(parameters)
        trial = ot.trial.create_trial(
            state=state, values=values, params=params,
            distributions={k: self._dists[k] for k in params if k in self._dists},
            intermediate_values=dict(enumerate(intermediate_values)) if intermediate_values else None)
        self._ot_study.add_trial(trial)

    def _add_replayed(self, trial_id, config, result, error):
        params = {}
        flat = flatten(config)
        for key, dist in self._dists.items():
            if key not in flat:
                return  # not a config this search made (a changed space): nothing to learn from
            value = flat[key]
            try:
                if not dist._contains(dist.to_internal_repr(value)):
                    return
            except Exception:
                return
            params[key] = value
        self._completed.add(trial_id)
        state, values = self._outcome(result, error)
        if isinstance(values, float):
            values = [values]
        try:
            self._ot_study.add_trial(ot.trial.create_trial(
                state=state, values=values, params=params, distributions=dict(self._dists)))
        except Exception as e:
            warnings.warn(f"OptunaSearch: trial {trial_id} from before the restore could not be told to the "
                          f"study ({e})", stacklevel=2)

    @property
    def study(self):
        """The Optuna study of the last fit (None before fit)."""
        return self._ot_study

    def __repr__(self):
        return f"OptunaSearch(metric={self._metric!r}, mode={self._mode!r})"


__all__ = ["OptunaSearch"]
