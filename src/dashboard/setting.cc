// The dashboard setting's forms (setting.h).
#include "dashboard/setting.h"

#include <cctype>
#include <cstdlib>

namespace prism::dashboard {

namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

bool DashboardSetting::NeedsToken() const { return mode == Mode::kServe && !IsLoopback(host); }

bool ParseDashboardSetting(const std::string& text, DashboardSetting* out, std::string* why) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  DashboardSetting s;
  if (t.empty() || t == "off" || t == "0" || t == "false") {
    *out = s;
    return true;
  }
  if (t == "report") {
    s.mode = DashboardSetting::Mode::kReportOnly;
    *out = s;
    return true;
  }
  s.mode = DashboardSetting::Mode::kServe;
  if (t == "loopback" || t == "on" || t == "1" || t == "true") {
    *out = s;
    return true;
  }
  const size_t colon = t.rfind(':');
  const std::string forms =
      " (expected off, loopback, report, or <address>:<port> such as 127.0.0.1:8265 or *:0)";
  if (colon == std::string::npos || colon == 0 || colon + 1 == t.size()) {
    *why = "is not a dashboard setting" + forms;
    return false;
  }
  const std::string port = t.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) {
    *why = "has no valid port (0..65535)" + forms;
    return false;
  }
  s.host = t.substr(0, colon);
  if (s.host.size() > 2 && s.host.front() == '[' && s.host.back() == ']') s.host = s.host.substr(1, s.host.size() - 2);
  if (s.host == "*") s.host = "0.0.0.0";
  if (s.host == "localhost") s.host = "127.0.0.1";
  s.port = static_cast<uint16_t>(p);
  *out = s;
  return true;
}

}  // namespace prism::dashboard
