#include "common/check.h"

#include <algorithm>

namespace prism::internal {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(std::max(0, len)));
}

void ThrowMpiError(int code, const char* call, const char* file, int line) {
  throw Error(std::string("prism: ") + call + " failed at " + file + ":" + std::to_string(line) +
              " with code " + std::to_string(code) + ": " + MpiErrorText(code));
}

}  // namespace prism::internal
