// A training worker's side: its context, Report, GetCheckpoint, PrepareModel (the DDP
// gradient reducer) and PrepareDataLoader.
#include <torch/csrc/autograd/engine.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "fs/durable_file.h"
#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/internal/json.h"
#include "prism/platform/invoke.h"
#include "prism/platform/worker_group.h"
#include "prism/remote.h"
#include "prism/train/collective.h"
#include "prism/train/session.h"
#include "train/worker.h"

namespace prism::train {

struct WorkerAccess {
  static TrainContext Make(const internal::WorkerSpec& spec, torch::Device device,
                           Collective* collective) {
    TrainContext c;
    c.world_rank_ = spec.world_rank;
    c.local_rank_ = spec.local_rank;
    c.world_size_ = static_cast<int>(spec.world_ranks.size());
    c.local_world_size_ = spec.local_world_size;
    c.node_rank_ = spec.node_rank;
    c.experiment_name_ = spec.experiment_name;
    c.trial_dir_ = spec.trial_dir;
    c.device_ = device;
    c.collective_ = collective;
    return c;
  }
};

namespace internal {
namespace {

// ---- Aborting a group ------------------------------------------------------------------

/// Set by the driver's WorkerGroup::Abort (a peer failed): every collective then throws.
/// Stopping (preemption) is WorkerContext::StopRequested, read at each Report.
struct GroupFlags {
  std::atomic<bool> aborted{false};
};

/// Thrown by Report to end the loop when the group stops (not a std::exception, so that
/// `catch (const std::exception&)` in the loop does not swallow it); RunWorker catches it.
struct StopTraining {};

// ---- The DDP gradient reducer ----------------------------------------------------------

/// Averages gradients across the group after each backward pass, the way torch's
/// DistributedDataParallel does: parameters go into buckets of at most `bucket_bytes` in
/// reverse registration order (roughly the order backward produces their gradients); a
/// bucket's all-reduce starts, on a communication thread, as soon as all its gradients are
/// in, while backward goes on; buckets are reduced in index order on every worker, so the
/// collectives always match. When backward ends (an autograd final callback), buckets
/// still waiting (parameters that got no gradient this time contribute zeros) are reduced
/// and every parameter's gradient becomes: what it held before this backward + the average.
class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  Reducer(std::vector<torch::Tensor> params, size_t bucket_bytes, std::unique_ptr<Collective> comm)
      : params_(std::move(params)), comm_(std::move(comm)) {
    size_t bytes = 0;
    for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
      const torch::Tensor& p = params_[i];
      const size_t size = static_cast<size_t>(p.numel()) * p.element_size();
      if (buckets_.empty() || bytes + size > bucket_bytes ||
          buckets_.back().dtype != p.scalar_type() || buckets_.back().device != p.device()) {
        buckets_.push_back(Bucket{});
        buckets_.back().dtype = p.scalar_type();
        buckets_.back().device = p.device();
        bytes = 0;
      }
      Bucket& b = buckets_.back();
      b.members.push_back(i);
      bytes += size;
    }
    slot_of_.assign(params_.size(), {});
    for (size_t bi = 0; bi < buckets_.size(); ++bi) {
      Bucket& b = buckets_[bi];
      int64_t offset = 0;
      for (int i : b.members) {
        slot_of_[i] = {static_cast<int>(bi), offset};
        offset += params_[i].numel();
      }
      b.flat = torch::zeros({offset}, torch::TensorOptions().dtype(b.dtype).device(b.device));
      b.local = torch::zeros_like(b.flat);
    }
    thread_ = std::thread([this] { CommLoop(); });
  }

