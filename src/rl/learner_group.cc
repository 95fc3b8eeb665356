// PPO's learner group on platform::WorkerGroup (learner_group.h): the learner loop each
// worker runs and the driver's side that feeds it.
//
// A learner's life: it builds its module copy and Adam from the start message, opens its
// inbox, and Reports kReady; the driver publishes nothing before every learner is ready (a
// channel drops what comes before it is open). Each kUpdate forms the collective group on
// the first update (every learner is then running one, as Communicator::Create needs), runs
// UpdateShard with an all-reduce per minibatch step and Reports its stats. An abort (the
// driver's ~LearnerGroup, or a peer's failure) sets the flag the collective polls and wakes
// the inbox, so the loop returns within one wait.

#include "rl/learner_group.h"

#include <atomic>
#include <chrono>
#include <optional>

#include "prism/collective.h"
#include "prism/errors.h"
#include "prism/platform/channel.h"
#include "prism/platform/invoke.h"
#include "prism/platform/worker_group.h"
#include "rl/ppo/rl_module.h"

namespace prism::rl::internal {

std::vector<uint8_t> OptimizerBytes(torch::optim::Adam& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::vector<uint8_t> bytes;
  archive.save_to([&bytes](const void* data, size_t size) -> size_t {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
    return size;
  });
  return bytes;
}

void LoadOptimizerBytes(torch::optim::Adam& optimizer, const std::vector<uint8_t>& bytes) {
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  optimizer.load(archive);
}

ppo::LearnerOptions LearnerOptionsOf(const PPOConfig& c, double kl_coeff) {
  ppo::LearnerOptions o;
  o.lr = c.lr;
  o.gamma = c.gamma;
  o.lambda = c.lambda_;
  o.minibatch_size = c.minibatch_size;
  o.num_epochs = c.num_epochs;
  o.grad_clip = c.grad_clip;
  o.kl_target = c.kl_target;
  o.loss = {.clip_param = c.clip_param,
            .vf_clip_param = c.vf_clip_param,
            .vf_loss_coeff = c.vf_loss_coeff,
            .entropy_coeff = c.entropy_coeff,
            .use_kl_loss = c.use_kl_loss,
            .kl_coeff = kl_coeff};
  o.seed = c.seed;
  return o;
}

namespace {

/// What every learner starts from (the WorkerGroup loop's config, as bytes).
struct LearnerStart {
  std::string config_json;
  std::vector<uint8_t> weights;
  double kl_coeff = 0;
  std::vector<uint8_t> optimizer;  // OptimizerBytes, or empty for a fresh Adam
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& config_json& weights& kl_coeff& optimizer;
  }
};

/// The driver to one learner, on its inbox.
struct LearnerCommand {
  enum Kind { kUpdate, kOptimizerState, kStop };
  int kind = kUpdate;
  ppo::LearnerShard shard;  // kUpdate
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& kind& shard;
  }
};

std::string InboxName(const std::string& group_id, int learner) {
  return "prism/rl/learners/" + group_id + "/" + std::to_string(learner);
}

/// Collective operations give up after this (a peer that never joins the all-reduce): the
/// driver waits as long for an update.
constexpr int64_t kCollectiveTimeoutMs = 10 * 60 * 1000;

}  // namespace

/// A learner to the driver, as a WorkerGroup report.
struct LearnerReply {
  enum Kind { kReady, kUpdated, kOptimizerState };
  int kind = kReady;
  double total_loss = 0, policy_loss = 0, vf_loss = 0, entropy = 0, mean_kl = 0, kl_coeff = 0;
  int64_t num_minibatches = 0;
  std::vector<uint8_t> bytes;  // kUpdated: learner 0's weights; kOptimizerState: Adam's state
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& kind& total_loss& policy_loss& vf_loss& entropy& mean_kl& kl_coeff& num_minibatches& bytes;
  }
};

