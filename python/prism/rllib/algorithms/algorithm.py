"""Algorithm: RLlib's (ray.rllib.algorithms.algorithm.Algorithm) over prism::rl's. train(),
save()/restore()/from_checkpoint(), compute_single_action() and stop() call the C++ engine
with the GIL released; train() returns RLlib's result dict (env_runners/..., learners/
default_policy/..., timers/..., num_env_steps_sampled_lifetime, training_iteration)."""

import math
import os
import cloudpickle
import pickle
import tempfile
import time

import numpy as np

import prism
from ... import _rllib
from .. import _env

_STATE_FILE = "prism_rllib.pkl"  # beside the engine's files: the Python env, if any


def _reraise_env_error(e):
    """Raises a Python env's exception (carried by the engine's error) as a TaskError that is
    also the env's exception type, as a failed task's is; returns if `e` carries none."""
    fields = None
    if isinstance(e, prism._prism.TaskFailure):
        fields = e.args
    elif prism._MARKER in str(e):
        fields = ("prism::Error", str(e), "the driver's sampler", 0, str(e))
    if fields is not None:
        prism._raise_task_failure(fields)


class Checkpoint:
    """Where save() wrote the algorithm (Ray's TrainingResult.checkpoint): .path; and
    os.fspath(result) is the path."""

    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"Checkpoint(path={self.path!r})"


class SaveResult:
    """save()'s result (Ray's TrainingResult): .checkpoint (.path) and .metrics (the last
    train() result); os.fspath(result) and str(result) are the path."""

    def __init__(self, path, metrics):
        self.checkpoint = Checkpoint(path)
        self.metrics = metrics

    def __fspath__(self):
        return self.checkpoint.path

    def __str__(self):
        return self.checkpoint.path

    def __repr__(self):
        return f"SaveResult(checkpoint={self.checkpoint!r})"


def _path_of(checkpoint):
    if isinstance(checkpoint, SaveResult):
        return checkpoint.checkpoint.path
    path = getattr(checkpoint, "path", checkpoint)
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"a checkpoint is a directory (str or path-like), a Checkpoint or save()'s result, not "
                        f"{type(checkpoint).__name__}") from None


def _nested(flat, elapsed, total):
    """The engine's TrainResult::ToRllibMap() ("env_runners/episode_return_mean", ...) as
    RLlib's nested result dict, with Tune's timing keys."""
    result = {}
    for path, value in flat.items():
        *parents, leaf = path.split("/")
        d = result
        for p in parents:
            d = d.setdefault(p, {})
        if (leaf.startswith("num_") or leaf == "training_iteration") and not math.isnan(value):
            value = int(value)
        d[leaf] = value
    result["timers"]["training_iteration"] = elapsed
    result["timesteps_total"] = result["num_env_steps_sampled_lifetime"]
    result["time_this_iter_s"] = elapsed
    result["time_total_s"] = total
    result["done"] = False
    return result


