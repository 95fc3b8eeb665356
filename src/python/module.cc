// prism._prism: the C++ half of Prism for Python (python/prism/ is the other half).
//
// Python tasks and actors go through three functions registered here, on every rank, when
// the extension is imported (every rank runs the same script, so every rank imports it):
//
//   prism.python.task        a Python function call: args[0] names the function (module and
//                            qualified name, or cloudpickled bytes), args[1..] are its
//                            encoded arguments, by value or as resolved ObjectRefs
//   prism.python.actor       an actor factory: the same layout, for a class
//   prism.python.actor_call  a method call: args[0] is the method's name
//
// Each runs the call in this rank's interpreter, on the executor's thread, holding the GIL
// (prism._worker does the decoding, the call and the encoding), and writes the encoded
// result into the task's result buffer. A Python exception leaves as a C++ exception whose
// message carries the cloudpickled exception and the worker's traceback; the driver's get
// turns the TaskError it becomes back into the same Python type (prism.exceptions).
//
// Objects made by Python are Prism objects of raw bytes in prism._serialization's layout: a
// header, the pickle stream (protocol 5), then each out-of-band buffer (NumPy arrays, torch
// tensors) 64-byte aligned. A get returns a read-only Python buffer over the store's own
// payload (PayloadView), so arrays decoded from it are views of the store's memory.
//
// Values of C++ functions (prism.cpp_function) use Prism's own serialization; the types
// both languages know are converted here (EncodeCpp / DecodeCpp), by the demangled
// parameter and return types of the registered function pointer.
#include <cxxabi.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gil.h"
#include "prism/api.h"
#include "prism/internal/cancel_hook.h"
#include "prism/platform/invoke.h"

namespace py = pybind11;

