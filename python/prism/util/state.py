"""The state API (Ray's ray.util.state): the cluster's nodes (ranks), tasks, actors,
placement groups and recent errors, as dicts. Each call asks the head (one round trip)."""

from .. import _prism


def list_nodes():
    """Every rank: rank, node_id, host, state, is_head, resources_total, resources_available."""
    return _prism.list_nodes()


_PYTHON_FUNCTIONS = {_prism.task_function_name(), _prism.actor_factory_name(), _prism.actor_method_name()}


def list_tasks():
    """Every task the head remembers: task_id, name, func_name, type, state, rank, attempt,
    error_type, error_message. A Python task's func_name is its name (its function's
    qualified name unless .options(name=...)): the core sees one function for them all."""
    tasks = _prism.list_tasks()
    for t in tasks:
        if t["func_name"] in _PYTHON_FUNCTIONS:
            t["func_name"] = t["name"]
    return tasks


def list_actors():
    """Every actor: actor_id, name, class_name, state, rank, num_restarts, death_cause."""
    return _prism.list_actors()


def list_placement_groups():
    """Every placement group: placement_group_id, name, strategy, state, bundles, bundle_ranks."""
    return _prism.list_placement_groups()


def list_errors(limit=100):
    """The most recent errors (failed tasks, dead actors): time_ns, type, message, id, rank."""
    return _prism.list_errors(limit)


def summarize_tasks():
    """Counts of tasks by function (list_tasks' func_name) and state: {"summary": {name:
    {"type", "state_counts"}}, "total_tasks", "total_actor_tasks", "total_actor_scheduled"}."""
    summary = {}
    totals = {"NORMAL_TASK": 0, "ACTOR_TASK": 0, "ACTOR_CREATION_TASK": 0}
    for t in list_tasks():
        entry = summary.setdefault(t["func_name"], {"type": t["type"], "state_counts": {}})
        entry["state_counts"][t["state"]] = entry["state_counts"].get(t["state"], 0) + 1
        totals[t["type"]] = totals.get(t["type"], 0) + 1
    return {"summary": summary, "total_tasks": totals["NORMAL_TASK"],
            "total_actor_tasks": totals["ACTOR_TASK"],
            "total_actor_scheduled": totals["ACTOR_CREATION_TASK"]}
