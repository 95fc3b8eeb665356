// The in-process cluster: several ranks in one process, no MPI, the whole public API.
#include "prism/platform/in_process.h"

#include <gtest/gtest.h>

#include <boost/archive/binary_oarchive.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "prism/api.h"
#include "prism/platform/channel.h"
#include "prism/platform/communicator.h"
#include "prism/platform/invoke.h"
#include "prism/platform/placement.h"
#include "prism/platform/put.h"

namespace {

int IpRank() { return prism::GetRuntimeContext().GetRank(); }
std::vector<double> IpMake(int n, double x) { return std::vector<double>(static_cast<size_t>(n), x); }
double IpSum(std::vector<double> v) { return std::accumulate(v.begin(), v.end(), 0.0); }
int IpFib(int n) {
  if (n < 2) return n;
  auto a = prism::Task(IpFib).Remote(n - 1);
  auto b = prism::Task(IpFib).Remote(n - 2);
  return *a.Get() + *b.Get();
}
std::string IpKvRoundTrip(std::string key) {
  prism::kv::Put(key, "from rank " + std::to_string(IpRank()));
  return *prism::kv::Get(key);
}

int IpPublish(std::string channel, int n) {
  for (int i = 0; i < n; ++i) prism::platform::Publish(channel, prism::platform::ToBytes(i));
  return IpRank();
}

class IpCounter {
 public:
  static IpCounter* Create(int start) { return new IpCounter{start}; }
  int Add(int x) { return value += x; }
  int Where() { return IpRank(); }
  int value;
};

// A tree whose nodes keep their children in a std::vector: two nesting levels per generation.
struct IpTree {
  std::vector<IpTree> kids;
  template <class A>
  void serialize(A& ar, unsigned) {
    ar & kids;
  }
};
// A list linked by shared_ptrs: two levels per link (the node, the shared_ptr).
struct IpLink {
  std::shared_ptr<IpLink> next;
  template <class A>
  void serialize(A& ar, unsigned) {
    ar & next;
  }
};
IpTree IpChain(int generations) {
  IpTree root;
  IpTree* node = &root;
  for (int i = 1; i < generations; ++i) node = &node->kids.emplace_back();
  return root;
}
int IpGenerations(IpTree tree) {
  int n = 1;
  for (const IpTree* node = &tree; !node->kids.empty(); node = &node->kids.front()) ++n;
  return n;
}

PRISM_REMOTE(IpRank, IpMake, IpSum, IpFib, IpKvRoundTrip, IpPublish, IpCounter::Create, &IpCounter::Add,
             &IpCounter::Where, IpChain, IpGenerations);

auto OnRank(int rank) {
  return prism::Task(IpRank).SetResource("rank:" + std::to_string(rank), 0.01);
}

TEST(InProcessCluster, TasksRunOnTheRankTheyWerePlacedOn) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  EXPECT_TRUE(prism::IsInitialized());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(*OnRank(r).Remote().Get(10000), r);
  EXPECT_EQ(prism::GetRuntimeContext().GetRank(), 0);  // the driver
  EXPECT_EQ(prism::GetRuntimeContext().GetWorldSize(), 3);
  EXPECT_EQ(prism::state::ListNodes().size(), 3u);
  EXPECT_EQ(prism::ClusterResources().at("CPU"), 6);
}

TEST(InProcessCluster, ObjectStoreCapacityAndUsageArePublic) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .object_store_memory = 64 << 20});
  EXPECT_EQ(prism::ClusterResources().at("object_store_memory"), 3.0 * (64 << 20));
  EXPECT_EQ(prism::AvailableResources().at("object_store_memory"), 3.0 * (64 << 20));
  const auto before = prism::state::ListObjectStores();
  ASSERT_EQ(before.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(before[r].rank, r);
    EXPECT_EQ(before[r].capacity_bytes, 64u << 20);
    EXPECT_EQ(before[r].spilled_bytes_total, 0u);
  }
  // 2 MiB made on rank 1 and pulled to the driver: both stores hold it.
  auto made = prism::Task(IpMake).SetResource("rank:1", 0.01).Remote(1 << 18, 0.5);
  ASSERT_EQ(made.Get(10000)->size(), size_t{1} << 18);
  const auto after = prism::state::ListObjectStores();
  // At least the 2 MiB (not before + 2 MiB: a small object counted in `before`, such as a
  // state call's reply, may be freed by then; CI saw 168 bytes go).
  EXPECT_GE(after[1].used_bytes, size_t{2} << 20);
  EXPECT_GE(after[0].used_bytes, size_t{2} << 20);
  EXPECT_GE(after[0].peak_used_bytes, after[0].used_bytes);
  EXPECT_EQ(prism::state::GetLocalObjectStore().rank, 0);
}