namespace prism::python {
namespace {

using internal::Buffer;
using internal::ByteView;
using internal::CoreApi;
using prism::ObjectId;
using internal::Payload;
using internal::TaskRequest;

constexpr const char* kTaskFunction = "prism.python.task";
constexpr const char* kActorFactory = "prism.python.actor";
constexpr const char* kActorMethod = "prism.python.actor_call";

/// Read-only bytes of an object, kept alive by the payload they lie in (or owned, for bytes
/// that came without an owner). Exposes the buffer protocol; never writable.
struct PayloadView {
  Payload payload;   // the store's buffer, or null when `owned` holds the bytes
  std::string owned;
  const char* data = nullptr;
  size_t size = 0;
};

PayloadView MakeView(const ByteView& v) {
  PayloadView view;
  if (v.owner != nullptr && *v.owner) {
    view.payload = *v.owner;
    view.data = v.data;
  } else {
    view.owned.assign(v.data, v.size);
    view.data = view.owned.data();
  }
  view.size = v.size;
  return view;
}

/// An ObjectRef held by Python: counts as a local reference while alive.
struct PyObjectRef {
  internal::ObjectRefBase ref;
  std::string cpp_type;  // the C++ type of a C++ function's result; empty: a Python object
};

/// The ObjectRefs a value being pickled contains (ObjectRef.__reduce__ records them here).
thread_local std::vector<uint64_t>* g_contained = nullptr;

/// f() with the GIL released: for calls that ask the head (state API, KV, resources,
/// placement groups, kills). On rank 0 the head may, under its lock, end a Python actor,
/// whose destruction needs the GIL: a caller holding the GIL while it waits for that lock
/// would deadlock with it.
template <typename F>
auto WithoutGil(F&& f) {
  ReleaseGil release;
  return f();
}

/// A Python exception leaving a task: what() is the traceback and the pickled exception.
class PythonTaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Appends the parts Python gave (bytes, memoryviews, PickleBuffers: anything with the
/// buffer protocol) to `out`, one copy each.
void AppendParts(const py::handle& parts, Buffer& out) {
  std::vector<py::buffer_info> infos;
  size_t total = 0;
  for (py::handle part : parts) {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(part).request();
    total += static_cast<size_t>(info.size * info.itemsize);
    infos.push_back(std::move(info));
  }
  out.Reserve(out.size() + total);
  for (const auto& info : infos) out.Append(info.ptr, static_cast<size_t>(info.size * info.itemsize));
}

/// Throws what a failed call of prism._worker's returned: ("error", message) or ("exit",
/// what) for code that called os._exit (the task runner fails it as a crashed worker).
void ThrowIfFailed(const py::tuple& result) {
  const std::string status = result[0].cast<std::string>();
  if (status == "exit") throw internal::WorkerExitSignal{result[1].cast<std::string>()};
  if (status == "exit_actor") throw internal::ExitActorSignal{};  // prism.actor.exit_actor()
  if (status != "ok") throw PythonTaskError(result[1].cast<std::string>());
}

/// What prism._worker returned: ("ok", parts, contained ids), or a failure (ThrowIfFailed).
void TakeWorkerResult(const py::tuple& result, Buffer& out) {
  ThrowIfFailed(result);
  AppendParts(result[1], out);
  for (py::handle id : result[2]) internal::ContainedRefScope::Record(ObjectId(id.cast<uint64_t>()));
}

py::list ArgViews(const std::vector<ByteView>& args, size_t from) {
  py::list views;
  for (size_t i = from; i < args.size(); ++i) views.append(py::cast(MakeView(args[i])));
  return views;
}

std::string FirstArg(const std::vector<ByteView>& args, const char* what) {
  if (args.empty()) throw Error(std::string("prism: a ") + what + " without its function");
  return std::string(args[0].data, args[0].size);
}

py::object Worker() { return py::module_::import("prism._worker"); }

/// prism._worker.<fn>(args...) on a task's thread, holding only raw references across the
/// call: the arguments are moved out of their objects first (pass temporaries, or copies
/// of what must live on). If the interpreter ends this thread inside the call (the script
/// ended and Python finalizes while the task still runs: pthread_exit from the GIL's
/// wait), the unwinding then meets no destructor that touches Python without the GIL
/// before TaskGil parks the thread (a pybind11 argument tuple's decref segfaulted there).
template <typename... A>
py::tuple CallWorker(const char* fn, A&&... args) {
  PyObject* f = py::object(Worker().attr(fn)).release().ptr();
  PyObject* argv[] = {args.release().ptr()...};
  PyObject* r = PyObject_Vectorcall(f, argv, sizeof...(A), nullptr);
  Py_DECREF(f);
  for (PyObject* a : argv) Py_XDECREF(a);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::tuple>(r);
}

/// What prism._worker's run_task_parts / call_actor_parts returned for a call with
/// num_returns > 1: ("ok", [parts of each value], [contained ids of each value]).
void TakeWorkerParts(const py::tuple& result, std::vector<Buffer>& parts,
                     std::vector<std::vector<ObjectId>>& contained) {
  ThrowIfFailed(result);
  for (py::handle value : result[1]) {
    parts.emplace_back();
    AppendParts(value, parts.back());
  }
  for (py::handle ids : result[2]) {
    contained.emplace_back();
    for (py::handle id : ids) contained.back().push_back(ObjectId(id.cast<uint64_t>()));
  }
}

// ---- words for prism._events' thread ------------------------------------------------------

/// What C++ threads hand to Python without taking the GIL: an object a future waits for is
/// ready (the future's token), or Cancel flagged a running Python task (its cancel flag).
/// prism._events' one thread per process takes them (next_event) and acts under the GIL,
/// holding no lock of the core's: the threads that give the words run callbacks or handle
/// messages and must never wait for the GIL.
enum class EventKind : int { kReady = 1, kCancel = 2 };

struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<EventKind, uint64_t>> queue;
};
Events& TheEvents() {
  static auto* events = new Events;  // never destroyed: callback threads may outlive exit
  return *events;
}
void PushEvent(EventKind kind, uint64_t value) {
  Events& e = TheEvents();
  {
    std::lock_guard<std::mutex> lock(e.mu);
    e.queue.emplace_back(kind, value);
  }
  e.cv.notify_one();
}

/// The Python tasks running on this rank, by their cancel flag: the thread each runs on,
/// and whether a cancel interrupted it (see PythonTaskScope).
struct RunningTask {
  unsigned long thread = 0;
  bool actor_call = false;   // Ray interrupts no actor method: only its flag is set
  bool interrupted = false;  // KeyboardInterrupt was raised in its thread
};
std::mutex g_running_mu;
std::condition_variable g_running_cv;  // a task left RunningTasks
std::map<const std::atomic<bool>*, RunningTask>& RunningTasks() {
  static auto* running = new std::map<const std::atomic<bool>*, RunningTask>;
  return *running;
}

void OnRunningTaskCancelled(const std::atomic<bool>* flag) {
  PushEvent(EventKind::kCancel, reinterpret_cast<uint64_t>(flag));
}

/// A Python task's or actor method's call, under the GIL: a cancel while a task runs
/// raises KeyboardInterrupt in its thread (Ray's ray.cancel of a running task), delivered
/// by prism._events' thread through Interrupt; an actor method is only flagged (and an
/// async one's coroutine cancelled, by prism._events). At the end an interrupt that came
/// too late for the task's code is taken back, so it cannot hit the thread's next task.
class PythonTaskScope {
 public:
  explicit PythonTaskScope(bool actor_call = false) : flag_(internal::CurrentTaskCancelFlag()) {
    if (flag_ == nullptr) return;
    std::lock_guard<std::mutex> lock(g_running_mu);
    RunningTasks()[flag_] = RunningTask{PyThread_get_thread_ident(), actor_call, false};
  }
  ~PythonTaskScope() {
    if (flag_ == nullptr) return;
    if (!HoldsGil()) ParkForever();  // ended by the interpreter: see CallWorker
    std::lock_guard<std::mutex> lock(g_running_mu);
    auto it = RunningTasks().find(flag_);
    if (it == RunningTasks().end()) return;
    if (it->second.interrupted) PyThreadState_SetAsyncExc(it->second.thread, nullptr);
    RunningTasks().erase(it);
    g_running_cv.notify_all();
  }
  PythonTaskScope(const PythonTaskScope&) = delete;
  PythonTaskScope& operator=(const PythonTaskScope&) = delete;

