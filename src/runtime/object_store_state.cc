// The object store's state on the public surface (prism/state.h): each rank's capacity,
// usage and spilling. A rank's store is its own, so the head does not know them: the
// caller reads its own rank's in place and asks every other rank with a task pinned there
// that takes no CPU (it runs even while the rank's CPUs are busy with the work it watches).
#include <string>
#include <vector>

#include "prism/api.h"
#include "prism/remote.h"
#include "prism/scheduling_strategy.h"
#include "prism/state.h"
#include "prism/task_caller.h"

namespace prism_object_store_state {
prism::state::ObjectStoreState PrismObjectStoreState() {
  return prism::state::GetLocalObjectStore();
}
}  // namespace prism_object_store_state
PRISM_REMOTE(prism_object_store_state::PrismObjectStoreState);

namespace prism::state {

ObjectStoreState GetLocalObjectStore() {
  return internal::RequireCore("state::GetLocalObjectStore").LocalObjectStore();
}

std::vector<ObjectStoreState> ListObjectStores(int64_t timeout_ms) {
  auto& core = internal::RequireCore("state::ListObjectStores");
  const int world = core.WorldSize();
  const int self = core.Rank();
  std::vector<ObjectRef<ObjectStoreState>> asked(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    if (r == self) continue;
    asked[static_cast<size_t>(r)] = Task(prism_object_store_state::PrismObjectStoreState)
                                        .SetResource("CPU", 0)
                                        .SetSchedulingStrategy(NodeAffinitySchedulingStrategy{r, false})
                                        .SetName("state::ListObjectStores")
                                        .Remote();
  }
  std::vector<ObjectStoreState> out(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    out[static_cast<size_t>(r)] =
        r == self ? core.LocalObjectStore() : *Get(asked[static_cast<size_t>(r)], timeout_ms);
  }
  return out;
}

}  // namespace prism::state