TEST(InProcessCluster, LargeObjectsMoveBetweenRanks) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .num_cpus = 1});
  const int n = 1 << 18;  // 2 MiB: far above the inline limit, so it is pulled
  auto made = prism::Task(IpMake).SetResource("rank:1", 0.01).Remote(n, 0.5);
  auto sum = prism::Task(IpSum).SetResource("rank:2", 0.01).Remote(made);
  EXPECT_EQ(*sum.Get(10000), n * 0.5);
  EXPECT_EQ(made.Get(10000)->size(), static_cast<size_t>(n));  // and on the driver's rank
}

TEST(InProcessCluster, PutWrittenStoresTheBytesTheCallerWritesInPlace) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 1});
  // A vector of 2 MiB written in place (what Serializer<std::vector<double>> writes), then
  // read by a task on another rank and on the driver's.
  const std::vector<double> value(1 << 18, 0.5);
  const prism::internal::Buffer reference = prism::internal::Serialize(value);
  auto ref = prism::platform::PutWritten<std::vector<double>>(reference.size(), [&](prism::internal::Writer& w) {
    prism::internal::Serializer<std::vector<double>>::Write(w, value);
  });
  EXPECT_EQ(*prism::Task(IpSum).SetResource("rank:1", 0.01).Remote(ref).Get(10000), (1 << 18) * 0.5);
  EXPECT_EQ(*ref.Get(10000), value);
  // Bytes that are not a T: the Get says so (a SerializationError), nothing crashes.
  auto bad = prism::platform::PutWritten<std::vector<double>>(0, [](prism::internal::Writer& w) { w.Pod<uint8_t>(7); });
  EXPECT_THROW(bad.Get(10000), prism::SerializationError);
}

TEST(InProcessCluster, ActorsLiveOnTheirRank) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  auto counter = prism::Actor(IpCounter::Create).SetResource("rank:1", 0.01).Remote(10);
  EXPECT_EQ(*counter.Task(&IpCounter::Where).Remote().Get(10000), 1);
  counter.Task(&IpCounter::Add).Remote(1);
  EXPECT_EQ(*counter.Task(&IpCounter::Add).Remote(2).Get(10000), 13);
}