 private:
  const std::atomic<bool>* flag_;
};

/// Under the GIL and g_running_mu: KeyboardInterrupt in `task`'s thread, once.
void RaiseKeyboardInterrupt(RunningTask& task) {
  if (task.interrupted) return;
  task.interrupted = true;
  PyThreadState_SetAsyncExc(task.thread, PyExc_KeyboardInterrupt);
}

/// prism._events' thread, holding the GIL: raises KeyboardInterrupt in the thread of the
/// Python task whose flag Cancel set, if it still runs (not in an actor method's). The
/// task's thread needs the GIL to end its scope, so the entry found here is the task's
/// own. Returns (the call's thread, whether it is an actor call), or None if it ended.
py::object Interrupt(uint64_t flag) {
  std::lock_guard<std::mutex> lock(g_running_mu);
  auto it = RunningTasks().find(reinterpret_cast<const std::atomic<bool>*>(flag));
  if (it == RunningTasks().end()) return py::none();
  if (!it->second.actor_call) RaiseKeyboardInterrupt(it->second);
  return py::make_tuple(it->second.thread, it->second.actor_call);
}

/// At the driver's shutdown, holding the GIL: every Python task still running on this rank
/// is abandoned; KeyboardInterrupt ends its code, so no task thread is left in Python when
/// the interpreter finalizes at exit (which aborts the process). Waits up to `grace` for
/// them without the GIL (a task blocked in C code, such as time.sleep, ends only when the
/// call returns).
void InterruptAll(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(g_running_mu);
    if (RunningTasks().empty()) return;
    for (auto& [flag, task] : RunningTasks()) RaiseKeyboardInterrupt(task);
  }
  ReleaseGil release;
  std::unique_lock<std::mutex> lock(g_running_mu);
  g_running_cv.wait_for(lock, grace, [] { return RunningTasks().empty(); });
}

void RunTask(const std::vector<ByteView>& args, Buffer& out) {
  internal::DeferRefReleases defer;  // a result may hold the last reference to an object
  TaskGil gil;
  PythonTaskScope scope;
  py::tuple result = CallWorker("run_task", py::bytes(FirstArg(args, "Python task")), ArgViews(args, 1));
  TakeWorkerResult(result, out);
}

/// A Python actor: the instance, destroyed under the GIL.
struct PyActor {
  py::object instance;
};

void* CreateActor(const std::vector<ByteView>& args) {
  TaskGil gil;
  py::tuple result = CallWorker("create_actor", py::bytes(FirstArg(args, "Python actor")), ArgViews(args, 1));
  ThrowIfFailed(result);
  return new PyActor{result[1]};
}

void DestroyActor(void* p) {
  TaskGil gil;
  delete static_cast<PyActor*>(p);
}

/// A call with num_returns > 1 (a task when self is null, else an actor method): the
/// returned tuple or list, one value per object.
void CallParts(void* self, const std::vector<ByteView>& args, std::vector<Buffer>& parts,
               std::vector<std::vector<ObjectId>>& contained) {
  internal::DeferRefReleases defer;
  TaskGil gil;
  PythonTaskScope scope(self != nullptr);
  py::tuple result =
      self == nullptr
          ? CallWorker("run_task_parts", py::bytes(FirstArg(args, "Python task")), ArgViews(args, 1))
          : CallWorker("call_actor_parts", py::object(static_cast<PyActor*>(self)->instance),
                       py::bytes(FirstArg(args, "Python actor call")), ArgViews(args, 1));
  TakeWorkerParts(result, parts, contained);
}

/// A streaming generator (num_returns="streaming"): a task when self is null, else an actor
/// method. prism._worker iterates the Python generator and hands each value to `emit`,
/// which yields it to the caller (blocking, without the GIL, under backpressure) and
/// returns False once the caller dropped its generator; the task then ends quietly.
void RunGenerator(void* self, const std::vector<ByteView>& args, internal::GeneratorSink& sink) {
  internal::DeferRefReleases defer;
  TaskGil gil;
  PythonTaskScope scope(self != nullptr);
  bool stopped = false;
  py::cpp_function emit([&sink, &stopped](const py::list& parts, const std::vector<uint64_t>& contained) {
    Buffer bytes;
    AppendParts(parts, bytes);
    std::vector<ObjectId> ids;
    for (uint64_t id : contained) ids.push_back(ObjectId(id));
    try {
      ReleaseGil release;
      sink.Yield(std::move(bytes), std::move(ids));
    } catch (const internal::GeneratorStoppedSignal&) {
      stopped = true;
      return false;
    }
    return true;
  });
  py::tuple result =
      self == nullptr
          ? CallWorker("run_generator", py::bytes(FirstArg(args, "Python task")), ArgViews(args, 1), std::move(emit))
          : CallWorker("call_actor_generator", py::object(static_cast<PyActor*>(self)->instance),
                       py::bytes(FirstArg(args, "Python actor call")), ArgViews(args, 1), std::move(emit));
  if (stopped) throw internal::GeneratorStoppedSignal{};
  ThrowIfFailed(result);
}

void CallActor(void* self, const std::vector<ByteView>& args, Buffer& out) {
  internal::DeferRefReleases defer;
  TaskGil gil;
  PythonTaskScope scope(true);
  py::tuple result = CallWorker("call_actor", py::object(static_cast<PyActor*>(self)->instance),
                                py::bytes(FirstArg(args, "Python actor call")), ArgViews(args, 1));
  TakeWorkerResult(result, out);
}

[[maybe_unused]] const bool kRegistered = [] {
  auto& registry = internal::FunctionRegistry::Instance();
  internal::RemoteFunction task;
  task.name = kTaskFunction;
  task.invoke = RunTask;
  task.invoke_parts = CallParts;
  task.generate = RunGenerator;
  registry.Add(std::string("key:") + kTaskFunction, std::move(task));
  internal::RemoteFunction factory;
  factory.name = kActorFactory;
  factory.create = CreateActor;
  factory.destroy = DestroyActor;
  registry.Add(std::string("key:") + kActorFactory, std::move(factory));
  internal::RemoteFunction method;
  method.name = kActorMethod;
  method.method = CallActor;
  method.invoke_parts = CallParts;
  method.generate = RunGenerator;
  registry.Add(std::string("key:") + kActorMethod, std::move(method));
  return true;
}();

// ---- submitting -------------------------------------------------------------------------

/// The options of one remote function, actor class or actor method (its .options()),
/// ready to submit many calls with.
struct RequestTemplate {
  TaskRequest request;
};

void AddArg(TaskRequest& request, const py::handle& arg) {
  internal::TaskArg packed;
  if (py::isinstance<PyObjectRef>(arg)) {
    const auto& ref = arg.cast<const PyObjectRef&>();
    if (ref.ref.IsNil()) throw Error("prism: an empty ObjectRef passed as an argument");
    packed.is_ref = true;
    packed.ref = ref.ref.ID();
  } else if (py::isinstance<py::bytes>(arg)) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    PyBytes_AsStringAndSize(arg.ptr(), &data, &size);
    packed.value = Buffer(data, static_cast<size_t>(size));
  } else {
    AppendParts(arg, packed.value);  // a list of parts
  }
  request.args.push_back(std::move(packed));
}

