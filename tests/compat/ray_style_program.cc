// A program written in the style of Ray's C++ documentation (docs.ray.io, "Ray C++ API"),
// unchanged but for its include line. Exits non-zero on any wrong answer.
#include <prism/ray_compat.h>  // was: #include <ray/api.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>

/// common function
int Plus(int x, int y) { return x + y; }
int Plus1(int x) { return x + 1; }
int Overloaded(int x) { return x; }
int Overloaded(int x, int y) { return x * y; }
int Throw(int) { throw std::logic_error("task failed on purpose"); }
std::string GetEnv(std::string name) {
  const char* value = std::getenv(name.c_str());
  return value ? value : "<unset>";
}
/// Declare remote function
RAY_REMOTE(Plus, Plus1, RAY_FUNC(Overloaded, int), RAY_FUNC(Overloaded, int, int), Throw, GetEnv);

/// class
class Counter {
 public:
  int count;
  Counter(int init) { count = init; }
  /// static factory method
  static Counter* FactoryCreate(int init) { return new Counter(init); }
  /// non static function
  int Add(int x) {
    count += x;
    return count;
  }
};
/// Declare remote function
RAY_REMOTE(Counter::FactoryCreate, &Counter::Add);

#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      std::cerr << "ray_style_program: FAILED: " #cond "\n";      \
      ray::Shutdown();                                            \
      return 1;                                                   \
    }                                                             \
  } while (0)

