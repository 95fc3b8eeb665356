#pragma once
// `prism status`: the dashboard's summary as text, for a terminal (users who only have ssh).
// It reads the same JSON the page reads: GET /api/snapshot of a live dashboard, or the data
// inlined in a report (src/cli/prism.cc fetches or opens it; this file only formats).

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace prism::dashboard {

/// The snapshot inlined in a report's HTML (ReportHtml's window.PRISM_REPORT), or nullopt
/// if `html` is not a Prism dashboard report.
std::optional<nlohmann::json> ReportSnapshot(const std::string& html);

/// A few lines and small tables: the job, every rank, tasks by state and by function (with
/// p50/p99), actors, placement groups, KV keys and the latest failures. `source` names where
/// it came from (the URL, or the report's path); `live` says which. Fields missing from
/// `snapshot` print as blanks, never throw.
std::string StatusText(const nlohmann::json& snapshot, const std::string& source, bool live);

}  // namespace prism::dashboard
