#include "common/protocol.h"

#include <iterator>

namespace prism::internal {

const std::shared_ptr<const TaskOptions>& DefaultTaskOptions() {
  static const auto* options = new std::shared_ptr<const TaskOptions>(std::make_shared<TaskOptions>());
  return *options;
}

const char* ErrorKindName(ErrorKind kind) {
  static const char* const kNames[] = {"TaskException", "ObjectLost",     "ActorError",
                                       "ObjectStoreFull", "CopyDidNotFit", "ResourceError",
                                       "PlacementGroupRemoved", "Error",
                                       "TaskCancelled", "WorkerCrashed"};
  static_assert(std::size(kNames) == kNumErrorKinds);
  return kNames[static_cast<size_t>(kind)];
}

ErrorInfo ErrorInfo::Of(ErrorKind kind, std::string message, std::string task_name, int rank) {
  return {kind, ErrorKindName(kind), std::move(message), std::move(task_name), rank};
}

ErrorInfo ErrorInfo::Exception(std::string type, std::string message, std::string task_name, int rank) {
  return {ErrorKind::kTaskException, std::move(type), std::move(message), std::move(task_name), rank};
}

std::string ErrorInfo::Render() const {
  std::string s = type + ": " + message;
  if (!task_name.empty()) {
    s += " (in task " + task_name + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string()) + ")";
  }
  return s;
}

std::string ErrorInfo::RenderText() const {
  const size_t attachment = message.find(kErrorAttachmentMarker);
  if (attachment == std::string::npos) return Render();
  ErrorInfo text = *this;
  text.message.resize(attachment);
  return text.Render();
}

bool IsForHead(const Message& m) {
  return std::holds_alternative<SubmitTask>(m) || std::holds_alternative<TaskDone>(m) ||
         std::holds_alternative<TaskBlocked>(m) || std::holds_alternative<PutObject>(m) ||
         std::holds_alternative<RefUpdate>(m) || std::holds_alternative<Subscribe>(m) ||
         std::holds_alternative<AddLocation>(m) || std::holds_alternative<Heartbeat>(m) ||
         std::holds_alternative<ActorDied>(m) || std::holds_alternative<HeadCall>(m) ||
         std::holds_alternative<KillActorRequest>(m) || std::holds_alternative<Publish>(m) ||
         std::holds_alternative<CancelTask>(m) ||
         std::holds_alternative<GeneratorItem>(m) || std::holds_alternative<GeneratorConsumed>(m);
}

const char* KindName(const Message& m) {
  static const char* const kNames[] = {
      "SubmitTask", "DispatchTask", "TaskDone",     "TaskBlocked", "PutObject",
      "RefUpdate",  "Subscribe",    "ObjectReady",  "FetchRequest", "FetchReply",
      "FreeObjects", "AddLocation", "Heartbeat",    "Stop",        "KillActorRequest",
      "KillActor",  "ActorDied",    "HeadCall",    "HeadReply",   "Publish",
      "Deliver",    "CancelTask",   "CancelDispatched", "PlacementGroupChanged",
      "GeneratorItem", "GeneratorReport", "GeneratorConsumed", "GeneratorAck", "RankLost"};
  static_assert(std::size(kNames) == std::variant_size_v<Message>);
  return kNames[m.index()];
}

}  // namespace prism::internal
