// CSV files in byte ranges. A range [begin, end) owns the rows that start inside it (the
// header row excepted): it skips the partial row it begins in (unless the byte before
// `begin` ends a line) and reads past `end` to finish its last row. So ranges that split a
// file anywhere read each row exactly once, without a pass over the file to find rows
// first (Hadoop's line splits). A quoted field may hold the delimiter and doubled quotes
// but not a line break: a range cannot tell a quoted line break from a row's end.
//
// Types are inferred per column from the range's fields unless given (CsvOptions); values
// are parsed with std::from_chars (locale-independent).

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>

#include "data/io/file_util.h"

namespace prism::data::io {
namespace {

constexpr size_t kChunk = 1 << 16;

[[noreturn]] void Bad(const std::string& path, uint64_t offset, const std::string& what) {
  throw Error("prism::data: " + path + ": the row at byte " + std::to_string(offset) + " " + what);
}

/// Offset just past the first '\n' at or after `from` (or `size` if there is none).
uint64_t NextLineStart(int fd, uint64_t from, uint64_t size, const std::string& path) {
  std::string chunk;
  while (from < size) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, size - from));
    chunk.resize(n);
    detail::PreadAll(fd, chunk.data(), n, from, path);
    const size_t at = chunk.find('\n');
    if (at != std::string::npos) return from + at + 1;
    from += n;
  }
  return size;
}

/// Splits one line into fields (RFC 4180 quoting, without line breaks in fields).
void SplitFields(std::string_view line, char delimiter, std::vector<std::string>& out,
                 const std::string& path, uint64_t offset) {
  out.clear();
  std::string field;
  size_t i = 0;
  while (true) {
    field.clear();
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) {
          Bad(path, offset,
              "has a quote left open: a quoted field cannot span lines when a file is "
              "read in ranges; close the quote or remove line breaks from fields");
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      // Anything after the closing quote up to the delimiter is kept as is.
      while (i < line.size() && line[i] != delimiter) field += line[i++];
    } else {
      while (i < line.size() && line[i] != delimiter) field += line[i++];
    }
    out.push_back(field);
    if (i >= line.size()) break;
    ++i;  // the delimiter
  }
}

std::string_view TrimEol(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool ParseInt(const std::string& s, int64_t& v) {
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  return ec == std::errc() && p == e && b != e;
}

bool ParseDouble(const std::string& s, double& v) {
  if (s.empty()) {
    v = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  return ec == std::errc() && p == e && b != e;
}

bool ParseBool(const std::string& s, bool& v) {
  if (strcasecmp(s.c_str(), "true") == 0)
    v = true;
  else if (strcasecmp(s.c_str(), "false") == 0)
    v = false;
  else
    return false;
  return true;
}

struct Rows {
  std::vector<std::vector<std::string>> columns;  // fields by column
  std::vector<uint64_t> offsets;                  // each row's byte offset
};

Column BuildColumn(const std::string& path, const std::string& name,
                   const std::vector<std::string>& fields, const std::vector<uint64_t>& offsets,
                   const DType* given, bool given_was_inferred) {
  auto fail = [&](size_t r, const char* type) {
    Bad(path, offsets[r],
        "has \"" + fields[r] + "\" in column \"" + name + "\", which is not " + type +
            (given == nullptr ? " (the type inferred from this range)"
             : given_was_inferred
                 ? " (the type inferred from the first MiB of the first file: pass ReadCsv's "
                   "column_types, e.g. {{\"" + name + "\", DType::kString}}, to read it as another type)"
                 : " (the type given in column_types)"));
  };
  DType dtype;
  if (given != nullptr) {
    dtype = *given;
  } else {
    int64_t i;
    double d;
    bool b;
    if (!fields.empty() &&
        std::all_of(fields.begin(), fields.end(), [&](const auto& f) { return ParseInt(f, i); })) {
      dtype = DType::kInt64;
    } else if (!fields.empty() &&
               std::any_of(fields.begin(), fields.end(),
                           [](const auto& f) { return !f.empty(); }) &&
               std::all_of(fields.begin(), fields.end(),
                           [&](const auto& f) { return ParseDouble(f, d); })) {
      dtype = DType::kFloat64;
    } else if (!fields.empty() && std::all_of(fields.begin(), fields.end(),
                                              [&](const auto& f) { return ParseBool(f, b); })) {
      dtype = DType::kBool;
    } else {
      dtype = DType::kString;
    }
  }
  switch (dtype) {
    case DType::kInt64: {
      std::vector<int64_t> v(fields.size());
      for (size_t r = 0; r < fields.size(); ++r) {
        if (!ParseInt(fields[r], v[r])) fail(r, "an int64");
      }
      return Column::FromVector(std::move(v));
    }
    case DType::kFloat64: {
      std::vector<double> v(fields.size());
      for (size_t r = 0; r < fields.size(); ++r) {
        if (!ParseDouble(fields[r], v[r])) fail(r, "a float64");
      }
      return Column::FromVector(std::move(v));
    }
    case DType::kBool: {
      std::vector<bool> v(fields.size());
      for (size_t r = 0; r < fields.size(); ++r) {
        bool x = false;
        if (!ParseBool(fields[r], x)) fail(r, "a bool");
        v[r] = x;
      }
      return Column::FromVector(std::move(v));
    }
    case DType::kString:
      return Column::FromStrings(fields);
    default:
      throw Error(std::string("prism::data: ") + path + ": column \"" + name +
                  "\" cannot be read as " + DTypeName(dtype) +
                  " from CSV (int64, float64, bool or string)");
  }
}

std::string QuoteIfNeeded(std::string_view s, char delimiter) {
  if (s.find_first_of(std::string{delimiter, '"', '\n', '\r'}) == std::string_view::npos)
    return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

template <typename T>
void AppendNumber(std::string& out, T value) {
  char text[64];
  auto [p, ec] = std::to_chars(text, text + sizeof text, value);
  out.append(text, p);
}

}  // namespace

std::vector<std::string> ReadCsvHeader(const std::string& path, char delimiter) {
  detail::Fd fd = detail::OpenForRead(path, "the CSV file");
  const uint64_t size = FileSize(path);
  if (size == 0) throw Error("prism::data: " + path + " is empty: a CSV file needs a header row");
  const uint64_t end = NextLineStart(fd.get(), 0, size, path);
  std::string line(end, '\0');
  detail::PreadAll(fd.get(), line.data(), end, 0, path);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  std::vector<std::string> names;
  SplitFields(TrimEol(line), delimiter, names, path, 0);
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) {
      throw Error("prism::data: " + path + ": the header names column \"" + names[i] + "\" twice");
    }
  }
  return names;
}

