"""A Python searcher inside the C++ Tuner: the bridge that prism._tune's PythonSearcher
(src/python/tune/python_searcher.cc) calls on the driver, holding the GIL, for each of the
engine's Searcher calls.

The engine keeps a config as text per key; the bridge turns a searcher's suggested dict into
that text with the param_space's codecs (so a trial decodes it as it decodes any config, see
prism/tune/_space.py), adds the param_space's constants (Ray's searchers suggest only the
searched keys), and decodes the configs it is told about. The user's searcher is a
prism.tune.search.Searcher: Ray's suggest / on_trial_result / on_trial_complete, plus
prism's hooks where it has them (_prism_setup, _prism_on_trial_complete, _prism_save_state,
_prism_restore_state, _prism_total_trials; OptunaSearch defines them all)."""

import base64
import os
import tempfile

import cloudpickle

from ... import _tune
from .._space import Domain, _is_grid, compile_space, decode_config, encode_as, flatten

FINISHED = "FINISHED"  # Ray's Searcher.FINISHED
_INT_METRICS = ("training_iteration", "iterations_since_restore", "timesteps_total", "episodes_total")


def make(searcher, param_space):
    """The engine's searcher (a prism._tune.Searcher) that asks `searcher`."""
    return _tune.python_searcher(_Bridge(searcher, param_space), type(searcher).__name__)


def is_constant(value):
    """A param_space entry that is a fixed value, not a domain, grid or sample_from."""
    return not (isinstance(value, Domain) or _is_grid(value) or (callable(value) and not isinstance(value, type)))


def _result(metrics):
    if metrics is None:
        return None
    return {k: int(v) if k in _INT_METRICS and float(v).is_integer() else v for k, v in metrics.items()}


class _Bridge:
    def __init__(self, searcher, param_space):
        self.searcher = searcher
        self.param_space = param_space or {}
        self.codecs = compile_space(self.param_space)[1] if self.param_space else {}
        self.constants = {k: v for k, v in flatten(self.param_space).items() if is_constant(v)}

    def _hook(self, name):
        return getattr(self.searcher, name, None)

    def setup(self, metric, mode, num_samples, seed):
        setup = self._hook("_prism_setup")
        if setup is not None:
            setup(metric or None, mode or None, num_samples, seed, self.param_space)
        else:
            set_props = getattr(self.searcher, "set_search_properties", None)
            if set_props is not None:
                set_props(metric or None, mode or None, self.param_space)

    def suggest(self, trial_id):
        config = self.searcher.suggest(trial_id)
        if config is None:
            return ("wait", None)
        if isinstance(config, str) and config == FINISHED:
            return ("finished", None)
        if not isinstance(config, dict):
            raise TypeError(f"{type(self.searcher).__name__}.suggest returned a {type(config).__name__}; "
                            "it must return a dict (the config), None (ask again later) or Searcher.FINISHED")
        flat = {**self.constants, **flatten(config)}
        return ("config", {k: _tune.value_text(self._encode(k, v)) for k, v in flat.items()})

    def _encode(self, key, value):
        """`value` as the trial decodes `key`: a float, int or str key's codec reads its own
        type only (a searcher's 3 for a float key travels as 3.0)."""
        codec = self.codecs.get(key, "any")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if codec == "float" and number:
            value = float(value)
        elif codec == "int" and number and float(value).is_integer():
            value = int(value)
        elif codec != "any" and type(value) is not {"float": float, "int": int, "str": str}[codec]:
            raise TypeError(f"{type(self.searcher).__name__}.suggest gave {key!r} = {value!r}, but the "
                            f"param_space's {key!r} takes {codec} values")
        return encode_as([value], codec)[0]

    def on_trial_result(self, trial_id, metrics):
        self.searcher.on_trial_result(trial_id, _result(metrics))

    def on_trial_complete(self, trial_id, config_text, metrics, error):
        hook = self._hook("_prism_on_trial_complete")
        if hook is not None:
            hook(trial_id, decode_config(config_text, self.codecs), _result(metrics), bool(error))
        else:
            self.searcher.on_trial_complete(trial_id, result=_result(metrics), error=bool(error))

    def save_state(self):
        hook = self._hook("_prism_save_state")
        if hook is not None:
            return hook()
        if not _overrides(self.searcher, "save"):
            return ""
        # Ray's Searcher.save(checkpoint_path) / restore(checkpoint_path): through a file.
        fd, path = tempfile.mkstemp(prefix="prism-searcher-")
        os.close(fd)
        try:
            self.searcher.save(path)
            with open(path, "rb") as f:
                return "file:" + base64.b64encode(f.read()).decode()
        finally:
            os.unlink(path)

    def restore_state(self, state):
        hook = self._hook("_prism_restore_state")
        if hook is not None:
            hook(state)
            return
        if not state or not _overrides(self.searcher, "restore"):
            return
        if not state.startswith("file:"):
            raise ValueError(f"{type(self.searcher).__name__}: the saved searcher state is not one this "
                             "searcher wrote")
        fd, path = tempfile.mkstemp(prefix="prism-searcher-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(state[len("file:"):]))
            self.searcher.restore(path)
        finally:
            os.unlink(path)

    def total_trials(self):
        hook = self._hook("_prism_total_trials")
        return int(hook()) if hook is not None else -1


def _overrides(obj, name):
    from . import Searcher
    mine = getattr(type(obj), name, None)
    return mine is not None and mine is not getattr(Searcher, name, None)


def pickle_text(obj):
    return base64.b64encode(cloudpickle.dumps(obj)).decode()


def unpickle_text(text):
    return cloudpickle.loads(base64.b64decode(text))