int main(int argc, char** argv) {
  /// initialization, with a namespace and a runtime environment
  ray::RayConfig config;
  config.ray_namespace = "compat";
  ray::RuntimeEnv runtime_env;
  std::map<std::string, std::string> env_vars{{"TEST_KEY", "TEST_VALUE"}};
  runtime_env.Set("env_vars", env_vars);
  config.runtime_env = runtime_env;
  ray::Init(config, argc, argv);
  CHECK(ray::GetNamespace() == "compat");
  CHECK((runtime_env.Get<std::map<std::string, std::string>>("env_vars").at("TEST_KEY") == "TEST_VALUE"));

  /// put and get object
  auto object = ray::Put(100);
  auto put_get_result = *(ray::Get(object));
  CHECK(put_get_result == 100);

  /// common task
  auto task_object = ray::Task(Plus).Remote(1, 2);
  int task_result = *(ray::Get(task_object));
  CHECK(task_result == 3);
  CHECK(*ray::Task(RAY_FUNC(Overloaded, int, int)).Remote(6, 7).Get() == 42);

  /// the job's env_vars are set on every rank
  const int world = ray::GetRuntimeContext().GetWorldSize();
  for (int rank = 0; rank < world; ++rank) {
    auto env = ray::Task(GetEnv).SetResource("rank:" + std::to_string(rank), 0.01).Remote(std::string("TEST_KEY"));
    CHECK(*env.Get() == "TEST_VALUE");
  }
  /// a task's runtime_env: the job's is accepted; one of its own cannot be had in a shared process
  CHECK(*ray::Task(Plus).SetRuntimeEnv(runtime_env).Remote(1, 1).Get() == 2);
  try {
    ray::RuntimeEnv other;
    other.Set("env_vars", std::map<std::string, std::string>{{"TEST_KEY", "OTHER"}});
    ray::Task(Plus).SetRuntimeEnv(other).Remote(1, 1);
    CHECK(false);
  } catch (ray::internal::RayRuntimeEnvException& e) {
    std::cout << "caught RayRuntimeEnvException: " << e.what() << "\n";
  }
  try {
    ray::RuntimeEnv pip;  // any field can be set (and serialized); using it says what Prism cannot do
    pip.Set("pip", std::map<std::string, std::string>{{"packages", "requests"}});
    CHECK(ray::RuntimeEnv::Deserialize(pip.Serialize()).GetJsonStr("pip") == R"({"packages":"requests"})");
    ray::Task(Plus).SetRuntimeEnv(pip).Remote(1, 1);
    CHECK(false);
  } catch (ray::internal::RayRuntimeEnvException& e) {
    std::cout << "caught RayRuntimeEnvException: " << e.what() << "\n";
  }

  /// resources as Ray's std::unordered_map, on a task
  std::unordered_map<std::string, double> resources{{"CPU", 1.0}};
  CHECK(*ray::Task(Plus).SetResources(resources).Remote(2, 3).Get() == 5);

  /// IDs as strings
  std::string object_id = object.ID();
  CHECK(!object_id.empty());
  std::ostringstream printed;
  printed << task_object.ID();
  CHECK(printed.str() == std::string(task_object.ID()));
  CHECK(("id " + object.ID()) == "id " + object_id);

  /// actor
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreate).SetResources(resources).Remote(0);
  std::string actor_id = actor.ID();
  CHECK(actor_id.size() == 16);
  /// actor task
  auto actor_object = actor.Task(&Counter::Add).Remote(3);
  int actor_task_result = *(ray::Get(actor_object));
  CHECK(actor_task_result == 3);
  /// actor call with resources (checked; the call runs with what the actor holds)
  CHECK(*actor.Task(&Counter::Add).SetResources(std::unordered_map<std::string, double>{{"CPU", 0.5}}).Remote(1).Get() == 4);
  CHECK(*actor.Task(&Counter::Add).SetResource("CPU", 0.5).Remote(1).Get() == 5);
  /// as in Ray, an actor call is scheduled by its actor alone: resources no rank has change nothing
  CHECK(*actor.Task(&Counter::Add).SetResource("GPU", 64).Remote(1).Get() == 6);

  /// named actor
  ray::ActorHandle<Counter> named = ray::Actor(Counter::FactoryCreate).SetName("counter").Remote(10);
  auto found = ray::GetActor<Counter>("counter");
  CHECK(found && *found->Task(&Counter::Add).Remote(1).Get() == 11);
  /// named actors in namespaces: one name, two namespaces
  ray::ActorHandle<Counter> other_ns = ray::Actor(Counter::FactoryCreate).SetName("counter", "other").Remote(50);
  auto in_other = ray::GetActor<Counter>("counter", "other");
  CHECK(in_other && *in_other->Task(&Counter::Add).Remote(1).Get() == 51);
  CHECK(*ray::GetActor<Counter>("counter", "compat")->Task(&Counter::Add).Remote(1).Get() == 12);
  CHECK(!ray::GetActor<Counter>("counter", "nowhere"));

  /// wait
  std::vector<ray::ObjectRef<int>> refs{ray::Task(Plus1).Remote(1), ray::Task(Plus1).Remote(2)};
  ray::WaitResult<int> wait_result = ray::Wait(refs, 2, 10000);
  CHECK(wait_result.ready.size() == 2 && wait_result.unready.empty());
  auto values = ray::Get(refs);
  CHECK(*values[0] == 2 && *values[1] == 3);

  /// exceptions
  try {
    ray::Get(ray::Task(Throw).Remote(1));
    CHECK(false);
  } catch (ray::internal::RayTaskException& e) {
    std::cout << "caught RayTaskException: " << e.what() << "\n";
  }
  actor.Kill();
  try {
    ray::Get(actor.Task(&Counter::Add).Remote(1), 10000);
    CHECK(false);
  } catch (ray::internal::RayActorException& e) {
    std::cout << "caught RayActorException: " << e.what() << "\n";
  }

  /// placement group
  ray::PlacementGroupCreationOptions options{"pg", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK};
  auto pg = ray::CreatePlacementGroup(options);
  CHECK(pg.Wait(10));
  CHECK(pg.GetState() == ray::PlacementGroupState::CREATED);
  CHECK(*ray::Task(Plus).SetPlacementGroup(pg, 0).Remote(2, 2).Get() == 4);
  ray::RemovePlacementGroup(pg.GetID());
  CHECK(pg.GetState() == ray::PlacementGroupState::REMOVED);

  /// shutdown
  ray::Shutdown();
  std::cout << "ray_style_program: all checks passed\n";
  return 0;
}
