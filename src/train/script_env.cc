// The pure parts of ScriptTrainer's workers: the environment a script gets (torchrun's
// variables, or TF_CONFIG as Ray Train's TensorflowTrainer writes it, and Prism's own), and
// the JSON lines of the pipe between a script's prism_train module and its worker.
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "prism/errors.h"
#include "train/script_worker.h"

namespace prism::train::internal {

std::string TfConfig(const std::vector<std::string>& workers, int index) {
  nlohmann::json config = {{"cluster", {{"worker", workers}}},
                           {"task", {{"type", "worker"}, {"index", index}}}};
  return config.dump();
}

std::map<std::string, std::string> ScriptEnvironment(const ScriptWorkerSpec& spec,
                                                     const platform::WorkerInfo& me,
                                                     const std::vector<platform::WorkerInfo>& group,
                                                     int attempt,
                                                     const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = spec.env;
  auto known = [&](const std::string& key) { return env.count(key) > 0 || base.count(key) > 0; };
  const std::string world_size = std::to_string(group.size());
  std::set<int> nodes;
  for (const auto& w : group) nodes.insert(w.node_rank);

  env["PRISM_TRAIN_BACKEND"] = spec.backend;
  env["PRISM_TRAIN_RUN_DIR"] = spec.trial_dir;
  env["PRISM_TRAIN_TRIAL_NAME"] = spec.name;
  env["PRISM_TRAIN_ATTEMPT"] = std::to_string(attempt);
  if (!spec.resume_path.empty()) {
    env["PRISM_TRAIN_CHECKPOINT"] = spec.resume_path;
  } else {
    env.erase("PRISM_TRAIN_CHECKPOINT");
  }
  env["PRISM_TRAIN_WORLD_RANK"] = std::to_string(me.index);
  env["PRISM_TRAIN_WORLD_SIZE"] = world_size;
  env["PRISM_TRAIN_LOCAL_RANK"] = std::to_string(me.local_rank);
  env["PRISM_TRAIN_LOCAL_WORLD_SIZE"] = std::to_string(me.local_world_size);
  env["PRISM_TRAIN_NODE_RANK"] = std::to_string(me.node_rank);
  env["PRISM_TRAIN_TO_WORKER_FD"] = std::to_string(kScriptToWorkerFd);
  env["PRISM_TRAIN_FROM_WORKER_FD"] = std::to_string(kWorkerToScriptFd);
  env["PRISM_TRAIN_REPORT_TIMEOUT_S"] = std::to_string(spec.report_timeout_s);

  // The prism_train module first on the path, then whatever the user or the rank had.
  std::string path = spec.python_dir;
  const auto user_path = env.find("PYTHONPATH");
  const auto rank_path = base.find("PYTHONPATH");
  if (user_path != env.end() && !user_path->second.empty()) {
    path += ":" + user_path->second;
  } else if (rank_path != base.end() && !rank_path->second.empty()) {
    path += ":" + rank_path->second;
  }
  env["PYTHONPATH"] = path;
  // Output through a pipe is block-buffered by default: lines would reach the driver late.
  env["PYTHONUNBUFFERED"] = "1";
  // One thread per CPU the worker holds (Ray Train does the same): more would compete with
  // the other workers for the same cores.
  if (!known("OMP_NUM_THREADS")) env["OMP_NUM_THREADS"] = std::to_string(spec.cpus_per_worker);

  if (spec.backend == "torch") {
    env["MASTER_ADDR"] = spec.master_addr;
    env["MASTER_PORT"] = std::to_string(spec.master_port);
    env["RANK"] = std::to_string(me.index);
    env["WORLD_SIZE"] = world_size;
    env["LOCAL_RANK"] = std::to_string(me.local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(me.local_world_size);
    env["NODE_RANK"] = std::to_string(me.node_rank);
    env["GROUP_RANK"] = std::to_string(me.node_rank);
    env["GROUP_WORLD_SIZE"] = std::to_string(nodes.size());
    env["ROLE_NAME"] = "default";
    env["ROLE_RANK"] = std::to_string(me.index);
    env["ROLE_WORLD_SIZE"] = world_size;
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
    env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(spec.max_restarts);
    env["TORCHELASTIC_RUN_ID"] = spec.run_id;
  } else if (spec.backend == "tensorflow") {
    env["TF_CONFIG"] = TfConfig(spec.tf_workers, me.index);
  } else {
    throw Error("prism::train::ScriptTrainer: backend \"" + spec.backend +
                "\" is not one of torch, tensorflow");
  }
  return env;
}

ScriptMessage ParseScriptMessage(const std::string& line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error("not a JSON line (" + std::string(e.what()) + "): " + line.substr(0, 200));
  }
  if (!j.is_object() || !j.contains("op") || !j["op"].is_string()) {
    throw Error("not a message (a JSON object with \"op\"): " + line.substr(0, 200));
  }
  ScriptMessage m;
  const std::string op = j["op"].get<std::string>();
  if (op == "stopping") {
    m.op = ScriptMessage::kStopping;
    return m;
  }
  if (op != "report") throw Error("unknown op \"" + op + "\" (report, stopping)");
  m.op = ScriptMessage::kReport;
  if (j.contains("metrics")) {
    if (!j["metrics"].is_object()) throw Error("report: \"metrics\" is not an object");
    for (const auto& [key, value] : j["metrics"].items()) {
      if (value.is_boolean()) {
        m.metrics[key] = value.get<bool>() ? 1 : 0;
      } else if (value.is_number()) {
        m.metrics[key] = value.get<double>();
      } else if (value.is_string() && (value == "nan" || value == "inf" || value == "-inf")) {
        // JSON has no NaN or infinity: the module sends them as these strings.
        const std::string text = value.get<std::string>();
        m.metrics[key] = text == "nan" ? NAN : text == "inf" ? INFINITY : -INFINITY;
      } else {
        throw Error("report: metric \"" + key + "\" is " + value.type_name() + ", not a number");
      }
    }
  }
  if (j.contains("checkpoint_dir") && !j["checkpoint_dir"].is_null()) {
    if (!j["checkpoint_dir"].is_string()) throw Error("report: \"checkpoint_dir\" is not a string");
    m.checkpoint_dir = j["checkpoint_dir"].get<std::string>();
  }
  return m;
}

std::string ReplyOk(int64_t iteration, const std::string& committed_checkpoint) {
  nlohmann::json j = {{"op", "reply"}, {"ok", true}, {"iteration", iteration}};
  j["checkpoint"] = committed_checkpoint.empty() ? nlohmann::json() : nlohmann::json(committed_checkpoint);
  return j.dump() + "\n";
}

std::string ReplyError(const std::string& error) {
  nlohmann::json j = {{"op", "reply"}, {"ok", false}, {"error", error}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string StopLine() { return "{\"op\": \"stop\"}\n"; }

}  // namespace prism::train::internal
