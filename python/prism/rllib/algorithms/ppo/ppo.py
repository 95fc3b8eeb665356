"""PPO and PPOConfig (ray.rllib.algorithms.ppo) over prism::rl's PPO (prism/rl/algorithm.h).

    from prism.rllib.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2)
              .training(lr=3e-4, num_epochs=6, vf_loss_coeff=0.01))
    algo = config.build_algo()
    for _ in range(30):
        result = algo.train()
        if result["env_runners"]["episode_return_mean"] >= 450:
            break

training() takes prism::rl's PPO settings by RLlib's names: lr, gamma, lambda_ (or lambda),
train_batch_size (or train_batch_size_per_learner), minibatch_size, num_epochs, clip_param,
vf_clip_param, vf_loss_coeff, entropy_coeff, use_kl_loss, kl_coeff, kl_target, grad_clip;
model={"fcnet_hiddens": [64, 64]}. Defaults are RLlib's (lr 5e-5, train batch 4000,
minibatch 128, 30 epochs, 2 env runners)."""

from ..algorithm import Algorithm
from ..algorithm_config import AlgorithmConfig


class PPOConfig(AlgorithmConfig):
    algo_name = "PPO"

    def __init__(self, algo_class=None):
        super().__init__(algo_class or PPO)


class PPO(Algorithm):
    _name = "PPO"

    @classmethod
    def get_default_config(cls):
        return PPOConfig()