/// The caller's end of a streaming generator task (Ray's ObjectRefGenerator; prism._remote
/// wraps it). Dropping it frees the values not taken and stops the producer.
struct PyGenerator {
  internal::ObjectRefBase task;  // the generator task's own object
  PyGenerator(internal::ObjectRefBase t) : task(std::move(t)) {}
  PyGenerator(PyGenerator&&) = default;
  ~PyGenerator() { Drop(); }
  void Drop() {
    if (task.IsNil()) return;
    if (auto* core = internal::CurrentCore()) {
      const ObjectId id = task.ID();
      if (PyGILState_Check()) {
        ReleaseGil release;
        core->DropGenerator(id);
      } else {
        core->DropGenerator(id);
      }
    }
  }
};

/// One ObjectRef, or with num_returns > 1 a list of one per returned value, or a
/// PyGenerator for a streaming generator.
py::object Submit(const RequestTemplate& tmpl, const py::list& args, const std::vector<uint64_t>& contained,
                  const std::string& name) {
  CoreApi& core = internal::RequireCore("remote()");
  TaskRequest request = tmpl.request;
  if (!name.empty()) request.name = name;
  request.args.reserve(args.size());
  for (py::handle a : args) AddArg(request, a);
  for (uint64_t id : contained) request.contained.push_back(ObjectId(id));
  ObjectId id;
  {
    ReleaseGil release;
    id = core.Submit(std::move(request));
  }
  if (tmpl.request.streaming) return py::cast(PyGenerator(internal::ObjectRefBase(id, internal::ObjectRefBase::Adopt{})));
  const int n = tmpl.request.num_returns;
  if (n == 1) return py::cast(PyObjectRef{internal::ObjectRefBase(id, internal::ObjectRefBase::Adopt{}), {}});
  py::list refs;
  for (int i = 0; i < n; ++i) {
    refs.append(py::cast(PyObjectRef{internal::ObjectRefBase(internal::ReturnId(id, i), internal::ObjectRefBase::Adopt{}), {}}));
  }
  return refs;
}

// ---- C++ values -------------------------------------------------------------------------

std::string Demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

/// The demangled type of the function pointer registered as `name`, e.g. "int (*)(int,
/// double)". Throws Error if there is none (an actor method, or no such function).
std::string CppSignature(const std::string& name) {
  const internal::RemoteFunction* fn = internal::FunctionRegistry::Instance().FindByName(name);
  if (fn == nullptr) {
    throw Error("prism: no C++ function registered as \"" + name +
                "\" in this process (PRISM_REMOTE in a library loaded with "
                "prism.load_library on every rank, before prism.init)");
  }
  if (fn->pointer_type == nullptr) {
    throw Error("prism: \"" + name + "\" is not a free C++ function (an actor factory, method or "
                "generator): prism.cpp_function calls free functions");
  }
  return Demangle(fn->pointer_type->name());
}

const std::string kString = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";

template <typename T>
std::string VectorName(const char* element) {
  return std::string("std::vector<") + element + ", std::allocator<" + element + "> >";
}

/// Prism's bytes of `value` as C++ type `type` (a demangled name). Throws TypeError for a
/// type Python cannot make.
py::bytes EncodeCpp(const std::string& type, const py::handle& value) {
  auto bytes = [](const auto& v) {
    std::string s = platform::ToBytes(v);
    return py::bytes(s);
  };
  if (type == "int") return bytes(value.cast<int>());
  if (type == "long" || type == "long long") return bytes(value.cast<int64_t>());
  if (type == "unsigned int") return bytes(value.cast<unsigned>());
  if (type == "unsigned long" || type == "unsigned long long") return bytes(value.cast<uint64_t>());
  if (type == "double") return bytes(value.cast<double>());
  if (type == "float") return bytes(value.cast<float>());
  if (type == "bool") return bytes(value.cast<bool>());
  if (type == kString) {
    if (py::isinstance<py::bytes>(value)) return bytes(value.cast<std::string>());
    return bytes(py::str(value).cast<std::string>());
  }
  auto array = [&](auto zero, const char* dtype) {
    using T = decltype(zero);
    py::object np = py::module_::import("numpy");
    py::object a = np.attr("ascontiguousarray")(value, py::arg("dtype") = dtype);
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(a).request();
    Buffer out;
    internal::Writer w(out);
    w.Bytes(info.ptr, static_cast<uint64_t>(info.size) * sizeof(T));
    return py::bytes(out.data(), out.size());
  };
  if (type == VectorName<double>("double")) return array(double{}, "float64");
  if (type == VectorName<float>("float")) return array(float{}, "float32");
  if (type == VectorName<int>("int")) return array(int{}, "int32");
  if (type == VectorName<int64_t>("long")) return array(int64_t{}, "int64");
  throw py::type_error("prism: cannot pass a Python value as C++ type " + type +
                       " (Python and C++ share int, long, double, float, bool, std::string and "
                       "std::vector of double, float, int and long)");
}