/// The loop every learner of a group runs (registered below; WorkerGroup calls it by name).
std::string PpoLearnerLoop(std::string start_bytes) {
  using Reply = LearnerReply;
  torch::set_num_threads(1);  // tiny MLPs: one intra-op thread is fastest, and one CPU is held
  const platform::WorkerContext& me = platform::CurrentWorker();
  const auto start = platform::FromBytes<LearnerStart>(start_bytes);
  const int index = me.info().index;
  std::vector<int> ranks;
  for (const auto& w : me.group()) ranks.push_back(w.rank);

  const PPOConfig c = PPOConfig::FromJson(start.config_json);
  auto env = MakeEnv(c.env, c.env_config);
  ppo::RLModule module(env->observation_space(), env->action_space(), c.hidden);
  ppo::SetWeights(*module, start.weights.data(), start.weights.size());
  ppo::Learner learner(module, LearnerOptionsOf(c, start.kl_coeff));
  if (!start.optimizer.empty()) LoadOptimizerBytes(learner.optimizer(), start.optimizer);

  platform::Channel inbox(InboxName(me.group_id(), index));
  auto aborted = std::make_shared<std::atomic<bool>>(false);
  me.OnAbort([aborted, name = inbox.name()] {
    aborted->store(true);
    try {
      platform::Publish(name, platform::ToBytes(LearnerCommand{LearnerCommand::kStop, {}}));
    } catch (const std::exception&) {  // the runtime is going down: the loop ends with it
    }
  });
  collective::Group group;  // formed at the first update
  me.Report(platform::ToBytes(Reply{}));

  while (!aborted->load()) {
    auto message = inbox.Next(/*timeout_ms=*/1000);
    if (!message) {
      if (me.StopRequested()) break;
      continue;
    }
    auto command = platform::FromBytes<LearnerCommand>(message->bytes);
    Reply reply;
    if (command.kind == LearnerCommand::kStop) break;
    if (command.kind == LearnerCommand::kOptimizerState) {
      reply.kind = Reply::kOptimizerState;
      reply.bytes = OptimizerBytes(learner.optimizer());
    } else {
      if (!group.valid()) {
        collective::GroupOptions options;
        options.aborted = [aborted] { return aborted->load(); };
        options.timeout = std::chrono::milliseconds(kCollectiveTimeoutMs);
        group = collective::Group::Create(
            "prism-rl-learners-" + me.group_id() + "-" + std::to_string(me.attempt()), ranks,
            options);
      }
      ppo::LearnerStats st = learner.UpdateShard(
          command.shard,
          [&group](std::vector<float>& v) { group.AllReduce(v, collective::ReduceOp::kAverage); },
          static_cast<int>(ranks.size()));
      reply = {Reply::kUpdated, st.total_loss, st.policy_loss,     st.vf_loss, st.entropy,
               st.mean_kl,      st.kl_coeff,   st.num_minibatches, {}};
      if (index == 0) reply.bytes = ppo::GetWeights(*learner.module());
    }
    me.Report(platform::ToBytes(reply));
  }
  return "";
}

// ---- The driver's side -------------------------------------------------------------------

LearnerGroup::LearnerGroup(const PPOConfig& config, const std::vector<uint8_t>& weights,
                           double kl_coeff, const std::vector<uint8_t>& optimizer)
    : num_learners_(config.num_learners) {
  platform::WorkerGroupOptions options;
  options.num_workers = num_learners_;
  options.resources_per_worker = {{"CPU", 1}};
  options.one_worker_per_rank = true;
  for (int i = 0; i < num_learners_; ++i) options.ranks.push_back(1 + i);
  options.name = "rl_ppo_learners";
  try {
    group_ = std::make_unique<platform::WorkerGroup>(options);
  } catch (const ResourceError&) {
    throw;  // the cluster could never hold them: its message names what is missing
  } catch (const Error& e) {
    throw Error(
        "prism::rl: Learners(" + std::to_string(num_learners_) + "): " + e.what() +
        ". Learner i holds 1 CPU on rank 1 + i beside the env runner there: give each rank a CPU "
        "more (e.g. --prism-num-cpus=2) or use fewer learners");
  }
  group_->Start(platform::RegisteredName(PpoLearnerLoop, "prism::rl's learner group"),
                platform::ToBytes(LearnerStart{config.ToJson(), weights, kl_coeff, optimizer}));
  std::vector<int> all;
  for (int i = 0; i < num_learners_; ++i) all.push_back(i);
  Await(all, /*timeout_ms=*/60 * 1000, "start");
}

