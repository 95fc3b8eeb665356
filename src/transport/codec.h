#pragma once
// The wire format of the control-plane protocol (common/protocol.h): messages in batches.

#include <vector>

#include "common/protocol.h"

namespace prism::internal {

/// Appends one message to a batch.
void EncodeMessage(const Message& m, Buffer& batch);
/// Decodes every message of a batch. Throws SerializationError on corrupt input.
std::vector<Message> DecodeBatch(const char* data, size_t size);

}  // namespace prism::internal
