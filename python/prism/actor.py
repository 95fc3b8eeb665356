"""Ray's ray.actor: the classes of actors and their handles (prism.remote makes them)."""

from ._remote import ActorClass, ActorHandle, ActorMethod

__all__ = ["ActorClass", "ActorHandle", "ActorMethod"]