TEST(InProcessCluster, SpreadPlacementGroupUsesDistinctRanks) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  auto pg = prism::CreatePlacementGroup({"spread", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                                         prism::PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(pg.Wait(10));
  std::set<int> ranks;
  for (int b = 0; b < 3; ++b) ranks.insert(*prism::Task(IpRank).SetPlacementGroup(pg, b).Remote().Get(10000));
  EXPECT_EQ(ranks.size(), 3u);
  prism::RemovePlacementGroup(pg.GetID());
}

TEST(InProcessCluster, BundleLocationsSayWhereEachBundleLanded) {
  prism::platform::InProcessCluster cluster({.num_ranks = 4, .num_cpus = 1, .ranks_per_node = 2});
  auto pg = prism::CreatePlacementGroup({"", {{{"CPU", 1}}, {{"CPU", 1}}}, prism::PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(pg.Wait(10));
  auto where = prism::platform::BundleLocations(pg);
  ASSERT_EQ(where.size(), 2u);
  EXPECT_NE(where[0].node_id, where[1].node_id) << "STRICT_SPREAD: one bundle per node";
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(where[b].node_id, "node-" + std::to_string(where[b].rank / 2));
    EXPECT_EQ(*prism::Task(IpRank).SetPlacementGroup(pg, b).Remote().Get(10000), where[b].rank);
  }
  prism::RemovePlacementGroup(pg.GetID());
  EXPECT_TRUE(prism::platform::BundleLocations(pg).empty());
  EXPECT_THROW(prism::platform::BundleLocations(prism::PlacementGroup()), prism::Error);
}

TEST(InProcessCluster, ChannelsPushMessagesInOrderFromEveryRank) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  prism::platform::Channel reports("reports");
  EXPECT_THROW(prism::platform::Channel("reports"), prism::Error) << "names are job-wide";
  std::vector<prism::ObjectRef<int>> done;
  for (int r = 0; r < 3; ++r) {
    done.push_back(prism::Task(IpPublish).SetResource("rank:" + std::to_string(r), 0.01)
                       .Remote(std::string("reports"), 50));
  }
  std::map<int, std::vector<int>> by_rank;
  for (int i = 0; i < 150; ++i) {
    auto m = reports.Next(10000);
    ASSERT_TRUE(m) << "message " << i << " did not come";
    by_rank[m->from_rank].push_back(prism::platform::FromBytes<int>(m->bytes));
  }
  ASSERT_EQ(by_rank.size(), 3u);
  for (auto& [rank, got] : by_rank) {
    std::vector<int> want(50);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(got, want) << "from rank " << rank << ": in order, none lost";
  }
  EXPECT_FALSE(reports.Next(0));
  prism::Get(done, 10000);
}

TEST(InProcessCluster, MessagesToAClosedChannelAreDroppedAndListed) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  { prism::platform::Channel gone("gone"); }
  prism::Task(IpPublish).SetResource("rank:1", 0.01).Remote(std::string("gone"), 1).Get(10000);
  bool listed = false;
  for (const auto& e : prism::state::ListErrors()) listed |= e.type == "CHANNEL_MESSAGE_DROPPED";
  EXPECT_TRUE(listed);
  prism::platform::Channel again("gone");  // the name is free again
}

TEST(Platform, InvokeByNameAndBytes) {
  EXPECT_EQ(prism::platform::RegisteredName(IpSum), "IpSum");
  EXPECT_THROW(prism::platform::RegisteredName(+[](int x) { return x; }), prism::Error);
  EXPECT_EQ(prism::platform::Invoke<double>("IpSum", std::vector<double>{1, 2, 3.5}), 6.5);
  EXPECT_THROW(prism::platform::Invoke<double>("NoSuchFunction", 1), prism::Error);
  EXPECT_THROW(prism::platform::Invoke<double>("IpSum"), prism::Error);  // one argument missing
  auto bytes = prism::platform::ToBytes(std::vector<double>{1, 2});
  EXPECT_EQ(prism::platform::FromBytes<std::vector<double>>(bytes), (std::vector<double>{1, 2}));
  EXPECT_THROW(prism::platform::FromBytes<std::vector<double>>(bytes + "x"), prism::SerializationError);
}

TEST(InProcessCluster, NestedTasksAndTheKvWorkFromAnyRank) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 1});
  EXPECT_EQ(*prism::Task(IpFib).Remote(10).Get(30000), 55);  // blocked tasks give their CPU back
  EXPECT_EQ(*prism::Task(IpKvRoundTrip).SetResource("rank:1", 0.01).Remote(std::string("k")).Get(10000),
            "from rank 1");
  EXPECT_EQ(prism::kv::Get("k"), "from rank 1");
}

TEST(InProcessCluster, HugeResourceAmountsAreRejectedNotOverflowed) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  // 1e18 CPUs once overflowed the fixed-point units and ran six such tasks at once on 3 CPUs.
  EXPECT_THROW(prism::Task(IpRank).SetResource("CPU", 1e18).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(IpRank).SetResource("CPU", 9.3e14).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::CreatePlacementGroup({"", {{{"CPU", 1e18}}}, prism::PlacementStrategy::PACK}),
               prism::Error);
  EXPECT_THROW(prism::platform::InProcessCluster({.num_ranks = 1, .num_cpus = 1e18}), prism::Error);
}

