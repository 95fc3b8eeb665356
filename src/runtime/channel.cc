// platform::Channel and Publish: thin handles over the core's channel calls.
#include "prism/platform/channel.h"

#include "prism/errors.h"
#include "prism/internal/core_api.h"

namespace prism::platform {

Channel::Channel(std::string name)
    : name_(std::move(name)), inbox_(internal::RequireCore("platform::Channel").OpenChannel(name_)) {}

Channel::~Channel() {
  // After Shutdown there is nothing left to close.
  if (auto* core = internal::CurrentCore()) {
    try {
      core->CloseChannel(name_);
    } catch (const std::exception&) {  // the head is gone: the job is ending anyway
    }
  }
}

std::optional<ChannelMessage> Channel::Next(int64_t timeout_ms) { return inbox_->Next(timeout_ms); }

std::vector<ChannelMessage> Channel::Drain() { return inbox_->Drain(); }

void Publish(const std::string& name, const std::string& bytes) {
  internal::RequireCore("platform::Publish").Publish(name, internal::Buffer(bytes.data(), bytes.size()));
}

}  // namespace prism::platform
