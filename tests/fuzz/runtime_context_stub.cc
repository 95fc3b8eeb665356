// The one call of the runtime the checkpoint sources make (DefaultRunName under Slurm asks
// for the job id): the fuzz targets link the checkpoint sources without the runtime, and
// never reach it.
#include <cstdio>
#include <cstdlib>

#include "prism/runtime_context.h"

namespace prism {

RuntimeContext GetRuntimeContext() { return {}; }

std::string RuntimeContext::GetJobId() const {
  std::fprintf(stderr, "prism fuzz: RuntimeContext::GetJobId is not available to the fuzz targets\n");
  std::abort();
}

}  // namespace prism
