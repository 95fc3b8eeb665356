"""PPOConfig -> PPO on prism::rl's PPO: the result dict, learning, checkpoints, actions and
bad input. At 1 rank the env runners go on rank 0's free CPUs; at 3 ranks one per worker rank."""

import math
import os

import numpy as np
import pytest

import prism
from prism import tune
from prism.rllib.algorithms.algorithm import Algorithm
from prism.rllib.algorithms.dqn import DQNConfig
from prism.rllib.algorithms.ppo import PPO, PPOConfig

TUNED = dict(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01)  # RLlib's tuned CartPole settings


def cartpole(**training):
    return PPOConfig().environment("CartPole-v1").training(**{**TUNED, **training}).debugging(seed=1)


def test_train_returns_rllibs_result_dict_and_cartpole_return_rises(world_size):
    algo = cartpole(train_batch_size=2000).env_runners(num_env_runners=2).build_algo()
    try:
        first = algo.train()
        assert set(first) >= {"env_runners", "learners", "timers", "training_iteration",
                              "num_env_steps_sampled_lifetime", "time_this_iter_s", "fault_tolerance"}
        er = first["env_runners"]
        for k in ("episode_return_mean", "episode_return_min", "episode_return_max", "episode_len_mean",
                  "num_episodes", "num_env_steps_sampled", "num_env_steps_sampled_lifetime"):
            assert k in er, k
        assert er["num_env_steps_sampled"] >= 2000
        assert first["training_iteration"] == 1
        assert first["fault_tolerance"]["num_healthy_workers"] == 2
        module = first["learners"]["default_policy"]
        for k in ("total_loss", "policy_loss", "vf_loss", "entropy", "mean_kl_loss", "curr_kl_coeff"):
            assert math.isfinite(module[k]), k
        returns = [er["episode_return_mean"]]
        for _ in range(7):
            r = algo.train()
            returns.append(r["env_runners"]["episode_return_mean"])
        assert r["training_iteration"] == 8
        assert r["num_env_steps_sampled_lifetime"] >= 8 * 2000
        # A random policy averages about 22; PPO with these settings passes 60 by here.
        assert returns[-1] > max(40.0, 1.5 * returns[0]), returns
    finally:
        algo.stop()


def test_save_restore_and_from_checkpoint_keep_weights_and_counters(tmp_path):
    algo = cartpole(train_batch_size=1000).env_runners(num_env_runners=0).build_algo()
    algo.train()
    algo.train()
    obs = np.random.default_rng(0).uniform(-0.2, 0.2, size=(20, 4)).astype(np.float32)
    actions = [algo.compute_single_action(o) for o in obs]
    result = algo.save(str(tmp_path / "ckpt"))
    assert os.path.exists(os.path.join(result.checkpoint.path, "algorithm.h5"))
    assert os.fspath(result) == result.checkpoint.path

    again = Algorithm.from_checkpoint(result)
    assert isinstance(again, PPO)
    assert again.iteration == 2
    assert [again.compute_single_action(o) for o in obs] == actions
    assert again.config.lr == pytest.approx(3e-4)
    assert again.train()["training_iteration"] == 3

    fresh = cartpole(train_batch_size=1000).env_runners(num_env_runners=0).debugging(seed=7).build_algo()
    fresh.restore(result.checkpoint.path)
    assert fresh.iteration == 2
    assert [fresh.compute_single_action(o) for o in obs] == actions

    dqn = DQNConfig().environment("CartPole-v1").build_algo()
    with pytest.raises(ValueError, match="PPO checkpoint"):
        dqn.restore(result.checkpoint.path)
    with pytest.raises(ValueError, match="holds no"):
        Algorithm.from_checkpoint(str(tmp_path))
    for a in (algo, again, fresh, dqn):
        a.stop()


def test_compute_single_action_discrete_and_box():
    algo = cartpole(train_batch_size=500, minibatch_size=100).env_runners(num_env_runners=0).build_algo()
    a = algo.compute_single_action(np.zeros(4, np.float32))
    assert isinstance(a, int) and a in (0, 1)
    assert {algo.compute_single_action([0.0, 0.0, 0.1, 0.0], explore=True) for _ in range(50)} <= {0, 1}
    with pytest.raises(ValueError, match="observation"):
        algo.compute_single_action([0.0, 0.0])
    pendulum = (PPOConfig().environment("Pendulum-v1").env_runners(num_env_runners=0)
                .training(train_batch_size=400, minibatch_size=100, num_epochs=1).build_algo())
    r = pendulum.train()
    assert r["env_runners"]["num_episodes"] == 2  # 200 steps each
    action = pendulum.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32))
    assert isinstance(action, np.ndarray) and action.shape == (1,) and action.dtype == np.float32
    algo.stop()
    pendulum.stop()


