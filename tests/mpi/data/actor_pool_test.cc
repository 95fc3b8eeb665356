// Dataset::MapBatches with a callable class in an actor pool, and UDF retries, end to end:
// the constructor runs once per actor (counted in the KV store, so across ranks), the pool
// grows to max under load and stays at min with one block, the output equals a function
// MapBatches of the same logic, exceptions name the operator, dropping the iterator kills
// the actors, and retry_exceptions reruns a block whose UDF failed. Runs under mpirun -n 1
// and -n 3 (mpi_test_main.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "prism/api.h"
#include "prism/data.h"
#include "prism/kv.h"
#include "prism/state.h"
#include "../../common/test_util.h"
#include "../../common/data_test_util.h"

namespace {

using namespace prism::data;
using ::testing::HasSubstr;
using prism_test::AllIds;
using prism_test::ErrorOf;
using prism_test::Iota;

std::atomic<int64_t> g_constructions{0};

// Adds `offset` to "id"; records each construction under kv "pool-test/<tag>/".
class AddOffset {
 public:
  AddOffset(std::string tag, int64_t offset, int delay_ms) : offset_(offset), delay_ms_(delay_ms) {
    const int64_t n = g_constructions.fetch_add(1);
    prism::kv::Put("pool-test/" + tag + "/" + std::to_string(getpid()) + "-" + std::to_string(n), "1");
  }
  Block operator()(const Block& batch) const {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    std::vector<int64_t> v;
    for (int64_t x : batch.GetColumn("id").Values<int64_t>()) v.push_back(x + offset_);
    return batch.AddColumn("id", Column::FromVector(std::move(v)));
  }

