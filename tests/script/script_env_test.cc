// The pure parts of ScriptTrainer's workers (src/train/script_env.cc): the variables a
// script gets for each backend, TF_CONFIG, and the pipe's messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "train/script_process.h"
#include "train/script_worker.h"

namespace prism::train::internal {
namespace {

std::vector<platform::WorkerInfo> TwoNodesOfTwo() {
  std::vector<platform::WorkerInfo> group(4);
  for (int i = 0; i < 4; ++i) {
    group[i].index = i;
    group[i].rank = i + 1;
    group[i].node_rank = i / 2;
    group[i].local_rank = i % 2;
    group[i].local_world_size = 2;
  }
  return group;
}

ScriptWorkerSpec Spec(const std::string& backend) {
  ScriptWorkerSpec spec;
  spec.run_id = "r1";
  spec.name = "run";
  spec.trial_dir = "/store/run";
  spec.backend = backend;
  spec.master_addr = "node0";
  spec.master_port = 29500;
  spec.tf_workers = {"node0:1000", "node0:1001", "node1:1002", "node1:1003"};
  spec.python_dir = "/prism/python";
  spec.cpus_per_worker = 2;
  spec.max_restarts = 3;
  return spec;
}

TEST(ScriptEnv, TorchGetsTorchrunsVariables) {
  const auto group = TwoNodesOfTwo();
  auto env = ScriptEnvironment(Spec("torch"), group[3], group, 1, {});
  EXPECT_EQ(env["MASTER_ADDR"], "node0");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["ROLE_RANK"], "3");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["PRISM_TRAIN_ATTEMPT"], "1");
  EXPECT_EQ(env["PRISM_TRAIN_RUN_DIR"], "/store/run");
  EXPECT_EQ(env["PRISM_TRAIN_TRIAL_NAME"], "run");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "2");
  EXPECT_EQ(env["PYTHONPATH"], "/prism/python");
  EXPECT_EQ(env.count("TF_CONFIG"), 0u);
  EXPECT_EQ(env.count("PRISM_TRAIN_CHECKPOINT"), 0u);
}

TEST(ScriptEnv, TensorflowGetsTfConfigAsRayWritesIt) {
  const auto group = TwoNodesOfTwo();
  auto env = ScriptEnvironment(Spec("tensorflow"), group[2], group, 0, {});
  auto tf = nlohmann::json::parse(env["TF_CONFIG"]);
  EXPECT_EQ(tf["cluster"]["worker"],
            nlohmann::json({"node0:1000", "node0:1001", "node1:1002", "node1:1003"}));
  EXPECT_EQ(tf["task"]["type"], "worker");
  EXPECT_EQ(tf["task"]["index"], 2);
  EXPECT_EQ(env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(env.count("RANK"), 0u);
}

TEST(ScriptEnv, ResumePathUserEnvAndTheRanksPythonpath) {
  const auto group = TwoNodesOfTwo();
  ScriptWorkerSpec spec = Spec("torch");
  spec.resume_path = "/store/run/checkpoint_000004";
  spec.env = {{"MY_FLAG", "1"}, {"RANK", "99"}};
  auto env = ScriptEnvironment(spec, group[0], group, 0, {{"PYTHONPATH", "/site"}, {"OMP_NUM_THREADS", "8"}});
  EXPECT_EQ(env["PRISM_TRAIN_CHECKPOINT"], "/store/run/checkpoint_000004");
  EXPECT_EQ(env["MY_FLAG"], "1");
  EXPECT_EQ(env["RANK"], "0");  // Prism's variables win
  EXPECT_EQ(env["PYTHONPATH"], "/prism/python:/site");
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);  // the rank's 8 stays
}

TEST(ScriptEnv, UnknownBackendThrows) {
  const auto group = TwoNodesOfTwo();
  EXPECT_THROW(ScriptEnvironment(Spec("jax"), group[0], group, 0, {}), Error);
}

TEST(ScriptProtocol, ReportsAndStopping) {
  ScriptMessage m = ParseScriptMessage(
      R"({"op": "report", "metrics": {"loss": 0.5, "epoch": 3, "ok": true, "bad": "nan", "big": "-inf"}, "checkpoint_dir": "/tmp/c"})");
  EXPECT_EQ(m.op, ScriptMessage::kReport);
  EXPECT_EQ(m.metrics.at("loss"), 0.5);
  EXPECT_EQ(m.metrics.at("epoch"), 3);
  EXPECT_EQ(m.metrics.at("ok"), 1);
  EXPECT_TRUE(std::isnan(m.metrics.at("bad")));
  EXPECT_EQ(m.metrics.at("big"), -INFINITY);
  EXPECT_EQ(m.checkpoint_dir.value(), "/tmp/c");
  m = ParseScriptMessage(R"({"op": "report", "metrics": {}, "checkpoint_dir": null})");
  EXPECT_FALSE(m.checkpoint_dir.has_value());
  EXPECT_EQ(ParseScriptMessage(R"({"op": "stopping"})").op, ScriptMessage::kStopping);
}

TEST(ScriptProtocol, BadLinesSayWhatIsWrong) {
  auto error_of = [](const std::string& line) {
    try {
      ParseScriptMessage(line);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("not json").find("not a JSON line"), std::string::npos);
  EXPECT_NE(error_of(R"({"x": 1})").find("with \"op\""), std::string::npos);
  EXPECT_NE(error_of(R"({"op": "dance"})").find("unknown op \"dance\""), std::string::npos);
  EXPECT_NE(error_of(R"({"op": "report", "metrics": {"acc": "high"}})").find("metric \"acc\" is string"),
            std::string::npos);
}

TEST(ScriptProtocol, RepliesAreJsonLines) {
  auto ok = nlohmann::json::parse(ReplyOk(4, "/store/run/checkpoint_000003"));
  EXPECT_EQ(ok["ok"], true);
  EXPECT_EQ(ok["iteration"], 4);
  EXPECT_EQ(ok["checkpoint"], "/store/run/checkpoint_000003");
  EXPECT_TRUE(nlohmann::json::parse(ReplyOk(1, ""))["checkpoint"].is_null());
  auto bad = nlohmann::json::parse(ReplyError("no \"such\"\n dir"));
  EXPECT_EQ(bad["ok"], false);
  EXPECT_EQ(bad["error"], "no \"such\"\n dir");
  EXPECT_EQ(ReplyError("x").back(), '\n');
}

TEST(ScriptProcess, ResolvesProgramsLikeExecvp) {
  EXPECT_EQ(ResolveProgram("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(ResolveProgram("no-such-program-prism", "/bin:/usr/bin"), "");
  EXPECT_EQ(ResolveProgram("/bin/sh", ""), "/bin/sh");
  char file[] = "/tmp/prism-not-executable-XXXXXX";
  const int fd = mkstemp(file);  // mode 0600: no execute bit
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(ResolveProgram(file, ""), "");
  unlink(file);
}

}  // namespace
}  // namespace prism::train::internal
