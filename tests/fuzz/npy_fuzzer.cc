// Fuzzes Data's .npy reader (data/io/npy.cc): the fuzzer's bytes are the file.
//
// Properties: ReadNpyHeader and ReadNpyRows throw nothing but prism::Error; a header they
// accept describes an array the file holds (every row read is inside the file, so
// reading every byte of the block is in bounds); rows read, written with WriteNumpyPart
// and read again are the same bytes.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "data/io.h"
#include "data_util.h"
#include "fuzz_util.h"

namespace {

namespace io = prism::data::io;
using prism::fuzz::Fail;

constexpr int64_t kMaxRowsRead = 256;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = prism::fuzz::ScratchDir() + "/input.npy";
  prism::fuzz::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  io::NpyHeader header;
  try {
    header = io::ReadNpyHeader(path);
  } catch (const prism::Error&) {
    return 0;
  }
  if (header.shape.empty() || header.shape[0] < 0) Fail("ReadNpyHeader accepted a shape with no rows");
  const int64_t rows = header.shape[0];
  unsigned __int128 need = prism::data::DTypeSize(header.dtype);
  for (int64_t d : header.shape) {
    if (d == 0) need = 0;
    if (need > size) need = size + 1;  // saturates: stays below 2^128
    need *= static_cast<uint64_t>(d);
  }
  if (header.data_offset + need > size)
    Fail("ReadNpyHeader accepted a shape whose elements the file does not hold");
  prism::data::Block block;
  try {
    block = io::ReadNpyRows(path, 0, std::min(rows, kMaxRowsRead));
    (void)prism::fuzz::TouchBlock(block);
    if (rows > 0) (void)prism::fuzz::TouchBlock(io::ReadNpyRows(path, rows - 1, rows));
  } catch (const prism::Error&) {
    return 0;  // e.g. a bool element that is neither 0 nor 1
  }
  if (block.num_rows() == 0) return 0;

  const std::string out = prism::fuzz::ScratchDir() + "/out";
  const io::Part part = io::WriteNumpyPart(out, 0, {block}, "data");
  const prism::data::Block back = io::ReadNpyRows(out + "/" + part.file, 0, block.num_rows());
  const auto& a = block.column_at(0).second;
  const auto& b = back.column_at(0).second;
  if (a.dtype() != b.dtype() || a.row_shape() != b.row_shape() || a.size_bytes() != b.size_bytes() ||
      (a.size_bytes() > 0 && std::memcmp(a.data(), b.data(), a.size_bytes()) != 0)) {
    Fail("rows written with WriteNumpyPart read back different");
  }
  return 0;
}
