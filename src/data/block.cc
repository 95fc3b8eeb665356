// Columns, schemas and blocks (prism/data/block.h), and their bytes as Prism values.
//
// A column is (dtype, rows, row shape, data pointer, owner). Nothing here copies values
// except Concat, FromRows, FromStrings and the fallback of a read without an owner: slices
// move the data pointer (for strings, the offsets pointer: offsets stay absolute into the
// byte array, so a slice of strings is a pointer move too), and selections copy shared
// pointers.
//
// Serialized column (all integers native-endian, as the rest of Prism's values):
//   u8 dtype, u64 ndim, i64 dims[ndim], i64 rows,
//   u64 pad, pad zero bytes                      so that what follows the next length
//                                                starts on a 64-byte boundary of the buffer
//   fixed width: u64 n, n value bytes
//   string:      u64 n, (rows + 1) int64 offsets starting at 0, u64 m, m character bytes
// Serialized block: u32 magic "PBLK", u64 columns, i64 rows, then per column its name
// (u64 length, bytes) and the column as above.
// The 64-byte offset is relative to the start of the buffer being written, which is the
// object's payload when a Block is Put, returned or passed to a task; a Block nested in a
// std::vector or tuple is written into that same buffer and still aligns.

#include "prism/data/block.h"
#include "data/block_wire.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace prism::data {
namespace {

constexpr uint32_t kBlockMagic = 0x4b4c4250;  // "PBLK"
using internal::kAlign;
constexpr uint64_t kMaxDims = 32;

/// Product of dims; throws if negative or past int64.
int64_t Product(const std::vector<int64_t>& dims, const char* what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      throw Error(std::string("prism::data: ") + what + " has a negative dimension " +
                  ShapeToString(dims));
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error(std::string("prism::data: ") + what + " " + ShapeToString(dims) +
                  " has too many elements");
    }
  }
  return n;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + Quoted(names[i]);
  return names.empty() ? "(none)" : out;
}

std::string FieldText(const Field& f) {
  std::string out = f.name + ": " + DTypeName(f.dtype);
  if (!f.row_shape.empty()) out += ShapeToString(f.row_shape);
  return out;
}

/// An uninitialised byte array of n bytes (16-byte aligned), shared.
std::shared_ptr<prism::internal::Buffer> NewBytes(size_t n) {
  return std::make_shared<prism::internal::Buffer>(n);
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kString:
      return "string";
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kBool:
      return 1;
    case DType::kString:
      return 0;
  }
  return 0;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

namespace detail {
int64_t RowsOf(size_t elements, const std::vector<int64_t>& row_shape, const char* dtype) {
  const int64_t per_row = Product(row_shape, "row shape");
  if (per_row == 0) {
    if (elements != 0) {
      throw Error("prism::data: " + std::to_string(elements) + " " + dtype +
                  " values for rows of shape " + ShapeToString(row_shape) + " (no elements each)");
    }
    return 0;
  }
  if (elements % static_cast<size_t>(per_row) != 0) {
    throw Error("prism::data: " + std::to_string(elements) + " " + dtype +
                " values are not a whole number of rows of shape " + ShapeToString(row_shape) +
                " (" + std::to_string(per_row) +
                " each): pass the row shape that matches the values");
  }
  return static_cast<int64_t>(elements / static_cast<size_t>(per_row));
}
}  // namespace detail

// ---- Column ------------------------------------------------------------------------------

Column Column::OwnBytes(DType dtype, int64_t rows, std::vector<int64_t> row_shape,
                        std::shared_ptr<const void> owner, const void* data) {
  Column c;
  c.dtype_ = dtype;
  c.rows_ = rows;
  c.row_elements_ = Product(row_shape, "row shape");
  c.row_shape_ = std::move(row_shape);
  c.data_ = data;
  c.owner_ = std::move(owner);
  return c;
}

