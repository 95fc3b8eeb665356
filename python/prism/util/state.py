"""The state API (Ray's ray.util.state): tasks and actors as dicts."""

from .. import _prism


def list_tasks():
    """Every task the head remembers: task_id, name, state, rank."""
    return _prism.list_tasks()


def list_actors():
    """Every actor: actor_id, name, class_name, state, rank."""
    return _prism.list_actors()
