#pragma once
// A push channel: a stream of messages from any rank to the one rank that opened it
// (usually the driver), delivered as they are published through the head. The reader
// blocks on a condition variable, so nothing polls. Messages from one publisher arrive in
// the order they were published; messages to a channel nobody has open are dropped and
// listed by prism::state::ListErrors (CHANNEL_MESSAGE_DROPPED): open it before starting
// the work that publishes.
//
//   platform::Channel reports("run-42/reports");           // on the driver
//   ... in a task on any rank:
//   platform::Publish("run-42/reports", platform::ToBytes(metrics));
//   ... on the driver:
//   while (auto m = reports.Next(1000)) Show(platform::FromBytes<Metrics>(m->bytes));

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/internal/channel_inbox.h"

namespace prism::platform {

using ChannelMessage = internal::ChannelMessage;  // {from_rank, bytes}

class Channel {
 public:
  /// Opens channel `name` on the calling rank. Throws Error if it is open anywhere in the
  /// job (names are job-wide), RuntimeError outside Init..Shutdown.
  explicit Channel(std::string name);
  /// Closes it: later messages are dropped.
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  /// The next message, waiting up to `timeout_ms` (< 0: until one comes; a reader that
  /// must also notice other events should pass a bound); nullopt on timeout. Thread-safe.
  std::optional<ChannelMessage> Next(int64_t timeout_ms);
  /// Every message already here, without waiting. Thread-safe.
  std::vector<ChannelMessage> Drain();
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<internal::ChannelInbox> inbox_;
};

/// Sends `bytes` to the rank that opened channel `name`, from any rank, task or actor.
/// Does not wait. Throws RuntimeError outside Init..Shutdown.
void Publish(const std::string& name, const std::string& bytes);

}  // namespace prism::platform
