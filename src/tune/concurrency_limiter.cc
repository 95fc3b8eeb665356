// ConcurrencyLimiter (Ray's tune/search/concurrency_limiter.py): at most max_concurrent of
// the wrapped searcher's trials live at once. Suggest answers Wait while the limit is
// reached; everything else passes through. Its state is the live trials plus the wrapped
// searcher's own state, so a restored experiment still counts the trials it resumes.

#include <algorithm>

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/tune/searcher.h"

namespace prism::tune {

namespace {
constexpr const char* kLimiterKind = "ConcurrencyLimiter";
}  // namespace

ConcurrencyLimiter::ConcurrencyLimiter(std::shared_ptr<Searcher> searcher, int max_concurrent)
    : searcher_(std::move(searcher)), max_concurrent_(max_concurrent) {
  if (!searcher_) {
    throw Error("prism::tune::ConcurrencyLimiter: the searcher is null; pass the searcher to "
                "limit, e.g. std::make_shared<tune::TPESearch>()");
  }
  if (max_concurrent_ < 1) {
    throw Error("prism::tune::ConcurrencyLimiter: max_concurrent is " +
                std::to_string(max_concurrent_) + "; pass 1 or more");
  }
}

void ConcurrencyLimiter::Setup(const ParamSpace& space, const std::string& metric,
                               const std::string& mode, int num_samples, uint64_t seed) {
  // live_ is kept: a RestoreState may come before Setup.
  searcher_->Setup(space, metric, mode, num_samples, seed);
}

Suggestion ConcurrencyLimiter::Suggest(const std::string& trial_id) {
  if (static_cast<int>(live_.size()) >= max_concurrent_) return Suggestion::Wait();
  Suggestion s = searcher_->Suggest(trial_id);
  if (s.kind == Suggestion::kConfig) live_.push_back(trial_id);
  return s;
}

void ConcurrencyLimiter::OnTrialResult(const std::string& trial_id, const Metrics& result) {
  searcher_->OnTrialResult(trial_id, result);
}

void ConcurrencyLimiter::OnTrialComplete(const std::string& trial_id, const Config& config,
                                         const Metrics* result, bool error) {
  live_.erase(std::remove(live_.begin(), live_.end(), trial_id), live_.end());
  searcher_->OnTrialComplete(trial_id, config, result, error);
}

std::string ConcurrencyLimiter::SaveState() const {
  nlohmann::json j;
  j["kind"] = kLimiterKind;
  j["live"] = live_;
  j["searcher"] = searcher_->SaveState();
  return j.dump();
}

void ConcurrencyLimiter::RestoreState(const std::string& state) {
  std::string inner;
  std::vector<std::string> live;
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    if (j.at("kind").get<std::string>() != kLimiterKind) throw std::runtime_error("kind");
    live = j.at("live").get<std::vector<std::string>>();
    inner = j.at("searcher").get<std::string>();
  } catch (const std::exception& e) {
    throw Error("prism::tune::ConcurrencyLimiter::RestoreState: the state is not one "
                "ConcurrencyLimiter::SaveState wrote (" + std::string(e.what()) + "): \"" +
                state.substr(0, 200) + "\"; restore with the searcher the experiment ran with");
  }
  searcher_->RestoreState(inner);
  live_ = std::move(live);
}

}  // namespace prism::tune
