// Must not compile: a parameter of type ObjectRef<T> receives the reference itself (Ray's
// rule), so a plain value for it is a compile error that says so
// (tests/integration.cmake, compile_fail_object_ref_parameter).
#include <prism/api.h>

#include <string>

std::string Length(prism::ObjectRef<std::string> ref) { return *ref.Get(); }
PRISM_REMOTE(Length);

int main() { prism::Task(Length).Remote(std::string("a value, not a reference")); }
