// main() for Dataset tests on an in-process cluster: 3 ranks of 2 CPUs in this process
// (platform::InProcessCluster), so the end-to-end cases of tests/mpi/data/dataset_test.cc
// also run without an MPI launcher.
#include <gtest/gtest.h>

#include "prism/platform/in_process.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  prism::platform::InProcessOptions options;
  options.num_ranks = 3;
  options.num_cpus = 2;
  prism::platform::InProcessCluster cluster(options);
  return RUN_ALL_TESTS();
}
