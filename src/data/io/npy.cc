// NumPy .npy files (NEP 1): "\x93NUMPY", version (1, 2 or 3), the header's length (u16 for
// version 1, u32 after), then the header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
// padded with spaces to a multiple of 64 bytes and ended by '\n'; then the elements,
// row-major. Rows [begin, end) are one pread at data_offset + begin * row_bytes into the
// column's buffer. Little-endian only (x86 and arm64 hosts); a big-endian file is an error
// that says how to convert it.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "data/io/file_util.h"
#include "prism/internal/buffer.h"

namespace prism::data::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxHeader = 1 << 20;

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw Error("prism::data: " + path + ": " + what);
}

/// The value text after 'key': in a header dict (up to the next ',' at depth 0 or '}').
std::string DictValue(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  if (at == std::string::npos) Bad(path, "the .npy header has no '" + key + "': " + header);
  at = header.find(':', at);
  if (at == std::string::npos) Bad(path, "corrupt .npy header: " + header);
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    const char ch = header[end];
    if (ch == '(' || ch == '[') ++depth;
    if (ch == ')' || ch == ']') --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
  }
  std::string value = header.substr(at, end - at);
  const size_t first = value.find_first_not_of(" \t");
  const size_t last = value.find_last_not_of(" \t");
  return first == std::string::npos ? "" : value.substr(first, last - first + 1);
}

DType DTypeOfDescr(const std::string& descr, const std::string& path) {
  if (descr == "<f4") return DType::kFloat32;
  if (descr == "<f8") return DType::kFloat64;
  if (descr == "<i4") return DType::kInt32;
  if (descr == "<i8") return DType::kInt64;
  if (descr == "|u1" || descr == "<u1") return DType::kUInt8;
  if (descr == "|b1") return DType::kBool;
  std::string advice = "convert it with numpy, e.g. np.save(path, a.astype('<f4')) or 'int64'";
  if (!descr.empty() && descr[0] == '>') advice = "it is big-endian: " + advice;
  Bad(path, "the array's dtype '" + descr +
                "' has no column type (float32/64 '<f4' '<f8', "
                "int32/64 '<i4' '<i8', uint8 '|u1', bool '|b1'): " +
                advice);
}

const char* DescrOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kUInt8:
      return "|u1";
    case DType::kBool:
      return "|b1";
    case DType::kString:
      break;
  }
  return nullptr;
}

}  // namespace