Column Column::Wrap(DType dtype, int64_t rows, std::vector<int64_t> row_shape, const void* data,
                    std::shared_ptr<const void> owner) {
  if (dtype == DType::kString) {
    throw Error("prism::data: Column::Wrap is for fixed-width dtypes; use WrapStrings for strings");
  }
  if (rows < 0) throw Error("prism::data: a column cannot have " + std::to_string(rows) + " rows");
  Column c = OwnBytes(dtype, rows, std::move(row_shape), std::move(owner), data);
  if (data == nullptr && rows * c.row_elements_ > 0) {
    throw Error("prism::data: Column::Wrap of " + std::to_string(rows) + " rows at a null pointer");
  }
  if (reinterpret_cast<uintptr_t>(data) % DTypeSize(dtype) != 0) {
    throw Error(std::string("prism::data: Column::Wrap: the ") + DTypeName(dtype) +
                " values are not aligned for their type: copy them to an aligned buffer first");
  }
  return c;
}

Column Column::WrapStrings(int64_t rows, const int64_t* offsets, const char* bytes,
                           std::shared_ptr<const void> owner) {
  if (rows < 0) throw Error("prism::data: a column cannot have " + std::to_string(rows) + " rows");
  if (offsets == nullptr) throw Error("prism::data: Column::WrapStrings needs rows + 1 offsets");
  for (int64_t i = 0; i < rows; ++i) {
    if (offsets[i + 1] < offsets[i] || offsets[i] < 0) {
      throw Error("prism::data: string offsets decrease at row " + std::to_string(i));
    }
  }
  Column c;
  c.dtype_ = DType::kString;
  c.rows_ = rows;
  c.data_ = bytes;
  c.offsets_ = offsets;
  c.owner_ = std::move(owner);
  return c;
}

Column Column::FromStrings(const std::vector<std::string>& values) {
  size_t chars = 0;
  for (const auto& s : values) chars += s.size();
  // One buffer: offsets first (8-byte aligned), then the characters.
  const size_t offsets_bytes = (values.size() + 1) * sizeof(int64_t);
  auto buffer = NewBytes(offsets_bytes + chars);
  auto* offsets = reinterpret_cast<int64_t*>(buffer->data());
  char* bytes = buffer->data() + offsets_bytes;
  int64_t at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    offsets[i] = at;
    if (!values[i].empty()) std::memcpy(bytes + at, values[i].data(), values[i].size());
    at += static_cast<int64_t>(values[i].size());
  }
  offsets[values.size()] = at;
  return WrapStrings(static_cast<int64_t>(values.size()), offsets, bytes, std::move(buffer));
}

size_t Column::size_bytes() const {
  if (dtype_ == DType::kString) {
    if (rows_ == 0) return 0;
    return static_cast<size_t>(offsets_[rows_] - offsets_[0]) + (rows_ + 1) * sizeof(int64_t);
  }
  return static_cast<size_t>(rows_ * row_elements_) * DTypeSize(dtype_);
}

void Column::CheckType(DType dtype) const {
  if (dtype != dtype_) {
    throw Error(std::string("prism::data: the column holds ") + DTypeName(dtype_) +
                " values, not " + DTypeName(dtype) + ": read it as " + DTypeName(dtype_) +
                " (Schema() shows each column's dtype)");
  }
}

std::string_view Column::StringAt(int64_t i) const {
  CheckType(DType::kString);
  if (i < 0 || i >= rows_) {
    throw Error("prism::data: row " + std::to_string(i) + " out of range (the column has " +
                std::to_string(rows_) + " rows)");
  }
  return {string_bytes() + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
}

Column Column::Slice(int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > rows_) {
    throw Error("prism::data: slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is not inside the column's " + std::to_string(rows_) + " rows");
  }
  Column c = *this;
  c.rows_ = end - begin;
  if (dtype_ == DType::kString) {
    if (offsets_ != nullptr) c.offsets_ = offsets_ + begin;
  } else if (data_ != nullptr) {
    c.data_ = static_cast<const char*>(data_) + begin * row_elements_ * DTypeSize(dtype_);
  }
  return c;
}

// ---- Schema ------------------------------------------------------------------------------

std::vector<std::string> Schema::names() const {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

std::string Schema::ToString() const {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? ", " : "") + FieldText(fields[i]);
  return out;
}

