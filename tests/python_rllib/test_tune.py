"""An RLlib algorithm as a Tune trainable: Tuner("PPO", param_space=config) runs prism::rl's
own trial (prism/rl/tune.h) through prism.tune's Tuner."""

import math

import pytest

from prism import tune
from prism.rllib.algorithms.algorithm import Algorithm
from prism.rllib.algorithms.dqn import DQNConfig
from prism.rllib.algorithms.ppo import PPO, PPOConfig

import envs


def small_ppo():
    return (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
            .training(lr=3e-4, num_epochs=2, train_batch_size=400, minibatch_size=100))


def run(trainable, config, tmp_path, metric="env_runners/episode_return_mean", iterations=2, **tc):
    return tune.Tuner(trainable, param_space=config,
                      tune_config=tune.TuneConfig(metric=metric, mode="max", **tc),
                      run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0,
                                                stop={"training_iteration": iterations})).fit()


def test_tuner_ppo_by_name_searches_the_configs_spaces(tmp_path):
    config = small_ppo().training(lr=tune.grid_search([1e-3, 1e-4]), gamma=tune.uniform(0.9, 0.99))
    results = run("PPO", config, tmp_path)
    assert len(results) == 2 and results.num_errors == 0, results.errors
    lrs = sorted(r.config["lr"] for r in results)
    assert lrs == [1e-4, 1e-3]
    for r in results:
        assert r.metrics["training_iteration"] == 2
        assert 0.9 <= r.config["gamma"] <= 0.99
        assert math.isfinite(r.metrics["env_runners/episode_return_mean"])
        assert r.metrics["episode_return_mean"] == r.metrics["env_runners/episode_return_mean"]
        assert r.metrics["num_env_steps_sampled_lifetime"] >= 800
        assert "learners/default_policy/total_loss" in r.metrics
    best = results.get_best_result()
    algo = Algorithm.from_checkpoint(best.checkpoint.path)
    assert isinstance(algo, PPO) and algo.iteration == 2
    assert algo.config.lr == best.config["lr"]
    algo.stop()


def test_tuner_restore_by_name(tmp_path):
    # A stopper rather than a stop dict: Tuner.restore of an experiment with RunConfig(stop={...})
    # crashes in the Tune engine (src/tune/tuner.cc iterates items() of a temporary JSON).
    config = small_ppo().training(lr=tune.grid_search([1e-3, 1e-4]))
    tuner = tune.Tuner("PPO", param_space=config, tune_config=tune.TuneConfig(metric="episode_return_mean", mode="max"),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0,
                                                 stop=tune.stopper.MaximumIterationStopper(2)))
    results = tuner.fit()
    del tuner  # it holds the experiment's journal
    again = tune.Tuner.restore(results.experiment_path, "PPO").fit()  # finished trials stay
    assert len(again) == 2 and again.num_errors == 0
    assert sorted(r.config["lr"] for r in again) == [1e-4, 1e-3]


def test_tuner_with_the_class_a_python_env_and_dqn(tmp_path):
    config = small_ppo().environment(envs.Corridor).training(entropy_coeff=tune.choice([0.0, 0.01]))
    results = run(PPO, config, tmp_path / "ppo", num_samples=2)
    assert results.num_errors == 0, results.errors
    dqn = (DQNConfig().environment("CartPole-v1")
           .training(lr=tune.loguniform(1e-4, 1e-3), num_steps_sampled_before_learning_starts=100,
                     training_intensity=0.1)
           .rl_module(model_config={"fcnet_hiddens": [32]}))
    results = run("DQN", dqn.to_dict(), tmp_path / "dqn", metric="episode_return_mean", iterations=1)
    assert results.num_errors == 0, results.errors
    assert results[0].metrics["env_runners/epsilon"] < 1.0


def test_tuner_bad_input():
    with pytest.raises(ValueError, match="PPO"):
        tune.Tuner("A2C", param_space={})
    with pytest.raises(ValueError, match="PPOConfig"):
        tune.Tuner("PPO", param_space=DQNConfig().environment("CartPole-v1"))
    with pytest.raises(TypeError, match="no setting"):
        tune.Tuner("PPO", param_space={"env": "CartPole-v1", "learning_rate": tune.uniform(0, 1)})
    with pytest.raises(ValueError, match="numbers and bools"):
        tune.Tuner("PPO", param_space=small_ppo().rl_module(model_config={"fcnet_hiddens": tune.choice([[32], [64]])}))
    with pytest.raises(ValueError, match="num_learners"):
        tune.Tuner("PPO", param_space=small_ppo().learners(num_learners=2))
