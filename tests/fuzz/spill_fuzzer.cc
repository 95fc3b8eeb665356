// Fuzzes the spill-file reader (object_store/spill_file.h): the file an object store reads
// a spilled object back from, which anyone who can write to the spill directory can
// change. The fuzzer's first byte chooses which header fields to set right (so inputs
// reach the later checks: the store's token and object id, the size, the CRC-32); the
// rest is the file, header first.
//
// Properties: ReadSpillFile throws nothing but ObjectLostError; it returns bytes only
// when the file holds exactly the object this store wrote, and then returns those bytes;
// it never allocates more than the size the store expects, whatever the header claims.

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "object_store/spill_file.h"
#include "prism/errors.h"

namespace {

using prism::fuzz::Fail;

constexpr uint64_t kWriter = 0x5eed5eed12345678ull;
constexpr size_t kHeader = 40;  // spill_file.cc: magic, writer, id, size, crc, reserved

void Put64(std::string& s, size_t at, uint64_t v) {
  if (s.size() >= at + 8) std::memcpy(s.data() + at, &v, 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prism::fuzz::Bytes in(data, size);
  const uint8_t fix = in.Byte();
  const prism::ObjectId id(in.U64() | 1);
  std::string file(in.Rest());
  const uint64_t payload = file.size() > kHeader ? file.size() - kHeader : 0;
  // The size the store expects: the payload's, or (bit 4) one the file's tail misstates.
  const uint64_t expected = (fix & 16) ? payload + (fix >> 5) : payload;

  if ((fix & 1) && file.size() >= 8) std::memcpy(file.data(), "PRISMSP1", 8);
  if (fix & 2) {
    Put64(file, 8, kWriter);
    Put64(file, 16, id.Value());
  }
  if (fix & 4) Put64(file, 24, expected);
  if ((fix & 8) && file.size() >= kHeader) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(file.data() + kHeader), payload));
    std::memcpy(file.data() + 32, &crc, 4);
  }
  const std::string path = prism::fuzz::ScratchDir() + "/" + id.Hex();
  prism::fuzz::WriteFile(path, file);
  try {
    prism::internal::Payload value = prism::internal::ReadSpillFile(path, kWriter, id, expected);
    if (value == nullptr || value->size() != expected || expected != payload ||
        (payload > 0 && std::memcmp(value->data(), file.data() + kHeader, payload) != 0)) {
      Fail("ReadSpillFile returned bytes that are not the file's object");
    }
  } catch (const prism::ObjectLostError&) {
  }

  // What this store writes, it reads back.
  prism::internal::Buffer object(file.data(), file.size());
  const std::string why = prism::internal::WriteSpillFile(path, kWriter, id, object);
  if (!why.empty()) Fail("WriteSpillFile failed: " + why);
  prism::internal::Payload back = prism::internal::ReadSpillFile(path, kWriter, id, object.size());
  if (back->size() != object.size() ||
      (!object.empty() && std::memcmp(back->data(), object.data(), object.size()) != 0))
    Fail("a spill file written does not read back as its object");
  return 0;
}