/// The Python value of C++ type `type` in `view` (a NumPy array for vectors: a read-only
/// view of the bytes, no copy).
py::object DecodeCpp(const std::string& type, const py::object& view_object) {
  const auto& view = view_object.cast<const PayloadView&>();
  std::string_view bytes(view.data, view.size);
  if (type == "void") return py::none();
  if (type == "int") return py::cast(platform::FromBytes<int>(bytes));
  if (type == "long" || type == "long long") return py::cast(platform::FromBytes<int64_t>(bytes));
  if (type == "unsigned int") return py::cast(platform::FromBytes<unsigned>(bytes));
  if (type == "unsigned long" || type == "unsigned long long") return py::cast(platform::FromBytes<uint64_t>(bytes));
  if (type == "double") return py::cast(platform::FromBytes<double>(bytes));
  if (type == "float") return py::cast(platform::FromBytes<float>(bytes));
  if (type == "bool") return py::cast(platform::FromBytes<bool>(bytes));
  if (type == kString) {
    std::string s = platform::FromBytes<std::string>(bytes);
    PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
    if (text == nullptr) {
      PyErr_Clear();
      return py::bytes(s);  // not text: the bytes
    }
    return py::reinterpret_steal<py::object>(text);
  }
  auto array = [&](const char* dtype, size_t element) -> py::object {
    if (view.size < sizeof(uint64_t)) throw SerializationError("prism: a C++ vector's bytes are truncated");
    uint64_t n = 0;
    std::memcpy(&n, view.data, sizeof n);
    if (n != view.size - sizeof n || n % element != 0) {
      throw SerializationError("prism: a C++ vector's length does not match its bytes");
    }
    py::object np = py::module_::import("numpy");
    py::object mv = py::memoryview(view_object);
    return np.attr("frombuffer")(mv, py::arg("dtype") = dtype, py::arg("offset") = sizeof n);
  };
  if (type == VectorName<double>("double")) return array("float64", 8);
  if (type == VectorName<float>("float")) return array("float32", 4);
  if (type == VectorName<int>("int")) return array("int32", 4);
  if (type == VectorName<int64_t>("long")) return array("int64", 8);
  throw py::type_error("prism: cannot read C++ type " + type + " from Python");
}

// ---- errors -----------------------------------------------------------------------------

/// Raises prism.exceptions.<name>(message) (the Python half defines the classes).
[[noreturn]] void Raise(const char* name, const std::string& message) {
  py::object cls = py::module_::import("prism.exceptions").attr(name);
  PyErr_SetObject(cls.ptr(), py::str(message).ptr());
  throw py::error_already_set();
}

/// The main thread's id: the only thread where Python runs signal handlers.
unsigned long g_main_thread = 0;

/// Runs `attempt(timeout)` (which releases the GIL while it blocks) until it returns true or
/// timeout_ms (< 0: no limit) passed. On the main thread it waits in slices of at most 200
/// ms and runs Python's signal handlers between them, so Ctrl-C interrupts a long get or
/// wait with KeyboardInterrupt; a slice's TimeoutError is no error unless the whole timeout
/// passed, and then it says how long that was. Elsewhere (a task's thread, where no signal
/// handler runs) it is one wait: a task waiting in slices would leave and take back its
/// rank's CPU every 200 ms. Returns the last attempt's result.
template <typename Attempt>
bool WaitInSlices(int64_t timeout_ms, const char* what, Attempt&& attempt) {
  if (PyThread_get_thread_ident() != g_main_thread) return attempt(timeout_ms);
  constexpr int64_t kSliceMs = 200;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    int64_t left = kSliceMs;
    if (timeout_ms >= 0) {
      int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start).count();
      left = std::max<int64_t>(0, std::min(kSliceMs, timeout_ms - spent));
    }
    bool last = timeout_ms >= 0 && left < kSliceMs;
    try {
      if (attempt(left) || last) return true;
    } catch (const TimeoutError& e) {
      if (last) {
        // The slice's message counts only its own milliseconds; keep what it says after them.
        const std::string slice = e.what();
        const size_t detail = slice.find(" ms: ");
        throw TimeoutError(std::string("prism: ") + what + " timed out after " + std::to_string(timeout_ms) +
                           " ms" + (detail == std::string::npos ? "" : slice.substr(detail + 3)));
      }
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

std::vector<ObjectId> IdsOf(const py::list& refs) {
  std::vector<ObjectId> ids;
  ids.reserve(refs.size());
  for (py::handle r : refs) {
    const auto& ref = r.cast<const PyObjectRef&>();
    if (ref.ref.IsNil()) throw Error("prism: get/wait on an empty ObjectRef");
    ids.push_back(ref.ref.ID());
  }
  return ids;
}

/// A state API record (prism/state.h) as a dict of its fields, by the names Fields gives
/// them; a field that is itself a list of records (a task's events) becomes a list of dicts.
template <class T>
py::object StateValue(T& value) {
  if constexpr (requires { value.Fields([](const char*, auto&) {}); }) {
    py::dict d;
    value.Fields([&d](const char* name, auto& field) { d[name] = StateValue(field); });
    return d;
  } else if constexpr (requires { value.front().Fields([](const char*, auto&) {}); }) {
    py::list out;
    for (auto& item : value) out.append(StateValue(item));
    return out;
  } else {
    return py::cast(value);
  }
}

template <class T>
py::list StateList(std::vector<T> records) {
  py::list out;
  for (T& record : records) out.append(StateValue(record));
  return out;
}

}  // namespace
}  // namespace prism::python

