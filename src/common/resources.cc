#include "common/resources.h"

#include <algorithm>
#include <cstdio>

namespace prism::internal {

ResourceSet::ResourceSet(const std::map<std::string, double>& amounts) {
  for (const auto& [name, amount] : amounts) Set(name, ToUnits(amount));
}

int64_t ResourceSet::Get(const std::string& name) const {
  for (const auto& [n, v] : entries_) {
    if (n == name) return v;
  }
  return 0;
}

void ResourceSet::Set(const std::string& name, int64_t units) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != entries_.end() && it->first == name) {
    if (units == 0) {
      entries_.erase(it);
    } else {
      it->second = units;
    }
  } else if (units != 0) {
    entries_.insert(it, {name, units});
  }
}

bool ResourceSet::FitsIn(const ResourceSet& capacity) const { return FitsInScaled(capacity, 1); }

bool ResourceSet::FitsInScaled(const ResourceSet& capacity, int64_t scale) const {
  // Both sorted: one merge pass.
  auto c = capacity.entries_.begin();
  for (const auto& [name, amount] : entries_) {
    while (c != capacity.entries_.end() && c->first < name) ++c;
    int64_t have = (c != capacity.entries_.end() && c->first == name) ? c->second : 0;
    if (amount > have * scale) return false;
  }
  return true;
}

void ResourceSet::Combine(const ResourceSet& other, int64_t sign) {
  // Both sorted: one merge pass, updating in place (no zeros kept).
  size_t i = 0;
  for (const auto& [name, amount] : other.entries_) {
    while (i < entries_.size() && entries_[i].first < name) ++i;
    if (i < entries_.size() && entries_[i].first == name) {
      entries_[i].second += sign * amount;
      if (entries_[i].second == 0) {
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    } else if (amount != 0) {
      entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(i), {name, sign * amount});
      ++i;
    }
  }
}

void ResourceSet::Add(const ResourceSet& other) { Combine(other, 1); }

void ResourceSet::Subtract(const ResourceSet& other) { Combine(other, -1); }

std::map<std::string, double> ResourceSet::ToMap() const {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : entries_) out[name] = FromUnits(amount);
  return out;
}

std::string ResourceSet::ToString() const {
  std::string s = "{";
  for (const auto& [name, amount] : entries_) {
    if (s.size() > 1) s += ", ";
    char num[64];
    std::snprintf(num, sizeof num, "%g", FromUnits(amount));
    s += name + ": " + num;
  }
  return s + "}";
}

std::string DescribeRankCapacities(const std::vector<ResourceSet>& capacities, size_t max_ranks) {
  std::string s;
  for (size_t i = 0; i < capacities.size() && i < max_ranks; ++i) {
    ResourceSet shown;
    for (const auto& [name, units] : capacities[i].Entries()) {
      if (name.rfind("rank:", 0) != 0) shown.Set(name, units);
    }
    s += " rank " + std::to_string(i) + " " + shown.ToString() + ";";
  }
  if (capacities.size() > max_ranks) s += " ...";
  return s;
}

}  // namespace prism::internal