// ---- Block -------------------------------------------------------------------------------

Block Block::FromColumns(std::vector<std::pair<std::string, Column>> columns) {
  Block b;
  std::set<std::string> seen;
  for (const auto& [name, column] : columns) {
    if (!seen.insert(name).second) {
      throw Error("prism::data: two columns are named " + Quoted(name) +
                  ": give each its own name");
    }
    if (column.rows() != columns.front().second.rows()) {
      throw Error("prism::data: column " + Quoted(name) + " has " + std::to_string(column.rows()) +
                  " rows but column " + Quoted(columns.front().first) + " has " +
                  std::to_string(columns.front().second.rows()) +
                  ": every column of a block has the same number of rows");
    }
  }
  b.num_rows_ = columns.empty() ? 0 : columns.front().second.rows();
  b.columns_ = std::move(columns);
  return b;
}

Block Block::FromRows(const std::vector<Row>& rows) {
  if (rows.empty()) return Block();
  // Column kinds from every row: 0 int64, 1 double, 2 bool, 3 string (Value's indices).
  std::map<std::string, size_t> kind;
  for (const auto& [name, value] : rows.front()) kind[name] = value.index();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [name, _] : kind) {
      if (!rows[r].count(name)) {
        throw Error("prism::data: row " + std::to_string(r) + " has no column " + Quoted(name) +
                    " (row 0 has it): every row needs the same columns");
      }
    }
    for (const auto& [name, value] : rows[r]) {
      auto it = kind.find(name);
      if (it == kind.end()) {
        throw Error("prism::data: row " + std::to_string(r) + " has a column " + Quoted(name) +
                    " that row 0 has not: every row needs the same columns");
      }
      const size_t k = value.index();
      if (k == it->second) continue;
      if (k <= 1 && it->second <= 1) {
        it->second = 1;  // ints and doubles: float64
        continue;
      }
      static const char* kNames[] = {"int64", "float64", "bool", "string"};
      throw Error("prism::data: column " + Quoted(name) + " holds " + kNames[it->second] +
                  " values and, at row " + std::to_string(r) + ", a " + kNames[k] +
                  ": a column holds one type");
    }
  }
  std::vector<std::pair<std::string, Column>> columns;
  for (const auto& [name, k] : kind) {
    switch (k) {
      case 0: {
        std::vector<int64_t> v;
        v.reserve(rows.size());
        for (const auto& row : rows) v.push_back(std::get<int64_t>(row.at(name)));
        columns.emplace_back(name, Column::FromVector(std::move(v)));
        break;
      }
      case 1: {
        std::vector<double> v;
        v.reserve(rows.size());
        for (const auto& row : rows) {
          const Value& x = row.at(name);
          v.push_back(x.index() == 0 ? static_cast<double>(std::get<int64_t>(x))
                                     : std::get<double>(x));
        }
        columns.emplace_back(name, Column::FromVector(std::move(v)));
        break;
      }
      case 2: {
        std::vector<bool> v;
        for (const auto& row : rows) v.push_back(std::get<bool>(row.at(name)));
        columns.emplace_back(name, Column::FromVector(std::move(v)));
        break;
      }
      default: {
        std::vector<std::string> v;
        v.reserve(rows.size());
        for (const auto& row : rows) v.push_back(std::get<std::string>(row.at(name)));
        columns.emplace_back(name, Column::FromStrings(v));
      }
    }
  }
  return FromColumns(std::move(columns));
}

std::vector<std::string> Block::column_names() const {
  std::vector<std::string> out;
  for (const auto& c : columns_) out.push_back(c.first);
  return out;
}

bool Block::HasColumn(const std::string& name) const {
  return std::any_of(columns_.begin(), columns_.end(),
                     [&](const auto& c) { return c.first == name; });
}

const Column& Block::GetColumn(const std::string& name) const {
  for (const auto& c : columns_) {
    if (c.first == name) return c.second;
  }
  throw Error("prism::data: no column " + Quoted(name) + "; the block's columns are " +
              NameList(column_names()));
}