  ~Reducer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void Attach() {
    std::weak_ptr<Reducer> weak = shared_from_this();
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].register_hook([weak, i](torch::Tensor grad) {
        if (auto self = weak.lock()) self->OnGradient(i, grad);
      });
    }
  }

 private:
  struct Bucket {
    torch::ScalarType dtype = torch::kFloat;
    torch::Device device = torch::kCPU;
    std::vector<int> members;  // parameter indices
    torch::Tensor flat;        // gradients in, averages out
    torch::Tensor local;       // this worker's gradients, kept for the write-back
    size_t ready = 0;          // gradients in, this backward
    bool done = false;         // reduced, this backward
  };
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;
  };

  void OnGradient(size_t i, const torch::Tensor& grad) {
    if (!in_backward_) {
      in_backward_ = true;
      seen_.assign(params_.size(), false);
      for (Bucket& b : buckets_) {
        b.ready = 0;
        b.done = false;
      }
      next_launch_ = 0;
      auto self = shared_from_this();
      torch::autograd::Engine::get_default_engine().queue_callback([self] { self->Finish(); });
    }
    if (seen_[i]) return;  // a second gradient for one parameter in one backward: summed by autograd already
    seen_[i] = true;
    const Slot& s = slot_of_[i];
    Bucket& b = buckets_[s.bucket];
    {
      torch::NoGradGuard no_grad;
      b.flat.narrow(0, s.offset, grad.numel()).copy_(grad.reshape({-1}));
    }
    ++b.ready;
    LaunchReady(false);
  }

  /// Starts, in index order, every bucket whose gradients are all in (or all of them).
  void LaunchReady(bool all) {
    while (next_launch_ < buckets_.size()) {
      Bucket& b = buckets_[next_launch_];
      if (!all && b.ready < b.members.size()) return;
      if (b.ready < b.members.size()) {  // parameters without a gradient this time count as 0
        torch::NoGradGuard no_grad;
        for (int i : b.members) {
          if (!seen_[i]) b.flat.narrow(0, slot_of_[i].offset, params_[i].numel()).zero_();
        }
      }
      b.local.copy_(b.flat);
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(next_launch_);
      }
      cv_.notify_all();
      ++next_launch_;
    }
  }

  void CommLoop() {
    for (;;) {
      size_t bi;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        bi = queue_.front();
        queue_.pop_front();
      }
      std::exception_ptr error;
      try {
        if (!failed_) comm_->AllReduce(buckets_[bi].flat, ReduceOp::kAverage);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (error && !failed_) failed_ = error;
        buckets_[bi].done = true;
      }
      done_cv_.notify_all();
    }
  }

  /// End of backward: reduce what is left, wait, write the averages into .grad.
  void Finish() {
    in_backward_ = false;
    LaunchReady(true);
    {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] {
        for (const Bucket& b : buckets_) {
          if (!b.done) return false;
        }
        return true;
      });
      if (failed_) std::rethrow_exception(failed_);
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Slot& s = slot_of_[i];
      const Bucket& b = buckets_[s.bucket];
      torch::Tensor& p = params_[i];
      auto avg = b.flat.narrow(0, s.offset, p.numel()).view(p.sizes());
      torch::Tensor& grad = p.mutable_grad();
      if (!grad.defined()) {
        grad = avg.clone();
      } else {
        grad.add_(avg - b.local.narrow(0, s.offset, p.numel()).view(p.sizes()));
      }
    }
  }

  std::vector<torch::Tensor> params_;
  std::unique_ptr<Collective> comm_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slot_of_;  // by parameter index
  // Backward thread only:
  bool in_backward_ = false;
  std::vector<bool> seen_;
  size_t next_launch_ = 0;
  // Shared with the communication thread:
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<size_t> queue_;
  std::exception_ptr failed_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- The worker's state ----------------------------------------------------------------

struct Worker {
  WorkerSpec spec;
  std::shared_ptr<GroupFlags> flags;
  // The group's communicator (groups of 2 or more): every collective runs on a Duplicate.
  platform::Communicator comm;
  std::unique_ptr<Collective> collective;
  TrainContext context;
  // Made with the group's before the loop runs: creating a communicator cannot be aborted,
  // so it must not wait on a worker that already failed in the loop.
  std::unique_ptr<Collective> reducer_collective;
  std::vector<std::shared_ptr<Reducer>> reducers;
  int64_t reports = 0;
  int cuda_device = -1;  // with use_gpu: the CUDA index of the GPU the worker's task holds
};