NpyHeader ReadNpyHeader(const std::string& path) {
  detail::Fd fd = detail::OpenForRead(path, "the .npy file");
  const uint64_t size = FileSize(path);
  char prefix[12];
  if (size < 10) Bad(path, "not a .npy file (" + std::to_string(size) + " bytes)");
  detail::PreadAll(fd.get(), prefix, std::min<uint64_t>(size, sizeof prefix), 0, path);
  if (std::memcmp(prefix, kMagic, kMagicSize) != 0)
    Bad(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(prefix[6]);
  uint64_t header_len = 0;
  uint64_t header_at = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(prefix[8]) | (static_cast<unsigned char>(prefix[9]) << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) Bad(path, "truncated .npy header");
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(prefix[8 + i]);
    header_at = 12;
  } else {
    Bad(path, ".npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  }
  if (header_len > kMaxHeader || header_at + header_len > size) Bad(path, "truncated .npy header");
  std::string header(header_len, '\0');
  detail::PreadAll(fd.get(), header.data(), header_len, header_at, path);

  NpyHeader out;
  out.data_offset = header_at + header_len;
  std::string descr = DictValue(header, "descr", path);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) {
    Bad(path, "the array's dtype " + descr +
                  " is structured, which has no column type: save one array per field");
  }
  descr = descr.substr(1, descr.size() - 2);
  out.dtype = DTypeOfDescr(descr, path);
  const std::string fortran = DictValue(header, "fortran_order", path);
  std::string shape = DictValue(header, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    Bad(path, "corrupt shape " + shape);
  for (size_t i = 1; i + 1 < shape.size();) {
    while (i + 1 < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i + 1 >= shape.size()) break;
    size_t used = 0;
    long long dim = 0;
    try {
      dim = std::stoll(shape.substr(i), &used);
    } catch (const std::exception&) {
      Bad(path, "corrupt shape " + shape);
    }
    if (dim < 0 || used == 0) Bad(path, "corrupt shape " + shape);
    out.shape.push_back(dim);
    i += used;
  }
  if (out.shape.empty())
    Bad(path, "the array is 0-dimensional and has no rows: save it with a first dimension");
  if (fortran == "True" && out.shape.size() > 1) {
    Bad(path,
        "the array is in Fortran order, so its rows are not contiguous: save it with "
        "np.save(path, np.ascontiguousarray(a))");
  }
  // The bytes of a row, then of the array, checked for overflow: a corrupt shape such as
  // (2**61,) of float64 would otherwise wrap to a small size that the file seems to hold,
  // and rows would be read (and indexed) far past the bytes there are.
  uint64_t row_bytes = DTypeSize(out.dtype);
  bool overflow = false;
  for (size_t i = 1; i < out.shape.size(); ++i)
    overflow |= __builtin_mul_overflow(row_bytes, static_cast<uint64_t>(out.shape[i]), &row_bytes);
  uint64_t need = 0;
  overflow |= row_bytes > static_cast<uint64_t>(INT64_MAX) ||
              __builtin_mul_overflow(row_bytes, static_cast<uint64_t>(out.shape[0]), &need) ||
              __builtin_add_overflow(need, out.data_offset, &need);
  if (overflow) {
    Bad(path, "its shape " + ShapeToString(out.shape) +
                  " holds more bytes than any file can: the .npy header is corrupt");
  }
  if (size < need) {
    Bad(path, "holds " + std::to_string(size) + " bytes but its shape " + ShapeToString(out.shape) +
                  " needs " + std::to_string(need) + ": the file is truncated");
  }
  return out;
}

Block ReadNpyRows(const std::string& path, int64_t begin, int64_t end, const std::string& column) {
  const NpyHeader header = ReadNpyHeader(path);
  const int64_t rows = header.shape[0];
  if (begin < 0 || end < begin || end > rows) {
    Bad(path, "rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") are not inside its " + std::to_string(rows) + " rows");
  }
  std::vector<int64_t> row_shape(header.shape.begin() + 1, header.shape.end());
  uint64_t row_bytes = DTypeSize(header.dtype);
  for (int64_t d : row_shape) row_bytes *= static_cast<uint64_t>(d);
  const uint64_t n = row_bytes * static_cast<uint64_t>(end - begin);
  auto buffer = std::make_shared<prism::internal::Buffer>(n);
  if (n > 0) {
    detail::Fd fd = detail::OpenForRead(path, "the .npy file");
    detail::PreadAll(fd.get(), buffer->data(), n, header.data_offset + row_bytes * begin, path);
  }
  if (header.dtype == DType::kBool) {
    for (uint64_t i = 0; i < n; ++i) {
      if (static_cast<unsigned char>(buffer->data()[i]) > 1) {
        Bad(path, "bool element " + std::to_string(i) +
                      " of the rows read is neither 0 nor 1: the file is corrupt");
      }
    }
  }
  const void* data = buffer->data();
  return Block::FromColumns({{column, Column::Wrap(header.dtype, end - begin, std::move(row_shape),
                                                   data, std::move(buffer))}});
}

Part WriteNumpyPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks,
                    const std::string& column) {
  detail::CheckOneSchema(blocks, "WriteNumpyPart");
  if (blocks.empty())
    throw Error("prism::data: WriteNumpyPart of no blocks: the array needs a dtype and shape");
  const Column& first = blocks.front().GetColumn(column);
  const char* descr = DescrOf(first.dtype());
  if (descr == nullptr) {
    throw Error("prism::data: WriteNumpyPart: column \"" + column +
                "\" holds strings, which .npy "
                "cannot hold without Python objects: write it with WriteCsvPart or WriteHdf5Part");
  }
  const int64_t rows = detail::TotalRows(blocks);
  std::string shape = "(" + std::to_string(rows) + ",";
  for (size_t i = 0; i < first.row_shape().size(); ++i) {
    shape += (i ? ", " : " ") + std::to_string(first.row_shape()[i]);
  }
  shape += ")";
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1 when the header's length fits 16 bits; pad the whole preamble to 64 bytes.
  const bool v1 = dict.size() + 11 + 64 < 65536;
  const size_t preamble = kMagicSize + 2 + (v1 ? 2 : 4);
  const size_t total = preamble + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string head(kMagic, kMagicSize);
  head += static_cast<char>(v1 ? 1 : 2);
  head += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < (v1 ? 2 : 4); ++i) head += static_cast<char>((len >> (8 * i)) & 0xff);
  head += dict;

  detail::PartFile part(dir, index, ".npy");
  {
    int fd = ::open(part.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error("prism::data: cannot create " + part.temp_path() + ": " +
                  detail::ErrnoText(errno));
    detail::Fd closer(fd);
    detail::WriteAll(fd, head, part.temp_path());
    for (const auto& b : blocks) {
      const Column& c = b.GetColumn(column);
      detail::WriteAll(fd, std::string_view(static_cast<const char*>(c.data()), c.size_bytes()),
                       part.temp_path());
    }
  }
  return part.Commit(rows);
}

}  // namespace prism::data::io