TEST(InProcessCluster, TooDeepValuesFailTheCallNotTheRank) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 1});
  const int legit = prism::kMaxValueDepth / 2, too_deep = prism::kMaxValueDepth;  // generations
  auto on_rank_1 = [](auto f) { return prism::Task(f).SetResource("rank:1", 0.01); };
  EXPECT_EQ(*on_rank_1(IpGenerations).Remote(IpChain(legit)).Get(10000), legit);
  EXPECT_EQ(IpGenerations(*prism::Get(prism::Put(IpChain(legit)))), legit);

  {  // The reported case: Put of a list 30,000 links long overflowed the driver's stack.
    IpLink head;
    IpLink* node = &head;
    for (int i = 1; i < 30000; ++i) node = (node->next = std::make_shared<IpLink>()).get();
    EXPECT_THROW(prism::Put(head), prism::SerializationError);
    std::shared_ptr<IpLink> next = std::move(head.next);  // ~IpLink would recurse 30,000 deep
    while (next) next = std::move(next->next);
  }
  try {  // A too-deep argument is refused by Remote, on the caller, before anything travels.
    on_rank_1(IpGenerations).Remote(IpChain(too_deep));
    ADD_FAILURE() << "a too-deep argument was submitted";
  } catch (const prism::SerializationError& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 1000 levels"), std::string::npos) << e.what();
  }
  try {  // A task whose result is too deep fails with the error; its rank carries on.
    on_rank_1(IpChain).Remote(too_deep).Get(10000);
    ADD_FAILURE() << "a too-deep result was returned";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.OriginalType(), "prism::SerializationError") << e.what();
    EXPECT_EQ(e.Rank(), 1);
  }
  {  // Argument bytes of a too-deep value (written without the limit) reach a task: it fails.
    std::ostringstream os;
    {
      boost::archive::binary_oarchive ar(os, boost::archive::no_header);
      ar << IpChain(too_deep);
    }
    prism::internal::TaskRequest request;
    request.function = prism::platform::RegisteredName(IpGenerations);
    request.resources = {{"rank:1", 0.01}};
    request.max_retries = 0;
    prism::internal::Writer(request.args.emplace_back().value).Str(os.str());
    prism::ObjectRef<int> ref(prism::internal::RequireCore("test").Submit(std::move(request)),
                              prism::ObjectRef<int>::Adopt{});
    try {
      ref.Get(10000);
      ADD_FAILURE() << "a task read a too-deep argument";
    } catch (const prism::TaskError& e) {
      EXPECT_EQ(e.OriginalType(), "prism::SerializationError") << e.what();
      EXPECT_NE(e.OriginalMessage().find("cannot deserialize"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(*OnRank(1).Remote().Get(10000), 1);
  EXPECT_EQ(*on_rank_1(IpGenerations).Remote(IpChain(legit)).Get(10000), legit);
}

TEST(InProcessCluster, CommunicatorsNeedAnMpiJobAndSaySo) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  try {
    prism::platform::Communicator::Create("group", {0, 1});
    ADD_FAILURE() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun or srun"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(prism::platform::Communicator().valid());
  EXPECT_THROW(prism::platform::Communicator().Duplicate(), prism::Error);
}

TEST(InProcessCluster, OneRuntimePerProcess) {
  {
    prism::platform::InProcessCluster cluster({.num_ranks = 2});
    EXPECT_THROW(prism::platform::InProcessCluster second({.num_ranks = 2}), prism::RuntimeError);
    EXPECT_THROW(prism::Init(), prism::RuntimeError);
  }
  EXPECT_FALSE(prism::IsInitialized());
  EXPECT_THROW(prism::platform::InProcessCluster bad({.num_ranks = 0}), prism::Error);
  prism::platform::InProcessCluster again({.num_ranks = 1});  // a new one after the first ended
  EXPECT_EQ(*prism::Task(IpRank).Remote().Get(10000), 0);
}

}  // namespace