PYBIND11_MODULE(_prism, m) {
  using namespace prism;
  using namespace prism::python;
  m.doc() = "Prism's C++ core for the prism Python package (use prism, not this module)";
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  // Python exceptions for the core's errors. A TaskError arrives as _prism.TaskFailure with
  // its fields; prism.get turns it into the task's own exception type.
  static py::exception<TaskError> task_failure(m, "TaskFailure");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const TaskCancelledError& e) {
      try { Raise("TaskCancelledError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const TaskError& e) {
      py::tuple fields = py::make_tuple(e.OriginalType(), e.OriginalMessage(), e.TaskName(), e.Rank(), std::string(e.what()));
      PyErr_SetObject(task_failure.ptr(), fields.ptr());
    } catch (const TimeoutError& e) {
      try { Raise("GetTimeoutError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const ActorError& e) {
      try { Raise("ActorDiedError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const ObjectLostError& e) {
      try { Raise("ObjectLostError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const ResourceError& e) {
      try { Raise("ResourceError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const SerializationError& e) {
      try { Raise("SerializationError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const RuntimeError& e) {
      try { Raise("PrismRuntimeError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    } catch (const Error& e) {
      try { Raise("PrismError", e.what()); } catch (py::error_already_set& err) { err.restore(); }
    }
  });

  py::class_<PayloadView>(m, "PayloadView", py::buffer_protocol())
      .def_buffer([](PayloadView& v) {
        return py::buffer_info(const_cast<char*>(v.data), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(v.size)}, {1}, /*readonly=*/true);
      })
      .def_property_readonly("address", [](const PayloadView& v) { return reinterpret_cast<uintptr_t>(v.data); },
                             "Address of the first byte (for tests of zero-copy reads)")
      .def_property_readonly("store_owned", [](const PayloadView& v) { return static_cast<bool>(v.payload); },
                             "True if the bytes are the object store's payload (not a copy)")
      .def("__len__", [](const PayloadView& v) { return v.size; });

  py::class_<PyObjectRef>(m, "ObjectRef")
      .def("id", [](const PyObjectRef& r) { return r.ref.ID().Value(); })
      .def("hex", [](const PyObjectRef& r) { return r.ref.ID().Hex(); })
      .def_readonly("_cpp_type", &PyObjectRef::cpp_type)
      .def("__eq__", [](const PyObjectRef& a, const py::object& b) {
        return py::isinstance<PyObjectRef>(b) && a.ref == b.cast<const PyObjectRef&>().ref;
      })
      .def("__hash__", [](const PyObjectRef& r) { return std::hash<uint64_t>()(r.ref.ID().Value()); })
      .def("__repr__", [](const PyObjectRef& r) { return "ObjectRef(" + r.ref.ID().Hex() + ")"; })
      .def("__reduce__", [](const PyObjectRef& r) {
        // Inside a value being pickled: the value contains the object (kept alive with it).
        if (g_contained != nullptr) g_contained->push_back(r.ref.ID().Value());
        return py::make_tuple(py::module_::import("prism._serialization").attr("ref_from_id"),
                              py::make_tuple(r.ref.ID().Value(), r.cpp_type));
      });
  m.def("_ref_from_id", [](uint64_t id, const std::string& cpp_type) {
    return PyObjectRef{internal::ObjectRefBase(prism::ObjectId(id)), cpp_type};
  });
  m.def("_with_cpp_type", [](const PyObjectRef& r, const std::string& cpp_type) {
    return PyObjectRef{r.ref, cpp_type};
  });

  m.def("pickle_refs", [](const py::function& dump) {
    // Runs dump() and returns (its result, ids of the ObjectRefs it pickled).
    std::vector<uint64_t> ids;
    std::vector<uint64_t>* previous = g_contained;
    g_contained = &ids;
    py::object out;
    try {
      out = dump();
    } catch (...) {
      g_contained = previous;
      throw;
    }
    g_contained = previous;
    return py::make_tuple(out, ids);
  }, "Calls dump() and returns (its result, the ids of the ObjectRefs pickled inside it)");

  m.def("init", [](const std::vector<std::string>& argv, std::map<std::string, double> resources,
                   std::optional<double> num_cpus, std::optional<double> num_gpus,
                   std::optional<std::string> ray_namespace, std::optional<std::string> log_level,
                   std::optional<std::string> dashboard) {
    Config config;
    config.resources = std::move(resources);
    config.num_cpus = num_cpus;
    config.num_gpus = num_gpus;
    if (ray_namespace) config.ray_namespace = *ray_namespace;
    config.log_level = log_level;
    config.dashboard = dashboard;
    std::vector<char*> args;
    static std::vector<std::string> kept;  // Init may keep argv's pointers
    kept = argv;
    for (auto& a : kept) args.push_back(a.data());
    args.push_back(nullptr);
    // Released: on a worker Init serves tasks (which take the GIL) and exits the process.
    ReleaseGil release;
    Init(config, static_cast<int>(kept.size()), args.data());
  }, "Starts Prism: returns on rank 0; on other ranks serves tasks and exits at shutdown");
  m.def("shutdown", [] {
    InterruptAll(std::chrono::seconds(2));  // abandoned tasks' Python code ends first
    ReleaseGil release;
    Shutdown();
  });
  m.def("is_initialized", &IsInitialized);

  py::class_<RequestTemplate>(m, "RequestTemplate")
      .def(py::init([](const std::string& kind, const std::string& function, const std::string& name,
                       std::map<std::string, double> resources, int max_retries, bool retry_exceptions,
                       const std::string& placement_group, int bundle_index, int max_restarts,
                       int max_task_retries, int max_concurrency, const std::string& class_name,
                       uint64_t actor, std::optional<int> node_rank, bool node_soft, bool spread,
                       const std::string& ray_namespace, int num_returns, bool streaming) {
             RequestTemplate t;
             TaskRequest& r = t.request;
             r.num_returns = num_returns;
             r.streaming = streaming;
             if (kind == "task") {
               r.kind = TaskRequest::Kind::kTask;
             } else if (kind == "actor") {
               r.kind = TaskRequest::Kind::kActorCreation;
               r.class_name = class_name;
               r.max_restarts = max_restarts;
               r.max_task_retries = max_task_retries;
               r.max_concurrency = max_concurrency;
               r.ray_namespace = ray_namespace;
               r.resources["CPU"] = 0;  // Ray's default for actors
             } else if (kind == "actor_call") {
               r.kind = TaskRequest::Kind::kActorCall;
               r.actor = ObjectId(actor);
               r.resources["CPU"] = 0;  // methods run on the actor's own threads
             } else {
               throw Error("prism: unknown request kind " + kind);
             }
             r.function = function;
             r.name = name;
             for (const auto& [k, v] : resources) r.resources[k] = v;
             r.max_retries = max_retries;
             r.retry_exceptions = retry_exceptions;
             r.placement_group = placement_group;
             r.bundle_index = bundle_index;
             if (node_rank) {
               r.strategy = internal::SchedulingStrategy{internal::SchedulingStrategy::Kind::kNodeAffinity, *node_rank, node_soft};
             } else if (spread) {
               r.strategy = internal::SchedulingStrategy{internal::SchedulingStrategy::Kind::kSpread, -1, false};
             }
             return t;
           }),
           py::arg("kind"), py::arg("function"), py::arg("name") = "", py::arg("resources") = std::map<std::string, double>{},
           py::arg("max_retries") = 3, py::arg("retry_exceptions") = false, py::arg("placement_group") = "",
           py::arg("bundle_index") = -1, py::arg("max_restarts") = 0, py::arg("max_task_retries") = 0,
           py::arg("max_concurrency") = 1, py::arg("class_name") = "", py::arg("actor") = 0,
           py::arg("node_rank") = py::none(), py::arg("node_soft") = false, py::arg("spread") = false,
           py::arg("namespace") = "", py::arg("num_returns") = 1, py::arg("streaming") = false)
      .def("submit", &Submit, py::arg("args"), py::arg("contained"), py::arg("name") = "",
           "Submits one call: args are bytes, lists of buffer parts, or ObjectRefs (resolved first)");

  py::class_<PyGenerator>(m, "StreamingGenerator")
      .def("next_ref", [](PyGenerator& g, int64_t timeout_ms) -> py::object {
        if (g.task.IsNil()) return py::none();
        CoreApi& core = internal::RequireCore("ObjectRefGenerator.next");
        ObjectId id;
        WaitInSlices(timeout_ms, "next", [&](int64_t slice) {
          ReleaseGil release;
          id = core.NextGeneratorValue(g.task.ID(), slice);
          return true;
        });
        if (id.IsNil()) return py::none();
        return py::cast(PyObjectRef{internal::ObjectRefBase(id, internal::ObjectRefBase::Adopt{}), {}});
      }, "The next value's ref; None once the generator ended; raises its error once")
      .def("task_ref", [](const PyGenerator& g) { return PyObjectRef{g.task, {}}; })
      .def("close", [](PyGenerator& g) {
        g.Drop();
        g.task = internal::ObjectRefBase();
      });

  m.def("put", [](const py::list& parts, const std::vector<uint64_t>& contained) {
    CoreApi& core = internal::RequireCore("put");
    Buffer bytes;
    AppendParts(parts, bytes);
    std::vector<ObjectId> ids;
    for (uint64_t id : contained) ids.push_back(ObjectId(id));
    ObjectId id;
    {
      ReleaseGil release;
      id = core.Put(std::move(bytes), std::move(ids));
    }
    return PyObjectRef{internal::ObjectRefBase(id, internal::ObjectRefBase::Adopt{}), {}};
  });
  m.def("get", [](const py::list& refs, int64_t timeout_ms) {
    CoreApi& core = internal::RequireCore("get");
    std::vector<ObjectId> ids = IdsOf(refs);
    std::vector<Payload> payloads;
    WaitInSlices(timeout_ms, "get", [&](int64_t slice) {
      ReleaseGil release;
      payloads = core.Get(ids, slice);
      return true;
    });
    py::list views;
    for (auto& p : payloads) {
      PayloadView v;
      v.data = p->data();
      v.size = p->size();
      v.payload = std::move(p);
      views.append(py::cast(std::move(v)));
    }
    return views;
  }, "The stored bytes of each ref, as read-only views of the store's payloads");
  m.def("wait", [](const py::list& refs, int num_returns, int64_t timeout_ms) {
    CoreApi& core = internal::RequireCore("wait");
    std::vector<ObjectId> ids = IdsOf(refs);
    std::vector<bool> ready;
    bool done = WaitInSlices(timeout_ms, "wait", [&](int64_t slice) {
      ReleaseGil release;
      ready = core.Wait(ids, num_returns, slice);
      return std::count(ready.begin(), ready.end(), true) >= num_returns;
    });
    (void)done;  // after the timeout: the flags of the last slice
    return ready;
  });
  m.def("cancel", [](const PyObjectRef& ref, bool recursive) {
    WithoutGil([&] { internal::RequireCore("cancel").Cancel(ref.ref.ID(), recursive); });
  });
  m.def("kill_actor", [](uint64_t actor, bool no_restart) {
    WithoutGil([&] { internal::RequireCore("kill").KillActor(ObjectId(actor), no_restart); });
  });
  m.def("lookup_actor", [](const std::string& name, const std::string& ray_namespace) -> py::object {
    auto [id, class_name] =
        WithoutGil([&] { return internal::RequireCore("get_actor").LookupActor(name, ray_namespace); });
    if (id.IsNil()) return py::none();
    return py::make_tuple(PyObjectRef{internal::ObjectRefBase(id), {}}, class_name);
  });

  m.def("cpp_signature", &CppSignature);
  m.def("is_cpp_factory", [](const std::string& name) {
    const internal::RemoteFunction* fn = internal::FunctionRegistry::Instance().FindByName(name);
    return fn != nullptr && static_cast<bool>(fn->create);
  }, "True if an actor factory is registered as `name`");
  m.def("encode_cpp", &EncodeCpp);
  m.def("decode_cpp", &DecodeCpp);
  m.def("task_function_name", [] { return std::string(kTaskFunction); });
  m.def("actor_factory_name", [] { return std::string(kActorFactory); });
  m.def("actor_method_name", [] { return std::string(kActorMethod); });

  m.def("cluster_resources", [] { return WithoutGil(&ClusterResources); });
  m.def("available_resources", [] { return WithoutGil(&AvailableResources); });
  m.def("runtime_context", [] {
    RuntimeContext c = GetRuntimeContext();
    py::dict d;
    d["rank"] = c.GetRank();
    d["world_size"] = c.GetWorldSize();
    d["node_id"] = c.GetNodeId();
    d["job_id"] = c.GetJobId();
    d["task_id"] = c.GetTaskId().Hex();
    d["is_driver"] = c.IsDriver();
    d["namespace"] = internal::RequireCore("get_runtime_context").Namespace();
    return d;
  });
  m.def("gpu_ids", &GetGpuIds);
  m.def("is_cancelled", &IsCancelled, "True inside a task cancelled while it runs");

  m.def("on_ready", [](const PyObjectRef& ref, uint64_t token) {
    if (ref.ref.IsNil()) throw Error("prism: future() of an empty ObjectRef");
    WithoutGil([&] {
      internal::RequireCore("ObjectRef.future").OnReady(ref.ref.ID(), [token] { PushEvent(EventKind::kReady, token); });
    });
  }, "Hands (1, token) to next_event once the object is ready (or its task failed)");
  m.def("next_event", [](double timeout_s) -> py::object {
    std::pair<EventKind, uint64_t> event{};
    bool got = false;
    {
      ReleaseGil release;
      Events& e = TheEvents();
      std::unique_lock<std::mutex> lock(e.mu);
      got = e.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !e.queue.empty(); });
      if (got) {
        event = e.queue.front();
        e.queue.pop_front();
      }
    }
    if (!got) return py::none();
    return py::make_tuple(static_cast<int>(event.first), event.second);
  }, "The next (kind, value) for prism._events' thread (1: a future's token is ready, "
     "2: a running task's cancel flag), or None after timeout_s");
  m.def("interrupt", &Interrupt,
        "Raises KeyboardInterrupt in the running Python task of this cancel flag (not in an actor "
        "method); (its thread's ident, is an actor call) or None if it ended");
  internal::SetRunningTaskCancelHook(OnRunningTaskCancelled);

  m.def("kv_put", [](const std::string& k, const py::bytes& v, bool overwrite) {
    std::string value = v;
    return WithoutGil([&] { return kv::Put(k, value, overwrite); });
  });
  m.def("kv_get", [](const std::string& k) -> py::object {
    auto v = WithoutGil([&] { return kv::Get(k); });
    if (!v) return py::none();
    return py::bytes(*v);
  });
  m.def("kv_exists", [](const std::string& k) { return WithoutGil([&] { return kv::Exists(k); }); });
  m.def("kv_delete", [](const std::string& k, bool by_prefix) {
    return WithoutGil([&] { return kv::Delete(k, by_prefix); });
  }, py::arg("key"), py::arg("by_prefix") = false);
  m.def("kv_list", [](const std::string& prefix) { return WithoutGil([&] { return kv::List(prefix); }); },
        py::arg("prefix") = "");

  m.def("create_placement_group", [](const std::vector<std::unordered_map<std::string, double>>& bundles,
                                     const std::string& strategy, const std::string& name) {
    PlacementGroupCreationOptions o;
    o.bundles = bundles;
    o.name = name;
    if (strategy == "PACK") o.strategy = PlacementStrategy::PACK;
    else if (strategy == "SPREAD") o.strategy = PlacementStrategy::SPREAD;
    else if (strategy == "STRICT_PACK") o.strategy = PlacementStrategy::STRICT_PACK;
    else if (strategy == "STRICT_SPREAD") o.strategy = PlacementStrategy::STRICT_SPREAD;
    else throw py::value_error("prism: placement strategy must be PACK, SPREAD, STRICT_PACK or STRICT_SPREAD, not " + strategy);
    return WithoutGil([&] { return CreatePlacementGroup(o).GetID(); });
  });
  m.def("wait_placement_group", [](const std::string& id, int64_t timeout_ms) {
    ReleaseGil release;
    return internal::RequireCore("placement_group.wait").WaitPlacementGroup(id, timeout_ms);
  });
  m.def("remove_placement_group", [](const std::string& id) { WithoutGil([&] { RemovePlacementGroup(id); }); });
  m.def("placement_group_id_by_name", [](const std::string& name) {
    return WithoutGil([&] { return GetPlacementGroup(name).GetID(); });
  });

  m.def("list_tasks", [] { return StateList(WithoutGil([] { return state::ListTasks(); })); });
  m.def("list_nodes", [] { return StateList(WithoutGil([] { return state::ListNodes(); })); });
  m.def("list_placement_groups", [] { return StateList(WithoutGil([] { return state::ListPlacementGroups(); })); });
  m.def("list_errors", [](size_t limit) { return StateList(WithoutGil([&] { return state::ListErrors(limit); })); });
  m.def("list_actors", [] { return StateList(WithoutGil([] { return state::ListActors(); })); });
}
