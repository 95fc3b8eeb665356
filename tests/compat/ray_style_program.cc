// A program written in the style of Ray's C++ documentation (docs.ray.io, "Ray C++ API"),
// unchanged but for its include line. Exits non-zero on any wrong answer.
#include <prism/ray_compat.h>  // was: #include <ray/api.h>

#include <iostream>
#include <stdexcept>

/// common function
int Plus(int x, int y) { return x + y; }
int Plus1(int x) { return x + 1; }
int Overloaded(int x) { return x; }
int Overloaded(int x, int y) { return x * y; }
int Throw(int) { throw std::logic_error("task failed on purpose"); }
/// Declare remote function
RAY_REMOTE(Plus, Plus1, RAY_FUNC(Overloaded, int), RAY_FUNC(Overloaded, int, int), Throw);

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
  /// initialization
  ray::RayConfig config;
  ray::Init(config, argc, argv);

  /// put and get object
  auto object = ray::Put(100);
  auto put_get_result = *(ray::Get(object));
  CHECK(put_get_result == 100);

  /// common task
  auto task_object = ray::Task(Plus).Remote(1, 2);
  int task_result = *(ray::Get(task_object));
  CHECK(task_result == 3);
  CHECK(*ray::Task(RAY_FUNC(Overloaded, int, int)).Remote(6, 7).Get() == 42);

  /// actor
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreate).Remote(0);
  /// actor task
  auto actor_object = actor.Task(&Counter::Add).Remote(3);
  int actor_task_result = *(ray::Get(actor_object));
  CHECK(actor_task_result == 3);

  /// named actor
  ray::ActorHandle<Counter> named = ray::Actor(Counter::FactoryCreate).SetName("counter").Remote(10);
  auto found = ray::GetActor<Counter>("counter");
  CHECK(found && *found->Task(&Counter::Add).Remote(1).Get() == 11);

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
  CHECK(*ray::Task(Plus).SetPlacementGroup(pg, 0).Remote(2, 2).Get() == 4);
  ray::RemovePlacementGroup(pg.GetID());

  /// shutdown
  ray::Shutdown();
  std::cout << "ray_style_program: all checks passed\n";
  return 0;
}
