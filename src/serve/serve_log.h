#pragma once
// One line on stderr, written at once (no interleaving within a line), for what an
// operator should see: a replica replaced, a replica set that could not be published.

#include <cstdio>
#include <sstream>

#define PRISM_SERVE_LOG(expr)                          \
  do {                                                 \
    std::ostringstream prism_serve_log_;               \
    prism_serve_log_ << "prism serve: " << expr << "\n"; \
    std::fputs(prism_serve_log_.str().c_str(), stderr); \
  } while (0)