thread_local Worker* t_worker = nullptr;

Worker& Current(const char* what) {
  if (t_worker == nullptr) {
    throw Error(std::string("prism::train::") + what +
                " called outside a training worker: call it from the train_loop_per_worker "
                "that TorchTrainer runs");
  }
  return *t_worker;
}

CollectiveOptions OptionsFor(const Worker& w) {
  CollectiveOptions o;
  auto flags = w.flags;
  o.aborted = [flags] { return flags->aborted.load(); };
  return o;
}

/// A group of one: every collective is the identity, and no MPI is needed (a program run
/// without mpirun trains on one worker).
class SoloCollective : public Collective {
 public:
  int Rank() const override { return 0; }
  int Size() const override { return 1; }
  std::string Backend() const override { return "solo"; }
  void AllReduce(torch::Tensor&, ReduceOp) override {}
  void Broadcast(torch::Tensor&, int root) override {
    if (root != 0) throw Error("prism::train: Broadcast root " + std::to_string(root) + " in a group of 1");
  }
  std::vector<torch::Tensor> AllGather(const torch::Tensor& t) override { return {t.clone()}; }
  void Barrier() override {}
};

/// A collective of its own over the worker's group (every member makes its collectives in
/// the same order, so they duplicate the group's communicator together).
std::unique_ptr<Collective> MakeGroupCollective(const Worker& w) {
  if (w.spec.world_ranks.size() == 1) return std::make_unique<SoloCollective>();
  auto mpi = MakeMpiCollective(w.comm.Duplicate(), OptionsFor(w));
  if (!w.spec.use_gpu) return mpi;
  return MakeNcclCollective(*mpi, w.cuda_device, OptionsFor(w));
}

/// `v` for progress.csv, every bit kept (pandas and Python's float() read NaN and inf).
std::string CsvNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Where MakeTempCheckpointDir puts its directories (see checkpoint.cc).
bool UnderTempCheckpointRoot(const std::string& path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string root = std::string(tmp && *tmp ? tmp : "/tmp") + "/prism-checkpoints-";
  return path.rfind(root, 0) == 0;
}

/// Commits world rank 0's reported checkpoint into the run and returns where it went. A
/// checkpoint in MakeTempCheckpointDir's scratch that fails to commit is removed (it would
/// only fill TMPDIR: the run goes on from its newest committed checkpoint), and the error
/// says so; a directory of the caller's own is left where it was, and the error says that.
std::string CommitReported(const WorkerSpec& spec, const Checkpoint& checkpoint,
                           const Metrics& metrics) {
  try {
    CheckpointStore store(spec.trial_dir, spec.checkpoint_config);
    return store.Commit(checkpoint, metrics, /*move=*/true).checkpoint.path();
  } catch (const Error& e) {
    std::error_code ec;
    std::string where;
    if (!UnderTempCheckpointRoot(checkpoint.path())) {
      where = "the checkpoint directory " + checkpoint.path() + " is left as it was";
    } else if (std::filesystem::remove_all(checkpoint.path(), ec); ec) {
      where = "its scratch copy " + checkpoint.path() + " could not be removed (" + ec.message() +
              "): delete it by hand";
    } else {
      where = "its scratch copy " + checkpoint.path() + " was removed";
    }
    throw Error("prism::train: Report: " + std::string(e.what()) + "; " + where);
  }
}

}  // namespace

void AppendHistory(const std::string& trial_dir, const ReportRecord& r) {
  const auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // One JSON object a line, as Ray's result.json; a metric that is not finite is null.
  nlohmann::json line(r.metrics);
  line["training_iteration"] = r.iteration;
  line["attempt"] = r.attempt;
  line["timestamp"] = now;
  line["checkpoint_dir_name"] =
      r.checkpoint_path.empty() ? nlohmann::json()
                                : nlohmann::json(std::filesystem::path(r.checkpoint_path).filename().string());
  // Each line in one write or not at all (a full disk), so ReadHistory never meets half a
  // line; a failure is the report's error, naming the file and the cause.
  prism::internal::AppendWhole(trial_dir + "/result.json", line.dump() + "\n");

  const std::string csv = trial_dir + "/progress.csv";
  std::ostringstream out;
  if (!std::filesystem::exists(csv)) {
    for (const auto& [k, v] : r.metrics) out << k << ",";
    out << "training_iteration,attempt,timestamp\n";
  }
  for (const auto& [k, v] : r.metrics) out << CsvNumber(v) << ",";
  out << r.iteration << "," << r.attempt << "," << CsvNumber(now) << "\n";
  prism::internal::AppendWhole(csv, out.str());
}

