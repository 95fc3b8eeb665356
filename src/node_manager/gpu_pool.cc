#include "node_manager/gpu_pool.h"

#include <sstream>

#include "common/resources.h"

namespace prism::internal {

GpuPool::GpuPool(GpuDevices devices)
    : devices_(std::move(devices)), free_(devices_.ids.size(), kResourceUnit) {}

std::optional<GpuGrant> GpuPool::TryTake(int64_t units) {
  GpuGrant grant;
  if (units >= kResourceUnit) {
    // Whole GPUs (the head accepts only whole amounts above 1): the lowest free ones.
    const int64_t whole = (units + kResourceUnit - 1) / kResourceUnit;
    for (size_t i = 0; i < free_.size() && static_cast<int64_t>(grant.slots.size()) < whole; ++i) {
      if (free_[i] == kResourceUnit) grant.slots.push_back(i);
    }
    if (static_cast<int64_t>(grant.slots.size()) < whole) return std::nullopt;
    for (size_t i : grant.slots) {
      free_[i] = 0;
      grant.units.push_back(kResourceUnit);
    }
    return grant;
  }
  // A fraction: the device with the least room that still fits it.
  std::optional<size_t> best;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i] >= units && (!best || free_[i] < free_[*best])) best = i;
  }
  if (!best) return std::nullopt;
  free_[*best] -= units;
  grant.slots.push_back(*best);
  grant.units.push_back(units);
  return grant;
}

std::optional<GpuGrant> GpuPool::Acquire(int64_t units, std::chrono::milliseconds timeout) {
  if (units <= 0) return GpuGrant{};
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<GpuGrant> grant;
  released_.wait_for(lock, timeout, [&] { return (grant = TryTake(units)).has_value(); });
  return grant;
}

void GpuPool::Release(const GpuGrant& grant) {
  if (grant.Empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < grant.slots.size(); ++k) free_[grant.slots[k]] += grant.units[k];
  }
  released_.notify_all();
}

std::string GpuPool::DescribeFree() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return "no GPUs";
  std::ostringstream out;
  for (size_t i = 0; i < free_.size(); ++i) {
    out << (i ? ", " : "") << "GPU " << devices_.ids[i] << ": " << FromUnits(free_[i]) << " free";
  }
  return out.str();
}

}  // namespace prism::internal
