// Fuzzes Data's CSV reader (data/io/csv.cc): the fuzzer's bytes are the file, except the
// first, which picks the byte where the file is split into two ranges (as ReadCsv plans
// ranges of a large file).
//
// Properties: ReadCsvHeader and ReadCsvRange throw nothing but prism::Error; every value
// of a block read is in bounds; when the whole file reads, the two ranges together read
// the same rows as the whole, each exactly once (with the types the whole inferred).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/io.h"
#include "data_util.h"
#include "fuzz_util.h"

namespace {

namespace io = prism::data::io;
using prism::fuzz::Fail;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prism::fuzz::Bytes in(data, size);
  const uint8_t split_byte = in.Byte();
  const std::string_view text = in.Rest();
  const std::string path = prism::fuzz::ScratchDir() + "/input.csv";
  prism::fuzz::WriteFile(path, text);
  const uint64_t split = text.empty() ? 0 : split_byte % (text.size() + 1);

  prism::data::Block whole;
  try {
    (void)io::ReadCsvHeader(path);
    whole = io::ReadCsvRange(path, 0, UINT64_MAX);
    (void)prism::fuzz::TouchBlock(whole);
  } catch (const prism::Error&) {
    return 0;
  }
  io::CsvOptions options;
  for (const auto& field : whole.schema().fields) options.column_types[field.name] = field.dtype;
  int64_t rows = 0;
  try {
    for (auto [begin, end] : {std::pair<uint64_t, uint64_t>{0, split}, {split, text.size()}}) {
      const prism::data::Block part = io::ReadCsvRange(path, begin, end, options);
      (void)prism::fuzz::TouchBlock(part);
      if (part.num_columns() != whole.num_columns()) Fail("a range read other columns than the whole file");
      rows += part.num_rows();
    }
  } catch (const prism::Error& e) {
    Fail(std::string("a range of a file that reads whole does not read: ") + e.what());
  }
  if (rows != whole.num_rows()) {
    Fail("ranges split at byte " + std::to_string(split) + " read " + std::to_string(rows) +
         " rows, the whole file " + std::to_string(whole.num_rows()));
  }
  return 0;
}
