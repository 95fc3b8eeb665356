// Serialization fast paths, Boost types, nested refs and the wire codec.
#include <gtest/gtest.h>

#include <boost/archive/binary_oarchive.hpp>
#include <map>
#include <sstream>
#include <unordered_map>

#include "prism/object_ref.h"
#include "prism/remote.h"
#include "prism/runtime_env.h"
#include "common/protocol.h"
#include "transport/codec.h"

namespace prism::internal {
namespace {

struct Point {
  double x, y;
};
struct Record {
  std::string name;
  std::vector<int> values;
  std::map<std::string, double> extra;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & name & values & extra;
  }
  bool operator==(const Record& o) const {
    return name == o.name && values == o.values && extra == o.extra;
  }
};

template <typename T>
T RoundTrip(const T& v) {
  Buffer b = Serialize(v);
  return Deserialize<T>(b.data(), b.size());
}

TEST(SerializationTest, FastPathsAreExactAndCompact) {
  EXPECT_EQ(RoundTrip(42), 42);
  EXPECT_EQ(Serialize(42).size(), sizeof(int));
  Point p = RoundTrip(Point{1.5, -2});
  EXPECT_EQ(p.x, 1.5);
  EXPECT_EQ(RoundTrip(std::string("hello")), "hello");
  std::vector<double> v(1000, 3.25);
  EXPECT_EQ(RoundTrip(v), v);
  EXPECT_EQ(Serialize(v).size(), 8 + 1000 * sizeof(double));
  EXPECT_EQ(RoundTrip(std::vector<std::string>{"a", "", "ccc"}),
            (std::vector<std::string>{"a", "", "ccc"}));
}

TEST(SerializationTest, BoostTypesAndContainers) {
  Record r{"r", {1, 2, 3}, {{"k", 0.5}}};
  EXPECT_EQ(RoundTrip(r), r);
  std::map<int, std::string> m{{1, "one"}, {2, "two"}};
  EXPECT_EQ(RoundTrip(m), m);
  EXPECT_EQ(RoundTrip(std::vector<Record>{r, r}), (std::vector<Record>{r, r}));
}

TEST(SerializationTest, StdOptionalAndTupleWorkAtTopLevelAndNested) {
  EXPECT_EQ(RoundTrip(std::optional<std::string>("x")), std::optional<std::string>("x"));
  EXPECT_EQ(RoundTrip(std::optional<std::string>()), std::nullopt);
  auto t = std::tuple<int, std::string, bool>(7, "seven", true);
  EXPECT_EQ(RoundTrip(t), t);
  std::map<std::string, std::optional<Record>> nested{{"a", Record{"r", {1}, {}}}, {"b", std::nullopt}};
  EXPECT_EQ(RoundTrip(nested), nested);
  std::vector<std::tuple<int, std::optional<double>>> rows{{1, 0.5}, {2, std::nullopt}};
  EXPECT_EQ(RoundTrip(rows), rows);
}

TEST(SerializationTest, TypeMismatchAndTruncationAreErrorsNotCrashes) {
  Buffer b = Serialize(std::string("hello"));
  EXPECT_THROW(Deserialize<std::string>(b.data(), b.size() - 1), SerializationError);
  EXPECT_THROW(Deserialize<int>(b.data(), b.size()), SerializationError);
  Buffer r = Serialize(Record{"x", {1}, {}});
  EXPECT_THROW(Deserialize<Record>(r.data(), 3), SerializationError);
}

TEST(SerializationTest, TraitsRejectPointersAndAcceptSerializableTypes) {
  static_assert(kIsSerializable<int>);
  static_assert(kIsSerializable<Record>);
  static_assert(kIsSerializable<std::map<std::string, std::vector<Record>>>);
  static_assert(!kIsSerializable<int*>);
  static_assert(!kIsSerializable<std::vector<int*>>);
  static_assert(kIsSerializable<ObjectRef<int>>);
}

TEST(SerializationTest, NestedObjectRefsAreRecorded) {
  // No runtime: ObjectRefs are inert ids, but serializing them must report what they hold.
  std::vector<ObjectRef<int>> refs{ObjectRef<int>(ObjectId(11)), ObjectRef<int>(ObjectId(12))};
  ContainedRefScope scope;
  Buffer b = Serialize(refs);
  auto ids = scope.Take();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], ObjectId(12));
  auto back = Deserialize<std::vector<ObjectRef<int>>>(b.data(), b.size());
  EXPECT_EQ(back[0].ID(), ObjectId(11));
}

// ---- Nesting depth -------------------------------------------------------------------------

// A tree whose nodes keep their children in a std::vector: two levels per generation.
struct Tree {
  std::vector<Tree> kids;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & kids;
  }
};

