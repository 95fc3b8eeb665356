// TorchTrainer with datasets: 2 workers on 3 ranks read their GetDatasetShard("train") of
// a Range dataset over 2 epochs (as torch batches). Each worker sees the same number of
// rows per epoch, and the shards of an epoch hold every row once. Each worker writes the
// ids it saw per epoch to a file in the run directory; the driver checks them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "prism/data/torch.h"
#include "prism/train.h"
#include "../../common/test_util.h"

namespace train = prism::train;
namespace data = prism::data;

namespace {

std::string FreshDir(const std::string& what) {
  std::string dir = prism_test::SharedTestDir() + "/prism-shard-test-" + what + "-" +
                    std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void ShardLoop(train::Config config) {
  const auto& ctx = train::GetContext();
  data::DataIterator shard = train::GetDatasetShard("train");
  for (int epoch = 1; epoch <= config.Get<int>("epochs", 2); ++epoch) {
    std::ofstream out(ctx.GetTrialDir() + "/ids-rank" + std::to_string(ctx.GetWorldRank()) +
                      "-epoch" + std::to_string(epoch));
    int64_t rows = 0;
    for (data::TorchBatch& batch : shard.IterTorchBatches(16)) {
      torch::Tensor ids = batch.at("id");
      for (int64_t i = 0; i < ids.size(0); ++i) out << ids[i].item<int64_t>() << "\n";
      rows += ids.size(0);
    }
    // Equal shards: the same number of rows everywhere, so nobody waits here for long.
    torch::Tensor counts = torch::tensor({static_cast<double>(rows)}, torch::kFloat64);
    ctx.GetCollective().AllReduce(counts, train::ReduceOp::kSum);
    train::Report({{"epoch", static_cast<double>(epoch)}, {"rows", counts.item<double>()}});
  }
}

void NoDatasetLoop(train::Config) { train::GetDatasetShard("validation"); }

PRISM_REMOTE(ShardLoop, NoDatasetLoop);

std::vector<int64_t> ReadIds(const std::string& file) {
  std::ifstream in(file);
  std::vector<int64_t> ids;
  for (int64_t x; in >> x;) ids.push_back(x);
  return ids;
}

TEST(TrainDatasets, EachWorkerReadsAnEqualShardOfEveryEpoch) {
  const std::string storage = FreshDir("shards");
  train::TorchTrainerOptions o;
  o.train_loop_config.Set("epochs", 2);
  o.scaling_config.num_workers = 2;
  o.run_config.name = "shards";
  o.run_config.storage_path = storage;
  o.run_config.verbose = false;
  o.datasets = {{"train", data::Range(1001, 13)}};
  train::Result result = train::TorchTrainer(ShardLoop, o).Fit();
  EXPECT_EQ(result.metrics.at("epoch"), 2);
  EXPECT_EQ(result.metrics.at("rows"), 1000);  // one row dropped to keep shards equal
  for (int epoch = 1; epoch <= 2; ++epoch) {
    std::vector<int64_t> a = ReadIds(result.path + "/ids-rank0-epoch" + std::to_string(epoch));
    std::vector<int64_t> b = ReadIds(result.path + "/ids-rank1-epoch" + std::to_string(epoch));
    EXPECT_EQ(a.size(), 500u) << "epoch " << epoch;
    EXPECT_EQ(b.size(), 500u) << "epoch " << epoch;
    std::set<int64_t> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    EXPECT_EQ(all.size(), 1000u) << "a row read twice in epoch " << epoch;
    EXPECT_GE(*all.begin(), 0);
    EXPECT_LE(*all.rbegin(), 1000);
  }
  std::filesystem::remove_all(storage);
}

TEST(TrainDatasets, AnUnknownNameSaysWhichTheTrainerHas) {
  const std::string storage = FreshDir("unknown");
  train::TorchTrainerOptions o;
  o.scaling_config.num_workers = 2;
  o.run_config.name = "unknown";
  o.run_config.storage_path = storage;
  o.run_config.verbose = false;
  o.datasets = {{"train", data::Range(10)}};
  try {
    train::TorchTrainer(NoDatasetLoop, o).Fit();
    FAIL() << "no error";
  } catch (const train::TrainingFailedError& e) {
    EXPECT_NE(std::string(e.what()).find("GetDatasetShard(\"validation\")"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("it has train"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(storage);
}

}  // namespace
