"""Utilities over the core API: ActorPool, placement groups, the state API."""

from .actor_pool import ActorPool
from .placement_group import (PlacementGroup, PlacementGroupSchedulingStrategy, get_placement_group,
                              placement_group, placement_group_table, remove_placement_group)
from . import scheduling_strategies, state

__all__ = ["ActorPool", "PlacementGroup", "PlacementGroupSchedulingStrategy", "placement_group",
           "remove_placement_group", "get_placement_group", "placement_group_table", "scheduling_strategies",
           "state"]