Schema Block::schema() const {
  Schema s;
  for (const auto& [name, c] : columns_) s.fields.push_back({name, c.dtype(), c.row_shape()});
  return s;
}

size_t Block::size_bytes() const {
  size_t n = 0;
  for (const auto& c : columns_) n += c.second.size_bytes();
  return n;
}

Block Block::Slice(int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > num_rows_) {
    throw Error("prism::data: slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is not inside the block's " + std::to_string(num_rows_) + " rows");
  }
  Block b;
  b.num_rows_ = end - begin;
  for (const auto& [name, c] : columns_) b.columns_.emplace_back(name, c.Slice(begin, end));
  return b;
}

Block Block::SelectColumns(const std::vector<std::string>& names) const {
  std::vector<std::pair<std::string, Column>> columns;
  for (const auto& name : names) columns.emplace_back(name, GetColumn(name));
  return FromColumns(std::move(columns));  // rejects a name given twice
}

Block Block::DropColumns(const std::vector<std::string>& names) const {
  for (const auto& name : names) GetColumn(name);  // a missing name is an error
  Block b;
  b.num_rows_ = num_rows_;
  for (const auto& c : columns_) {
    if (std::find(names.begin(), names.end(), c.first) == names.end()) b.columns_.push_back(c);
  }
  if (b.columns_.empty()) b.num_rows_ = 0;
  return b;
}

Block Block::AddColumn(const std::string& name, Column column) const {
  const bool replaces = HasColumn(name);
  if (!columns_.empty() && !(replaces && columns_.size() == 1) && column.rows() != num_rows_) {
    throw Error("prism::data: cannot add column " + Quoted(name) + " of " +
                std::to_string(column.rows()) + " rows to a block of " + std::to_string(num_rows_) +
                " rows");
  }
  Block b = *this;
  b.num_rows_ = column.rows();
  for (auto& c : b.columns_) {
    if (c.first == name) {
      c.second = std::move(column);
      return b;
    }
  }
  b.columns_.emplace_back(name, std::move(column));
  return b;
}

Block Block::Concat(const std::vector<Block>& given) {
  // Blocks without columns (Block()) hold nothing: skipped, so a result can start empty.
  std::vector<Block> blocks;
  for (const auto& b : given) {
    if (b.num_columns() > 0) blocks.push_back(b);
  }
  if (blocks.empty()) return Block();
  if (blocks.size() == 1) return blocks.front();
  const Schema schema = blocks.front().schema();
  int64_t rows = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Schema other = blocks[i].schema();
    if (other != schema) {
      std::string why;
      for (size_t f = 0; f < std::max(schema.fields.size(), other.fields.size()) && why.empty();
           ++f) {
        if (f >= schema.fields.size()) {
          why = "block " + std::to_string(i) + " has an extra column " + FieldText(other.fields[f]);
        } else if (f >= other.fields.size()) {
          why = "block " + std::to_string(i) + " lacks column " + FieldText(schema.fields[f]);
        } else if (!(schema.fields[f] == other.fields[f])) {
          why = "column " + std::to_string(f) + " is " + FieldText(schema.fields[f]) +
                " in block 0 but " + FieldText(other.fields[f]) + " in block " + std::to_string(i);
        }
      }
      throw Error("prism::data: cannot concatenate blocks of different schemas: " + why +
                  " (block 0: " + schema.ToString() + "; block " + std::to_string(i) + ": " +
                  other.ToString() + ")");
    }
    rows += blocks[i].num_rows();
  }
  std::vector<std::pair<std::string, Column>> columns;
  for (size_t f = 0; f < schema.fields.size(); ++f) {
    const Field& field = schema.fields[f];
    if (field.dtype == DType::kString) {
      size_t chars = 0;
      for (const auto& b : blocks) chars += b.columns_[f].second.size_bytes();
      const size_t offsets_bytes = (rows + 1) * sizeof(int64_t);
      auto buffer = NewBytes(offsets_bytes + chars);
      auto* offsets = reinterpret_cast<int64_t*>(buffer->data());
      char* bytes = buffer->data() + offsets_bytes;
      int64_t row = 0, at = 0;
      for (const auto& b : blocks) {
        const Column& c = b.columns_[f].second;
        if (c.rows() == 0) continue;
        const int64_t* src = c.string_offsets();
        for (int64_t r = 0; r < c.rows(); ++r) offsets[row++] = at + (src[r] - src[0]);
        const int64_t n = src[c.rows()] - src[0];
        if (n > 0) std::memcpy(bytes + at, c.string_bytes() + src[0], n);
        at += n;
      }
      offsets[rows] = at;
      columns.emplace_back(field.name,
                           Column::WrapStrings(rows, offsets, bytes, std::move(buffer)));
    } else {
      size_t total = 0;
      for (const auto& b : blocks) total += b.columns_[f].second.size_bytes();
      auto buffer = NewBytes(total);
      size_t at = 0;
      for (const auto& b : blocks) {
        const Column& c = b.columns_[f].second;
        if (c.size_bytes() > 0) std::memcpy(buffer->data() + at, c.data(), c.size_bytes());
        at += c.size_bytes();
      }
      const void* data = buffer->data();
      columns.emplace_back(
          field.name, Column::Wrap(field.dtype, rows, field.row_shape, data, std::move(buffer)));
    }
  }
  return FromColumns(std::move(columns));
}

