#pragma once
// Where a new replica goes, without the runtime (unit-tested with made-up node lists).
//
// Replicas go to the worker ranks (rank 0 too only when no worker rank is alive: a
// one-rank job, or every worker rank lost): to a rank that can hold the replica now, else
// to one that can at all (the replica then waits there, STARTING, until resources free
// up), the one with the fewest of Serve's replicas first. A rank the state API shows DEAD
// (lost under mpirun --enable-recovery) is never chosen: an actor pinned there would never
// start.

#include <map>
#include <string>
#include <vector>

#include "prism/state.h"

namespace prism::serve::internal {

/// The rank for a new replica needing `resources`, given the job's ranks (`nodes`, from
/// state::ListNodes) and Serve's live replicas per rank (`ours`); -1 when no live rank can
/// ever hold it, with the reason (what each live rank offers) in `why`.
int PickReplicaRank(const std::vector<state::NodeState>& nodes, const std::map<int, int>& ours,
                    const std::map<std::string, double>& resources, std::string& why);

}  // namespace prism::serve::internal
