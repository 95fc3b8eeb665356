"""A Python env (gymnasium's reset/step) inside prism::rl's C++ env runners: on the worker
ranks at 3 ranks (cloudpickled there), its errors raised on the driver as its own type with
its traceback, and what it returns checked."""

import os

import numpy as np
import pytest

import prism
from prism.rllib import register_env
from prism.rllib.algorithms.algorithm import Algorithm
from prism.rllib.algorithms.dqn import DQNConfig
from prism.rllib.algorithms.ppo import PPOConfig

import envs


def ppo(env, runners=2, **training):
    defaults = dict(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01, train_batch_size=1000, minibatch_size=100)
    return (PPOConfig().environment(env).env_runners(num_env_runners=runners)
            .training(**{**defaults, **training}).debugging(seed=2))


def test_python_corridor_learns_on_the_env_runners():
    algo = ppo(envs.Corridor, runners=2, train_batch_size=400).build_algo()
    first = algo.train()["env_runners"]["episode_return_mean"]
    for _ in range(14):
        r = algo.train()
    best = envs.Corridor().length * -0.1 + 1.1  # length - 1 steps right at -0.1, then +1
    last = r["env_runners"]["episode_return_mean"]
    assert r["fault_tolerance"]["num_healthy_workers"] == 2
    assert last > first and last > best - 0.5, (first, last)
    assert algo.compute_single_action([0.0]) == 1  # right
    algo.stop()


def test_python_cartpole_samples_like_the_builtin_one():
    algo = ppo(envs.PyCartPole, runners=2).build_algo()
    r = algo.train()
    er = r["env_runners"]
    assert er["num_env_steps_sampled"] >= 1000
    assert 10 < er["episode_len_mean"] < 60  # a random policy's episodes, as Gymnasium's
    assert er["episode_return_mean"] == er["episode_len_mean"]
    algo.stop()


def test_a_python_env_exception_reaches_the_driver_with_its_type_and_traceback():
    for runners in (1, 0):  # on an env runner actor, and on the driver
        algo = ppo(envs.ExplodingEnv, runners=runners).build_algo()
        with pytest.raises(KeyError) as info:
            algo.train()
        err = info.value
        assert isinstance(err, prism.exceptions.TaskError)
        assert "boom in step 3" in str(err)
        assert "envs.py" in str(err) and "raise KeyError" in str(err)
        algo.stop()


def test_wrong_returns_are_named():
    with pytest.raises(TypeError, match="terminated, truncated"):
        ppo(envs.FourTupleEnv, runners=1).build_algo().train()
    with pytest.raises(ValueError, match=r"observation of shape \(3,\)"):
        ppo(envs.WrongShapeEnv, runners=0).build_algo().train()
    with pytest.raises(TypeError, match="observation_space"):
        ppo(envs.NoSpacesEnv, runners=1).build_algo()
    with pytest.raises(TypeError, match="Python env class"):
        PPOConfig().environment(envs.Corridor())


def test_register_env_passes_env_config_and_a_local_class_travels_by_value():
    register_env("corridor3", lambda cfg: envs.Corridor(cfg))
    algo = (ppo("corridor3", runners=1).environment(env_config={"corridor_length": 3}).build_algo())
    r = algo.train()
    assert r["env_runners"]["episode_len_mean"] >= 3
    algo.stop()

    class Local(envs.Corridor):  # defined here: cloudpickled by value to the runners
        def step(self, action):
            obs, r, d, t, i = super().step(1)  # always right
            return obs, r, d, t, i

    algo = ppo(Local, runners=1).build_algo()
    assert algo.train()["env_runners"]["episode_len_mean"] == 5
    algo.stop()


def test_box_actions_reach_a_python_env():
    algo = ppo(envs.ContinuousTarget, runners=1, train_batch_size=200, minibatch_size=50).build_algo()
    r = algo.train()
    assert r["env_runners"]["num_episodes"] >= 200  # one step each
    a = algo.compute_single_action([0.0, 0.0])
    assert isinstance(a, np.ndarray) and a.shape == (1,)
    algo.stop()


def test_dqn_on_a_python_env_and_its_checkpoint(tmp_path):
    algo = (DQNConfig().environment(envs.Corridor)
            .training(num_steps_sampled_before_learning_starts=100, training_intensity=0.5)
            .rl_module(model_config={"fcnet_hiddens": [32]}).build_algo())
    algo.train()
    path = algo.save_to_path(str(tmp_path / "dqn_py"))
    again = Algorithm.from_checkpoint(path)
    assert again.train()["training_iteration"] == 2
    assert os.path.exists(os.path.join(path, "prism_rllib.pkl"))
    algo.stop()
    again.stop()
