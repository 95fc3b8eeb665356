"""An RLlib algorithm as a Tune trainable: Tuner("PPO", param_space=config) (or Tuner(PPO, ...)).
The trial is prism::rl's own (prism/rl/tune.h, tune::AlgorithmTrainable): it builds the
algorithm from the base config with the trial's values laid over it, reports each train()
with a checkpoint, and restores one (PBT, retries). Its runners go wherever a CPU is free; a
trial reserves 1 CPU plus 1 per env runner.

The config's search spaces (config.training(lr=tune.loguniform(1e-4, 1e-3))) become the
param_space; their keys are the engine's setting names (lr, gamma, lambda_, num_epochs, ...),
and numbers and bools can be searched. The trial reports the engine's flat metric names
(episode_return_mean, num_env_steps_sampled_lifetime, total_loss, ...) and RLlib's nested ones
(env_runners/episode_return_mean, learners/default_policy/total_loss, ...)."""

import copy

from ... import _rllib
from .. import _env
from .algorithm_config import AlgorithmConfig, _is_domain


class _RLlibTrainer:
    """What prism.tune's Tuner runs for "PPO"/"DQN": the engine's AlgorithmTrainable."""

    _tune_any_space = True  # its param_space is the config's settings, not train_loop_config

    def __init__(self, algo_name, base_json, checkpoint_frequency=1):
        self.algo_name = algo_name
        self.base_json = base_json
        self.checkpoint_frequency = checkpoint_frequency
        self.__name__ = algo_name

    def _tune_trainable(self, codecs):
        return _rllib.tune_trainable(self.algo_name, self.base_json, self.checkpoint_frequency)


def _config_of(algo_name, param_space):
    from .dqn import DQNConfig
    from .ppo import PPOConfig
    cls = {"PPO": PPOConfig, "DQN": DQNConfig}[algo_name]
    if isinstance(param_space, AlgorithmConfig):
        if param_space.algo_name != algo_name:
            raise ValueError(f"Tuner({algo_name!r}): param_space is a {type(param_space).__name__}; pass a "
                             f"{cls.__name__}")
        return param_space.copy()
    if isinstance(param_space, dict):
        return cls().update_from_dict(param_space)
    raise TypeError(f"Tuner({algo_name!r}): param_space must be a {cls.__name__} (or its to_dict()), not "
                    f"{type(param_space).__name__}")


def resolve(algo_name, param_space):
    """(the trainable, the param_space of searched settings) for Tuner(algo_name, param_space=...)."""
    import json
    import prism
    config = _config_of(algo_name, param_space)
    if _is_domain(config._env) or any(_is_domain(v) for v in config._env_config.values()):
        raise ValueError(f"Tuner({algo_name!r}): the environment and env_config cannot be searched; run a Tuner "
                         "per environment")
    if config.callbacks_class is not None:
        raise ValueError(f"Tuner({algo_name!r}): callbacks run in an Algorithm's driver, and a trial is prism::rl's "
                         "C++ trial: leave .callbacks() out of the Tuner's config")
    space = {k: v for k, v in config._settings.items() if _is_domain(v)}
    for k, v in space.items():
        values = getattr(v, "categories", None) or (v.get("grid_search") if isinstance(v, dict) else None) or []
        if any(not isinstance(x, (int, float, bool)) for x in values):
            raise ValueError(f"Tuner({algo_name!r}): {k} searches {v!r}; prism::rl's trial takes numbers and bools "
                             "(run a Tuner per layer-size list or schedule)")
    fresh = type(config)()
    for k in space:
        config._settings[k] = fresh._settings[k]  # the trial lays its value over it
    d, name, pickled = config._engine_dict()
    d["env_runner_placement"] = "any_free_cpu"
    if d.get("num_learners", 0) > 1:
        raise ValueError(f"Tuner({algo_name!r}): num_learners={d['num_learners']}: a trial learns on its own task "
                         "(.learners(num_learners=1)), since learner actors are pinned to ranks 1..n")
    prism._ensure_init()
    _rllib.check_every_rank(_env._REGISTER_TIMEOUT_S)
    if pickled is not None:
        _env.register_everywhere(name, pickled)
    from .algorithm_config import _validate
    base_json = _validate(algo_name, d)
    return _RLlibTrainer(algo_name, base_json), copy.copy(space)
