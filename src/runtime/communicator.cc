// platform::Communicator: group communicators made with MPI_Comm_create_group on a private
// copy of MPI_COMM_WORLD, under a creation tag the head hands out per key
// (common/head_calls.h CommunicatorTag, head/communicator_tags.h).
#include "prism/platform/communicator.h"

#include <mutex>
#include <set>
#include <utility>

#include "common/check.h"
#include "common/head_calls.h"
#include "prism/errors.h"
#include "prism/internal/core_api.h"
#include "runtime/communicator_service.h"

namespace prism::internal {
namespace {
std::mutex g_parent_mu;
MPI_Comm g_parent = MPI_COMM_NULL;

MPI_Comm Parent() {
  std::lock_guard<std::mutex> lock(g_parent_mu);
  return g_parent;
}
}  // namespace

void OpenCommunicatorService() {
  MPI_Comm parent = MPI_COMM_NULL;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &parent) != MPI_SUCCESS) {
    throw RuntimeError("prism: MPI_Comm_dup(MPI_COMM_WORLD) failed at Init");
  }
  MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  std::lock_guard<std::mutex> lock(g_parent_mu);
  g_parent = parent;
}

void CloseCommunicatorService() {
  // Not freed: MPI_Finalize, which follows, releases it, and a group being created on
  // another thread may still use it.
  std::lock_guard<std::mutex> lock(g_parent_mu);
  g_parent = MPI_COMM_NULL;
}

}  // namespace prism::internal

namespace prism::platform {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

bool MpiRunning() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

std::string MpiErrorText(int code) { return internal::MpiErrorText(code); }

std::string Communicator::Describe() const {
  return "communicator \"" + key_ + "\" (world ranks " + RankList(world_ranks_) + ", member " +
         std::to_string(rank_) + ")";
}

Communicator::Communicator(MPI_Comm comm, std::string key, std::vector<int> world_ranks)
    : comm_(comm), key_(std::move(key)), world_ranks_(std::move(world_ranks)) {
  MPI_Comm_rank(comm_, &rank_);
}

Communicator Communicator::Create(const std::string& key, const std::vector<int>& world_ranks) {
  const std::string what = "prism::platform::Communicator::Create(\"" + key + "\", world ranks " +
                           RankList(world_ranks) + ")";
  internal::CoreApi& core = internal::RequireCore("platform::Communicator::Create");
  MPI_Comm parent = internal::Parent();
  if (parent == MPI_COMM_NULL || !MpiRunning()) {
    throw Error(what + ": communicators need an MPI job; launch the program with mpirun or "
                "srun (an InProcessCluster or a program started on its own has no MPI)");
  }
  if (key.empty()) throw Error(what + ": the key is empty; name the group (e.g. its run id)");
  const int world = core.WorldSize(), me = core.Rank();
  if (world_ranks.empty()) throw Error(what + ": the group has no ranks");
  std::vector<int> bad, repeated;
  std::set<int> seen;
  for (int r : world_ranks) {
    if (r < 0 || r >= world) bad.push_back(r);
    if (!seen.insert(r).second) repeated.push_back(r);
  }
  if (!bad.empty()) {
    throw Error(what + ": ranks " + RankList(bad) + " are not ranks of this job (0.." +
                std::to_string(world - 1) + ")");
  }
  if (!repeated.empty()) {
    throw Error(what + ": ranks " + RankList(repeated) + " appear more than once; list each "
                "member once");
  }
  if (!seen.count(me)) {
    throw Error(what + ": this rank (" + std::to_string(me) + ") is not in the group; only "
                "members may create it");
  }
  const int tag = internal::CallHead<internal::CommunicatorTag>(
      core, {key, static_cast<int>(world_ranks.size())});

  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_group(parent, &world_group);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Group_incl(world_group, static_cast<int>(world_ranks.size()), world_ranks.data(), &group);
  }
  // Collective over the members only: blocks until all of them call it.
  if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(parent, group, tag, &comm);
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS || comm == MPI_COMM_NULL) {
    throw Error(what + ": MPI_Comm_create_group failed: " +
                (rc != MPI_SUCCESS ? MpiErrorText(rc) : "no communicator returned"));
  }
  // Errors as return codes (inherited from the parent): callers turn them into exceptions.
  return Communicator(comm, key, world_ranks);
}

Communicator Communicator::Duplicate() const {
  if (comm_ == MPI_COMM_NULL) throw Error("prism::platform::Communicator::Duplicate of an empty communicator");
  if (!MpiRunning()) throw Error("prism::platform::Communicator::Duplicate after MPI ended (prism::Shutdown)");
  MPI_Comm dup = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(comm_, &dup);
  if (rc != MPI_SUCCESS) {
    throw Error("prism::platform::Communicator::Duplicate(\"" + key_ + "\"): MPI_Comm_dup failed: " +
                MpiErrorText(rc));
  }
  return Communicator(dup, key_, world_ranks_);
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), key_(std::move(other.key_)),
      world_ranks_(std::move(other.world_ranks_)), rank_(std::exchange(other.rank_, -1)),
      abandoned_(std::exchange(other.abandoned_, false)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Free();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    key_ = std::move(other.key_);
    world_ranks_ = std::move(other.world_ranks_);
    rank_ = std::exchange(other.rank_, -1);
    abandoned_ = std::exchange(other.abandoned_, false);
  }
  return *this;
}

Communicator::~Communicator() { Free(); }

void Communicator::Free() {
  if (comm_ != MPI_COMM_NULL && !abandoned_ && MpiRunning()) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace prism::platform
