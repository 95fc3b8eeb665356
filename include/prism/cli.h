// prism/cli.h: the command line of a program built on Prism, with CLI11 (libcli11-dev;
// link CLI11::CLI11). A program declares its own flags on a CLI::App; this header adds what
// every app and benchmark shares, so they all accept Prism's runtime flags the same way:
//
//   --prism-*   Prism's runtime flags (prism/config.h), "--prism-x=v" or "--prism-x v".
//               They pass through untouched: prism::Init(argc, argv) reads the same argv and
//               validates them (an unknown --prism-x is Init's error, listing the known
//               ones), so the list of flags lives in one place, the runtime's settings.
//   --help      the program's flags, then a line on the --prism-* flags; exit status 0.
//   a bad flag  CLI11's message and "Run with --help", exit status 2 (kExitBadFlags).
//
// Nothing after a "--" is a flag of the program's: it is left to a positional (e.g. the
// command prism-train-script runs), --prism-* included.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace prism::cli {

/// The exit status of a run stopped by bad flags (and, in the apps, by a bad --prism-*
/// value or PRISM_* variable).
inline constexpr int kExitBadFlags = 2;
/// Parse's result when the program should go on and run.
inline constexpr int kRun = -1;

/// argv[1..argc-1] without Prism's own flags: "--prism-x=v", or "--prism-x" and the argument
/// after it (as prism::Init reads them). Nothing after "--" is taken out. Thread-safe.
inline std::vector<std::string> ProgramArgs(int argc, char** argv) {
  std::vector<std::string> kept;
  bool after_dashes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") after_dashes = true;
    if (!after_dashes && arg.rfind("--prism-", 0) == 0) {
      if (arg.find('=') == std::string::npos && i + 1 < argc) ++i;  // "--prism-x v"
      continue;
    }
    kept.push_back(arg);
  }
  return kept;
}

/// Parses argc/argv with `app`, Prism's --prism-* flags passed through to prism::Init (and
/// named in --help's footer). Returns kRun to go on, 0 after --help (printed to stdout), or
/// kExitBadFlags after a bad flag (CLI11's message on stderr). Does not throw CLI11's
/// errors.
inline int Parse(CLI::App& app, int argc, char** argv) {
  std::string footer = app.get_footer();
  if (footer.find("--prism-") == std::string::npos) {
    app.footer(footer + (footer.empty() ? "" : "\n") +
               "Prism's runtime flags (--prism-num-cpus=N, --prism-log-level=L, ...; see "
               "prism/config.h) are read by prism::Init.");
  }
  std::vector<std::string> args = ProgramArgs(argc, argv);
  std::reverse(args.begin(), args.end());  // CLI11's parse(vector) takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadFlags;
  }
  return kRun;
}

/// Parse, then ends the process with its status unless the program should run: for
/// programs that read their flags before prism::Init (every rank sees the same argv, so
/// every rank exits the same way, before MPI starts).
inline void ParseOrExit(CLI::App& app, int argc, char** argv) {
  const int status = Parse(app, argc, argv);
  if (status != kRun) std::exit(status);
}

/// True if `name` (e.g. "--rounds") was given on the command line: for flags whose default
/// depends on another one (--quick).
inline bool Given(const CLI::App& app, const std::string& name) { return app.count(name) > 0; }

}  // namespace prism::cli
