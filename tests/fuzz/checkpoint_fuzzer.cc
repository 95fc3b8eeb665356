// Fuzzes the checkpoint readers: a run directory holds one committed checkpoint whose
// commit record (prism_checkpoint.json) is the fuzzer's bytes up to the first NUL, and
// whose metadata.json is the bytes after it (when there is a NUL). The checkpoint holds
// one real file, model.bin, that a record may or may not describe correctly.
//
// Called: VerifyCheckpoint, VerifyCheckpointFile, Checkpoint::GetMetadata, and the
// store's List, Best and NewestValid (the reader a resume starts from).
//
// Properties: only prism::Error is thrown; a checkpoint that verifies is one List lists;
// NewestValid either returns this checkpoint or rejects it with a reason.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "prism/checkpoint_store.h"

namespace {

using prism::fuzz::Fail;
namespace fs = std::filesystem;

constexpr std::string_view kModel = "model bytes: 0123456789abcdef";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string run = prism::fuzz::ScratchDir() + "/run";
  const std::string dir = run + "/checkpoint_000001";
  std::error_code ec;
  fs::remove_all(run, ec);
  fs::create_directories(dir);
  prism::fuzz::WriteFile(dir + "/model.bin", kModel);

  const size_t nul = bytes.find('\0');
  prism::fuzz::WriteFile(dir + "/" + prism::kCheckpointRecordFile, bytes.substr(0, nul));
  if (nul != std::string_view::npos) prism::fuzz::WriteFile(dir + "/metadata.json", bytes.substr(nul + 1));

  const prism::CheckpointVerification verification = prism::VerifyCheckpoint(dir);
  (void)prism::VerifyCheckpointFile(dir + "/model.bin");
  try {
    (void)prism::Checkpoint::FromDirectory(dir).GetMetadata();
  } catch (const prism::Error&) {
  }

  prism::CheckpointStore store(run, {.num_to_keep = 1, .checkpoint_score_attribute = "loss"});
  const auto listed = store.List();
  (void)store.Best();
  const prism::ResumePoint resume = store.NewestValid();
  if (resume.checkpoint.has_value() == !resume.rejected.empty())
    Fail("NewestValid neither returned nor rejected the run's one checkpoint");
  if (resume.checkpoint && !verification.problem.empty())
    Fail("NewestValid returned a checkpoint that VerifyCheckpoint rejects: " + verification.problem);
  if (resume.checkpoint && listed.empty()) Fail("NewestValid returned a checkpoint List leaves out");
  return 0;
}