LearnerGroup::~LearnerGroup() =
    default;  // ~WorkerGroup aborts the learners (their OnAbort hooks end the loops)

void LearnerGroup::Send(int learner, const std::string& bytes) {
  platform::Publish(InboxName(group_->id(), learner), bytes);
}

std::vector<LearnerReply> LearnerGroup::Await(const std::vector<int>& from, int64_t timeout_ms,
                                              const char* what) {
  std::vector<std::optional<LearnerReply>> got(static_cast<size_t>(num_learners_));
  size_t missing = from.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto fail = [&](const std::string& why) {
    failure_ = "prism::rl: the learner group (" + std::to_string(num_learners_) +
               " learners) failed in " + what + ": " + why +
               "; the algorithm cannot learn further (build it again, or Restore a checkpoint)";
    group_->Abort(/*timeout_ms=*/30 * 1000);  // breaks the others out of their all-reduce
    group_.reset();                           // and gives their CPUs back
    throw Error(failure_);
  };
  while (missing > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) fail("no reply within " + std::to_string(timeout_ms / 1000) + " s");
    auto e = group_->Next(left);
    if (!e) continue;
    const std::string learner = "learner " + std::to_string(e->worker);
    if (e->kind == platform::WorkerEvent::kReport) {
      auto& slot = got.at(static_cast<size_t>(e->worker));
      if (!slot) --missing;
      slot = platform::FromBytes<LearnerReply>(e->bytes);
    } else if (e->kind == platform::WorkerEvent::kFailed) {
      fail(learner + " on rank " + std::to_string(group_->workers().at(e->worker).rank) +
           " threw " + e->bytes);
    } else if (e->kind == platform::WorkerEvent::kFinished) {
      fail(learner + " ended its loop");
    }  // kPreempted (a signal to the driver's rank): Train's caller decides what it means
  }
  std::vector<LearnerReply> replies;
  for (int i : from) replies.push_back(std::move(*got[static_cast<size_t>(i)]));
  return replies;
}

ppo::LearnerStats LearnerGroup::Update(std::vector<ppo::LearnerShard> shards,
                                       std::vector<uint8_t>& weights, int64_t timeout_ms) {
  if (!failure_.empty()) throw Error(failure_);
  std::vector<int> all;
  for (int i = 0; i < num_learners_; ++i) {
    Send(i, platform::ToBytes(LearnerCommand{LearnerCommand::kUpdate,
                                             std::move(shards.at(static_cast<size_t>(i)))}));
    all.push_back(i);
  }
  std::vector<LearnerReply> replies = Await(all, timeout_ms, "an update");
  LearnerReply& first = replies[0];
  weights = std::move(first.bytes);
  return {first.total_loss, first.policy_loss, first.vf_loss,        first.entropy,
          first.mean_kl,    first.kl_coeff,    first.num_minibatches};
}

std::vector<uint8_t> LearnerGroup::OptimizerState(int64_t timeout_ms) {
  if (!failure_.empty()) throw Error(failure_);
  Send(0, platform::ToBytes(LearnerCommand{LearnerCommand::kOptimizerState, {}}));
  return std::move(Await({0}, timeout_ms, "fetching Adam's state")[0].bytes);
}

}  // namespace prism::rl::internal

PRISM_REMOTE(prism::rl::internal::PpoLearnerLoop);
