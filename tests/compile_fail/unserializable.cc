// Must NOT compile: a task returning a type Prism cannot serialize. The ctest
// `compile_fail_unserializable` checks that the compiler says what to add.
#include <prism/api.h>

#include <memory>

struct Opaque {
  std::unique_ptr<int> p;  // not trivially copyable, no serialize member
};

Opaque Make() { return {}; }
PRISM_REMOTE(Make);

int main() { return 0; }
