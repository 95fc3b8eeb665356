// Fuzzes Data's HDF5 reader (data/io/hdf5.cc): the fuzzer's bytes are the file. Prism
// reads HDF5 through libhdf5, so this fuzzes libhdf5's parsing as much as Prism's.
//
// libhdf5 itself crashes on some damaged files, and Prism cannot check for them without
// parsing HDF5's format itself: libhdf5_crashes/h5hg_read_vlen_string.h5 is one of Prism's
// own part files with two bytes of a variable-length string's global-heap reference
// swapped; libhdf5 1.10.8 (Debian 12) segfaults in H5HG_read under H5Dread on it, and so
// does h5dump. Such inputs are not regressions of Prism: they stay out of corpus/.
//
// Properties: InspectHdf5 and ReadHdf5Rows throw nothing but prism::Error; a block read
// holds the rows asked for, every value in bounds.

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

constexpr int64_t kMaxRowsRead = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = prism::fuzz::ScratchDir() + "/input.h5";
  prism::fuzz::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const io::Hdf5File file = io::InspectHdf5(path);
    const int64_t rows = std::min(file.rows, kMaxRowsRead);
    const prism::data::Block block = io::ReadHdf5Rows(path, {}, 0, rows);
    if (block.num_rows() != rows) Fail("ReadHdf5Rows read another number of rows than asked for");
    (void)prism::fuzz::TouchBlock(block);
  } catch (const prism::Error&) {
  }
  return 0;
}
