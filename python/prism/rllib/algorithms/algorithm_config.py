"""AlgorithmConfig: RLlib's builder (ray.rllib.algorithms.algorithm_config) over prism::rl's
configs. A config holds the engine's settings by their names (PPOConfig::ToJson's keys, with
the engine's defaults, which are RLlib's), so every check and default stays in C++; the
builder methods take RLlib's argument names and refuse the ones prism::rl does not have with
a TypeError that lists the ones it does."""

import copy
import json
import math

import prism
from ... import _rllib
from .. import _env

# Settings set by a builder method other than training().
_NOT_TRAINING = {"env", "env_config", "num_env_runners", "num_envs_per_env_runner", "rollout_fragment_length",
                 "env_runner_placement", "sample_timeout_s", "seed", "num_learners", "hidden", "head_hiddens"}
# RLlib's other names for prism::rl's settings: name -> (engine key, conversion).
_ALIASES = {
    "lambda": "lambda_",
    "train_batch_size_per_learner": "train_batch_size",
    "sgd_minibatch_size": "minibatch_size",
    "num_sgd_iter": "num_epochs",
}
_PLACEMENTS = ("auto", "one_per_worker_rank", "any_free_cpu")


def _is_domain(value):
    from ...tune._space import Domain
    return isinstance(value, Domain) or (isinstance(value, dict) and set(value) == {"grid_search"})