def test_bad_input_names_what_to_change(world_size):
    with pytest.raises(ValueError, match="CartPole-v1"):
        PPOConfig().environment("CartPoel-v1").build_algo()
    with pytest.raises(ValueError, match="no environment"):
        PPOConfig().build_algo()
    with pytest.raises(TypeError, match="lr"):
        PPOConfig().training(learning_rate=1e-3)
    with pytest.raises(TypeError, match="num_env_runners"):
        PPOConfig().env_runners(num_workers=2)
    with pytest.raises(TypeError, match="numbers only"):
        PPOConfig().environment("CartPole-v1", env_config={"mode": "hard"}).build_algo()
    with pytest.raises(ValueError, match="lr must be > 0"):
        cartpole(lr=-1.0).env_runners(num_env_runners=0).build_algo()
    with pytest.raises(ValueError, match="minibatch_size"):
        cartpole(train_batch_size=100, minibatch_size=200).env_runners(num_env_runners=0).build_algo()
    with pytest.raises(ValueError, match="search space"):
        cartpole(lr=tune.loguniform(1e-4, 1e-3)).env_runners(num_env_runners=0).build_algo()
    with pytest.raises(ValueError, match="torch"):
        PPOConfig().framework("tf2")
    with pytest.raises(ValueError, match="mpirun -n"):
        cartpole().env_runners(num_env_runners=world_size, env_runner_placement="one_per_worker_rank").build_algo()
    with pytest.raises(ValueError, match="CPUs"):
        cartpole().env_runners(num_env_runners=1000).build_algo()
    with pytest.raises(TypeError, match="needs a config"):
        PPO()


def test_config_reads_copies_and_converts_like_rllibs():
    c = PPOConfig().environment("CartPole-v1").training(**{"lambda": 0.95, "train_batch_size_per_learner": 1000})
    assert c.lambda_ == 0.95 and c.train_batch_size == 1000
    assert c.num_env_runners == 2 and c.lr == pytest.approx(5e-5)  # RLlib's defaults
    c2 = c.copy().training(lr=1e-3)
    assert c.lr == pytest.approx(5e-5) and c2.lr == pytest.approx(1e-3)
    d = c2.to_dict()
    assert d["env"] == "CartPole-v1" and d["lr"] == pytest.approx(1e-3)
    assert PPOConfig.from_dict(d).lr == pytest.approx(1e-3)
    c3 = PPOConfig().rl_module(model_config={"fcnet_hiddens": [32]}).training(model={"fcnet_hiddens": [16, 16]})
    assert c3.hidden == [16, 16]
    assert PPO.get_default_config().num_epochs == 30
    algo = PPO(config=c.copy().env_runners(num_env_runners=0).training(minibatch_size=100))
    assert algo.train()["env_runners"]["num_env_steps_sampled"] >= 1000
    algo.stop()
    with pytest.raises(ValueError, match="stopped"):
        algo.train()


def test_learner_group_on_worker_ranks(world_size):
    config = cartpole(train_batch_size=1000, minibatch_size=100).env_runners(num_env_runners=0).learners(num_learners=2)
    if world_size < 3:
        with pytest.raises(ValueError, match="num_learners 2"):
            config.build_algo()
        return
    algo = config.build_algo()
    r = algo.train()
    assert math.isfinite(r["learners"]["default_policy"]["total_loss"])
    algo.stop()


def test_driver_callbacks_run_and_env_runner_ones_are_refused():
    from prism.rllib.callbacks import RLlibCallback

    class Count(RLlibCallback):
        def on_algorithm_init(self, *, algorithm, **kwargs):
            self.seen = ["init"]

        def on_train_result(self, *, algorithm, result, **kwargs):
            self.seen.append(result["training_iteration"])
            result["custom"] = {"doubled_return": 2 * result["env_runners"]["episode_return_mean"]}

    algo = cartpole(train_batch_size=500, minibatch_size=100).env_runners(num_env_runners=0).callbacks(Count).build_algo()
    r = algo.train()
    assert algo.callbacks.seen == ["init", 1]
    assert r["custom"]["doubled_return"] == 2 * r["env_runners"]["episode_return_mean"]
    algo.stop()

    class PerEpisode(RLlibCallback):
        def on_episode_end(self, **kwargs):
            pass

    with pytest.raises(TypeError, match="on_episode_end"):
        PPOConfig().callbacks(PerEpisode)