std::vector<Metrics> ReadHistory(const std::string& trial_dir) {
  static const char* const kNotMetrics[] = {"attempt", "timestamp", "checkpoint_dir_name"};
  std::vector<Metrics> out;
  const std::string file = trial_dir + "/result.json";
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Metrics m;
    const nlohmann::json record = prism::internal::ParseJson(line, file);
    for (const auto& [key, value] : record.items()) {
      if ((!value.is_number() && !value.is_null()) ||
          std::find(std::begin(kNotMetrics), std::end(kNotMetrics), key) != std::end(kNotMetrics)) {
        continue;
      }
      m[key] = prism::internal::JsonDouble(value);
    }
    out.push_back(std::move(m));
  }
  return out;
}

/// The CUDA device a GPU worker trains on: the first of the GPUs its task was granted
/// (GetGpuDeviceIndices), not cuda:<local rank>, which is wrong when Slurm binds one GPU
/// to each task (every rank then sees only cuda:0) or when the host's ranks hold GPUs in
/// another order. Throws when the worker holds none.
int GrantedCudaDevice(const WorkerSpec& spec) {
  std::vector<int> indices = prism::GetGpuDeviceIndices();
  if (indices.empty()) {
    throw Error("prism::train: use_gpu is set but worker " + std::to_string(spec.world_rank) +
                " holds no GPU: ScalingConfig::resources_per_worker must ask for one (e.g. "
                "{{\"CPU\", 1}, {\"GPU\", 1}}), or leave it empty");
  }
  return indices.front();
}

WorkerOutcome RunWorker(const WorkerSpec& spec) {
  auto loop = prism::internal::FunctionRegistry::Instance().FindByName(spec.loop_name);
  if (loop == nullptr || !loop->invoke) {
    throw Error("prism::train: no training loop named \"" + spec.loop_name +
                "\" on this rank (register it with PRISM_REMOTE in the same binary)");
  }
  Worker w;
  w.spec = spec;
  w.flags = std::make_shared<GroupFlags>();
  platform::CurrentWorker().OnAbort([flags = w.flags] { flags->aborted.store(true); });
  torch::Device device = torch::kCPU;
  if (spec.use_gpu) {
    w.cuda_device = GrantedCudaDevice(spec);
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(w.cuda_device));
  }
  if (spec.world_ranks.size() > 1) {
    w.comm = platform::Communicator::Create(
        "prism.train/" + spec.run_id + "/attempt-" + std::to_string(spec.attempt), spec.world_ranks);
  }
  w.collective = MakeGroupCollective(w);
  if (spec.world_ranks.size() > 1) w.reducer_collective = MakeGroupCollective(w);
  w.context = WorkerAccess::Make(spec, device, w.collective.get());
  t_worker = &w;
  struct Reset {
    ~Reset() { t_worker = nullptr; }
  } reset;
  WorkerOutcome outcome;
  try {
    platform::Invoke<void>(spec.loop_name, spec.config);
  } catch (const StopTraining&) {
    outcome.stopped = true;  // every worker stopped at the same Report
  }
  w.collective->Barrier();  // everyone finished: no collective is left half-matched
  outcome.reports = w.reports;
  return outcome;
}

}  // namespace internal

Collective& TrainContext::GetCollective() const {
  if (collective_ == nullptr) throw Error("prism::train: this context has no collective");
  return *collective_;
}

const TrainContext& GetContext() { return internal::Current("GetContext").context; }

