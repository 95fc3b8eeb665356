from .ppo import PPO, PPOConfig

__all__ = ["PPO", "PPOConfig"]
