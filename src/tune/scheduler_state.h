#pragma once
// What the schedulers' SaveState/RestoreState share: their state is a JSON object naming
// the scheduler ("scheduler"), and random generators travel as text.

#include <functional>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "prism/errors.h"

namespace prism::tune::internal {

/// Parses `state` (nothing to do if empty), checks that `who` saved it, and runs `body` on
/// it. Any failure (not JSON, another scheduler's, a missing or bad field, or an Error from
/// `body`) becomes prism::Error naming `who` and what to do.
inline void RestoreJsonState(const std::string& state, const char* who,
                             const std::function<void(const nlohmann::json&)>& body) {
  if (state.empty()) return;
  try {
    nlohmann::json j = nlohmann::json::parse(state);
    if (j.at("scheduler") != who) {
      throw Error("the state was saved by " + j.at("scheduler").get<std::string>());
    }
    body(j);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("prism::tune: ") + who + " cannot restore its state (" + e.what() +
                "); was the experiment journal written by another version?");
  } catch (const Error& e) {
    throw Error(std::string("prism::tune: ") + who + " cannot restore its state: " + e.what() +
                "; restore with the scheduler options the experiment was started with");
  }
}

/// A generator's state as text, and back (Error if the text is not one).
inline std::string RngText(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

inline std::mt19937_64 RngFromText(const std::string& text) {
  std::mt19937_64 rng;
  std::istringstream in(text);
  in >> rng;
  if (in.fail()) throw Error("the random generator's state does not parse");
  return rng;
}

}  // namespace prism::tune::internal
