// The Ray compatibility header's pieces that need no cluster (issue 41, items 2, 5 and 6):
// every field of Ray's RayConfig and what it becomes, RuntimeEnv as JSON, MSGPACK_DEFINE,
// and the standard headers <ray/api.h> brings.
#include <prism/ray_compat.h>  // first: what it includes must be enough on its own

#include <gtest/gtest.h>

namespace {

// Only names <ray/api.h> brings, used without including their headers here.
[[maybe_unused]] void UsesWhatRayApiBrings() {
  std::cout << std::string("x") << std::endl;
  std::vector<int> v{1};
  std::unordered_map<std::string, double> m;
  std::map<int, int> sorted;
  std::shared_ptr<int> p = std::make_shared<int>(1);
  std::mutex mu;
  std::this_thread::sleep_for(std::chrono::milliseconds(0));
  std::array<int, 2> a{};
  (void)v, (void)m, (void)sorted, (void)p, (void)a;
}

TEST(RayConfig, EveryRayFieldExistsAndTheConnectionFieldsChangeNothing) {
  ray::RayConfig config;
  config.address = "127.0.0.1:6379";
  config.local_mode = true;
  config.code_search_path = {"/somewhere"};
  config.redis_password_ = "secret";
  config.redis_username_ = "user";
  config.is_worker_ = false;
  config.default_actor_lifetime = ray::ActorLifetime::DETACHED;
  const prism::Config out = config.ToPrism();
  EXPECT_FALSE(out.num_cpus.has_value());
  EXPECT_TRUE(out.resources.empty());
  EXPECT_FALSE(out.ray_namespace.has_value());
}

TEST(RayConfig, HeadArgsGiveEachRanksResources) {
  ray::RayConfig config;
  config.head_args = {"--num-cpus", "2", "--resources", R"({"resource1":1,"resource2":2})",
                      "--include-dashboard", "false", "--num-gpus=0", "--object-store-memory", "1000000"};
  const prism::Config out = config.ToPrism();
  EXPECT_EQ(out.num_cpus, 2.0);
  EXPECT_EQ(out.num_gpus, 0.0);
  EXPECT_EQ(out.object_store_memory, 1000000u);
  EXPECT_EQ(out.resources, (std::map<std::string, double>{{"resource1", 1}, {"resource2", 2}}));

  config.prism.num_cpus = 5;  // Prism's own settings win
  EXPECT_EQ(config.ToPrism().num_cpus, 5.0);
}

TEST(RayConfig, ABadHeadArgsValueSaysWhichAndWhy) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--num-cpus", "two"}, {"--resources", "{1"}, {"--resources", "[1]"}, {"--num-cpus"}}) {
    ray::RayConfig config;
    config.head_args = args;
    try {
      config.ToPrism();
      ADD_FAILURE() << "no error for " << args[0];
    } catch (const ray::internal::RayException& e) {
      EXPECT_NE(std::string(e.what()).find(args[0]), std::string::npos) << e.what();
    }
  }
}

TEST(RayConfig, NamespaceAndRuntimeEnvEnvVars) {
  ray::RayConfig config;
  config.ray_namespace = "ns";
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"A", "1"}});
  config.runtime_env = env;
  const prism::Config out = config.ToPrism();
  EXPECT_EQ(out.ray_namespace, "ns");
  EXPECT_EQ(out.env_vars, (std::map<std::string, std::string>{{"A", "1"}}));

  ray::RuntimeEnv pip;
  pip.Set("pip", std::vector<std::string>{"requests"});
  config.runtime_env = pip;
  try {
    config.ToPrism();
    ADD_FAILURE() << "a pip runtime_env was accepted at Init";
  } catch (const ray::internal::RayRuntimeEnvException& e) {
    EXPECT_NE(std::string(e.what()).find("pip"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only env_vars"), std::string::npos) << e.what();
  }
}

struct RcPip {
  std::vector<std::string> packages;
  bool pip_check = false;
};
void to_json(json& j, const RcPip& p) { j = json{{"packages", p.packages}, {"pip_check", p.pip_check}}; }
void from_json(const json& j, RcPip& p) {
  j.at("packages").get_to(p.packages);
  j.at("pip_check").get_to(p.pip_check);
}

TEST(RuntimeEnv, FieldsAsJsonSerializeAndDeserialize) {
  ray::RuntimeEnv env;
  EXPECT_TRUE(env.Empty());
  env.Set("pip", RcPip{{"requests"}, true});
  env.Set("working_dir", std::string("https://path/to/working_dir.zip"));
  ray::RuntimeEnv back = ray::RuntimeEnv::Deserialize(env.Serialize());
  EXPECT_EQ(back.Get<RcPip>("pip").packages, std::vector<std::string>{"requests"});
  EXPECT_TRUE(back.Get<RcPip>("pip").pip_check);
  EXPECT_EQ(back.Get<std::string>("working_dir"), "https://path/to/working_dir.zip");

  const std::string raw = R"({"packages":["requests","tensorflow"],"pip_check":false})";
  ray::RuntimeEnv env3;
  env3.SetJsonStr("pip", raw);
  EXPECT_EQ(env3.GetJsonStr("pip"), raw);
  EXPECT_TRUE(env3.Contains("pip"));
  EXPECT_TRUE(env3.Remove("pip"));
  EXPECT_FALSE(env3.Remove("pip"));
  EXPECT_TRUE(env3.Empty());
}

TEST(RuntimeEnv, MisuseIsARayRuntimeEnvException) {
  ray::RuntimeEnv env;
  EXPECT_THROW(env.Get<std::string>("working_dir"), ray::internal::RayRuntimeEnvException);
  env.Set("working_dir", "https://path/to/working_dir.zip");
  EXPECT_THROW(env.Get<RcPip>("working_dir"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(env.SetJsonStr("pip", "{123"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(env.GetJsonStr("pip"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(ray::RuntimeEnv::Deserialize("[1, 2]"), ray::internal::RayRuntimeEnvException);
  // Used for a task, a field other than env_vars names itself.
  try {
    prism::RuntimeEnv used = env;
    ADD_FAILURE() << "working_dir was accepted";
  } catch (const ray::internal::RayRuntimeEnvException& e) {
    EXPECT_NE(std::string(e.what()).find("working_dir"), std::string::npos) << e.what();
  }
}

struct RcPerson {
  std::string name;
  int age = 0;
  std::vector<double> scores;
  MSGPACK_DEFINE(name, age, scores);
};

TEST(MsgpackDefine, TheFieldsRoundTrip) {
  RcPerson p{"tom", 20, {1.5, 2.5}};
  prism::internal::Buffer bytes = prism::internal::Serialize(p);
  RcPerson back = prism::internal::Deserialize<RcPerson>(bytes.data(), bytes.size());
  EXPECT_EQ(back.name, "tom");
  EXPECT_EQ(back.age, 20);
  EXPECT_EQ(back.scores, (std::vector<double>{1.5, 2.5}));
}

}  // namespace
