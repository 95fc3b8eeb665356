#pragma once
// The process-wide tables of deployment classes and typed methods (filled at static
// initialisation by prism/serve/deployment.h's registrars; read-only afterwards, so reads
// take no lock).

#include <string>

#include "prism/serve/deployment.h"

namespace prism::serve::internal {

/// The class registered under `key`, or nullptr.
const ClassEntry* FindClass(const std::string& key);
/// The method registered under `key`, or nullptr.
const MethodInvoker* FindMethod(const std::string& key);

}  // namespace prism::serve::internal
