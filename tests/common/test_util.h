#pragma once
// Helpers every test binary may use (no dependency beyond prism/errors.h). Data tests:
// tests/common/data_test_util.h. Include with a path relative to the test file
// ("../common/test_util.h") and name what you use (`using prism_test::ErrorOf;`).
#include <string>
#include <utility>

#include "prism/errors.h"

namespace prism_test {

/// Runs `f` and returns the message of the prism::Error it throws, or "(no error)" if it
/// returns: `EXPECT_THAT(ErrorOf([&] { Bad(); }), HasSubstr("what was wrong"))`. Other
/// exceptions propagate (gtest reports them as failures).
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const prism::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace prism_test
