# After Ray's "Placement Groups" page, https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html (doc_code/placement_group_example.py).
import time
from pprint import pprint

# Import placement group APIs.
from prism.util.placement_group import (
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from prism.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from prism.util.state import list_nodes

# Initialize Ray.
import prism as ray

# Create a single node Ray cluster with 2 CPUs and 2 GPUs.
ray.init(num_cpus=2, num_gpus=2)

# Reserve a placement group of 1 bundle that reserves 1 CPU and 1 GPU.
pg = placement_group([{"CPU": 1, "GPU": 1}])

# Wait until placement group is created.
ray.get(pg.ready(), timeout=10)

# You can also use ray.wait.
ready, unready = ray.wait([pg.ready()], timeout=10)
assert len(ready) == 1 and unready == []

# You can look at placement group states using this API.
print(placement_group_table(pg))
assert placement_group_table(pg)["state"] == "CREATED"

# Cannot create this placement group because we
# cannot create a {"GPU": 2} bundle.
pending_pg = placement_group([{"CPU": 1}, {"GPU": 2}])
# This raises the timeout exception!
try:
    ray.get(pending_pg.ready(), timeout=1)
    created = True
except Exception as e:
    print(
        "Cannot create a placement group because "
        "{'GPU': 2} bundle cannot be created."
    )
    print(e)
    assert isinstance(e, ray.exceptions.GetTimeoutError), repr(e)
    created = False
# One node (one rank) has 2 GPUs, one of them reserved by pg: the group must wait. With more
# ranks every rank is a node of 2 GPUs (init's resources are each rank's), so it fits on another.
nodes = len(list_nodes())
assert created == (nodes > 1), (created, nodes)


@ray.remote(num_cpus=1)
class Actor:
    def __init__(self):
        pass

    def ready(self):
        pass


# Create an actor to a placement group.
actor = Actor.options(
    scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg,
    )
).remote()

# Verify the actor is scheduled.
ray.get(actor.ready.remote(), timeout=10)


@ray.remote(num_cpus=0, num_gpus=1)
class Actor:
    def __init__(self):
        pass

    def ready(self):
        return ray.get_gpu_ids()


# Create a GPU actor on the first bundle of index 0.
actor2 = Actor.options(
    scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg,
        placement_group_bundle_index=0,
    )
).remote()

# Verify that the GPU actor is scheduled.
gpu_ids = ray.get(actor2.ready.remote(), timeout=10)
assert len(gpu_ids) == 1, gpu_ids

# This API is asynchronous.
remove_placement_group(pg)

# Wait until placement group is killed.
time.sleep(1)
# Check that the placement group has died.
pprint(placement_group_table(pg))
assert placement_group_table(pg)["state"] == "REMOVED"

# Reserve a placement group of 2 bundles
# that have to be packed on the same node.
pg = placement_group([{"CPU": 1}, {"GPU": 1}], strategy="STRICT_PACK")
remove_placement_group(pg)

# Create a detached placement group that survives even after
# the job terminates.
pg = placement_group([{"CPU": 1}], lifetime="detached", name="global_name")
ray.get(pg.ready(), timeout=10)
remove_placement_group(pg)

# Create a placement group with a global name.
pg = placement_group([{"CPU": 1}], name="global_name")
ray.get(pg.ready(), timeout=10)

# Retrieve a placement group with a global name.
pg2 = ray.util.get_placement_group("global_name")
assert pg2.id == pg.id
assert placement_group_table(pg2)["state"] == "CREATED"

print("OK placement_groups")
