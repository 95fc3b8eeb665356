// JSON lines output (WriteJsonPart): one object a row, keys in column order. A row whose
// column holds an array is written as nested lists of its row shape; floats in their
// shortest round-trip form (NaN and infinities as null: JSON has no spelling for them).

#include <fcntl.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/io.h"
#include "data/io/file_util.h"

namespace prism::data::io {

namespace {

template <typename T>
nlohmann::json Scalar(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return nullptr;
    return static_cast<double>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else {
    return static_cast<int64_t>(v);
  }
}

// Elements [at, at + product(shape[dim:])) as nested lists of shape[dim:].
template <typename T>
nlohmann::json Nested(const T* values, const std::vector<int64_t>& shape, size_t dim, int64_t& at) {
  if (dim == shape.size()) return Scalar(values[at++]);
  nlohmann::json list = nlohmann::json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) list.push_back(Nested(values, shape, dim + 1, at));
  return list;
}

template <typename T>
nlohmann::json Cell(const Column& col, int64_t row) {
  const T* values = col.Values<T>().data();
  int64_t at = row * col.row_elements();
  return Nested(values, col.row_shape(), 0, at);
}

nlohmann::json CellOf(const Column& col, int64_t row) {
  switch (col.dtype()) {
    case DType::kFloat32:
      return Cell<float>(col, row);
    case DType::kFloat64:
      return Cell<double>(col, row);
    case DType::kInt32:
      return Cell<int32_t>(col, row);
    case DType::kInt64:
      return Cell<int64_t>(col, row);
    case DType::kUInt8:
      return Cell<uint8_t>(col, row);
    case DType::kBool:
      return Cell<bool>(col, row);
    case DType::kString:
      return std::string(col.StringAt(row));
  }
  return nullptr;
}

}  // namespace

Part WriteJsonPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks) {
  detail::CheckOneSchema(blocks, "WriteJsonPart");
  detail::PartFile part(dir, index, ".json");
  int fd = ::open(part.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("prism::data: cannot create " + part.temp_path() + ": " + detail::ErrnoText(errno));
  detail::Fd closer(fd);
  std::string out;
  for (const Block& b : blocks) {
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      nlohmann::ordered_json row = nlohmann::ordered_json::object();
      for (size_t c = 0; c < b.num_columns(); ++c) {
        const auto& [name, col] = b.column_at(c);
        row[name] = CellOf(col, r);
      }
      // Strings that are not valid UTF-8 (binary files' bytes) are written with U+FFFD.
      out += row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out += '\n';
      if (out.size() > (1 << 20)) {
        detail::WriteAll(fd, out, part.temp_path());
        out.clear();
      }
    }
  }
  detail::WriteAll(fd, out, part.temp_path());
  return part.Commit(detail::TotalRows(blocks));
}

}  // namespace prism::data::io