/// A chain of `generations` nodes, built and taken apart without recursion (a 30,000-deep
/// ~Tree would itself recurse 30,000 frames).
struct Chain {
  explicit Chain(int generations) {
    Tree* node = &root;
    for (int i = 1; i < generations; ++i) node = &node->kids.emplace_back();
  }
  ~Chain() {
    std::vector<Tree> level = std::move(root.kids);
    while (!level.empty()) level = std::move(level.front().kids);
  }
  Tree root;
};

int Generations(const Tree& tree) {
  int n = 1;
  for (const Tree* node = &tree; !node->kids.empty(); node = &node->kids.front()) ++n;
  return n;
}

// A linked list of shared_ptrs: also two levels per link (the node, the shared_ptr).
struct Link {
  std::shared_ptr<Link> next;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & next;
  }
};

struct LinkChain {
  explicit LinkChain(int links) {
    Link* node = &head;
    for (int i = 1; i < links; ++i) node = (node->next = std::make_shared<Link>()).get();
  }
  ~LinkChain() {
    std::shared_ptr<Link> next = std::move(head.next);
    while (next) next = std::move(next->next);
  }
  Link head;
};

int Links(const Link& head) {
  int n = 1;
  for (const Link* node = &head; node->next; node = node->next.get()) ++n;
  return n;
}

TEST(SerializationDepthTest, ValuesNestedUpToTheLimitRoundTrip) {
  Chain chain(kMaxValueDepth / 2);  // its last node's (empty) vector is level kMaxValueDepth
  Buffer b = Serialize(chain.root);
  Chain back(1);
  back.root = Deserialize<Tree>(b.data(), b.size());
  EXPECT_EQ(Generations(back.root), static_cast<int>(kMaxValueDepth / 2));

  LinkChain links(kMaxValueDepth / 2);
  Buffer lb = Serialize(links.head);
  LinkChain links_back(1);
  links_back.head = Deserialize<Link>(lb.data(), lb.size());
  EXPECT_EQ(Links(links_back.head), static_cast<int>(kMaxValueDepth / 2));
}

TEST(SerializationDepthTest, DeeperValuesAreASerializationErrorNotAStackOverflow) {
  auto expect_refused = [](const auto& value, const std::string& what_value) {
    try {
      Serialize(value);
      ADD_FAILURE() << what_value << " was serialized";
    } catch (const SerializationError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("cannot serialize a value nested more than 1000 levels"), std::string::npos)
          << what;
      EXPECT_NE(what.find("Flatten"), std::string::npos) << what;
    }
  };
  const int over = kMaxValueDepth / 2 + 1;
  expect_refused(Chain(over).root, "a tree one generation too deep");
  expect_refused(LinkChain(over).head, "a list one link too long");
  // The reported crash: Boost overflowed the 8 MiB stack and killed the process (from about
  // 20,000 links; a vector tree from about 58,000 generations).
  expect_refused(LinkChain(30000).head, "a list of 30,000 links");
  expect_refused(Chain(30000).root, "a tree 30,000 generations deep");
}

