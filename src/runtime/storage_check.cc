// platform::CheckStorageShared (prism/platform/storage.h): probe files both ways between
// the calling rank and each rank it checks. A file the caller wrote that a rank cannot see,
// or one a rank wrote that the caller cannot, means `dir` is not one directory for both:
// a node-local disk, a private /tmp, or another mount namespace.
#include "prism/platform/storage.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "prism/api.h"
#include "prism/errors.h"
#include "prism/remote.h"
#include "prism/runtime_context.h"

namespace prism::platform::detail {

std::string ProbeFile(const std::string& dir, const std::string& id, int rank) {
  return dir + "/.prism-probe-" + id + "-rank" + std::to_string(rank);
}

std::string ThisHost() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? host : "?";
}

std::string RankAndHost(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " (host " + host + ")";
}

/// A probe on rank `rank`: checks that the caller's probe file is in `dir`, then writes its
/// own. Returns {what it could not do ("" if nothing), this host}.
std::vector<std::string> PrismProbeSharedStorage(std::string dir, std::string id, int caller,
                                                 std::string caller_host, int rank) {
  const std::string host = ThisHost();
  const std::string where = RankAndHost(rank, host);
  if (!std::filesystem::exists(ProbeFile(dir, id, caller))) {
    return {where + " cannot see the probe file " + RankAndHost(caller, caller_host) + " wrote in " + dir,
            host};
  }
  std::ofstream probe(ProbeFile(dir, id, rank));
  probe << host << "\n";
  probe.close();
  if (!probe) {
    return {where + " sees " + dir + " but cannot write into it (" + std::strerror(errno) + ")", host};
  }
  return {"", host};
}

}  // namespace prism::platform::detail

PRISM_REMOTE(prism::platform::detail::PrismProbeSharedStorage);

namespace prism::platform {

void CheckStorageShared(const std::string& dir, const StorageCheck& about, std::vector<int> ranks) {
  using detail::ProbeFile;
  if (!IsInitialized()) return;  // no cluster: this process is the only reader
  const RuntimeContext context = GetRuntimeContext();
  const int me = context.GetRank();
  if (ranks.empty()) {
    for (int r = 0; r < context.GetWorldSize(); ++r) ranks.push_back(r);
  }
  std::erase(ranks, me);
  if (ranks.empty()) return;

  static thread_local std::mt19937_64 random{std::random_device{}()};
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(random()));
  struct Cleanup {
    const std::string& dir;
    const std::string id;
    const std::vector<int>& ranks;
    int me;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(ProbeFile(dir, id, me), ec);
      for (int r : ranks) std::filesystem::remove(ProbeFile(dir, id, r), ec);
    }
  } cleanup{dir, id, ranks, me};

  const std::string host = detail::ThisHost();
  {
    std::ofstream probe(ProbeFile(dir, id, me));
    probe << host << "\n";
    probe.close();
    if (!probe) {
      throw Error(about.library + ": cannot write a probe file into " + about.setting + " " + dir + " (" +
                  std::strerror(errno) + "): check that the directory exists and is writable");
    }
  }
  std::vector<ObjectRef<std::vector<std::string>>> probes;
  for (int r : ranks) {
    probes.push_back(Task(detail::PrismProbeSharedStorage)
                         .SetResource("CPU", 0)
                         .SetResource("rank:" + std::to_string(r), 0.001)
                         .Remote(dir, std::string(id), me, host, r));
  }
  const std::string fix = ". Put " + about.setting +
                          " on a file system every node mounts (your cluster's scratch or home file "
                          "system)" +
                          (about.how_to_set.empty() ? "" : ", through " + about.how_to_set) + ".";
  const std::string head = about.library + ": " + about.setting + " is not shared: ";
  for (size_t i = 0; i < probes.size(); ++i) {
    const std::vector<std::string> answer = *probes[i].Get(about.timeout_ms);
    const std::string& problem = answer.at(0);
    if (!problem.empty()) throw Error(head + problem + fix);
    if (!std::filesystem::exists(ProbeFile(dir, id, ranks[i]))) {
      throw Error(head + detail::RankAndHost(me, host) + " cannot see the probe file " +
                  detail::RankAndHost(ranks[i], answer.at(1)) + " wrote in " + dir + fix);
    }
  }
}

}  // namespace prism::platform
