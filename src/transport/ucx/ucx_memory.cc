#include "transport/ucx/ucx_memory.h"

#include "common/log.h"

namespace prism::internal {

UcxMemory::~UcxMemory() {
  for (auto& [base, m] : regions_) ucp_mem_unmap(context_->handle, m.memh);
}

char* UcxMemory::Allocate(size_t size) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.length = size;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_->handle, &params, &memh);
  if (st != UCS_OK) {
    PRISM_LOG_DEBUG("UCX could not allocate " << size << " bytes (" << ucs_status_string(st)
                                              << "); using ordinary memory");
    return nullptr;
  }
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  void* packed = nullptr;
  size_t packed_size = 0;
  if (ucp_mem_query(memh, &attr) != UCS_OK || attr.length < size ||
      ucp_rkey_pack(context_->handle, memh, &packed, &packed_size) != UCS_OK) {
    ucp_mem_unmap(context_->handle, memh);
    return nullptr;
  }
  Mapped m{0, size, memh, std::vector<char>(static_cast<char*>(packed),
                                            static_cast<char*>(packed) + packed_size)};
  ucp_rkey_buffer_release(packed);
  char* block = static_cast<char*>(attr.address);
  std::lock_guard<std::mutex> lock(mu_);
  m.id = ++next_id_;
  regions_.emplace(reinterpret_cast<uintptr_t>(block), std::move(m));
  return block;
}

void UcxMemory::Free(char* block, size_t) {
  std::function<void()> on_free;
  ucp_mem_h memh = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(block));
    if (it == regions_.end()) return;
    memh = it->second.memh;
    freed_.push_back(it->second.id);
    regions_.erase(it);
    on_free = on_free_;
  }
  ucp_mem_unmap(context_->handle, memh);
  if (on_free) on_free();
}

std::optional<UcxMemory::Region> UcxMemory::Find(const void* data, size_t size) const {
  const auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.upper_bound(p);
  if (it == regions_.begin()) return std::nullopt;
  --it;
  if (p + size > it->first + it->second.size) return std::nullopt;
  return Region{it->second.id, it->second.rkey};
}

std::vector<uint64_t> UcxMemory::TakeFreed() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(freed_, {});
}

void UcxMemory::SetOnFree(std::function<void()> on_free) {
  std::lock_guard<std::mutex> lock(mu_);
  on_free_ = std::move(on_free);
}

}  // namespace prism::internal
