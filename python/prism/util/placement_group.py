"""Placement groups (Ray's ray.util.placement_group): bundles of resources reserved on
ranks, for tasks and actors placed with .options(placement_group=pg, bundle_index=i)."""

from .. import _prism


class PlacementGroup:
    """A handle to a placement group: .id, .bundle_specs, .wait(timeout_seconds)."""

    def __init__(self, pg_id, bundles=None):
        self.id = pg_id
        self.bundle_specs = bundles or []

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


def placement_group(bundles, strategy="PACK", name=""):
    """Reserves `bundles` (a list of {resource: amount}) with PACK, SPREAD, STRICT_PACK or
    STRICT_SPREAD. Does not wait: call .wait(). Raises ValueError for a bad strategy,
    ResourceError for bundles no rank can hold."""
    if not bundles:
        raise ValueError("prism.util.placement_group: bundles must not be empty")
    bundles = [{k: float(v) for k, v in b.items()} for b in bundles]
    return PlacementGroup(_prism.create_placement_group(bundles, strategy, name), bundles)


def remove_placement_group(pg):
    _prism.remove_placement_group(pg.id)


def get_placement_group(name):
    """The placement group named `name`. Raises ValueError if there is none."""
    pg_id = _prism.placement_group_id_by_name(name)
    if not pg_id:
        raise ValueError(f"prism: no placement group named {name!r}")
    return PlacementGroup(pg_id)
