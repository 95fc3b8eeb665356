"""Ray's ray.actor: the classes of actors and their handles (prism.remote makes them)."""

from ._remote import ActorClass, ActorHandle, ActorMethod, method
from ._worker import exit_actor

__all__ = ["ActorClass", "ActorHandle", "ActorMethod", "exit_actor", "method"]
