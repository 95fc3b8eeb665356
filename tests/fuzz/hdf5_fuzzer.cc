// Fuzzes Data's HDF5 reader (data/io/hdf5.cc): the fuzzer's bytes are the file. Prism
// reads HDF5 through libhdf5, so this fuzzes libhdf5's parsing as much as Prism's.
//
// libhdf5 itself crashes on some damaged files, and Prism cannot check for them without
// parsing HDF5's format itself: libhdf5_crashes/h5hg_read_vlen_string.h5 is one of Prism's
// own part files with two bytes of a variable-length string's global-heap reference
// swapped; libhdf5 1.10.8 (Debian 12) segfaults in H5HG_read under H5Dread on it, and so
// does h5dump. Such inputs are not regressions of Prism: they stay out of corpus/, and the
// target reads no variable-length string's rows (it still lists them), or every run would
// depend on the fuzzer not wandering into libhdf5's bug (seed 5 does within 2,000 inputs).
//
// What a read costs is the harness's to bound, as a user's block size is: a few bytes of
// shape can declare a row of gigabytes, or a chunk that libhdf5 reads whole for one row
// (CI's run ran out of its 2.5 GB that way). The target reads at most kMaxBytesRead of
// rows and skips datasets whose chunk exceeds it; Prism's own checks (a shape whose bytes
// overflow, an allocation that fails) are fuzzed by the declared sizes all the same,
// through InspectHdf5 and the bytes it would need.
//
// Properties: InspectHdf5 and ReadHdf5Rows throw nothing but prism::Error; a block read
// holds the rows asked for, every value in bounds.

#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/io.h"
#include "data_util.h"
#include "fuzz_util.h"

namespace {

namespace io = prism::data::io;
using prism::fuzz::Fail;

constexpr int64_t kMaxRowsRead = 64;
constexpr uint64_t kMaxBytesRead = 64 << 20;

/// A dataset's type and chunk layout, as the read would meet them.
struct Layout {
  bool variable_string = false;
  uint64_t chunk_bytes = 0;  // 0: not chunked (or not known)
};

Layout LayoutOf(const std::string& path, const std::string& name) {
  Layout out;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return out;
  hid_t dset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (dset >= 0) {
    hid_t type = H5Dget_type(dset);
    if (type >= 0) {
      out.variable_string = H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0;
      const uint64_t size = H5Tget_size(type);
      hid_t dcpl = H5Dget_create_plist(dset);
      if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t dims[H5S_MAX_RANK];
        const int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, dims);
        unsigned __int128 bytes = size;
        for (int i = 0; i < rank && bytes <= UINT64_MAX; ++i) bytes *= dims[i];
        out.chunk_bytes = bytes > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bytes);
      }
      if (dcpl >= 0) H5Pclose(dcpl);
      H5Tclose(type);
    }
    H5Dclose(dset);
  }
  H5Fclose(file);
  return out;
}

/// The bytes one row of `d` takes in memory (saturating; strings count their pointers).
uint64_t RowBytes(const io::Hdf5Dataset& d) {
  unsigned __int128 bytes = d.dtype == prism::data::DType::kString ? 16 : prism::data::DTypeSize(d.dtype);
  for (int64_t dim : d.row_shape) {
    if (bytes > UINT64_MAX) break;
    bytes *= static_cast<uint64_t>(dim);
  }
  return bytes > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = prism::fuzz::ScratchDir() + "/input.h5";
  prism::fuzz::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const io::Hdf5File file = io::InspectHdf5(path);
    std::vector<std::string> names;
    uint64_t row_bytes = 0;
    for (const auto& d : file.datasets) {
      const Layout layout = LayoutOf(path, d.name);
      const uint64_t bytes = RowBytes(d);
      if (layout.variable_string || layout.chunk_bytes > kMaxBytesRead ||
          bytes > kMaxBytesRead - row_bytes) {
        continue;
      }
      names.push_back(d.name);
      row_bytes += bytes;
    }
    if (names.empty()) return 0;
    int64_t rows = std::min(file.rows, kMaxRowsRead);
    if (row_bytes > 0) rows = std::min<int64_t>(rows, kMaxBytesRead / row_bytes);
    const prism::data::Block block = io::ReadHdf5Rows(path, names, 0, rows);
    if (block.num_rows() != rows) Fail("ReadHdf5Rows read another number of rows than asked for");
    (void)prism::fuzz::TouchBlock(block);
  } catch (const prism::Error&) {
  }
  return 0;
}
