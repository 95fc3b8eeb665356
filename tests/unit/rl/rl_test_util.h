#pragma once
// Helpers of the rl unit tests: EXPECT_ERROR_HAS (the prism::Error a statement throws names
// `text`) and a fresh temporary directory per test process.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../../common/test_util.h"

namespace prism_rl_test {

/// temp_directory_path()/<prefix><name>_<pid>, removed first so the test starts empty.
inline std::string TempDir(const std::string& prefix, const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace prism_rl_test

#define EXPECT_ERROR_HAS(stmt, text)                                                    \
  EXPECT_NE(::prism_test::ErrorOf([&] { stmt; }).find(text), std::string::npos)         \
      << "error was: '" << ::prism_test::ErrorOf([&] { stmt; }) << "'"
