from .callbacks import DefaultCallbacks, RLlibCallback

__all__ = ["RLlibCallback", "DefaultCallbacks"]
