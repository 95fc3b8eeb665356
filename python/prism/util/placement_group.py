"""Placement groups (Ray's ray.util.placement_group): bundles of resources reserved on
ranks, for tasks and actors placed with .options(placement_group=pg, bundle_index=i)."""

from .. import _prism
from .._remote import ensure_init, remote


class PlacementGroup:
    """A handle to a placement group: .id, .bundle_specs, .wait(timeout_seconds)."""

    def __init__(self, pg_id, bundles=None):
        self.id = pg_id
        self.bundle_specs = bundles or []

    def ready(self):
        """An ObjectRef that is ready (its value: this group) once the group is created:
        for prism.get and prism.wait beside other refs (Ray's pg.ready())."""
        return _ready_check.options(placement_group=self).remote(self)

    def wait(self, timeout_seconds=30):
        """True once the group is created; False after timeout_seconds, or if it was removed."""
        return _prism.wait_placement_group(self.id, int(timeout_seconds * 1000))

    @property
    def bundle_count(self):
        return len(self.bundle_specs)

    def __reduce__(self):
        return PlacementGroup, (self.id, self.bundle_specs)

    def __repr__(self):
        return f"PlacementGroup({self.id})"


class PlacementGroupSchedulingStrategy:
    """Ray's scheduling_strategy=PlacementGroupSchedulingStrategy(pg, bundle_index)."""

    def __init__(self, placement_group, placement_group_bundle_index=-1):
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index


def _ready_check(pg):
    return pg


_ready_check = remote(num_cpus=0)(_ready_check)


def placement_group(bundles, strategy="PACK", name="", lifetime=None):
    """Reserves `bundles` (a list of {resource: amount}) with PACK, SPREAD, STRICT_PACK or
    STRICT_SPREAD. Does not wait: call .wait() or get .ready(). A group lives until it is
    removed or the job ends, so lifetime "detached" (Ray: outlive the driver) changes
    nothing in one MPI job. Raises ValueError for a bad strategy or lifetime,
    ResourceError for bundles no rank can hold."""
    if lifetime not in (None, "detached"):
        raise ValueError(f"prism.util.placement_group: lifetime must be None or 'detached', not {lifetime!r}")
    if not bundles:
        raise ValueError("prism.util.placement_group: bundles must not be empty")
    ensure_init()
    bundles = [{k: float(v) for k, v in b.items()} for b in bundles]
    return PlacementGroup(_prism.create_placement_group(bundles, strategy, name), bundles)


def remove_placement_group(pg):
    _prism.remove_placement_group(pg.id)


def placement_group_table(placement_group=None):
    """Ray's table of placement groups: {id: {placement_group_id, name, bundles: {index:
    resources}, bundles_to_node_id: {index: rank}, strategy, state}}, or one group's entry."""
    table = {}
    for g in _prism.list_placement_groups():
        table[g["placement_group_id"]] = {
            "placement_group_id": g["placement_group_id"], "name": g["name"], "strategy": g["strategy"],
            "state": g["state"], "bundles": dict(enumerate(g["bundles"])),
            "bundles_to_node_id": dict(enumerate(g["bundle_ranks"]))}
    if placement_group is None:
        return table
    return table.get(placement_group.id, {"placement_group_id": placement_group.id, "state": "REMOVED"})


def get_placement_group(name):
    """The placement group named `name`. Raises ValueError if there is none."""
    pg_id = _prism.placement_group_id_by_name(name)
    if not pg_id:
        raise ValueError(f"prism: no placement group named {name!r}")
    return PlacementGroup(pg_id)
