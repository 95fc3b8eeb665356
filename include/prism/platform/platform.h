#pragma once
// The platform: the one door through which Prism's libraries (prism::train, and Tune,
// Data, Serve, RL to come) use the core. A library includes <prism/api.h> (tasks, actors,
// objects, placement groups, kv::, state::) and this header, and nothing from src/: if it
// needs more, this surface grows, with a test against the in-process cluster.
//
//   invoke.h      RegisteredName(f), Invoke<R>(name, args...): run a user's function by
//                 its registered name on any rank; ToBytes / FromBytes: Prism's values as bytes
//   channel.h     Channel / Publish: a push stream from any rank to the one that opened it
//   communicator.h Communicator: an MPI communicator over any ranks, made once per group
//                 under a key and duplicated per stream of collectives (no tag ranges)
//   put.h         PutWritten<T>(hint, write): a Put whose serialized bytes the caller
//                 writes in place (a large value assembled from pieces, copied once)
//   placement.h   BundleLocations(pg): the rank and node each bundle landed on
//   poll.h        PollPause: the pause of a poll loop (spin, then yield, then short sleeps)
//   preemption.h  PreemptionGuard, PreemptionHook: SIGUSR1/SIGTERM for libraries
//   panel.h       Panel, PublishPanel: a library's table on the job's dashboard
//   storage.h     CheckStorageShared: does every rank see a directory as this one does
//                 (results on shared storage, not on a node-local disk)
//   in_process.h  InProcessCluster: N ranks in one process without MPI, for unit tests
//   worker_group.h WorkerGroup: N workers reserved by a placement group, a loop on each,
//                 their reports and ends pushed to the driver, stop, abort, restart
//
// Under it, every call reaches the runtime through one interface, internal::CoreApi
// (prism/internal/core_api.h): tasks and objects, every control-plane call (ControlCall),
// channels, and where the caller runs. An MPI job's node manager implements it, and so does
// each rank of an InProcessCluster.

#include "prism/platform/channel.h"
#include "prism/platform/communicator.h"
#include "prism/platform/in_process.h"
#include "prism/platform/invoke.h"
#include "prism/platform/panel.h"
#include "prism/platform/placement.h"
#include "prism/platform/poll.h"
#include "prism/platform/put.h"
#include "prism/platform/preemption.h"
#include "prism/platform/storage.h"
#include "prism/platform/worker_group.h"