 private:
  int64_t offset_;
  int delay_ms_;
};

Block AddHundred(Block batch) {
  std::vector<int64_t> v;
  for (int64_t x : batch.GetColumn("id").Values<int64_t>()) v.push_back(x + 100);
  return batch.AddColumn("id", Column::FromVector(std::move(v)));
}
Row Negate(Row r) {
  r["id"] = -std::get<int64_t>(r["id"]);
  return r;
}

class BrokenModel {
 public:
  explicit BrokenModel(std::string path) { throw std::runtime_error("cannot load " + path); }
  Block operator()(const Block& batch) { return batch; }
};

class ThrowsAt42 {
 public:
  ThrowsAt42() = default;
  Block operator()(const Block& batch) {
    for (int64_t x : batch.GetColumn("id").Values<int64_t>()) {
      if (x == 42) throw std::invalid_argument("bad row 42");
    }
    return batch;
  }
};

// Rows 0..n-1 in "id", with the retry case in "case": tasks of an earlier, failed execution
// may still be running on other ranks, so each case keys its state apart.
Dataset RetryCase(int64_t n, int64_t blocks) {
  static int64_t next = 0;
  const int64_t c = ++next;
  std::vector<Row> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back({{"id", i}, {"case", c}});
  return FromItems(rows, blocks);
}
// The state key of a batch: its case and first id.
std::string FirstCallKey(const Block& batch) {
  return "retry-test/" + std::to_string(batch.GetColumn("case").Values<int64_t>()[0]) + "/" +
         std::to_string(batch.GetColumn("id").Values<int64_t>()[0]);
}

// Fails its first call on each block (state in the KV store: the retry may run elsewhere).
Block FailFirstCall(Block batch) {
  const int64_t first = batch.GetColumn("id").Values<int64_t>()[0];
  if (!prism::kv::Put(FirstCallKey(batch), "1", /*overwrite=*/false)) {
    throw std::runtime_error("first call on the block starting at " + std::to_string(first));
  }
  return batch;
}
class FailFirstClass {
 public:
  FailFirstClass() = default;
  Block operator()(const Block& batch) {
    const int64_t first = batch.GetColumn("id").Values<int64_t>()[0];
    if (!prism::kv::Put(FirstCallKey(batch), "1", false)) {
      throw std::runtime_error("first call on the block starting at " + std::to_string(first));
    }
    return batch;
  }
};

// Its actor dies (ExitActor: as if its rank were lost) on the first call on each block.
class DiesOnFirstCall {
 public:
  DiesOnFirstCall() = default;
  Block operator()(const Block& batch) {
    if (!prism::kv::Put(FirstCallKey(batch), "1", false)) prism::ExitActor();
    return batch;
  }
};

PRISM_REMOTE(AddHundred, Negate, FailFirstCall);

int64_t Constructions(const std::string& tag) {
  return static_cast<int64_t>(prism::kv::List("pool-test/" + tag + "/").size());
}

// The pool's actors (MapActor) still alive.
int LiveMapActors() {
  int alive = 0;
  for (const auto& a : prism::state::ListActors()) {
    if (a.class_name.find("MapActor") != std::string::npos && a.state != "DEAD") ++alive;
  }
  return alive;
}

bool EventuallyNoLiveMapActors() {
  for (int i = 0; i < 100; ++i) {
    if (LiveMapActors() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

const OperatorStats& PoolStats(const DatasetStats& stats) {
  for (const OperatorStats& op : stats.operators) {
    if (op.actors_started > 0) return op;
  }
  throw std::runtime_error("no actor pool in the stats:\n" + stats.ToString());
}

TEST(ActorPool, OutputEqualsAFunctionMapBatchesAndTheConstructorRunsOncePerActor) {
  Dataset source = Range(400, 20);
  Dataset by_class = source.MapBatches(ActorClass<AddOffset>(std::string("equal"), int64_t{100}, 0),
                                       {.batch_size = 7, .concurrency = {2, 2}})
                         .Map(Negate);
  Dataset by_function = source.MapBatches(AddHundred, 7).Map(Negate);
  std::vector<int64_t> expected = AllIds(by_function);
  ASSERT_EQ(expected.size(), 400u);
  EXPECT_EQ(AllIds(by_class), expected);

  DatasetStats stats = by_class.Stats();
  ASSERT_EQ(stats.operators.size(), 2u) << stats.ToString();
  EXPECT_EQ(stats.operators[0].name, "Range");
  // The function operator after the class runs in the same actor call.
  EXPECT_THAT(stats.operators[1].name, HasSubstr("MapBatches(AddOffset)->Map("));
  EXPECT_EQ(stats.operators[1].blocks, 20);
  EXPECT_EQ(stats.operators[1].actors_started, 2);
  EXPECT_EQ(stats.operators[1].peak_actors, 2);
  EXPECT_EQ(Constructions("equal"), 2);  // once per actor, not per block
  EXPECT_TRUE(EventuallyNoLiveMapActors());  // killed when the execution ended
}

TEST(ActorPool, GrowsToMaxUnderLoadAndNeverBeyond) {
  Dataset ds = Range(24, 24).MapBatches(ActorClass<AddOffset>(std::string("grow"), int64_t{0}, 150),
                                        {.batch_size = 64, .concurrency = {1, 3}});
  EXPECT_EQ(AllIds(ds).size(), 24u);
  const OperatorStats& pool = PoolStats(ds.Stats());
  EXPECT_EQ(pool.peak_actors, 3) << ds.Stats().ToString();
  EXPECT_EQ(pool.actors_started, 3);
  EXPECT_EQ(pool.peak_tasks_in_flight, 3);  // one call per actor at a time
  EXPECT_EQ(Constructions("grow"), 3);
}

TEST(ActorPool, StaysAtMinWithOneBlock) {
  Dataset ds = Range(10, 1).MapBatches(ActorClass<AddOffset>(std::string("one"), int64_t{1}, 50),
                                       {.batch_size = 4, .concurrency = {1, 4}});
  EXPECT_EQ(AllIds(ds), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  const OperatorStats& pool = PoolStats(ds.Stats());
  EXPECT_EQ(pool.actors_started, 1);
  EXPECT_EQ(pool.peak_actors, 1);
  EXPECT_EQ(Constructions("one"), 1);
}

TEST(ActorPool, AnExceptionInTheConstructorNamesTheOperator) {
  Dataset ds = Range(50, 5).MapBatches(ActorClass<BrokenModel>("/models/missing.pt"), {.concurrency = 1});
  std::string message = ErrorOf([&] { AllIds(ds); });
  EXPECT_THAT(message, HasSubstr("MapBatches(BrokenModel)"));
  EXPECT_THAT(message, HasSubstr("constructor failed"));
  EXPECT_THAT(message, HasSubstr("cannot load /models/missing.pt"));
  EXPECT_TRUE(EventuallyNoLiveMapActors());
}

TEST(ActorPool, AnExceptionInACallNamesTheOperatorAndBlock) {
  Dataset ds = Range(100, 10).MapBatches(ActorClass<ThrowsAt42>(), {.batch_size = 3, .concurrency = {1, 2}});
  std::string message = ErrorOf([&] { AllIds(ds); });
  EXPECT_THAT(message, HasSubstr("MapBatches(ThrowsAt42) failed on block 4"));
  EXPECT_THAT(message, HasSubstr("std::invalid_argument: bad row 42"));
  EXPECT_TRUE(EventuallyNoLiveMapActors());
}

TEST(ActorPool, DroppingTheIteratorKillsTheActors) {
  Dataset ds = Range(200, 40).MapBatches(ActorClass<AddOffset>(std::string("drop"), int64_t{0}, 100),
                                         {.concurrency = {2, 3}});
  {
    BatchIterator it = ds.IterBatches(5);
    ASSERT_TRUE(it.Next().has_value());
    EXPECT_GE(LiveMapActors(), 2);
  }
  EXPECT_TRUE(EventuallyNoLiveMapActors());
  EXPECT_LT(ds.Stats().operators.back().blocks, 40);
}

TEST(ActorPool, BadOptionsSayWhatIsWrong) {
  Dataset ds = Range(10);
  EXPECT_THAT(ErrorOf([&] { ds.MapBatches(ActorClass<ThrowsAt42>(), {.batch_size = 0}); }),
              HasSubstr("batch_size is 0"));
  EXPECT_THAT(ErrorOf([&] { ds.MapBatches(ActorClass<ThrowsAt42>(), {.concurrency = {0, 2}}); }),
              HasSubstr("at least 1 actor"));
  EXPECT_THAT(ErrorOf([&] { ds.MapBatches(ActorClass<ThrowsAt42>(), {.concurrency = {3, 2}}); }),
              HasSubstr("max must be >= min"));
  EXPECT_THAT(ErrorOf([&] { ds.Map(Negate, {.max_retries = -1}); }), HasSubstr("max_retries is -1"));
}

TEST(Retries, RetryExceptionsRerunsABlockWhoseUdfFailed) {
  const std::string name = prism::platform::RegisteredName(&FailFirstCall);
  // Without retry_exceptions: the first failure ends the execution, naming operator and block.
  std::string message = ErrorOf([&] { AllIds(RetryCase(60, 6).MapBatches(FailFirstCall, {.batch_size = 100})); });
  EXPECT_THAT(message, HasSubstr("MapBatches(" + name + ") failed on block"));
  EXPECT_THAT(message, HasSubstr("first call on the block"));

  Dataset retried = RetryCase(60, 6).MapBatches(FailFirstCall, {.batch_size = 100, .retry_exceptions = true});
  EXPECT_EQ(AllIds(retried), Iota(0, 60));
  EXPECT_EQ(retried.Stats().operators.back().retries, 6) << retried.Stats().ToString();

  // A list of types: only those are retried.
  EXPECT_EQ(AllIds(RetryCase(60, 6).MapBatches(
                FailFirstCall, {.batch_size = 100, .retry_exceptions = {"std::runtime_error"}})),
            Iota(0, 60));
  EXPECT_THAT(ErrorOf([&] {
                AllIds(RetryCase(60, 6).MapBatches(
                    FailFirstCall, {.batch_size = 100, .retry_exceptions = {"std::logic_error"}}));
              }),
              HasSubstr("first call on the block"));
  // max_retries = 0: nothing is retried, and the message says how often it ran.
  EXPECT_THAT(ErrorOf([&] {
                AllIds(RetryCase(60, 6).MapBatches(
                    FailFirstCall, {.batch_size = 100, .max_retries = 0, .retry_exceptions = true}));
              }),
              HasSubstr("after 1 attempts"));
}

TEST(Retries, AnActorPoolRetriesACallThatThrew) {
  Dataset ds = RetryCase(40, 8).MapBatches(ActorClass<FailFirstClass>(),
                                           {.concurrency = {1, 2}, .retry_exceptions = true});
  EXPECT_EQ(AllIds(ds), Iota(0, 40));
  EXPECT_EQ(PoolStats(ds.Stats()).retries, 8);

  Dataset no_retry = RetryCase(40, 8).MapBatches(ActorClass<FailFirstClass>(), {.concurrency = 1});
  EXPECT_THAT(ErrorOf([&] { AllIds(no_retry); }), HasSubstr("MapBatches(FailFirstClass) failed on block"));
}

TEST(Retries, ABlockWhoseActorDiedGoesToANewActor) {
  // max_retries (default 3) covers a dead actor without retry_exceptions, like a lost rank.
  Dataset ds = RetryCase(20, 4).MapBatches(ActorClass<DiesOnFirstCall>(), {.concurrency = 1});
  EXPECT_EQ(AllIds(ds), Iota(0, 20));
  const OperatorStats& pool = PoolStats(ds.Stats());
  EXPECT_EQ(pool.retries, 4) << ds.Stats().ToString();
  EXPECT_EQ(pool.actors_started, 5);  // the first, and one replacing each dead actor
  EXPECT_EQ(pool.peak_actors, 1);

  Dataset no_retry = RetryCase(20, 4).MapBatches(ActorClass<DiesOnFirstCall>(),
                                                 {.concurrency = 1, .max_retries = 0});
  EXPECT_THAT(ErrorOf([&] { AllIds(no_retry); }), HasSubstr("MapBatches(DiesOnFirstCall) failed on block"));
  EXPECT_TRUE(EventuallyNoLiveMapActors());
  prism::kv::Delete("retry-test/", /*by_prefix=*/true);
}

}  // namespace
