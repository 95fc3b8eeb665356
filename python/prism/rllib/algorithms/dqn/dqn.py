"""DQN and DQNConfig (ray.rllib.algorithms.dqn) over prism::rl's DQN (prism/rl/dqn.h).

    from prism.rllib.algorithms.dqn import DQNConfig

    algo = (DQNConfig().environment("CartPole-v1")
            .training(lr=5e-4, epsilon=[(0, 1.0), (10000, 0.02)], n_step=3)
            .rl_module(model_config={"fcnet_hiddens": [256], "head_fcnet_hiddens": [256]})
            .build_algo())
    result = algo.train()   # >= 1000 env steps per iteration

training() takes prism::rl's DQN settings by RLlib's names: lr, gamma, train_batch_size,
replay_buffer_config={"capacity": n} (or replay_buffer_capacity), target_network_update_freq,
num_steps_sampled_before_learning_starts, epsilon (a number or [(step, value), ...]),
double_q, dueling, n_step, tau, grad_clip, training_intensity. The replay buffer is uniform
(RLlib's default is prioritized). No env runners by default: the driver samples."""

from ..algorithm import Algorithm
from ..algorithm_config import AlgorithmConfig


class DQNConfig(AlgorithmConfig):
    algo_name = "DQN"

    def __init__(self, algo_class=None):
        super().__init__(algo_class or DQN)

    def _replay_buffer_config(self, v):
        if not isinstance(v, dict):
            raise TypeError(f"DQNConfig.training: replay_buffer_config must be a dict, not {type(v).__name__}")
        for k, value in v.items():
            if k == "capacity":
                self._settings["replay_buffer_capacity"] = value
            elif k == "type" and value in ("EpisodeReplayBuffer", "ReplayBuffer"):
                continue
            elif k in ("type", "alpha", "beta"):
                raise ValueError(f"DQNConfig: replay_buffer_config {k}={value!r}: prism::rl's replay buffer is "
                                 "uniform (prioritized replay is not implemented); leave it out")
            else:
                raise TypeError(f"DQNConfig.training: replay_buffer_config key {k!r} is not one prism::rl has; "
                                "it takes capacity")


class DQN(Algorithm):
    _name = "DQN"

    @classmethod
    def get_default_config(cls):
        return DQNConfig()
