// Must not compile: Ray's cross-language calls have no Python or Java worker to reach in an
// MPI job; the error says so (tests/integration.cmake, compile_fail_ray_cross_language).
#include <prism/ray_compat.h>

int main() {
  auto counter = ray::Actor(ray::PyActorClass{"test_cross_language_invocation", "Counter"});
  (void)counter;
}
