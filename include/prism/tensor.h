#pragma once
// torch::Tensor as an object: Put, Get, task arguments and results, without a copy on read.
// Header-only; include it (with LibTorch on the include path) where tensors cross tasks.
//
//   #include <prism/tensor.h>
//   auto ref = prism::Put(torch::randn({1024, 1024}));
//   std::shared_ptr<torch::Tensor> t = prism::Get(ref);   // aliases the store's buffer
//
// Written: dtype, shape, then the elements (contiguous, row-major), at a 64-byte offset
// inside the object (64-byte aligned in memory for objects of 2 MiB and more, 16 below). A tensor on another device is copied to the CPU first, a
// non-contiguous one is made contiguous; autograd state is not kept.
// Read: a CPU tensor whose storage is the object's bytes on this rank (a local value, or
// the copy a transfer wrote straight into the store), kept alive by the tensor: the store
// never spills that object while the tensor lives. The tensor shares its memory with every
// other reader of the object on this rank: clone() it before writing in place. Bytes that
// are not the store's (a tensor nested in a Boost-serialized struct) or misaligned are
// copied into a fresh tensor instead.

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "prism/errors.h"
#include "prism/serialization.h"

namespace prism::internal {

template <>
struct IsSerializable<torch::Tensor> : std::true_type {};

template <>
struct Serializer<torch::Tensor> {
  static constexpr size_t kAlign = 64;
  static constexpr int64_t kMaxDims = 64;

  static void Write(Writer& w, const torch::Tensor& value) {
    if (!value.defined()) {
      w.Pod<int8_t>(-1);
      return;
    }
    torch::Tensor t = value.device().is_cpu() ? value : value.to(torch::kCPU);
    t = t.contiguous();
    w.Pod<int8_t>(static_cast<int8_t>(t.scalar_type()));
    w.Pod<int64_t>(t.dim());
    for (int64_t d : t.sizes()) w.Pod<int64_t>(d);
    // Pad so that the elements start on a 64-byte boundary of the object's buffer: after
    // the pad's length, the pad, and the elements' byte count.
    const size_t at = w.buffer().size() + 2 * sizeof(uint64_t);
    const uint64_t pad = (kAlign - at % kAlign) % kAlign;
    w.Pod<uint64_t>(pad);
    if (pad > 0) std::memset(w.buffer().Extend(pad), 0, pad);
    const uint64_t nbytes = t.numel() * t.element_size();
    w.buffer().Reserve(w.buffer().size() + sizeof(uint64_t) + nbytes);  // one allocation
    w.Bytes(t.data_ptr(), nbytes);
  }

  static torch::Tensor Read(Reader& r) {
    const auto code = r.Pod<int8_t>();
    if (code == -1) return torch::Tensor();
    if (code < 0 || code >= static_cast<int8_t>(c10::ScalarType::NumOptions)) {
      throw SerializationError("prism: corrupt tensor: unknown dtype code " +
                               std::to_string(code));
    }
    const auto dtype = static_cast<c10::ScalarType>(code);
    const auto ndim = r.Pod<int64_t>();
    if (ndim < 0 || ndim > kMaxDims) {
      throw SerializationError("prism: corrupt tensor: " + std::to_string(ndim) + " dimensions");
    }
    std::vector<int64_t> sizes(static_cast<size_t>(ndim));
    uint64_t numel = 1;
    for (auto& d : sizes) {
      d = r.Pod<int64_t>();
      if (d < 0) throw SerializationError("prism: corrupt tensor: negative dimension");
      numel *= static_cast<uint64_t>(d);
    }
    r.Take(r.Pod<uint64_t>());  // alignment padding
    ByteView bytes = r.Bytes();
    const size_t element = c10::elementSize(dtype);
    if (bytes.size != numel * element) {
      throw SerializationError("prism: corrupt tensor: " + std::to_string(bytes.size) +
                               " bytes for " + std::to_string(numel) + " elements of " +
                               std::to_string(element) + " bytes");
    }
    auto options = torch::TensorOptions().dtype(dtype);
    const Payload* owner = r.owner();
    if (owner != nullptr && *owner && reinterpret_cast<uintptr_t>(bytes.data) % element == 0 &&
        bytes.size > 0) {
      auto* keep = new Payload(*owner);  // released by the tensor's storage
      return torch::from_blob(const_cast<char*>(bytes.data), sizes,
                              [keep](void*) { delete keep; }, options);
    }
    torch::Tensor t = torch::empty(sizes, options);
    if (bytes.size > 0) std::memcpy(t.data_ptr(), bytes.data, bytes.size);
    return t;
  }
};

}  // namespace prism::internal
