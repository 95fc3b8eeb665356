#pragma once
// prism::data blocks: columnar batches of named, typed columns, the unit that Prism Data's
// operators pass between tasks (Ray Data's Block, in Arrow's spirit without Arrow).
//
//   using namespace prism::data;
//   Block b = Block::FromColumns({
//       {"image", Column::FromVector(std::vector<float>(n * 28 * 28), {28, 28})},
//       {"label", Column::FromVector(std::vector<int64_t>(n))},
//       {"name", Column::FromStrings(names)}});
//   std::span<const int64_t> labels = b.GetColumn("label").Values<int64_t>();
//   auto ref = prism::Put(b);                  // a Block is a Prism value
//   std::shared_ptr<Block> back = prism::Get(ref);   // columns alias the stored bytes
//
// A Column is a run of `rows` rows of one DType, each row an array of shape `row_shape`
// ({} for scalars, {28, 28} for images), laid out contiguously, row-major. Its bytes are
// shared: a column holds an owner (a std::shared_ptr) that keeps them alive, so copies,
// slices, selections and blocks read back from the object store never copy the bytes.
// Columns are immutable: never write through data(). String columns hold int64 offsets
// (rows + 1 of them, into a byte array) and the bytes; Values<T>() is for fixed-width
// dtypes and StringAt(i) for strings.
//
// As an object: Put, Get, task arguments and results. The bytes are written with each
// column's values at a 64-byte offset of the object's buffer; a read from a payload (Get,
// a task argument, a copy fetched from another rank) makes columns that alias it and hold
// it (the store never spills an object while a column of it lives). A Block inside a
// standard container or tuple (std::vector<Block>, a task's tuple of returns) reads the
// same way. Bytes without an owner (internal::Deserialize without one) or misaligned for
// the dtype (an object whose bytes were moved off a 64-byte boundary) are copied. A Block
// has no Boost serialize: a struct holding one cannot use Boost.Serialization; pass the
// Block as its own argument or return value instead. A Row (and a std::vector<Row>) is a
// Prism value too, so that row functions can be registered with PRISM_REMOTE.
//
// Thread-safety: every const member is safe to call from any thread; a Block or Column is
// a value (copying one copies shared pointers, never bytes).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "prism/errors.h"
#include "prism/serialization.h"

namespace prism::data {

/// Element type of a column. bool is one byte per element (0 or 1); string is variable
/// length (offsets + bytes).
enum class DType : uint8_t { kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBool, kString };

/// "float32", "float64", "int32", "int64", "uint8", "bool", "string".
const char* DTypeName(DType dtype);
/// Bytes per element: 4, 8, 4, 8, 1, 1; 0 for string.
size_t DTypeSize(DType dtype);

/// The DType of a C++ element type: float, double, int32_t, int64_t, uint8_t, bool.
template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::kFloat64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::kInt64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::kUInt8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::kBool;
  else
    static_assert(sizeof(T) == 0,
                  "prism::data: no DType for this element type (float, double, int32_t, int64_t, "
                  "uint8_t or bool)");
}

/// "[28, 28]".
std::string ShapeToString(const std::vector<int64_t>& shape);

/// A typed column: rows of one dtype and row shape, contiguous bytes held by an owner.
class Column {
 public:
  /// An empty float64 column (0 rows).
  Column() = default;

  /// A column of `values` (moved in, no copy): values.size() must be a whole number of
  /// rows of `row_shape`. Throws prism::Error otherwise. std::vector<bool> is packed, so
  /// bool values are copied into one byte each.
  template <typename T>
  static Column FromVector(std::vector<T> values, std::vector<int64_t> row_shape = {});
  /// A string column (copies the strings into one byte array).
  static Column FromStrings(const std::vector<std::string>& values);
  /// A fixed-width column over `rows` rows at `data`, kept alive by `owner` (no copy): the
  /// zero-copy door for readers and tensors. Throws prism::Error for a string dtype, a
  /// negative dimension, a null pointer with rows > 0, or `data` misaligned for the dtype.
  static Column Wrap(DType dtype, int64_t rows, std::vector<int64_t> row_shape, const void* data,
                     std::shared_ptr<const void> owner);
  /// A string column over `rows + 1` offsets into `bytes` (offsets need not start at 0),
  /// kept alive by `owner` (no copy). Throws prism::Error if the offsets decrease.
  static Column WrapStrings(int64_t rows, const int64_t* offsets, const char* bytes,
                            std::shared_ptr<const void> owner);

