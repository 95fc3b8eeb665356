// apps/common/driver.h: the frame every app's main shares, so each app's main.cc holds only
// its flags and its run:
//
//   prism::Init(argc, argv)   ranks 1..N-1 serve tasks there and never return; a bad
//                             --prism-* flag or PRISM_* variable: "<app>: ..." and exit 2
//   the app's flags           read on rank 0 with CLI11 (prism/cli.h): --help prints them and
//                             exits 0, a bad flag exits 2, --prism-* pass through
//   run()                     its status is the exit status; an exception: "<app>: ..." and 1
//   prism::Shutdown()         the serving ranks exit here
#pragma once

#include <exception>
#include <functional>
#include <iostream>

#include "prism/api.h"
#include "prism/cli.h"

namespace prism_apps {

/// Runs an app's main as above and returns its exit status. `app` names the app (its name
/// prefixes the error messages) and declares its flags; `run` reads what they were bound to.
inline int RunDriver(CLI::App& app, int argc, char** argv, const std::function<int()>& run) {
  try {
    prism::Init(argc, argv);  // ranks 1..N-1 serve tasks here and never return
  } catch (const std::exception& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\n";
    return prism::cli::kExitBadFlags;
  }
  int status = prism::cli::Parse(app, argc, argv);
  if (status == prism::cli::kRun) {
    try {
      status = run();
    } catch (const std::exception& e) {
      std::cerr << app.get_name() << ": " << e.what() << "\n";
      status = 1;
    }
  }
  prism::Shutdown();  // the serving ranks exit here
  return status;
}

}  // namespace prism_apps
