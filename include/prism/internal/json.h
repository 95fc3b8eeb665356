#pragma once
// Prism's one JSON convention, for every file it reads or writes with nlohmann-json
// (checkpoint metadata, Tune's journal and results, perf reports, status JSON): a number
// that is not finite (NaN, +/-Infinity: a diverged loss) is written as null, which nlohmann
// does by itself, and reads back as NaN where a number is expected. The files stay standard
// JSON, so a browser, jq and Python's json module read them.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "prism/errors.h"

namespace prism::internal {

/// How deep JSON may nest where Prism parses it (checkpoint records, journals, Serve's
/// Request::Json): deeper documents are refused before parsing, since copying or dumping
/// them recurses once per level and a hostile one would overflow the stack.
inline constexpr size_t kMaxJsonDepth = 512;

/// The deepest nesting of arrays and objects in `text` (brackets inside strings do not
/// count), counting no further than `stop_at`. Does not check that `text` is JSON.
inline size_t JsonNestingDepth(std::string_view text, size_t stop_at = kMaxJsonDepth + 1) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest < stop_at; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// `j` as a double; null (how a NaN or an infinity was written) is NaN. Throws
/// nlohmann::json::type_error if `j` is neither a number nor null.
inline double JsonDouble(const nlohmann::json& j) {
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  return j.get<double>();
}

/// `text` parsed. Files written before this convention (by an older Prism, or by Python's
/// json module) may hold the bare words NaN, Infinity and -Infinity: they read as null.
/// Throws prism::Error "<source>: malformed JSON: <why>" if `text` is not JSON or nests
/// deeper than kMaxJsonDepth.
inline nlohmann::json ParseJson(std::string_view text, const std::string& source) {
  if (JsonNestingDepth(text) > kMaxJsonDepth) {
    throw Error(source + ": malformed JSON: nested deeper than " + std::to_string(kMaxJsonDepth) +
                " levels");
  }
  std::string why;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // A parse_error, or out_of_range for a number no double holds (1e999).
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ...": the part
    // after the tag.
    why = e.what();
    if (size_t at = why.find("] "); at != std::string::npos) why = why.substr(at + 2);
  }
  // Not JSON as written: try again with the bare words outside strings as null. If that
  // fails too, the error is reported where the original text has it.
  std::string patched;
  patched.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      patched += c;
      if (c == '\\' && i + 1 < text.size()) {
        patched += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.substr(i, word.size()) == word) {
        patched += "null";
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) patched += c;
  }
  nlohmann::json out = nlohmann::json::parse(patched, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) throw Error(source + ": malformed JSON: " + why);
  return out;
}

}  // namespace prism::internal
