"""Ray's ray.util.scheduling_strategies: where a task or actor runs, given as
.options(scheduling_strategy=...): "DEFAULT", "SPREAD" (across ranks), a
PlacementGroupSchedulingStrategy or a NodeAffinitySchedulingStrategy."""

from .placement_group import PlacementGroupSchedulingStrategy

__all__ = ["PlacementGroupSchedulingStrategy", "NodeAffinitySchedulingStrategy"]

_turns = {}  # node id -> how many strategies took one of its ranks (the next rank's turn)


class NodeAffinitySchedulingStrategy:
    """Run on the node `node_id` (Ray's): a node id as get_runtime_context().get_node_id()
    or prism.util.state.list_nodes() give it, or a rank (an int, Prism's own). With
    soft=False the task or actor runs only there; with soft=True elsewhere when that node
    cannot take it (a busy node is waited for either way).

    In Prism a node is a host, and every rank on that host has its node id: each
    .options(scheduling_strategy=...) with this strategy takes the host's next rank in turn,
    so a loop of f.options(...).remote() calls spreads over the host's ranks. An unknown
    node id is a ValueError at .remote() naming the known ones."""

    def __init__(self, node_id, soft=False, _spill_on_unavailable=False, _fail_on_unavailable=False):
        if not isinstance(node_id, (str, int)) or isinstance(node_id, bool):
            raise TypeError(f"NodeAffinitySchedulingStrategy: node_id must be a node id (str) or a "
                            f"rank (int), not {type(node_id).__name__}")
        self.node_id = node_id
        self.soft = bool(soft)

    def _rank(self):
        """The rank the next call with this strategy goes to (asks the head for the nodes)."""
        from .state import list_nodes
        nodes = list_nodes()
        if isinstance(self.node_id, int):
            ranks = [n["rank"] for n in nodes if n["rank"] == self.node_id]
            known = f"ranks 0..{len(nodes) - 1}"
        else:
            ranks = [n["rank"] for n in nodes if n["node_id"] == self.node_id]
            known = "node ids " + ", ".join(sorted({repr(n["node_id"]) for n in nodes}))
        if not ranks:
            raise ValueError(f"NodeAffinitySchedulingStrategy: no node {self.node_id!r} in this job "
                             f"(its {known})")
        turn = _turns.get(self.node_id, 0)
        _turns[self.node_id] = turn + 1
        return ranks[turn % len(ranks)]

    def __repr__(self):
        return f"NodeAffinitySchedulingStrategy(node_id={self.node_id!r}, soft={self.soft})"
