// main() of the multi-rank GoogleTest binary: Init first (ranks 1..N-1 serve tasks inside
// it and exit when the driver shuts down), then the tests on rank 0 only.
#include <gtest/gtest.h>
#include <prism/api.h>

int main(int argc, char** argv) {
  prism::Init(argc, argv);  // consumes nothing; gtest ignores the --prism-* flags
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  prism::Shutdown();
  return status;
}
