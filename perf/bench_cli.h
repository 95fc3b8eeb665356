// bench_cli.h: a benchmark's command line, with CLI11 through prism/cli.h, so every perf/
// program reads its flags the same way: --help lists them (exit 0), a bad flag or value is
// CLI11's message (exit 2), Prism's --prism-* flags pass through to prism::Init, and every
// rank, which sees the same argv, exits the same way before MPI starts.
//
// Most benchmarks have a --quick smoke mode that changes the defaults of other flags: bind
// those flags, parse, then QuickDefault gives each one not given its quick or full value
// (or Parse with a function that sets the quick values, the flags given parsed over them).
#pragma once

#include <functional>
#include <string>

#include "prism/cli.h"

namespace prism_bench {

struct Cli {
  /// `program` names the binary; `what` is --help's first line(s).
  Cli(const std::string& program, const std::string& what) : app(what, program) {}

  /// Adds --quick, a short smoke run that `what` describes (its quick defaults).
  Cli& AddQuick(const std::string& what = "a short smoke run") {
    app.add_flag("--quick", quick, what);
    return *this;
  }
  /// Adds --json=PATH, defaulting to `path` ("": no file unless given).
  Cli& AddJson(const std::string& path = "") {
    json = path;
    app.add_option("--json", json,
                   "where the Google-Benchmark-style JSON goes, directories created (" +
                       (path.empty() ? std::string("default: none") : "default " + path) + ")");
    return *this;
  }

  /// Parses argv; --help and bad flags end the process (prism::cli::ParseOrExit).
  void Parse(int argc, char** argv) { prism::cli::ParseOrExit(app, argc, argv); }

  /// Parses argv as above; with --quick, `quick_defaults` then sets the quick values of the
  /// options and argv is parsed again, so that the flags given win over them.
  void Parse(int argc, char** argv, const std::function<void()>& quick_defaults) {
    Parse(argc, argv);
    if (!quick) return;
    quick_defaults();
    app.clear();
    Parse(argc, argv);
  }

  /// True if `name` ("--rounds") was on the command line.
  bool Given(const std::string& name) const { return prism::cli::Given(app, name); }

  /// Unless `name` was given: `out` = the quick or the full value, as --quick says.
  template <class T, class Q, class F>
  void QuickDefault(const std::string& name, T& out, Q quick_value, F full_value) {
    if (!Given(name)) out = quick ? static_cast<T>(quick_value) : static_cast<T>(full_value);
  }

  CLI::App app;
  bool quick = false;
  std::string json;
};

}  // namespace prism_bench