data::DataIterator GetDatasetShard(const std::string& name) {
  const auto& w = internal::Current("GetDatasetShard");
  auto it = w.spec.dataset_shards.find(name);
  if (it == w.spec.dataset_shards.end()) {
    std::string names;
    for (const auto& [known, shards] : w.spec.dataset_shards) names += (names.empty() ? "" : ", ") + known;
    throw Error("prism::train: GetDatasetShard(\"" + name + "\"): the trainer has no dataset of that name (" +
                (names.empty() ? std::string("it was given none: pass TorchTrainerOptions::datasets")
                               : "it has " + names) +
                ")");
  }
  const size_t rank = static_cast<size_t>(w.spec.world_rank);
  if (rank >= it->second.size()) {
    throw Error("prism::train: GetDatasetShard(\"" + name + "\"): no shard for world rank " +
                std::to_string(rank) + " (a bug)");
  }
  return it->second[rank];
}

std::optional<Checkpoint> GetCheckpoint() {
  const auto& w = internal::Current("GetCheckpoint");
  if (w.spec.resume_path.empty()) return std::nullopt;
  return Checkpoint::FromDirectory(w.spec.resume_path);
}

void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint) {
  auto& w = internal::Current("Report");
  // A barrier that also agrees on stopping: once the driver asked (on any member's rank),
  // every worker stops at the same Report, the first whose checkpoint world rank 0 commits.
  const bool chief = w.spec.world_rank == 0;
  torch::Tensor votes = torch::tensor({platform::CurrentWorker().StopRequested() ? 1.0f : 0.0f,
                                       chief && checkpoint ? 1.0f : 0.0f})
                            .to(w.context.GetDevice());
  w.collective->AllReduce(votes, ReduceOp::kMax);
  votes = votes.cpu();
  const bool stop = votes[0].item<float>() > 0 && votes[1].item<float>() > 0;
  ++w.reports;
  if (chief) {
    internal::ReportRecord record;
    record.attempt = w.spec.attempt;
    record.iteration = w.reports;
    record.metrics = metrics;
    if (checkpoint) record.checkpoint_path = internal::CommitReported(w.spec, *checkpoint, metrics);
    internal::AppendHistory(w.spec.trial_dir, record);
    platform::CurrentWorker().Report(platform::ToBytes(record));  // to the driver, in order
  } else if (checkpoint && internal::UnderTempCheckpointRoot(checkpoint->path())) {
    // World rank 0's checkpoint is the one kept; a copy this worker wrote to a temporary
    // directory would only fill the disk.
    std::error_code ec;
    std::filesystem::remove_all(checkpoint->path(), ec);
  }
  if (stop) throw internal::StopTraining{};
}

void PrepareModule(const std::shared_ptr<torch::nn::Module>& module, size_t bucket_bytes) {
  auto& w = internal::Current("PrepareModel");
  module->to(w.context.GetDevice());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : module->parameters()) w.collective->Broadcast(p, 0);
    for (auto& b : module->buffers()) {
      if (b.is_contiguous()) w.collective->Broadcast(b, 0);
    }
  }
  std::vector<torch::Tensor> params;
  for (auto& p : module->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  if (w.spec.world_ranks.size() < 2 || params.empty()) return;  // nothing to average
  // The reducer's all-reduces run on its own thread while the loop may call collectives:
  // its own communicator keeps the two streams of collectives from crossing.
  // A second prepared model gets a communicator of its own (every worker prepares the
  // same models in the same order, so they all create it together).
  std::unique_ptr<Collective> comm = std::move(w.reducer_collective);
  if (!comm) comm = internal::MakeGroupCollective(w);
  auto reducer = std::make_shared<internal::Reducer>(std::move(params), bucket_bytes, std::move(comm));
  reducer->Attach();
  w.reducers.push_back(std::move(reducer));
}

DataLoader PrepareDataLoader(TensorDataset dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                             bool drop_last) {
  const auto& c = GetContext();
  return DataLoader(std::move(dataset), batch_size, shuffle, seed, c.GetWorldRank(),
                    c.GetWorldSize(), c.GetDevice(), drop_last);
}

}  // namespace prism::train