std::vector<Row> Block::ToRows() const {
  for (const auto& [name, c] : columns_) {
    if (!c.row_shape().empty()) {
      throw Error("prism::data: ToRows: column " + Quoted(name) + " has rows of shape " +
                  ShapeToString(c.row_shape()) +
                  " and a Row holds scalars: read it with "
                  "GetColumn(" +
                  Quoted(name) + ").Values<" + DTypeName(c.dtype()) + ">()");
    }
  }
  std::vector<Row> rows(static_cast<size_t>(num_rows_));
  for (const auto& [name, c] : columns_) {
    for (int64_t r = 0; r < num_rows_; ++r) {
      Value v;
      switch (c.dtype()) {
        case DType::kFloat32:
          v = static_cast<double>(c.Values<float>()[r]);
          break;
        case DType::kFloat64:
          v = c.Values<double>()[r];
          break;
        case DType::kInt32:
          v = static_cast<int64_t>(c.Values<int32_t>()[r]);
          break;
        case DType::kInt64:
          v = c.Values<int64_t>()[r];
          break;
        case DType::kUInt8:
          v = static_cast<int64_t>(c.Values<uint8_t>()[r]);
          break;
        case DType::kBool:
          v = c.Values<bool>()[r];
          break;
        case DType::kString:
          v = std::string(c.StringAt(r));
          break;
      }
      rows[r].emplace(name, std::move(v));
    }
  }
  return rows;
}

}  // namespace prism::data

// ---- Serialization -----------------------------------------------------------------------

namespace prism::internal {
namespace {

using data::Column;
using data::DType;

/// Pads so that the bytes after the next u64 length start on a 64-byte boundary: the pad's
/// own length, then the pad.
void PadForNextBytes(Writer& w) {
  const size_t at = w.buffer().size() + 2 * sizeof(uint64_t);
  const uint64_t pad = (data::kAlign - at % data::kAlign) % data::kAlign;
  w.Pod<uint64_t>(pad);
  if (pad > 0) std::memset(w.buffer().Extend(pad), 0, pad);
}

bool Aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

[[noreturn]] void Corrupt(const std::string& what) {
  throw SerializationError("prism::data: corrupt column bytes: " + what +
                           " (the ObjectRef's type may not match the stored value's)");
}

}  // namespace
}  // namespace prism::internal

