// What every trial scheduler shares (status names, the default choice of the next trial,
// metric/mode checks) and the FIFO scheduler.

#include "prism/tune/schedulers.h"
#include "tune/metric_mode.h"

namespace prism::tune {

namespace internal {

void CheckMode(const std::string& mode, const std::string& who) {
  if (mode != "max" && mode != "min") {
    throw Error("prism::tune: " + who + " got mode \"" + mode +
                "\"; pass \"max\" (higher is better) or \"min\" (lower is better)");
  }
}

void MergeMetricMode(std::string& metric, std::string& mode, const std::string& tune_metric,
                     const std::string& tune_mode, const std::string& who, bool required) {
  if (!metric.empty() && !tune_metric.empty() && metric != tune_metric) {
    throw Error("prism::tune: " + who + " was given metric \"" + metric +
                "\" but TuneConfig's is \"" + tune_metric + "\"; set it in one place only");
  }
  if (!mode.empty() && !tune_mode.empty() && mode != tune_mode) {
    throw Error("prism::tune: " + who + " was given mode \"" + mode + "\" but TuneConfig's is \"" +
                tune_mode + "\"; set it in one place only");
  }
  if (metric.empty()) metric = tune_metric;
  if (mode.empty()) mode = tune_mode;
  if (!mode.empty()) CheckMode(mode, who);
  if (required && (metric.empty() || mode.empty())) {
    throw Error("prism::tune: " + who + " needs a metric and a mode (\"max\" or \"min\"): set " +
                "TuneConfig's metric and mode, or the " + who + "'s own");
  }
}

}  // namespace internal

const char* StatusName(TrialStatus status) {
  switch (status) {
    case TrialStatus::kPending: return "PENDING";
    case TrialStatus::kRunning: return "RUNNING";
    case TrialStatus::kPaused: return "PAUSED";
    case TrialStatus::kTerminated: return "TERMINATED";
    case TrialStatus::kError: return "ERROR";
  }
  return "UNKNOWN";
}

Trial* TrialScheduler::ChooseTrialToRun(TrialRunner&, const std::vector<Trial*>& candidates) {
  for (Trial* t : candidates) {
    if (t->status == TrialStatus::kPending) return t;
  }
  for (Trial* t : candidates) {
    if (t->status == TrialStatus::kPaused) return t;
  }
  return nullptr;
}

void FIFOScheduler::SetSearchProperties(const std::string& metric, const std::string& mode) {
  if (!mode.empty()) internal::CheckMode(mode, "FIFOScheduler");
}

}  // namespace prism::tune
