#include "common/progress_helper.h"

#include <atomic>

namespace prism::internal {
namespace {

std::atomic<ProgressHelper*> g_helper{nullptr};
// Calls inside the helper, so that removing it can wait for them (threads running user
// code may still spin after the runtime began to stop).
std::atomic<int> g_in_flight{0};
thread_local int t_in_flight = 0;  // this thread's share of g_in_flight

template <typename Fn>
auto WithHelper(Fn&& fn) {
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  ++t_in_flight;
  ProgressHelper* helper = g_helper.load(std::memory_order_seq_cst);
  auto result = fn(helper);
  --t_in_flight;
  g_in_flight.fetch_sub(1, std::memory_order_release);
  return result;
}

}  // namespace

void SetProgressHelper(ProgressHelper* helper) {
  g_helper.store(helper, std::memory_order_seq_cst);
}

void RemoveProgressHelper(ProgressHelper* helper) {
  ProgressHelper* expected = helper;
  g_helper.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst);
  while (g_in_flight.load(std::memory_order_acquire) > t_in_flight) sched_yield();
}

bool HelpProgress() {
  if (g_helper.load(std::memory_order_relaxed) == nullptr) return false;
  return WithHelper([](ProgressHelper* h) { return h != nullptr && h->Help(); });
}

void StopHelpingProgress() {
  if (g_helper.load(std::memory_order_relaxed) == nullptr) return;
  WithHelper([](ProgressHelper* h) {
    if (h != nullptr) h->StopHelping();
    return true;
  });
}

}  // namespace prism::internal
