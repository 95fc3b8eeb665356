#include "common/check.h"

namespace prism::internal {

void ThrowMpiError(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw Error(std::string("prism: ") + call + " failed at " + file + ":" + std::to_string(line) +
              " with code " + std::to_string(code) + ": " + std::string(text, len));
}

}  // namespace prism::internal
