#pragma once
// The `dashboard` setting (Config::dashboard, PRISM_DASHBOARD, --prism-dashboard): whether
// rank 0 serves the dashboard, where, and whether it writes the end-of-job report. Apart
// from the server so that the settings code reads it without the HTTP stack.

#include <cstdint>
#include <string>

namespace prism::dashboard {

struct DashboardSetting {
  enum class Mode { kOff, kServe, kReportOnly };
  Mode mode = Mode::kOff;
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the kernel picks
  /// Served beyond loopback: requests must carry the dashboard's random token.
  bool NeedsToken() const;
  /// Whether Shutdown writes the report (served or report-only).
  bool WritesReport() const { return mode != Mode::kOff; }
  bool operator==(const DashboardSetting&) const = default;
};

/// Parses off (also "", 0, false) | loopback (also on, 1, true: 127.0.0.1, a port the
/// kernel picks) | <addr>:<port> (an IP address, "localhost", or "*" for every interface;
/// port 0 lets the kernel pick) | report (no server: the end-of-job report only),
/// case-insensitive. Returns false and sets `why` (what is wrong, and the accepted forms)
/// on anything else.
bool ParseDashboardSetting(const std::string& text, DashboardSetting* out, std::string* why);

}  // namespace prism::dashboard