class AlgorithmConfig:
    """What PPOConfig and DQNConfig share. Builder methods return the config, so calls chain:
    PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).training(lr=3e-4).
    Settings read as attributes (config.lr, config.num_env_runners, config.env)."""

    algo_name = None  # "PPO" or "DQN"
    algo_class = None  # set by ppo.py / dqn.py

    def __init__(self, algo_class=None):
        object.__setattr__(self, "_settings", json.loads(_rllib.default_config(self.algo_name)))
        self._settings.pop("algorithm", None)
        self._settings["env_runner_placement"] = "auto"
        object.__setattr__(self, "_env", None)  # a name, a Python env class, or None
        object.__setattr__(self, "_env_config", {})
        object.__setattr__(self, "callbacks_class", None)
        if algo_class is not None:
            object.__setattr__(self, "algo_class", algo_class)

    # ---- reading and copying -----------------------------------------------------------

    def __getattr__(self, name):
        settings = self.__dict__.get("_settings", {})
        if name == "env":
            return self.__dict__.get("_env")
        if name == "env_config":
            return self.__dict__.get("_env_config")
        key = _ALIASES.get(name, name)
        if key in settings:
            return settings[key]
        if name == "framework_str":
            return "torch"
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}")

    def __setattr__(self, name, value):
        key = _ALIASES.get(name, name)
        if name in ("env", "env_config"):
            object.__setattr__(self, "_" + name, value if name == "env" else dict(value or {}))
        elif key in self._settings:
            self._settings[key] = value
        else:
            object.__setattr__(self, name, value)

    def copy(self, copy_frozen=None):
        c = copy.copy(self)
        object.__setattr__(c, "_settings", copy.deepcopy(self._settings))
        object.__setattr__(c, "_env_config", copy.deepcopy(self._env_config))
        return c

    def to_dict(self):
        """The settings by name (the engine's, e.g. "lambda_"), with "env" and "env_config"."""
        d = copy.deepcopy(self._settings)
        d["env"] = self._env
        d["env_config"] = copy.deepcopy(self._env_config)
        return d

    def update_from_dict(self, config_dict):
        """Sets each key of `config_dict` (to_dict's names, or RLlib's aliases); TypeError for
        a key this config has no setting for."""
        for k, v in config_dict.items():
            if k in ("env", "env_config"):
                setattr(self, k, v)
            elif k == "model":
                self.rl_module(model_config=v)
            else:
                self._set(k, v, "update_from_dict")
        return self

    @classmethod
    def from_dict(cls, config_dict):
        return cls().update_from_dict(config_dict)

    def __repr__(self):
        return f"{type(self).__name__}(env={self._env!r}, {self._settings!r})"

    def _known(self):
        return sorted(set(self._settings) | set(_ALIASES))

    def _set(self, key, value, method):
        engine_key = _ALIASES.get(key, key)
        if engine_key not in self._settings:
            raise TypeError(f"{type(self).__name__}.{method}: no setting {key!r} in prism::rl's {self.algo_name}; "
                            f"its settings are: {', '.join(self._known())}")
        self._settings[engine_key] = value

    # ---- builder methods (RLlib's names) -----------------------------------------------

    def environment(self, env=None, *, env_config=None, **ignored):
        """The environment: "CartPole-v1" or "Pendulum-v1" (prism::rl's), a name given to
        prism.rllib.register_env, or a Python env class with gymnasium's reset/step and
        observation_space/action_space (prism.rllib.spaces.Box/Discrete); env_config is passed
        to the class or creator (for a built-in env: numbers only)."""
        _refuse(ignored, "environment", "env, env_config")
        if env is not None:
            if not isinstance(env, (str, type)):
                raise TypeError(f"{type(self).__name__}.environment: env must be a name (str) or a Python env "
                                f"class, not {type(env).__name__}")
            object.__setattr__(self, "_env", env)
        if env_config is not None:
            if not isinstance(env_config, dict):
                raise TypeError(f"{type(self).__name__}.environment: env_config must be a dict, not "
                                f"{type(env_config).__name__}")
            object.__setattr__(self, "_env_config", dict(env_config))
        return self

    def env_runners(self, num_env_runners=None, num_envs_per_env_runner=None, rollout_fragment_length=None,
                    sample_timeout_s=None, env_runner_placement=None, **ignored):
        """num_env_runners (actors; 0 samples on the driver), num_envs_per_env_runner (env
        copies each), rollout_fragment_length ("auto" or steps per copy per sample),
        sample_timeout_s; Prism's env_runner_placement: "auto" (default: runner i on worker rank
        1 + i when there are enough worker ranks, else wherever a CPU is free),
        "one_per_worker_rank" or "any_free_cpu"."""
        _refuse(ignored, "env_runners", "num_env_runners, num_envs_per_env_runner, rollout_fragment_length, "
                "sample_timeout_s, env_runner_placement")
        if num_env_runners is not None:
            self._settings["num_env_runners"] = num_env_runners
        if num_envs_per_env_runner is not None:
            self._settings["num_envs_per_env_runner"] = num_envs_per_env_runner
        if rollout_fragment_length is not None:
            self._settings["rollout_fragment_length"] = 0 if rollout_fragment_length == "auto" else \
                rollout_fragment_length
        if sample_timeout_s is not None:
            self._settings["sample_timeout_s"] = sample_timeout_s
        if env_runner_placement is not None:
            if env_runner_placement not in _PLACEMENTS:
                raise ValueError(f"env_runners: env_runner_placement must be one of {', '.join(_PLACEMENTS)}, "
                                 f"not {env_runner_placement!r}")
            self._settings["env_runner_placement"] = env_runner_placement
        return self

    def training(self, **kwargs):
        """The algorithm's training settings by RLlib's names (lr, gamma, train_batch_size,
        grad_clip, and each algorithm's own); TypeError for one prism::rl does not have, with
        the list of those it has. model={"fcnet_hiddens": [...]} sets the module's sizes."""
        for k, v in kwargs.items():
            if k == "model":
                self.rl_module(model_config=v)
                continue
            if k == "replay_buffer_config" and self.algo_name == "DQN":
                self._replay_buffer_config(v)
                continue
            engine_key = _ALIASES.get(k, k)
            if engine_key in _NOT_TRAINING or engine_key not in self._settings:
                known = sorted(k2 for k2 in set(self._settings) | set(_ALIASES) | {"model"}
                               if _ALIASES.get(k2, k2) not in _NOT_TRAINING)
                raise TypeError(f"{type(self).__name__}.training: no setting {k!r} in prism::rl's "
                                f"{self.algo_name}; training() takes: {', '.join(known)}")
            self._settings[engine_key] = v
        return self

    def learners(self, num_learners=None, **ignored):
        """num_learners: 0 or 1 learns on the driver; n > 1 is a learner group on worker ranks
        1..n (gradients averaged every minibatch)."""
        _refuse(ignored, "learners", "num_learners")
        if num_learners is not None:
            self._settings["num_learners"] = num_learners
        return self

    def rl_module(self, *, model_config=None, **ignored):
        """model_config: {"fcnet_hiddens": [64, 64]} (and for DQN "head_fcnet_hiddens"), or an
        object with those attributes (RLlib's DefaultModelConfig)."""
        _refuse(ignored, "rl_module", "model_config")
        if model_config is None:
            return self
        if not isinstance(model_config, dict):
            model_config = {k: getattr(model_config, k) for k in ("fcnet_hiddens", "head_fcnet_hiddens")
                            if hasattr(model_config, k)}
        known = {"fcnet_hiddens": "hidden"}
        if self.algo_name == "DQN":
            known["head_fcnet_hiddens"] = "head_hiddens"
        for k, v in model_config.items():
            if k not in known:
                if k in ("fcnet_activation", "vf_share_layers") :
                    continue  # prism::rl's: tanh (PPO), separate value MLP; accepted, not changed
                raise TypeError(f"{type(self).__name__}.rl_module: model_config key {k!r} is not one prism::rl "
                                f"has; it takes {', '.join(sorted(known))}")
            self._settings[known[k]] = v if _is_domain(v) else _int_list(v, k)
        return self

    def callbacks(self, callbacks_class=None, **ignored):
        """An RLlibCallback subclass (prism.rllib.callbacks) whose driver hooks the Algorithm
        calls: on_algorithm_init, on_train_result, on_checkpoint_loaded. TypeError for one that
        overrides an env runner hook (the runners are C++)."""
        _refuse(ignored, "callbacks", "callbacks_class")
        if callbacks_class is None:
            return self
        from ..callbacks.callbacks import ENV_RUNNER_HOOKS, RLlibCallback
        if not isinstance(callbacks_class, type):
            raise TypeError(f"callbacks(callbacks_class): a class (an RLlibCallback subclass), not "
                            f"{type(callbacks_class).__name__}")
        overridden = [h for h in ENV_RUNNER_HOOKS if callable(getattr(callbacks_class, h, None))
                      and getattr(callbacks_class, h) is not getattr(RLlibCallback, h, None)]
        if overridden:
            raise TypeError(f"callbacks({callbacks_class.__name__}): {', '.join(overridden)} would run on the env "
                            "runners, which are C++ in prism::rl and call no Python hooks; use on_train_result "
                            "(on the driver, with the result dict) instead")
        object.__setattr__(self, "callbacks_class", callbacks_class)
        return self

    def debugging(self, *, seed=None, **ignored):
        """seed: the module's initial weights, the env copies and the samplers' generators."""
        _refuse(ignored, "debugging", "seed", ok=("log_level", "logger_config", "log_sys_usage"))
        if seed is not None:
            self._settings["seed"] = seed
        return self

    def framework(self, framework=None, **ignored):
        if framework not in (None, "torch"):
            raise ValueError(f"framework({framework!r}): prism::rl runs LibTorch; use 'torch'")
        return self

    def api_stack(self, enable_rl_module_and_learner=None, enable_env_runner_and_connector_v2=None):
        """Accepted for RLlib's scripts: prism::rl is the new API stack."""
        if enable_rl_module_and_learner is False or enable_env_runner_and_connector_v2 is False:
            raise ValueError("api_stack: prism::rl has only RLlib's new API stack (RLModule, Learner, EnvRunner)")
        return self

    def resources(self, **ignored):
        """Accepted for RLlib's scripts: each env runner and learner holds 1 CPU (Prism)."""
        return self

    def reporting(self, **ignored):
        return self

    # ---- checks and building -----------------------------------------------------------

    def _engine_dict(self, for_tune=False):
        """The engine's JSON dict and the Python env (name, pickled creator or None)."""
        if self._env is None:
            raise ValueError(f"{type(self).__name__}: no environment; call .environment('CartPole-v1') (or "
                             "'Pendulum-v1', a register_env name, or a Python env class)")
        name, pickled = _env.python_env_name(self._env, self._env_config)
        d = copy.deepcopy(self._settings)
        d["algorithm"] = self.algo_name
        d["env"] = name
        if pickled is None:
            if isinstance(self._env, str) and name not in _rllib.registered_envs():
                raise ValueError(f"{type(self).__name__}.environment({name!r}): no such environment; prism::rl has "
                                 f"{', '.join(_rllib.registered_envs())}, and register_env has "
                                 f"{', '.join(sorted(_env._registry)) or 'none'} (or pass a Python env class)")
            for k, v in self._env_config.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise TypeError(f"env_config[{k!r}] is {v!r}: prism::rl's built-in {name} takes numbers only")
            d["env_config"] = {k: float(v) for k, v in self._env_config.items()}
        else:
            d["env_config"] = {}
        for k, v in d.items():
            if _is_domain(v) and not for_tune:
                raise ValueError(f"{type(self).__name__}: {k} is a search space ({v!r}); build() needs values "
                                 "(pass the config to Tuner(\"" + self.algo_name + "\", param_space=config) to "
                                 "search it)")
        if "epsilon" in d and not _is_domain(d["epsilon"]):
            d["epsilon"] = _schedule(d["epsilon"])
        for k in ("hidden", "head_hiddens"):
            if k in d and not _is_domain(d[k]):
                d[k] = _int_list(d[k], k)
        return d, name, pickled

    def _resolve_placement(self, d, world_size, cpus):
        """"auto": one runner per worker rank when they fit, else any free CPU."""
        runners = d["num_env_runners"]
        if d["env_runner_placement"] == "auto":
            d["env_runner_placement"] = "one_per_worker_rank" if runners <= world_size - 1 else "any_free_cpu"
        if not isinstance(runners, int) or runners <= 0:
            return
        if d["env_runner_placement"] == "one_per_worker_rank" and runners > world_size - 1:
            raise ValueError(f"{type(self).__name__}: num_env_runners={runners} with env_runner_placement="
                             f"'one_per_worker_rank' needs {runners} worker ranks, and the job has {world_size} "
                             f"rank(s): launch {runners + 1} ranks (mpirun -n {runners + 1}), use fewer runners, "
                             "or env_runner_placement='any_free_cpu'")
        if d["env_runner_placement"] == "any_free_cpu" and runners > cpus:
            raise ValueError(f"{type(self).__name__}: num_env_runners={runners} needs {runners} CPUs (one each) and "
                             f"the job has {cpus:g}: use fewer runners, or .env_runners(num_env_runners=0) to "
                             "sample on the driver")

    def to_json(self):
        """The engine's JSON for this config (what a checkpoint stores), placement resolved."""
        d, _, _ = self._engine_dict()
        if d["env_runner_placement"] == "auto":
            d["env_runner_placement"] = "one_per_worker_rank"
        return json.dumps(d)

    def validate(self):
        """Checks every setting as build() does (ValueError/TypeError naming what to change)
        without building."""
        d, name, pickled = self._engine_dict()
        if pickled is not None:
            _env.register_everywhere(name, pickled)
        if d["env_runner_placement"] == "auto":
            d["env_runner_placement"] = "one_per_worker_rank"
        _validate(self.algo_name, d)

    def build_algo(self, env=None, logger_creator=None, use_copy=True):
        """The Algorithm (RLlib's build_algo): checks the config, makes the env runner actors
        (prism.init() first if needed) and returns the algorithm ready to train()."""
        if env is not None:
            self.environment(env)
        d, name, pickled = self._engine_dict()
        prism._ensure_init()  # as RLlib's build starts Ray
        _rllib.check_every_rank(_env._REGISTER_TIMEOUT_S)
        self._resolve_placement(d, prism.get_runtime_context().world_size,
                                prism.cluster_resources().get("CPU", 0))
        if pickled is not None:
            _env.register_everywhere(name, pickled)
        from .algorithm import Algorithm
        cls = self.algo_class or Algorithm
        algo = cls.__new__(cls)
        Algorithm._init_built(algo, self.copy() if use_copy else self, _build(self.algo_name, d), name, pickled)
        return algo

    build = build_algo  # RLlib's older name


