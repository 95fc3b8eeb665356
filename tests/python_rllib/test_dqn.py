"""DQNConfig -> DQN on prism::rl's DQN: the result dict, runners on worker ranks, checkpoints,
and what DQN refuses."""

import math
import os

import numpy as np
import pytest

from prism.rllib.algorithms.algorithm import Algorithm
from prism.rllib.algorithms.dqn import DQN, DQNConfig


def small(**training):
    return (DQNConfig().environment("CartPole-v1")
            .training(**{"num_steps_sampled_before_learning_starts": 200, "train_batch_size": 32,
                         "epsilon": [(0, 1.0), (2000, 0.05)], "training_intensity": 0.25, **training})
            .rl_module(model_config={"fcnet_hiddens": [64], "head_fcnet_hiddens": [32]})
            .debugging(seed=3))


def test_dqn_trains_with_rllibs_result_keys(world_size):
    runners = min(2, world_size - 1)
    algo = small().env_runners(num_env_runners=runners, rollout_fragment_length=25).build_algo()
    r1 = algo.train()
    r2 = algo.train()
    er = r2["env_runners"]
    assert er["num_env_steps_sampled"] >= 1000 and r2["num_env_steps_sampled_lifetime"] >= 2000
    assert 0.05 <= er["epsilon"] < r1["env_runners"]["epsilon"] <= 1.0  # decays with the lifetime steps
    module = r2["learners"]["default_policy"]
    assert math.isfinite(module["qf_loss"]) and math.isfinite(module["qf_mean"])
    assert r2["learners"]["__all_modules__"]["num_env_steps_trained"] > 0
    assert r2["replay_buffer"]["num_env_steps_stored"] >= 2000
    assert r2["fault_tolerance"]["num_healthy_workers"] == runners
    assert r2["training_iteration"] == 2
    algo.stop()


def test_dqn_checkpoint_round_trip(tmp_path):
    algo = small().build_algo()
    algo.train()
    obs = np.random.default_rng(1).uniform(-0.2, 0.2, size=(10, 4)).astype(np.float32)
    actions = [algo.compute_single_action(o) for o in obs]
    path = algo.save_to_path(str(tmp_path / "dqn"))
    assert os.path.exists(os.path.join(path, "dqn.h5"))
    again = Algorithm.from_checkpoint(path)
    assert isinstance(again, DQN) and again.iteration == 1
    assert [again.compute_single_action(o) for o in obs] == actions
    algo.stop()
    again.stop()


def test_dqn_refuses_what_prism_rl_lacks():
    with pytest.raises(ValueError, match="Discrete"):
        DQNConfig().environment("Pendulum-v1").build_algo()
    with pytest.raises(ValueError, match="uniform"):
        DQNConfig().training(replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer"})
    with pytest.raises(TypeError, match="n_step"):
        DQNConfig().training(num_atoms=51)
    c = DQNConfig().training(replay_buffer_config={"capacity": 1000}, epsilon=0.1)
    assert c.replay_buffer_capacity == 1000