Block ReadCsvRange(const std::string& path, uint64_t begin, uint64_t end,
                   const CsvOptions& options) {
  const std::vector<std::string> names = ReadCsvHeader(path, options.delimiter);
  detail::Fd fd = detail::OpenForRead(path, "the CSV file");
  const uint64_t size = FileSize(path);
  const uint64_t header_end = NextLineStart(fd.get(), 0, size, path);
  end = std::min(end, size);
  uint64_t start = std::max(begin, header_end);
  if (start > header_end) {
    char before = 0;
    detail::PreadAll(fd.get(), &before, 1, start - 1, path);
    if (before != '\n') start = NextLineStart(fd.get(), start, size, path);
  }
  std::string text;
  if (start < end) {
    text.resize(end - start);
    detail::PreadAll(fd.get(), text.data(), text.size(), start, path);
    if (text.back() != '\n' && end < size) {
      const uint64_t stop = NextLineStart(fd.get(), end, size, path);
      const size_t have = text.size();
      text.resize(have + (stop - end));
      detail::PreadAll(fd.get(), text.data() + have, stop - end, end, path);
    }
  }
  Rows rows;
  rows.columns.resize(names.size());
  std::vector<std::string> fields;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line = TrimEol(std::string_view(text).substr(at, nl - at));
    const uint64_t offset = start + at;
    at = nl + 1;
    if (line.empty()) continue;
    SplitFields(line, options.delimiter, fields, path, offset);
    if (fields.size() != names.size()) {
      Bad(path, offset,
          "has " + std::to_string(fields.size()) + " fields but the header has " +
              std::to_string(names.size()) + " columns");
    }
    for (size_t c = 0; c < names.size(); ++c) rows.columns[c].push_back(std::move(fields[c]));
    rows.offsets.push_back(offset);
  }
  std::vector<std::pair<std::string, Column>> columns;
  for (size_t c = 0; c < names.size(); ++c) {
    auto it = options.column_types.find(names[c]);
    const bool inferred =
        std::find(options.inferred.begin(), options.inferred.end(), names[c]) != options.inferred.end();
    columns.emplace_back(names[c],
                         BuildColumn(path, names[c], rows.columns[c], rows.offsets,
                                     it == options.column_types.end() ? nullptr : &it->second,
                                     inferred));
  }
  return Block::FromColumns(std::move(columns));
}

Part WriteCsvPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks,
                  char delimiter) {
  detail::CheckOneSchema(blocks, "WriteCsvPart");
  if (!blocks.empty()) {
    for (const auto& f : blocks.front().schema().fields) {
      if (!f.row_shape.empty()) {
        throw Error("prism::data: WriteCsvPart: column \"" + f.name + "\" has rows of shape " +
                    ShapeToString(f.row_shape) +
                    " and a CSV field holds one value: write it with "
                    "WriteHdf5Part or WriteNumpyPart");
      }
    }
  }
  detail::PartFile part(dir, index, ".csv");
  int fd = ::open(part.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("prism::data: cannot create " + part.temp_path() + ": " + detail::ErrnoText(errno));
  detail::Fd closer(fd);
  std::string out;
  if (!blocks.empty()) {
    const auto names = blocks.front().column_names();
    for (size_t c = 0; c < names.size(); ++c)
      out += (c ? std::string(1, delimiter) : "") + QuoteIfNeeded(names[c], delimiter);
    out += '\n';
  }
  for (const auto& b : blocks) {
    for (int64_t r = 0; r < b.num_rows(); ++r) {
      for (size_t c = 0; c < b.num_columns(); ++c) {
        if (c) out += delimiter;
        const Column& col = b.column_at(c).second;
        switch (col.dtype()) {
          case DType::kFloat32:
            AppendNumber(out, col.Values<float>()[r]);
            break;
          case DType::kFloat64:
            AppendNumber(out, col.Values<double>()[r]);
            break;
          case DType::kInt32:
            AppendNumber(out, col.Values<int32_t>()[r]);
            break;
          case DType::kInt64:
            AppendNumber(out, col.Values<int64_t>()[r]);
            break;
          case DType::kUInt8:
            AppendNumber(out, static_cast<int>(col.Values<uint8_t>()[r]));
            break;
          case DType::kBool:
            out += col.Values<bool>()[r] ? "true" : "false";
            break;
          case DType::kString:
            out += QuoteIfNeeded(col.StringAt(r), delimiter);
            break;
        }
      }
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
