from .dqn import DQN, DQNConfig

__all__ = ["DQN", "DQNConfig"]
