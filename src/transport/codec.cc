// Wire format of a batch: repeated [kind: u8][fields...]. Fields are written in struct
// order with the primitives of prism::internal::Writer (little-endian, same binary on
// every rank). Payloads are a presence byte followed by length-prefixed bytes.
#include "transport/codec.h"

#include <type_traits>

namespace prism::internal {

namespace {

// Field lists of nested structs and messages, shared by encoder and decoder so the two
// can never disagree.
template <typename F> void Fields(ErrorInfo& e, F&& f) { f(e.kind); f(e.type); f(e.message); f(e.task_name); f(e.rank); }
template <typename F> void Fields(TaskOptions& o, F&& f) {
  f(o.function); f(o.name); f(o.demand); f(o.strategy); f(o.placement_group); f(o.bundle_index);
  f(o.max_retries); f(o.retry_exceptions); f(o.streaming); f(o.generator_backpressure);
  f(o.actor_name); f(o.actor_namespace); f(o.class_name); f(o.max_restarts); f(o.max_concurrency);
  f(o.max_task_retries);
}
template <typename F> void Fields(TaskSpec& t, F&& f) {
  f(t.id); f(t.kind); f(t.actor); f(t.options); f(t.args); f(t.contained); f(t.submitter);
  f(t.attempt); f(t.depth); f(t.num_returns); f(t.parent);
}
template <typename F> void Fields(SchedulingStrategy& s, F&& f) { f(s.kind); f(s.rank); f(s.soft); }
template <typename F> void Fields(ArgLocation& a, F&& f) { f(a.id); f(a.inline_value); }
template <typename F> void Fields(ReturnValue& r, F&& f) { f(r.inline_value); f(r.size); f(r.contained); }

struct Enc {
  Writer& w;
  void operator()(uint8_t v) { w.Pod(v); }
  void operator()(uint16_t v) { w.Pod(v); }
  void operator()(int16_t v) { w.Pod(v); }
  void operator()(TaskKind v) { w.Pod(static_cast<uint8_t>(v)); }
  void operator()(SchedulingStrategy::Kind v) { w.Pod(static_cast<uint8_t>(v)); }
  void operator()(ErrorKind v) { w.Pod(static_cast<uint8_t>(v)); }
  void operator()(bool v) { w.Pod<uint8_t>(v); }
  void operator()(int v) { w.Pod<int32_t>(v); }
  void operator()(uint32_t v) { w.Pod(v); }
  void operator()(uint64_t v) { w.Pod(v); }
  void operator()(ObjectId v) { w.Pod(v.Value()); }
  void operator()(const std::string& s) { w.Str(s); }
  void operator()(const Payload& p) {
    w.Pod<uint8_t>(p != nullptr);
    if (p) w.Bytes(p->data(), p->size());
  }
  template <typename T>
  void operator()(const std::vector<T>& v) {
    w.Pod<uint64_t>(v.size());
    for (const auto& e : v) (*this)(e);
  }
  void operator()(const ResourceSet& r) {
    w.Pod<uint64_t>(r.Entries().size());
    for (const auto& [name, units] : r.Entries()) {
      w.Str(name);
      w.Pod(units);
    }
  }
  template <typename T>
  auto operator()(const T& v) -> decltype(Fields(const_cast<T&>(v), *this)) {
    Fields(const_cast<T&>(v), [this](const auto& field) { (*this)(field); });
  }
  void operator()(const TaskSpecArg& a) {
    (*this)(a.is_ref);
    if (a.is_ref) {
      (*this)(a.ref);
    } else {
      (*this)(a.value);
    }
  }
  void operator()(const std::shared_ptr<const TaskSpec>& t) { (*this)(*t); }
  void operator()(const std::shared_ptr<TaskSpec>& t) { (*this)(*t); }
  void operator()(const std::shared_ptr<const TaskOptions>& o) { (*this)(*o); }
};

struct Dec {
  Reader& r;
  void operator()(uint8_t& v) { v = r.Pod<uint8_t>(); }
  void operator()(uint16_t& v) { v = r.Pod<uint16_t>(); }
  void operator()(int16_t& v) { v = r.Pod<int16_t>(); }
  void operator()(TaskKind& v) { v = static_cast<TaskKind>(r.Pod<uint8_t>()); }
  void operator()(SchedulingStrategy::Kind& v) {
    const auto raw = r.Pod<uint8_t>();
    if (raw > static_cast<uint8_t>(SchedulingStrategy::Kind::kNodeAffinity)) {
      throw SerializationError("prism: corrupt message: scheduling strategy " + std::to_string(raw) +
                               " (ranks running different binaries?)");
    }
    v = static_cast<SchedulingStrategy::Kind>(raw);
  }
  void operator()(ErrorKind& v) {
    const auto raw = r.Pod<uint8_t>();
    if (raw >= kNumErrorKinds) {
      throw SerializationError("prism: corrupt message: error kind " + std::to_string(raw) +
                               " (ranks running different binaries?)");
    }
    v = static_cast<ErrorKind>(raw);
  }
  void operator()(bool& v) { v = r.Pod<uint8_t>() != 0; }
  void operator()(int& v) { v = r.Pod<int32_t>(); }
  void operator()(uint32_t& v) { v = r.Pod<uint32_t>(); }
  void operator()(uint64_t& v) { v = r.Pod<uint64_t>(); }
  void operator()(ObjectId& v) { v = ObjectId(r.Pod<uint64_t>()); }
  void operator()(std::string& s) { s = r.Str(); }
  void operator()(Payload& p) {
    if (r.Pod<uint8_t>()) {
      ByteView b = r.Bytes();
      p = std::make_shared<const Buffer>(b.data, b.size);
    } else {
      p = nullptr;
    }
  }
  template <typename T>
  void operator()(std::vector<T>& v) {
    auto n = r.Pod<uint64_t>();
    if (n > r.remaining()) throw SerializationError("prism: corrupt message: vector length");
    v.resize(n);
    for (auto& e : v) (*this)(e);
  }
  void operator()(ResourceSet& rs) {
    auto n = r.Pod<uint64_t>();
    if (n > r.remaining()) throw SerializationError("prism: corrupt message: resource count");
    for (uint64_t i = 0; i < n; ++i) {
      std::string name = r.Str();
      rs.Set(name, r.Pod<int64_t>());
    }
  }
  template <typename T>
  auto operator()(T& v) -> decltype(Fields(v, *this)) {
    Fields(v, [this](auto& field) { (*this)(field); });
  }
  void operator()(TaskSpecArg& a) {
    (*this)(a.is_ref);
    if (a.is_ref) {
      (*this)(a.ref);
    } else {
      (*this)(a.value);
    }
  }
  void operator()(std::shared_ptr<const TaskSpec>& t) {
    auto spec = std::make_shared<TaskSpec>();
    (*this)(*spec);
    t = std::move(spec);
  }
  void operator()(std::shared_ptr<TaskSpec>& t) {
    t = std::make_shared<TaskSpec>();
    (*this)(*t);
  }
  // Tasks come in runs of a few callers' options: decoded into the thread's scratch (no
  // allocation), they share the thread's recent copy that equals them.
  void operator()(std::shared_ptr<const TaskOptions>& o) {
    thread_local TaskOptions scratch;
    thread_local RecentOptions recent;
    scratch.demand.Clear();
    (*this)(scratch);
    o = recent.Share(scratch);
  }
};

template <typename F> void Fields(SubmitTask& m, F&& f) { f(m.spec); }
template <typename F> void Fields(DispatchTask& m, F&& f) { f(m.spec); f(m.refs); }
template <typename F> void Fields(TaskDone& m, F&& f) {
  f(m.id); f(m.attempt); f(m.ok); f(m.inline_value); f(m.size); f(m.contained); f(m.error);
  f(m.exec_ns); f(m.more_returns);
}
template <typename F> void Fields(TaskBlocked& m, F&& f) { f(m.id); f(m.blocked); }
template <typename F> void Fields(PutObject& m, F&& f) {
  f(m.id); f(m.inline_value); f(m.size); f(m.contained);
}
template <typename F> void Fields(RefUpdate& m, F&& f) { f(m.add); f(m.remove); }
template <typename F> void Fields(Subscribe& m, F&& f) { f(m.ids); }
template <typename F> void Fields(ObjectReady& m, F&& f) {
  f(m.id); f(m.inline_value); f(m.size); f(m.holders); f(m.failed); f(m.error); f(m.notice);
}
template <typename F> void Fields(FetchRequest& m, F&& f) { f(m.id); f(m.tag); }
template <typename F> void Fields(FetchReply& m, F&& f) { f(m.id); f(m.tag); f(m.found); f(m.size); }
template <typename F> void Fields(FreeObjects& m, F&& f) { f(m.ids); }
template <typename F> void Fields(AddLocation& m, F&& f) { f(m.id); f(m.stored); f(m.failed_from); }
template <typename F> void Fields(Heartbeat&, F&&) {}
template <typename F> void Fields(Stop& m, F&& f) { f(m.exit_code); f(m.reason); f(m.end_process); }
template <typename F> void Fields(KillActorRequest& m, F&& f) { f(m.actor); f(m.no_restart); }
template <typename F> void Fields(KillActor& m, F&& f) { f(m.actor); f(m.restart); f(m.cause); }
template <typename F> void Fields(ActorDied& m, F&& f) { f(m.actor); f(m.cause); f(m.crashed); }
template <typename F> void Fields(HeadCall& m, F&& f) { f(m.request); f(m.op); f(m.args); }
template <typename F> void Fields(Publish& m, F&& f) { f(m.channel); f(m.bytes); }
template <typename F> void Fields(Deliver& m, F&& f) { f(m.channel); f(m.bytes); f(m.from); }
template <typename F> void Fields(CancelTask& m, F&& f) { f(m.id); f(m.recursive); f(m.timeout_ms); }
template <typename F> void Fields(CancelDispatched& m, F&& f) { f(m.id); f(m.actor); f(m.error); }
template <typename F> void Fields(PlacementGroupChanged& m, F&& f) { f(m.group); f(m.status); }
template <typename F> void Fields(GeneratorItem& m, F&& f) {
  f(m.task); f(m.attempt); f(m.index); f(m.item); f(m.inline_value); f(m.size); f(m.contained);
}
template <typename F> void Fields(GeneratorReport& m, F&& f) {
  f(m.task); f(m.index); f(m.item); f(m.inline_value); f(m.size); f(m.end); f(m.failed); f(m.error);
}
template <typename F> void Fields(GeneratorConsumed& m, F&& f) { f(m.task); f(m.consumed); f(m.dropped); }
template <typename F> void Fields(GeneratorAck& m, F&& f) { f(m.task); f(m.consumed); f(m.stop); }
template <typename F> void Fields(RankLost& m, F&& f) { f(m.rank); }
template <typename F> void Fields(HeadReply& m, F&& f) {
  f(m.request); f(m.ok); f(m.error_kind); f(m.error); f(m.result);
}

template <size_t I = 0>
Message MakeKind(size_t index) {
  if constexpr (I < std::variant_size_v<Message>) {
    if (index == I) return Message(std::in_place_index<I>);
    return MakeKind<I + 1>(index);
  } else {
    throw SerializationError("prism: corrupt message: unknown kind " + std::to_string(index));
  }
}

}  // namespace

void EncodeMessage(const Message& m, Buffer& batch) {
  Writer w(batch);
  w.Pod<uint8_t>(static_cast<uint8_t>(m.index()));
  Enc enc{w};
  std::visit([&](const auto& msg) {
    Fields(const_cast<std::decay_t<decltype(msg)>&>(msg), [&](const auto& field) { enc(field); });
  }, m);
}

std::vector<Message> DecodeBatch(const char* data, size_t size) {
  std::vector<Message> out;
  Reader r(data, size);
  Dec dec{r};
  while (!r.AtEnd()) {
    Message m = MakeKind(r.Pod<uint8_t>());
    std::visit([&](auto& msg) { Fields(msg, [&](auto& field) { dec(field); }); }, m);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace prism::internal