class Algorithm:
    """A built PPO or DQN (config.build_algo(), or PPO(config=config)). Not thread-safe: call
    it from one thread. Its env runner actors end with stop() (or when it is dropped)."""

    def __init__(self, config=None, env=None, logger_creator=None, **kwargs):
        if config is None:
            raise TypeError(f"{type(self).__name__}(config=...) needs a config, e.g. "
                            f"{type(self).__name__}Config().environment('CartPole-v1')")
        if isinstance(config, dict):
            config = self.get_default_config().update_from_dict(config)
        built = config.build_algo(env=env)
        self.__dict__.update(built.__dict__)

    @classmethod
    def get_default_config(cls):
        from .ppo import PPOConfig
        from .dqn import DQNConfig
        return {"PPO": PPOConfig, "DQN": DQNConfig}[cls._algo_name()]()

    @classmethod
    def _algo_name(cls):
        name = getattr(cls, "_name", None)
        if name is None:
            raise TypeError("Algorithm itself is abstract: use PPO or DQN")
        return name

    def _init_built(self, config, cpp, env_name, pickled_env):
        self.config = config
        self._cpp = cpp
        self._env_name = env_name
        self._pickled_env = pickled_env
        self._started = time.monotonic()
        self._time_total = 0.0
        self._last = None
        cls = getattr(config, "callbacks_class", None)
        self.callbacks = cls() if cls is not None else None
        if self.callbacks is not None:
            self.callbacks.on_algorithm_init(algorithm=self, metrics_logger=None)

    # ---- training ------------------------------------------------------------------------

    def train(self):
        """One iteration (sample on the env runners, learn, report): RLlib's result dict.
        Raises the Python env's own exception (a TaskError that is also its type) if it
        failed, or PrismError if no runner returned a sample within sample_timeout_s."""
        start = time.monotonic()
        try:
            flat = self._cpp.train()
        except Exception as e:
            _reraise_env_error(e)
            raise
        elapsed = time.monotonic() - start
        self._time_total += elapsed
        self._last = _nested(flat, elapsed, self._time_total)
        if self.callbacks is not None:
            self.callbacks.on_train_result(algorithm=self, metrics_logger=None, result=self._last)
        return self._last

    step = train

    @property
    def iteration(self):
        return self._cpp.iteration()

    training_iteration = iteration

    def get_config(self):
        return self.config

    def compute_single_action(self, observation=None, state=None, *, explore=None, policy_id=None, **ignored):
        """The policy's action for one observation: greedy (explore False, the default) or
        sampled (explore=True). An int for a Discrete action space, a float32 array for a Box.
        ValueError for an observation of the wrong size."""
        if observation is None:
            raise TypeError("compute_single_action(observation): an observation is needed")
        return self._cpp.compute_single_action(np.asarray(observation, dtype=np.float32).ravel(), bool(explore))

    # ---- checkpoints ---------------------------------------------------------------------

    def save_to_path(self, path=None):
        """Writes the algorithm (weights, optimizer state, config, counters; for a Python env
        its pickled creator) to `path` (a new temporary directory if None); returns the path."""
        path = os.path.abspath(os.fspath(path)) if path is not None else tempfile.mkdtemp(prefix="prism_rllib_")
        self._cpp.save(path)
        with open(os.path.join(path, _STATE_FILE), "wb") as f:
            cloudpickle.dump({"algorithm": self._cpp.algorithm_name(), "env_name": self._env_name,
                         "pickled_env": self._pickled_env, "python_env": self.config._env
                         if not isinstance(self.config._env, str) else None}, f)
        return path

    def save(self, checkpoint_dir=None):
        """save_to_path(checkpoint_dir), returned as RLlib's TrainingResult: .checkpoint.path
        (os.fspath(result) is the path too) and .metrics (the last train() result)."""
        return SaveResult(self.save_to_path(checkpoint_dir), self._last)

    def restore(self, checkpoint_path):
        """Loads a checkpoint of this algorithm (same environment and module sizes) into it:
        weights, optimizer moments, counters; this config's settings stay (Ray's restore).
        ValueError for a directory without one, or one of another algorithm or shape."""
        self._cpp.restore(_path_of(checkpoint_path))
        if self.callbacks is not None:
            self.callbacks.on_checkpoint_loaded(algorithm=self)

    restore_from_path = restore

    @classmethod
    def from_checkpoint(cls, path, **ignored):
        """A new algorithm from a checkpoint (its config, weights and counters; its runners made
        anew). ValueError if `path` holds none."""
        path = os.path.abspath(_path_of(path))
        state = {}
        state_file = os.path.join(path, _STATE_FILE)
        if os.path.exists(state_file):
            with open(state_file, "rb") as f:
                state = pickle.load(f)
        prism._ensure_init()
        _rllib.check_every_rank(_env._REGISTER_TIMEOUT_S)
        if state.get("pickled_env") is not None:
            _env.register_everywhere(state["env_name"], state["pickled_env"])
        cpp = _rllib.from_checkpoint(path)
        algo_name = cpp.algorithm_name()
        from .ppo import PPO, PPOConfig
        from .dqn import DQN, DQNConfig
        import json
        config = (PPOConfig if algo_name == "PPO" else DQNConfig)()
        settings = json.loads(cpp.config_json())
        settings.pop("algorithm", None)
        env = settings.pop("env")
        settings.pop("env_config", None)
        config._settings.update(settings)
        object.__setattr__(config, "_env", state.get("python_env") or (env if not env.startswith("python:") else env))
        target = cls if cls not in (Algorithm,) and getattr(cls, "_name", None) == algo_name else \
            (PPO if algo_name == "PPO" else DQN)
        algo = target.__new__(target)
        Algorithm._init_built(algo, config, cpp, env, state.get("pickled_env"))
        return algo

    def stop(self):
        """Ends the env runner actors (and a learner group); the algorithm cannot train again."""
        cpp = getattr(self, "_cpp", None)
        if cpp is not None:
            cpp.stop()

    def __repr__(self):
        return f"{type(self).__name__}(env={self._env_name!r}, iteration={self.iteration})"

    # ---- Tune: Tuner(PPO, param_space=config) or Tuner("PPO", ...) -----------------------

    @classmethod
    def _tune_resolve(cls, param_space):
        from ._tune import resolve
        return resolve(cls._algo_name(), param_space)