TEST(SerializationDepthTest, BytesOfATooDeepValueAreASerializationErrorNotAStackOverflow) {
  // Bytes from a writer without the limit (Boost's own archive writes the same format):
  // reading them must stop at the limit too.
  auto unchecked_bytes = [](const Tree& tree) {
    std::ostringstream os;
    {
      boost::archive::binary_oarchive ar(os, boost::archive::no_header);
      ar << tree;
    }
    Buffer framed;
    Writer(framed).Str(os.str());
    return framed;
  };
  {
    Chain legit(kMaxValueDepth / 2);  // the same bytes Prism writes: readable
    Buffer b = unchecked_bytes(legit.root);
    EXPECT_EQ(b.size(), Serialize(legit.root).size());
    Chain back(1);
    back.root = Deserialize<Tree>(b.data(), b.size());
    EXPECT_EQ(Generations(back.root), static_cast<int>(kMaxValueDepth / 2));
  }
  // (Not 30,000 here: Boost's own archive would overflow the stack writing them.)
  for (int generations : {static_cast<int>(kMaxValueDepth / 2) + 1, static_cast<int>(kMaxValueDepth)}) {
    Chain chain(generations);
    Buffer b = unchecked_bytes(chain.root);
    try {
      Chain back(1);
      back.root = Deserialize<Tree>(b.data(), b.size());
      ADD_FAILURE() << "a value " << generations << " generations deep was deserialized";
    } catch (const SerializationError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot deserialize a value nested more than 1000 levels"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(RemoteNamesTest, SplitsMacrosMembersAndOverloads) {
  auto names = SplitRemoteNames("Plus, PRISM_FUNC(F, int, double), &Counter::Add, Counter::Create");
  EXPECT_EQ(names, (std::vector<std::string>{"Plus", "F(int,double)", "Counter::Add",
                                             "Counter::Create"}));
}

TEST(MessageCodecTest, BatchRoundTripKeepsEveryField) {
  TaskSpec spec;
  spec.id = ObjectId::Make(2, 77);
  spec.Edit().function = "Add";
  spec.Edit().name = "my add";
  TaskSpecArg value;
  value.value = std::make_shared<const Buffer>(Serialize(5));
  TaskSpecArg ref;
  ref.is_ref = true;
  ref.ref = ObjectId(9);
  spec.args = {value, ref};
  spec.Edit().demand = ResourceSet({{"CPU", 0.5}, {"GPU", 1}});
  spec.Edit().retry_exceptions = true;
  spec.attempt = 2;
  TaskDone done;
  done.id = spec.id;
  done.ok = false;
  done.error = ErrorInfo::Exception("std::logic_error", "bad", "my add", 2);
  Buffer batch;
  EncodeMessage(SubmitTask{spec}, batch);
  EncodeMessage(done, batch);
  EncodeMessage(Heartbeat{}, batch);
  auto msgs = DecodeBatch(batch.data(), batch.size());
  ASSERT_EQ(msgs.size(), 3u);
  const auto& s = *std::get<SubmitTask>(msgs[0]).spec;
  EXPECT_EQ(s.id, spec.id);
  EXPECT_EQ(s.options->name, "my add");
  EXPECT_EQ(s.args[1].ref, ObjectId(9));
  EXPECT_EQ(Deserialize<int>(s.args[0].value->data(), s.args[0].value->size()), 5);
  EXPECT_EQ(s.options->demand, spec.options->demand);
  EXPECT_TRUE(s.options->retry_exceptions);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(std::get<TaskDone>(msgs[1]).error.Render(),
            "std::logic_error: bad (in task my add on rank 2)");
  EXPECT_THROW(DecodeBatch(batch.data(), batch.size() - 3), SerializationError);
}

TEST(MessageCodecTest, StrategyNamespaceAndCallRetriesTravelAndUnknownStrategiesAreRejected) {
  TaskSpec spec;
  spec.id = ObjectId(3);
  spec.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 2, true};
  spec.Edit().actor_namespace = "colors";
  spec.Edit().max_task_retries = -1;
  Buffer batch;
  EncodeMessage(SubmitTask{spec}, batch);
  auto msgs = DecodeBatch(batch.data(), batch.size());
  ASSERT_EQ(msgs.size(), 1u);
  const auto& s = *std::get<SubmitTask>(msgs[0]).spec;
  EXPECT_EQ(s.options->strategy.kind, SchedulingStrategy::Kind::kNodeAffinity);
  EXPECT_EQ(s.options->strategy.rank, 2);
  EXPECT_TRUE(s.options->strategy.soft);
  EXPECT_EQ(s.options->actor_namespace, "colors");
  EXPECT_EQ(s.options->max_task_retries, -1);

  Buffer bad;
  spec.Edit().strategy.kind = static_cast<SchedulingStrategy::Kind>(9);
  EncodeMessage(SubmitTask{spec}, bad);
  EXPECT_THROW(DecodeBatch(bad.data(), bad.size()), SerializationError);
}

TEST(MessageCodecTest, TasksWithEqualOptionsShareOneDecodedCopy) {
  auto make = [](uint64_t id, const std::string& function, double cpus) {
    TaskSpec spec;
    spec.id = ObjectId(id);
    spec.Edit().function = spec.Edit().name = function;
    spec.Edit().demand = ResourceSet({{"CPU", cpus}});
    return spec;
  };
  Buffer batch;
  for (const auto& spec : {make(1, "f", 1), make(2, "f", 1), make(3, "f", 2), make(4, "g", 2),
                           make(5, "f", 2), make(6, "g", 2)}) {
    EncodeMessage(SubmitTask{spec}, batch);
  }
  auto msgs = DecodeBatch(batch.data(), batch.size());
  ASSERT_EQ(msgs.size(), 6u);
  auto options = [&](size_t i) { return std::get<SubmitTask>(msgs[i]).spec->options; };
  EXPECT_EQ(options(0), options(1)) << "equal options: one copy";
  EXPECT_NE(options(1), options(2));
  EXPECT_NE(options(2), options(3));
  EXPECT_EQ(options(4), options(2)) << "callers taking turns keep their copies";
  EXPECT_EQ(options(5), options(3));
  EXPECT_EQ(options(0)->demand, ResourceSet({{"CPU", 1}}));
  EXPECT_EQ(options(2)->demand, ResourceSet({{"CPU", 2}}));
  EXPECT_EQ(options(3)->function, "g");
}

TEST(TaskSpecTest, RecentOptionsKeepsTheNewestFourNewestFirst) {
  RecentOptions recent;
  auto named = [](const std::string& f) {
    auto o = std::make_shared<TaskOptions>();
    o->function = f;
    return std::shared_ptr<const TaskOptions>(std::move(o));
  };
  auto find = [&](const std::string& f) { return recent.Find([&](const TaskOptions& o) { return o.function == f; }); };
  EXPECT_EQ(find("a"), nullptr);
  for (const char* f : {"a", "b", "c", "d"}) recent.Add(named(f));
  auto a = find("a");  // the oldest, now the newest
  ASSERT_NE(a, nullptr);
  recent.Add(named("e"));  // drops the oldest: b
  EXPECT_EQ(find("b"), nullptr);
  EXPECT_EQ(find("a"), a);
  for (const char* f : {"c", "d", "e"}) EXPECT_NE(find(f), nullptr) << f;
  recent.Clear();
  EXPECT_EQ(find("a"), nullptr);
}

TEST(TaskSpecTest, EditCopiesSharedOptionsFirst) {
  TaskSpec a;
  EXPECT_EQ(a.options, DefaultTaskOptions());
  a.Edit().function = "f";
  EXPECT_EQ(DefaultTaskOptions()->function, "") << "the defaults never change";
  TaskSpec b = a;
  EXPECT_EQ(a.options, b.options);
  b.Edit().max_retries = 0;
  EXPECT_NE(a.options, b.options);
  EXPECT_EQ(a.options->max_retries, 3);
  EXPECT_EQ(b.options->function, "f");
  const TaskOptions* mine = b.options.get();
  b.Edit().max_retries = 1;
  EXPECT_EQ(b.options.get(), mine) << "its only user edits in place";
}

TEST(ObjectIdTest, UsableAsAStringAsRayCodeDoes) {
  ObjectId id(0xab);
  std::string s = id;
  EXPECT_EQ(s, "00000000000000ab");
  EXPECT_EQ("id " + id, "id 00000000000000ab");
  EXPECT_EQ(id + std::string("!"), "00000000000000ab!");
  std::ostringstream os;
  os << id;
  EXPECT_EQ(os.str(), s);
  EXPECT_EQ(id, ObjectId(0xab)) << "still compares as an id";
}

TEST(RuntimeEnvTest, OnlyEnvVarsAndOnlyTheJobsEnvironmentForATask) {
  RuntimeEnv env;
  EXPECT_TRUE(env.Empty());
  env.Set("env_vars", std::unordered_map<std::string, std::string>{{"PRISM_TEST_RUNTIME_ENV", "1"}});
  EXPECT_TRUE(env.Contains("env_vars"));
  EXPECT_EQ((env.Get<std::map<std::string, std::string>>("env_vars").at("PRISM_TEST_RUNTIME_ENV")), "1");
  using Vars = std::map<std::string, std::string>;
  EXPECT_THROW(env.Set("pip", Vars{}), Error);
  EXPECT_THROW(env.Get<Vars>("conda"), Error);
  unsetenv("PRISM_TEST_RUNTIME_ENV");
  try {
    RequireJobEnvironment(env, "SetRuntimeEnv");
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PRISM_TEST_RUNTIME_ENV=\"1\" differs from the job's (unset)"), std::string::npos)
        << e.what();
  }
  setenv("PRISM_TEST_RUNTIME_ENV", "1", 1);
  EXPECT_NO_THROW(RequireJobEnvironment(env, "SetRuntimeEnv")) << "the job's own environment";
  unsetenv("PRISM_TEST_RUNTIME_ENV");
  EXPECT_TRUE(env.Remove("env_vars"));
  EXPECT_FALSE(env.Remove("env_vars"));
  EXPECT_THROW(env.Get<Vars>("env_vars"), Error) << "not set";
}

TEST(MessageCodecTest, ErrorKindsTravelAsAnEnumAndUnknownKindsAreRejected) {
  Buffer batch;
  ObjectReady lost;
  lost.failed = true;
  lost.error = ErrorInfo::Of(ErrorKind::kObjectLost, "gone");
  EncodeMessage(lost, batch);
  HeadReply reply;
  reply.ok = false;
  reply.error_kind = ErrorKind::kResourceError;
  EncodeMessage(reply, batch);
  auto msgs = DecodeBatch(batch.data(), batch.size());
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(std::get<ObjectReady>(msgs[0]).error.kind, ErrorKind::kObjectLost);
  EXPECT_EQ(std::get<ObjectReady>(msgs[0]).error.type, "ObjectLost");
  EXPECT_EQ(std::get<HeadReply>(msgs[1]).error_kind, ErrorKind::kResourceError);

  Buffer bad;
  lost.error.kind = static_cast<ErrorKind>(200);  // a kind this binary does not know
  EncodeMessage(lost, bad);
  EXPECT_THROW(DecodeBatch(bad.data(), bad.size()), SerializationError);
}

}  // namespace
}  // namespace prism::internal
