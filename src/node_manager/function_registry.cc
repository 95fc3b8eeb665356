#include <cctype>

#include "prism/remote.h"

namespace prism::internal {

FunctionRegistry& FunctionRegistry::Instance() {
  static FunctionRegistry registry;
  return registry;
}

void FunctionRegistry::Add(const std::string& key, RemoteFunction fn) {
  name_by_key_[key] = fn.name;
  by_name_[fn.name] = std::move(fn);
}

const RemoteFunction* FunctionRegistry::FindByName(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const std::string& FunctionRegistry::NameOf(const std::string& key, const char* what) const {
  auto it = name_by_key_.find(key);
  if (it == name_by_key_.end()) {
    throw FunctionNotFound(std::string("prism: ") + what +
                           ": this function is not registered; add PRISM_REMOTE(f) at namespace "
                           "scope in the binary (for overloads PRISM_REMOTE(PRISM_FUNC(f, "
                           "Args...)))");
  }
  return it->second;
}

std::vector<std::string> FunctionRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, fn] : by_name_) names.push_back(name);
  return names;
}

namespace {
std::string Strip(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}
}  // namespace

std::vector<std::string> SplitRemoteNames(const char* text) {
  std::vector<std::string> raw;
  std::string cur;
  int depth = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    char c = *p;
    if (c == '(' || c == '<') ++depth;
    if (c == ')' || c == '>') --depth;
    if (c == ',' && depth == 0) {
      raw.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  raw.push_back(cur);
  std::vector<std::string> names;
  for (auto& r : raw) {
    std::string s = Strip(r);
    for (const char* macro : {"PRISM_FUNC(", "RAY_FUNC("}) {
      std::string m(macro);
      if (s.rfind(m, 0) == 0 && s.back() == ')') {
        // "PRISM_FUNC(f,int,double)" -> "f(int,double)"
        std::string inner = s.substr(m.size(), s.size() - m.size() - 1);
        auto comma = inner.find(',');
        s = comma == std::string::npos ? inner
                                       : inner.substr(0, comma) + "(" + inner.substr(comma + 1) + ")";
      }
    }
    if (!s.empty() && s[0] == '&') s.erase(0, 1);
    names.push_back(s);
  }
  return names;
}

}  // namespace prism::internal
