// AlgorithmTrainable (prism/rl/tune.h): a trial that builds a PPO or DQN Algorithm from the
// base config with the trial's values laid over it, and reports each Train() to the Tuner.

#include "prism/rl/tune.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "prism/checkpoint.h"
#include "prism/platform/invoke.h"
#include "prism/serialization.h"

namespace prism::tune {
namespace internal {
namespace {

constexpr const char* kWhere = "prism::tune::AlgorithmTrainable";

/// What a trial needs besides its config (Trainable::args).
struct RlTrialArgs {
  std::string algorithm;  // "PPO" or "DQN"
  std::string config_json;
  int checkpoint_frequency = 1;
  bool rllib_result_names = false;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& algorithm& config_json& checkpoint_frequency& rllib_result_names;
  }
};

/// Sets `value`, the text a tune::Config holds, into `field`, keeping the field's JSON type.
void SetFromText(nlohmann::json& field, const std::string& key, const std::string& value) {
  std::string want;  // what the value had to be, for the error
  auto bad = [&] {
    return Error(std::string(kWhere) + ": the trial's \"" + key + "\" is \"" + value + "\", not " + want);
  };
  try {
    size_t used = 0;
    if (field.is_boolean()) {
      want = "a bool (true or false)";
      if (value != "true" && value != "1" && value != "false" && value != "0") throw bad();
      field = value == "true" || value == "1";
    } else if (field.is_number_integer()) {  // JSON reads 400 as unsigned, -1 as signed
      want = "an integer";
      const long long v = std::stoll(value, &used);
      if (used != value.size()) throw bad();
      if (field.is_number_unsigned() && v < 0) {
        want = "a non-negative integer";
        throw bad();
      }
      field = static_cast<int64_t>(v);
    } else if (field.is_number()) {
      want = "a number";
      const double v = std::stod(value, &used);
      if (used != value.size()) throw bad();
      field = v;
    } else if (field.is_string()) {
      field = value;
    } else if (field.is_null()) {  // an unset optional (DQN's training_intensity): a number
      want = "a number";
      field = std::stod(value, &used);
      if (used != value.size()) throw bad();
    } else {
      want = "JSON of the setting's type (e.g. [64, 64])";
      nlohmann::json parsed = nlohmann::json::parse(value);  // lists and objects as JSON text
      if (parsed.type() != field.type()) throw bad();
      field = std::move(parsed);
    }
  } catch (const std::logic_error&) {  // stoll / stod: not a number, or out of range
    throw bad();
  } catch (const nlohmann::json::exception&) {
    throw bad();
  }
}

/// The base config's JSON with the trial's values laid over it.
std::string Overlay(const std::string& base_json, const Config& config, const std::string& algorithm) {
  nlohmann::json j = nlohmann::json::parse(base_json);
  for (const auto& [name, value] : config.Values()) {
    const std::string key = name == "lambda" ? "lambda_" : name;  // RLlib's name for GAE's lambda
    if (key == "env_runner_placement" || key == "num_learners") {
      throw Error(std::string(kWhere) + ": a trial cannot set \"" + name +
                  "\" (its runners go wherever a CPU is free, and it learns on its own task)");
    }
    if (!j.contains(key)) {
      std::string known;
      for (const auto& [k, v] : j.items()) known += (known.empty() ? "" : ", ") + k;
      throw Error(std::string(kWhere) + ": the trial's config sets \"" + name + "\", which " + algorithm +
                  "Config has no setting for; its settings are: " + known);
    }
    SetFromText(j[key], name, value);
  }
  return j.dump();
}

rl::Algorithm BuildAlgorithm(const RlTrialArgs& args, const std::string& json) {
  if (args.algorithm == "DQN") return rl::DQNConfig::FromJson(json).Build();
  return rl::PPOConfig::FromJson(json).Build();
}

}  // namespace

/// The trial: Train() per report until the Tuner stops it.
void PrismTuneRlTrial(Config config) {
  const auto args = platform::FromBytes<RlTrialArgs>(TrainableArgs());
  torch::set_num_threads(1);  // the trial holds one CPU for its own task
  rl::Algorithm algo = BuildAlgorithm(args, Overlay(args.config_json, config, args.algorithm));
  if (auto ckpt = GetCheckpoint()) algo.Restore(ckpt->path());
  for (int64_t report = 1;; ++report) {
    const rl::TrainResult result = algo.Train();
    Metrics metrics = result.ToMap();
    if (args.rllib_result_names) metrics.merge(result.ToRllibMap(args.algorithm));
    metrics.erase("training_iteration");  // Tune counts the trial's reports itself
    if (report % args.checkpoint_frequency != 0) {
      Report(metrics);
      continue;
    }
    const std::string dir = MakeTempCheckpointDir();
    algo.Save(dir);
    Report(metrics, Checkpoint::FromDirectory(dir));
  }
}

namespace {

Trainable MakeTrainable(RlTrialArgs args, int num_env_runners, AlgorithmTrainableOptions options) {
  if (options.checkpoint_frequency < 1) {
    throw Error(std::string(kWhere) + ": checkpoint_frequency is " + std::to_string(options.checkpoint_frequency) +
                "; it must be at least 1");
  }
  args.checkpoint_frequency = options.checkpoint_frequency;
  args.rllib_result_names = options.rllib_result_names;
  Trainable t(PrismTuneRlTrial);
  t.resources = {{"CPU", 1.0 + num_env_runners}};
  t.task_resources = std::map<std::string, double>{{"CPU", 1}};
  t.args = platform::ToBytes(args);
  return t;
}

}  // namespace
}  // namespace internal

Trainable AlgorithmTrainable(const rl::PPOConfig& config, AlgorithmTrainableOptions options) {
  if (config.num_learners > 1) {
    throw Error(std::string(internal::kWhere) + ": num_learners is " + std::to_string(config.num_learners) +
                "; a trial learns on its own task (Learners(0) or Learners(1)), since learner actors are "
                "pinned to ranks 1..n that concurrent trials would contend for");
  }
  rl::PPOConfig c = config;
  c.Placement(rl::RunnerPlacement::kAnyFreeCpu);
  c.Validate();
  return internal::MakeTrainable({"PPO", c.ToJson(), 1}, c.num_env_runners, options);
}

Trainable AlgorithmTrainable(const rl::DQNConfig& config, AlgorithmTrainableOptions options) {
  rl::DQNConfig c = config;
  c.Placement(rl::RunnerPlacement::kAnyFreeCpu);
  c.Validate();
  return internal::MakeTrainable({"DQN", c.ToJson(), 1}, c.num_env_runners, options);
}

}  // namespace prism::tune

PRISM_REMOTE(prism::tune::internal::PrismTuneRlTrial);
