"""Ray's ray.util.scheduling_strategies: where a task or actor runs, given as
.options(scheduling_strategy=...): "DEFAULT", "SPREAD" (across ranks) or a
PlacementGroupSchedulingStrategy."""

from .placement_group import PlacementGroupSchedulingStrategy

__all__ = ["PlacementGroupSchedulingStrategy"]