  DType dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  /// Shape of one row: {} for scalars.
  const std::vector<int64_t>& row_shape() const { return row_shape_; }
  /// Elements per row (the product of row_shape; 1 for scalars).
  int64_t row_elements() const { return row_elements_; }
  /// Bytes of the values (for strings, the characters plus the offsets).
  size_t size_bytes() const;
  /// First byte of row 0 (fixed-width dtypes; for strings, the offsets' byte array base).
  const void* data() const { return data_; }
  /// What keeps the bytes alive (shared with every copy and slice).
  const std::shared_ptr<const void>& owner() const { return owner_; }

  /// The values as elements of T (rows * row_elements of them), no copy. Throws
  /// prism::Error naming both types if T is not this column's dtype.
  template <typename T>
  std::span<const T> Values() const {
    CheckType(DTypeOf<T>());
    return {static_cast<const T*>(data_), static_cast<size_t>(rows_ * row_elements_)};
  }
  /// Row i of a string column, no copy. Throws prism::Error if the column is not a string
  /// column or i is out of range.
  std::string_view StringAt(int64_t i) const;
  /// The offsets of a string column (rows + 1, absolute into string_bytes()).
  const int64_t* string_offsets() const { return offsets_; }
  /// The byte array a string column's offsets point into.
  const char* string_bytes() const { return static_cast<const char*>(data_); }

  /// Rows [begin, end) without a copy. Throws prism::Error if the range is not inside
  /// [0, rows()].
  Column Slice(int64_t begin, int64_t end) const;

  /// Throws prism::Error ("column holds int64 values, not float32") unless dtype() == dtype.
  void CheckType(DType dtype) const;

 private:
  static Column OwnBytes(DType dtype, int64_t rows, std::vector<int64_t> row_shape,
                         std::shared_ptr<const void> owner, const void* data);

  DType dtype_ = DType::kFloat64;
  int64_t rows_ = 0;
  std::vector<int64_t> row_shape_;
  int64_t row_elements_ = 1;
  const void* data_ = nullptr;        // values; strings: the byte array base
  const int64_t* offsets_ = nullptr;  // strings: rows_ + 1 offsets into data_
  std::shared_ptr<const void> owner_;
};

/// One column's description in a Schema.
struct Field {
  std::string name;
  DType dtype = DType::kFloat64;
  std::vector<int64_t> row_shape;
  bool operator==(const Field&) const = default;
};

/// Names, dtypes and row shapes of a block's columns, in order.
struct Schema {
  std::vector<Field> fields;

  /// The column names, in order.
  std::vector<std::string> names() const;
  /// "image: float32[28, 28], label: int64, name: string".
  std::string ToString() const;
  bool operator==(const Schema&) const = default;
};

/// A scalar value of a row: int64, float64, bool or string.
using Value = std::variant<int64_t, double, bool, std::string>;
/// One row, by column name.
using Row = std::map<std::string, Value>;

/// Ordered named columns of equal row count. A value: cheap to copy (shares the columns).
class Block {
 public:
  /// A block with no columns and no rows.
  Block() = default;
  /// A block of these columns, in this order. Throws prism::Error if two share a name or
  /// their row counts differ (naming the columns and counts).
  static Block FromColumns(std::vector<std::pair<std::string, Column>> columns);
  /// A block of scalar columns from rows: each column's dtype is int64, float64 (ints and
  /// doubles mixed), bool or string. Throws prism::Error if a row lacks a column another
  /// has, or a column mixes strings or bools with other types (naming the row and column).
  static Block FromRows(const std::vector<Row>& rows);
  /// Blocks of one schema, one after another (copies the values; one block is returned
  /// as is). Blocks without columns (Block()) are skipped. Throws prism::Error naming the
  /// first column that differs in name, dtype or row shape. No blocks: an empty block.
  static Block Concat(const std::vector<Block>& blocks);

