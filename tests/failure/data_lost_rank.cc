// A Data pipeline whose worker rank is lost mid-run under `mpirun --enable-recovery`
// (issue 44): every row still comes back, once, correct.
//
//   prism_data_lost_rank_test tasks|actors
//
// kRows rows in kBlocks blocks (Range), through
//   * tasks:  Map(Square) -> MapBatches(Widen), fused into one task per block: a Map on the
//             last rank kills its own process at its kKillAtRow-th row (its fourth block);
//   * actors: the same, then MapBatches(ActorClass<Tagger>, 3 actors): the actor on the
//             last rank kills its own process in its fourth call;
// Widen makes each block 200 KiB, so blocks stay in the store of the rank that made them
// (not inlined into their task's result), and the driver reads them slowly: finished blocks
// wait on the rank that dies.
// the first to claim the KV key "data_lost_rank/killed" kills (so a rerun does not). The
// driver reads every row (IterBatches) and checks each id 0..kRows-1 once, in order, with
// sq = id * id, the pad Widen adds and (actors) the rank of the actor that tagged it. It prints "data_lost_rank ok: ..." with
// the time from the kill to the last row, and Shutdown ends the job with status 0.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "prism/api.h"
#include "prism/data.h"
#include "prism/kv.h"
#include "prism/runtime_context.h"

namespace {

namespace data = prism::data;

constexpr int64_t kRows = 6000;
constexpr int64_t kBlocks = 30;
constexpr int64_t kKillAtRow = 700;  // on the last rank: in its fourth block
constexpr int64_t kPad = 128;
constexpr const char* kKilledKey = "data_lost_rank/killed";

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsVictim() {
  const auto& ctx = prism::GetRuntimeContext();
  return ctx.GetRank() == ctx.GetWorldSize() - 1;
}

/// The first caller job-wide (on the last rank) records the time and kills its process.
void MaybeKill() {
  if (!IsVictim()) return;
  if (prism::kv::Put(kKilledKey, std::to_string(WallMs()), /*overwrite=*/false)) return;  // done before
  ::kill(::getpid(), SIGKILL);
}

data::Row Square(const data::Row& row) {
  const int64_t id = std::get<int64_t>(row.at("id"));
  static int64_t seen = 0;  // this process's rows
  if (++seen % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ~a block
  // In the tasks mode only (the driver's KV key says which).
  if (seen == kKillAtRow && IsVictim() && prism::kv::Get("data_lost_rank/mode").value_or("") == "tasks") {
    MaybeKill();
  }
  return {{"id", id}, {"sq", id * id}};
}

/// Adds kPad copies of each row's id: 1 KiB a row, so a block (200 KiB) stays in the store
/// of the rank that made it instead of travelling with its task's result.
data::Block Widen(const data::Block& batch) {
  std::vector<int64_t> pad;
  pad.reserve(static_cast<size_t>(batch.num_rows()) * kPad);
  for (int64_t id : batch.GetColumn("id").Values<int64_t>()) pad.insert(pad.end(), kPad, id);
  return batch.AddColumn("pad", data::Column::FromVector(std::move(pad), {kPad}));
}

/// Tags each row with its actor's rank; the actor on the last rank dies in its fourth call.
class Tagger {
 public:
  data::Block operator()(const data::Block& batch) {
    if (++calls_ == 4) MaybeKill();
    const int64_t rank = prism::GetRuntimeContext().GetRank();
    std::vector<int64_t> ranks(static_cast<size_t>(batch.num_rows()), rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return batch.AddColumn("actor_rank", data::Column::FromVector(std::move(ranks)));
  }

 private:
  int calls_ = 0;
};

PRISM_REMOTE(Square, Widen);

int Fail(const std::string& what) {
  std::fprintf(stderr, "data_lost_rank FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "tasks";
  const bool actors = mode == "actors";
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const int victim = world - 1;
  if (world < 3) return Fail("needs 3 ranks or more");
  prism::kv::Put("data_lost_rank/mode", mode);

  data::Dataset ds = data::Range(kRows, kBlocks).Map(Square).MapBatches(Widen, 1024);
  if (actors) ds = ds.MapBatches(data::ActorClass<Tagger>(), {.batch_size = 1024, .concurrency = 3});
  const auto started = std::chrono::steady_clock::now();
  std::vector<bool> seen(kRows, false);
  int64_t rows = 0, next = 0;
  std::vector<int64_t> actor_ranks(world, 0);
  try {
    for (const data::Block& batch : ds.IterBatches(500)) {
      // A slow consumer: finished blocks wait in the store (some on the rank that dies).
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      auto ids = batch.GetColumn("id").Values<int64_t>();
      auto sq = batch.GetColumn("sq").Values<int64_t>();
      for (int64_t i = 0; i < batch.num_rows(); ++i, ++rows) {
        const int64_t id = ids[i];
        if (id < 0 || id >= kRows) return Fail("row id " + std::to_string(id) + " out of range");
        if (seen[id]) return Fail("row " + std::to_string(id) + " came twice");
        if (id != next) return Fail("row " + std::to_string(id) + " came where " + std::to_string(next) + " was due");
        seen[id] = true;
        ++next;
        if (sq[i] != id * id) return Fail("row " + std::to_string(id) + ": sq " + std::to_string(sq[i]));
        if (actors) {
          const int64_t r = batch.GetColumn("actor_rank").Values<int64_t>()[i];
          if (r < 0 || r >= world) return Fail("row " + std::to_string(id) + ": actor rank " + std::to_string(r));
          ++actor_ranks[r];
        }
        auto pad = batch.GetColumn("pad").Values<int64_t>().subspan(static_cast<size_t>(i * kPad), kPad);
        if (pad.front() != id || pad.back() != id) return Fail("row " + std::to_string(id) + ": pad wrong");
      }
    }
  } catch (const std::exception& e) {
    return Fail(std::string("the pipeline failed: ") + e.what());
  }
  const int64_t done_ms = WallMs();
  const auto total_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  if (rows != kRows) return Fail(std::to_string(rows) + " rows, not " + std::to_string(kRows));
  auto killed = prism::kv::Get(kKilledKey);
  if (!killed) return Fail("nothing ran on rank " + std::to_string(victim) + " to kill it");
  const int64_t killed_ms = std::stoll(*killed);
  std::string stats = ds.Stats().ToString();
  std::printf("data_lost_rank ok (%s): %lld rows correct, once each, in order; rank %d killed mid-run, "
              "the last row %lld ms after the kill (the run took %lld ms)\n",
              mode.c_str(), static_cast<long long>(rows), victim, static_cast<long long>(done_ms - killed_ms),
              static_cast<long long>(total_ms));
  if (actors) {
    std::printf("rows by actor rank:");
    for (int r = 0; r < world; ++r) std::printf(" %d:%lld", r, static_cast<long long>(actor_ranks[r]));
    std::printf("\n");
  }
  std::printf("%s\n", stats.c_str());
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