namespace prism::data::internal {

void WriteColumnHead(prism::internal::Writer& w, DType dtype, const std::vector<int64_t>& row_shape,
                     int64_t rows) {
  w.Pod<uint8_t>(static_cast<uint8_t>(dtype));
  w.Pod<uint64_t>(row_shape.size());
  for (int64_t d : row_shape) w.Pod<int64_t>(d);
  w.Pod<int64_t>(rows);
  prism::internal::PadForNextBytes(w);
}

void WriteBlockHead(prism::internal::Writer& w, uint64_t columns, int64_t rows) {
  w.Pod<uint32_t>(kBlockMagic);
  w.Pod<uint64_t>(columns);
  w.Pod<int64_t>(rows);
}

const Block* FirstWithColumns(const std::vector<Block>& sources) {
  for (const Block& b : sources) {
    if (b.num_columns() > 0) return &b;
  }
  return nullptr;
}

uint64_t GatheredBlockBytes(const std::vector<Block>& sources, const std::vector<RowRun>& runs) {
  const Block* first = FirstWithColumns(sources);
  if (first == nullptr) return 64;
  int64_t rows = 0;
  for (const RowRun& r : runs) rows += r.count;
  uint64_t bytes = 4 + 8 + 8;
  for (size_t c = 0; c < first->num_columns(); ++c) {
    const auto& [name, proto] = first->column_at(c);
    bytes += 8 + name.size() + 1 + 8 + 8 * proto.row_shape().size() + 8 + 8 + kAlign + 8;
    if (proto.dtype() == DType::kString) {
      bytes += 8 + static_cast<uint64_t>(rows + 1) * sizeof(int64_t);
      for (const RowRun& r : runs) {
        const int64_t* so = sources[r.source].column_at(c).second.string_offsets();
        bytes += static_cast<uint64_t>(so[r.begin + r.count] - so[r.begin]);
      }
    } else {
      bytes += DTypeSize(proto.dtype()) * static_cast<uint64_t>(proto.row_elements()) * static_cast<uint64_t>(rows);
    }
  }
  return bytes;
}

void WriteGatheredBlock(prism::internal::Writer& w, const std::vector<Block>& sources,
                        const std::vector<RowRun>& runs) {
  const Block* first = FirstWithColumns(sources);
  if (first == nullptr) {  // no columns anywhere: the empty block
    prism::internal::Serializer<Block>::Write(w, Block());
    return;
  }
  int64_t rows = 0;
  for (const RowRun& r : runs) rows += r.count;
  WriteBlockHead(w, first->num_columns(), rows);
  for (size_t c = 0; c < first->num_columns(); ++c) {
    const auto& [name, proto] = first->column_at(c);
    w.Str(name);
    WriteColumnHead(w, proto.dtype(), proto.row_shape(), rows);
    if (proto.dtype() == DType::kString) {
      w.Pod<uint64_t>(static_cast<uint64_t>(rows + 1) * sizeof(int64_t));
      char* offsets = w.buffer().Extend(static_cast<size_t>(rows + 1) * sizeof(int64_t));
      int64_t row = 0, at = 0;
      std::memcpy(offsets, &at, sizeof at);
      for (const RowRun& r : runs) {
        const int64_t* so = sources[r.source].column_at(c).second.string_offsets();
        for (int64_t k = 0; k < r.count; ++k) {
          const int64_t o = at + (so[r.begin + k + 1] - so[r.begin]);
          std::memcpy(offsets + (row + k + 1) * sizeof(int64_t), &o, sizeof o);
        }
        row += r.count;
        at += so[r.begin + r.count] - so[r.begin];
      }
      w.Pod<uint64_t>(static_cast<uint64_t>(at));
      char* chars = w.buffer().Extend(static_cast<size_t>(at));
      for (const RowRun& r : runs) {
        const Column& col = sources[r.source].column_at(c).second;
        const int64_t* so = col.string_offsets();
        const int64_t n = so[r.begin + r.count] - so[r.begin];
        std::memcpy(chars, col.string_bytes() + so[r.begin], static_cast<size_t>(n));
        chars += n;
      }
      continue;
    }
    const uint64_t row_bytes = DTypeSize(proto.dtype()) * static_cast<uint64_t>(proto.row_elements());
    const uint64_t n = row_bytes * static_cast<uint64_t>(rows);
    w.Pod<uint64_t>(n);
    char* dst = w.buffer().Extend(static_cast<size_t>(n));
    for (const RowRun& r : runs) {
      const Column& col = sources[r.source].column_at(c).second;
      const size_t len = static_cast<size_t>(r.count) * row_bytes;
      std::memcpy(dst, static_cast<const char*>(col.data()) + r.begin * row_bytes, len);
      dst += len;
    }
  }
}

}  // namespace prism::data::internal