def _refuse(ignored, method, takes, ok=()):
    bad = sorted(k for k in ignored if k not in ok)
    if bad:
        raise TypeError(f"{method}() got argument{'s' if len(bad) > 1 else ''} {', '.join(bad)} that prism::rl "
                        f"does not have; it takes {takes}")


def _int_list(v, what):
    if isinstance(v, (list, tuple)) and (v or what in ("head_hiddens", "head_fcnet_hiddens")) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    raise TypeError(f"{what} must be a list of ints (layer sizes), not {v!r}")


def _schedule(v):
    """DQN's epsilon: a number (constant) or RLlib's [(timestep, value), ...]."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [[0, float(v)]]
    try:
        return [[int(t), float(x)] for t, x in v]
    except (TypeError, ValueError):
        raise TypeError(f"epsilon must be a number or a list of (timestep, epsilon) pairs, not {v!r}") from None


def _validate(algo_name, d):
    try:
        return _rllib.validate(algo_name, json.dumps(d))
    except ValueError as e:
        raise ValueError(_python_wording(str(e))) from None


def _build(algo_name, d):
    from .algorithm import _reraise_env_error
    try:
        return _rllib.build(algo_name, json.dumps(d))
    except ValueError as e:
        raise ValueError(_python_wording(str(e))) from None
    except Exception as e:  # a Python env's exception (its creation, reset) as its own type
        _reraise_env_error(e)
        raise


def _python_wording(message):
    """The engine's message with its C++ builder names as prism.rllib's."""
    for cpp, py in (("EnvRunners(0)", ".env_runners(num_env_runners=0)"), ("Learners(1)", ".learners(num_learners=1)"),
                    (".Environment(name)", ".environment(name)"), ("Environment(", "environment("),
                    ("RLModule hidden", "model_config fcnet_hiddens"),
                    ("RLModule head_hiddens", "model_config head_fcnet_hiddens"),
                    ("prism::Init", "prism.init()"), ("::FromJson", "")):
        message = message.replace(cpp, py)
    return message
