// storage_helper <tune|data> <dir>: a Tune experiment or a Data write into <dir>, for
// storage_not_shared_libs.sh, which hides <dir> from one rank. Each says on stdout when it
// did work ("trial ran on rank N", "wrote N rows"), so the script can check that the clear
// error came before any.

#include <cstdio>
#include <string>

#include "prism/api.h"
#include "prism/data.h"
#include "prism/runtime_context.h"
#include "prism/tune.h"

namespace {

void Trial(prism::tune::Config config) {
  std::printf("storage_helper: trial ran on rank %d\n", prism::GetRuntimeContext().GetRank());
  std::fflush(stdout);
  prism::tune::Report({{"score", config.Get<double>("x", 0)}});
}

}  // namespace

PRISM_REMOTE(Trial);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s tune|data <dir>\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  prism::Init(argc, argv);
  int status = 0;
  try {
    if (mode == "tune") {
      prism::tune::RunConfig run;
      run.storage_path = dir;
      run.name = "probe";
      run.verbose = 0;
      prism::tune::Tuner tuner(Trial, {{"x", prism::tune::GridSearch({1.0, 2.0, 3.0, 4.0})}},
                               {.metric = "score", .mode = "max"}, run);
      auto grid = tuner.Fit();
      std::printf("storage_helper: %zu trials finished\n", grid.size());
    } else if (mode == "data") {
      prism::data::Range(1000, 6).WriteJson(dir + "/out");
      std::printf("storage_helper: wrote 1000 rows\n");
    } else {
      std::fprintf(stderr, "storage_helper: unknown mode %s\n", mode.c_str());
      status = 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "storage_helper: %s\n", e.what());
    status = 1;
  }
  prism::Shutdown();
  return status;
}