namespace prism::internal {

void Serializer<Column>::Write(Writer& w, const Column& c) {
  data::internal::WriteColumnHead(w, c.dtype(), c.row_shape(), c.rows());
  if (c.dtype() != DType::kString) {
    w.buffer().Reserve(w.buffer().size() + sizeof(uint64_t) + c.size_bytes());  // one allocation
    w.Bytes(c.data(), c.size_bytes());
    return;
  }
  const int64_t rows = c.rows();
  const int64_t* src = c.string_offsets();
  const int64_t base = rows > 0 ? src[0] : 0;
  const int64_t chars = rows > 0 ? src[rows] - base : 0;
  w.buffer().Reserve(w.buffer().size() + 2 * sizeof(uint64_t) + (rows + 1) * sizeof(int64_t) +
                     chars);
  w.Pod<uint64_t>((rows + 1) * sizeof(int64_t));
  auto* offsets = w.buffer().Extend((rows + 1) * sizeof(int64_t));
  for (int64_t r = 0; r <= rows; ++r) {
    const int64_t o = rows > 0 ? src[r] - base : 0;
    std::memcpy(offsets + r * sizeof(int64_t), &o, sizeof o);
  }
  w.Bytes(rows > 0 ? c.string_bytes() + base : nullptr, static_cast<uint64_t>(chars));
}

Column Serializer<Column>::Read(Reader& r) {
  const auto code = r.Pod<uint8_t>();
  if (code > static_cast<uint8_t>(DType::kString))
    Corrupt("unknown dtype code " + std::to_string(code));
  const auto dtype = static_cast<DType>(code);
  const auto ndim = r.Pod<uint64_t>();
  if (ndim > data::kMaxDims) Corrupt(std::to_string(ndim) + " dimensions");
  std::vector<int64_t> row_shape(ndim);
  for (auto& d : row_shape) {
    d = r.Pod<int64_t>();
    if (d < 0) Corrupt("negative dimension");
  }
  const auto rows = r.Pod<int64_t>();
  if (rows < 0) Corrupt("negative row count");
  r.Take(r.Pod<uint64_t>());  // alignment padding
  const Payload* owner = r.owner();
  const bool owned = owner != nullptr && *owner;
  if (dtype != DType::kString) {
    ByteView bytes = r.Bytes();
    int64_t elements = 0;
    int64_t per_row = 1;
    for (int64_t d : row_shape) {
      if (__builtin_mul_overflow(per_row, d, &per_row)) Corrupt("row shape too large");
    }
    if (__builtin_mul_overflow(per_row, rows, &elements) ||
        static_cast<uint64_t>(elements) * data::DTypeSize(dtype) != bytes.size) {
      Corrupt(std::to_string(bytes.size) + " bytes for " + std::to_string(rows) + " rows of " +
              data::ShapeToString(row_shape) + " " + data::DTypeName(dtype));
    }
    if (owned && Aligned(bytes.data, data::DTypeSize(dtype))) {
      return Column::Wrap(dtype, rows, std::move(row_shape), bytes.data, *owner);
    }
    auto copy = std::make_shared<Buffer>(bytes.data, bytes.size);
    const void* at = copy->data();
    return Column::Wrap(dtype, rows, std::move(row_shape), at, std::move(copy));
  }
  if (!row_shape.empty()) Corrupt("a string column with a row shape");
  ByteView offsets = r.Bytes();
  ByteView chars = r.Bytes();
  if (offsets.size != static_cast<uint64_t>(rows + 1) * sizeof(int64_t)) {
    Corrupt(std::to_string(offsets.size) + " offset bytes for " + std::to_string(rows) +
            " strings");
  }
  const int64_t* o = nullptr;
  std::shared_ptr<const void> keep;
  const char* bytes = nullptr;
  if (owned && Aligned(offsets.data, sizeof(int64_t))) {
    o = reinterpret_cast<const int64_t*>(offsets.data);
    bytes = chars.data;
    keep = *owner;
  } else {
    auto copy = std::make_shared<Buffer>(offsets.size + chars.size);
    std::memcpy(copy->data(), offsets.data, offsets.size);
    if (chars.size > 0) std::memcpy(copy->data() + offsets.size, chars.data, chars.size);
    o = reinterpret_cast<const int64_t*>(copy->data());
    bytes = copy->data() + offsets.size;
    keep = std::move(copy);
  }
  if (o[0] != 0 || o[rows] != static_cast<int64_t>(chars.size)) {
    Corrupt("string offsets do not span the " + std::to_string(chars.size) + " character bytes");
  }
  try {
    return Column::WrapStrings(rows, o, bytes, std::move(keep));
  } catch (const Error& e) {
    Corrupt(e.what());
  }
}

void Serializer<data::Block>::Write(Writer& w, const data::Block& block) {
  data::internal::WriteBlockHead(w, block.num_columns(), block.num_rows());
  for (size_t i = 0; i < block.num_columns(); ++i) {
    const auto& [name, column] = block.column_at(i);
    w.Str(name);
    Serializer<Column>::Write(w, column);
  }
}

data::Block Serializer<data::Block>::Read(Reader& r) {
  if (r.Pod<uint32_t>() != data::kBlockMagic) {
    throw SerializationError(
        "prism::data: these bytes are not a Block (the ObjectRef's type "
        "does not match the stored value's)");
  }
  const auto count = r.Pod<uint64_t>();
  const auto rows = r.Pod<int64_t>();
  if (count > r.remaining()) throw SerializationError("prism::data: corrupt block: column count");
  std::vector<std::pair<std::string, Column>> columns;
  columns.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = r.Str();
    Column c = Serializer<Column>::Read(r);
    if (c.rows() != rows) {
      throw SerializationError("prism::data: corrupt block: column \"" + name + "\" has " +
                               std::to_string(c.rows()) + " rows, the block " +
                               std::to_string(rows));
    }
    columns.emplace_back(std::move(name), std::move(c));
  }
  try {
    return data::Block::FromColumns(std::move(columns));
  } catch (const SerializationError&) {
    throw;
  } catch (const Error& e) {
    throw SerializationError(std::string("prism::data: corrupt block: ") + e.what());
  }
}

}  // namespace prism::internal

