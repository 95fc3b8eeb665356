// Fuzzes Tune's experiment journal (experiment_state.jsonl): the fuzzer's bytes are the
// journal as a restore finds it (torn, damaged, deep, not UTF-8, anything).
//
// Properties: Read throws nothing but prism::Error; when it reads the journal, opening it
// for appending (which cuts a torn last line) and appending one event keeps exactly what
// Read returned and adds that event, and so does a second restore: a restored experiment
// neither loses nor repeats an event, however its journal ended.

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "prism/errors.h"
#include "tune/journal.h"

namespace {

using prism::fuzz::Fail;
using prism::tune::internal::Journal;

std::optional<std::vector<nlohmann::json>> TryRead(const std::string& path) {
  try {
    return Journal::Read(path);
  } catch (const prism::Error&) {
    return std::nullopt;
  }
}

// Opens the journal and appends `event`, with the journal's own stderr notes silenced.
void Append(const std::string& path, const nlohmann::json& event) {
  const int saved = ::dup(2);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ::dup2(null, 2);
  ::close(null);
  {
    Journal journal(path);
    journal.Append(event);
  }
  ::dup2(saved, 2);
  ::close(saved);
}

std::string Dump(const std::vector<nlohmann::json>& events) {
  std::string out;
  for (const auto& e : events) out += e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = prism::fuzz::ScratchDir() + "/experiment_state.jsonl";
  prism::fuzz::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  std::optional<std::vector<nlohmann::json>> events = TryRead(path);
  if (!events) return 0;  // damaged before its last line: a restore refuses it, as it should

  for (int restore = 1; restore <= 2; ++restore) {
    const nlohmann::json event = {{"e", "status"}, {"restore", restore}};
    Append(path, event);
    events->push_back(event);
    std::optional<std::vector<nlohmann::json>> after = TryRead(path);
    if (!after) Fail("the journal cannot be read after restore " + std::to_string(restore));
    if (*after != *events)
      Fail("restore " + std::to_string(restore) + " changed the journal's events: expected\n" +
           Dump(*events) + "read\n" + Dump(*after));
  }
  return 0;
}
