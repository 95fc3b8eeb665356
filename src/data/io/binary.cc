// Binary files as rows (Ray's read_binary_files): each file's bytes are one string row,
// read with pread straight into the column's byte array (one buffer for all the files of
// a block, sized from stat first).

#include <memory>

#include "data/io/file_util.h"
#include "prism/internal/buffer.h"

namespace prism::data::io {

Block ReadBinaryFiles(const std::vector<std::string>& paths, bool include_paths) {
  std::vector<uint64_t> sizes;
  sizes.reserve(paths.size());
  uint64_t total = 0;
  for (const auto& path : paths) {
    sizes.push_back(FileSize(path));
    total += sizes.back();
  }
  const size_t offsets_bytes = (paths.size() + 1) * sizeof(int64_t);
  auto buffer = std::make_shared<prism::internal::Buffer>(offsets_bytes + total);
  auto* offsets = reinterpret_cast<int64_t*>(buffer->data());
  char* bytes = buffer->data() + offsets_bytes;
  int64_t at = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    offsets[i] = at;
    if (sizes[i] > 0) {
      detail::Fd fd = detail::OpenForRead(paths[i], "the file");
      detail::PreadAll(fd.get(), bytes + at, sizes[i], 0, paths[i]);
    }
    at += static_cast<int64_t>(sizes[i]);
  }
  offsets[paths.size()] = at;
  std::vector<std::pair<std::string, Column>> columns;
  if (include_paths) columns.emplace_back("path", Column::FromStrings(paths));
  columns.emplace_back("bytes", Column::WrapStrings(static_cast<int64_t>(paths.size()), offsets,
                                                    bytes, std::move(buffer)));
  return Block::FromColumns(std::move(columns));
}

}  // namespace prism::data::io
