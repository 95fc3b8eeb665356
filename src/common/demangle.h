#pragma once
// Readable C++ type names (an exception's type in error messages).

#include <cxxabi.h>

#include <cstdlib>
#include <string>

namespace prism::internal {

/// "std::runtime_error" for typeid(e).name(); the mangled name if it cannot be demangled.
inline std::string Demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = (status == 0 && out != nullptr) ? out : name;
  std::free(out);
  return s;
}

}  // namespace prism::internal