  int64_t num_rows() const { return num_rows_; }
  size_t num_columns() const { return columns_.size(); }
  std::vector<std::string> column_names() const;
  bool HasColumn(const std::string& name) const;
  /// The column of that name. Throws prism::Error naming the missing column and the
  /// block's columns.
  const Column& GetColumn(const std::string& name) const;
  /// The i-th column's name and column (i < num_columns()).
  const std::pair<std::string, Column>& column_at(size_t i) const { return columns_.at(i); }
  Schema schema() const;
  /// Bytes held by the columns (values, string bytes and offsets) of this block's rows.
  size_t size_bytes() const;

  /// Rows [begin, end) without a copy. Throws prism::Error if out of [0, num_rows()].
  Block Slice(int64_t begin, int64_t end) const;
  /// These columns in this order (no copy). Throws prism::Error for a missing column.
  Block SelectColumns(const std::vector<std::string>& names) const;
  /// Every column but these (no copy). Throws prism::Error for a missing column.
  Block DropColumns(const std::vector<std::string>& names) const;
  /// This block with `column` added at the end, or replacing the column of that name in
  /// place (Ray's add_column). Throws prism::Error if its row count differs.
  Block AddColumn(const std::string& name, Column column) const;

  /// The rows as Row maps (int32/uint8 as int64, float32 as double); for small blocks
  /// (tests, Take). Throws prism::Error for a column whose rows are arrays (row_shape not
  /// {}).
  std::vector<Row> ToRows() const;

 private:
  std::vector<std::pair<std::string, Column>> columns_;
  int64_t num_rows_ = 0;
};

// ---- Column::FromVector ----------------------------------------------------------------

namespace detail {
int64_t RowsOf(size_t elements, const std::vector<int64_t>& row_shape, const char* dtype);
}

template <typename T>
Column Column::FromVector(std::vector<T> values, std::vector<int64_t> row_shape) {
  constexpr DType dtype = DTypeOf<T>();
  const int64_t rows = detail::RowsOf(values.size(), row_shape, DTypeName(dtype));
  if constexpr (std::is_same_v<T, bool>) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(values.begin(), values.end());
    const void* data = bytes->data();
    return OwnBytes(dtype, rows, std::move(row_shape), std::move(bytes), data);
  } else {
    auto held = std::make_shared<std::vector<T>>(std::move(values));
    const void* data = held->data();
    return OwnBytes(dtype, rows, std::move(row_shape), std::move(held), data);
  }
}

}  // namespace prism::data

// ---- As Prism values ------------------------------------------------------------------

namespace prism::internal {

template <>
struct IsSerializable<data::Column> : std::true_type {};
template <>
struct Serializer<data::Column> {
  static void Write(Writer& w, const data::Column& column);
  static data::Column Read(Reader& r);
};

template <>
struct IsSerializable<data::Block> : std::true_type {};
template <>
struct Serializer<data::Block> {
  static void Write(Writer& w, const data::Block& block);
  static data::Block Read(Reader& r);
};

// A Row (and its Values) is a Prism value too, so that Map, Filter and FlatMap functions
// can be registered with PRISM_REMOTE and called by name: a count, then per column its
// name, the alternative's index and the value.
template <>
struct IsSerializable<data::Value> : std::true_type {};
template <>
struct Serializer<data::Value> {
  static void Write(Writer& w, const data::Value& value);
  static data::Value Read(Reader& r);
};

template <>
struct IsSerializable<data::Row> : std::true_type {};
template <>
struct Serializer<data::Row> {
  static void Write(Writer& w, const data::Row& row);
  static data::Row Read(Reader& r);
};

}  // namespace prism::internal