namespace prism::internal {

void Serializer<data::Value>::Write(Writer& w, const data::Value& value) {
  w.Pod<uint8_t>(static_cast<uint8_t>(value.index()));
  if (const auto* i = std::get_if<int64_t>(&value)) {
    w.Pod(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    w.Pod(*d);
  } else if (const auto* b = std::get_if<bool>(&value)) {
    w.Pod<uint8_t>(*b ? 1 : 0);
  } else {
    w.Str(std::get<std::string>(value));
  }
}

data::Value Serializer<data::Value>::Read(Reader& r) {
  switch (r.Pod<uint8_t>()) {
    case 0:
      return r.Pod<int64_t>();
    case 1:
      return r.Pod<double>();
    case 2:
      return r.Pod<uint8_t>() != 0;
    case 3:
      return r.Str();
    default:
      throw SerializationError("prism::data: corrupt row value: unknown type index");
  }
}

void Serializer<data::Row>::Write(Writer& w, const data::Row& row) {
  w.Pod<uint64_t>(row.size());
  for (const auto& [name, value] : row) {
    w.Str(name);
    Serializer<data::Value>::Write(w, value);
  }
}

data::Row Serializer<data::Row>::Read(Reader& r) {
  const auto count = r.Pod<uint64_t>();
  if (count > r.remaining()) throw SerializationError("prism::data: corrupt row: column count");
  data::Row row;
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = r.Str();
    row.emplace(std::move(name), Serializer<data::Value>::Read(r));
  }
  return row;
}

}  // namespace prism::internal
