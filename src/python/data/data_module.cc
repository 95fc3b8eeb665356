// prism._data: the C++ half of prism.data (python/prism/data/ is the other half), Ray Data's
// Python API over Prism's one Data engine (prism/data/dataset.h). Plans, streaming, fusion,
// scheduling, shuffles, sorts, groups and writes stay in C++; only the user's UDFs run in
// Python, on the rank that runs the block.
//
// UDFs: one trampoline, PrismDataPythonUdf, is registered here (so on every rank that
// imported prism.data before prism.init). Every Python function reaches the engine as a
// BoundUdf: the trampoline plus the function's payload (cloudpickled by prism.data._udf:
// the function, its kind, batch format and arguments). The trampoline turns the block
// into a dict of NumPy arrays (columns the arrays read in place), calls
// prism.data._udf.run_udf with the payload's loaded runner (cached per payload), and turns
// the dict it returns back into a block (arrays wrapped in place when their dtype is the
// engine's). A callable class goes through the engine's actor pool as
// ActorClass<PythonBatchClass>(payload): the Python instance lives in the actor.
//
// Errors: a UDF's exception leaves the trampoline as PythonUdfError whose message is the
// worker's traceback and the pickled exception after the core's attachment marker
// (prism._worker.describe); the engine wraps it with the operator and block, and
// prism.data._errors rebuilds the exception on the driver from that message.
//
// This module links prism_data and prism_data_blocks whole but not the core: it is loaded
// after prism._prism (RTLD_GLOBAL), and prism._train resolves the Data engine from it, so
// the process holds one copy of each (tests/python_data/test_module.py checks this).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gil.h"
// The core's headers keep default visibility here (pybind11 builds with hidden): their
// inline thread_locals (DeferRefReleases::Depth, ContainedRefScope::current_) must be the
// one copy prism._prism exports, not a private one. With a private copy, an engine task
// that returns ObjectRefs (an all-to-all member's output blocks) released them before the
// head learned its result held them, and the blocks were freed ("object ... is gone").
#pragma GCC visibility push(default)
#include "prism/api.h"
#include "prism/data.h"
#include "prism/platform/invoke.h"
#pragma GCC visibility pop

namespace py = pybind11;

namespace prism::python::data_binding {

using prism::data::Block;
using prism::data::Column;
using prism::data::DType;

/// A Python UDF's failure: what() is its traceback and pickled exception.
class PythonUdfError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- columns <-> NumPy --------------------------------------------------------------------

/// A shared owner for a Python object that any thread may drop: the last owner decrefs it
/// under the GIL (or leaks it once the interpreter is gone).
std::shared_ptr<const void> PyOwner(py::object o) {
  return std::shared_ptr<const void>(new py::object(std::move(o)), [](const void* p) {
    auto* obj = static_cast<py::object*>(const_cast<void*>(p));
    if (!Py_IsInitialized()) {
      obj->release();
      delete obj;
      return;
    }
    PyGILState_STATE s = PyGILState_Ensure();
    delete obj;
    PyGILState_Release(s);
  });
}

py::dtype NumpyDtype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat64:
      return py::dtype::of<double>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kBool:
      return py::dtype::of<bool>();
    case DType::kString:
      break;
  }
  return py::dtype("O");
}

/// A column as a NumPy array: fixed-width columns read in place (read-only, the array holds
/// the column's owner); strings as an object array of str (bytes where a value is not
/// UTF-8, and always for a column named "bytes", read_binary_files').
py::array ColumnToNumpy(const std::string& name, const Column& c) {
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(c.rows())};
  for (int64_t d : c.row_shape()) shape.push_back(static_cast<py::ssize_t>(d));
  if (c.dtype() != DType::kString) {
    auto* holder = new std::shared_ptr<const void>(c.owner());
    py::capsule owner(holder, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
    py::array a(NumpyDtype(c.dtype()), shape, {}, c.data(), owner);
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return a;
  }
  const bool as_bytes = name == "bytes";
  py::array out(py::dtype("O"), shape);
  auto** items = static_cast<PyObject**>(out.mutable_data());
  for (int64_t i = 0; i < c.rows(); ++i) {
    std::string_view s = c.StringAt(i);
    PyObject* v = nullptr;
    if (!as_bytes) {
      v = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), nullptr);
      if (v == nullptr) PyErr_Clear();
    }
    if (v == nullptr) v = PyBytes_FromStringAndSize(s.data(), static_cast<py::ssize_t>(s.size()));
    if (v == nullptr) throw py::error_already_set();
    Py_XDECREF(items[i]);  // numpy filled the object array with None
    items[i] = v;
  }
  return out;
}

py::dict BlockToDict(const Block& b) {
  py::dict d;
  for (size_t i = 0; i < b.num_columns(); ++i) {
    const auto& [name, col] = b.column_at(i);
    d[py::str(name)] = ColumnToNumpy(name, col);
  }
  return d;
}

std::optional<DType> DTypeOfNumpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::kFloat32;
  if (kind == 'f' && size == 8) return DType::kFloat64;
  if (kind == 'i' && size == 4) return DType::kInt32;
  if (kind == 'i' && size == 8) return DType::kInt64;
  if (kind == 'u' && size == 1) return DType::kUInt8;
  if (kind == 'b') return DType::kBool;
  return std::nullopt;
}

Column StringColumn(const std::string& name, const py::array& a) {
  auto strings = std::make_shared<std::pair<std::vector<int64_t>, std::string>>();
  auto& [offsets, bytes] = *strings;
  const int64_t rows = a.shape(0);
  offsets.reserve(static_cast<size_t>(rows) + 1);
  offsets.push_back(0);
  py::list values = a.attr("tolist")();
  for (py::handle v : values) {
    if (PyUnicode_Check(v.ptr())) {
      py::ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
      if (s == nullptr) throw py::error_already_set();
      bytes.append(s, static_cast<size_t>(n));
    } else if (PyBytes_Check(v.ptr())) {
      bytes.append(PyBytes_AS_STRING(v.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(v.ptr())));
    } else {
      throw py::type_error("prism.data: column '" + name + "' mixes strings with a " +
                           std::string(py::str(v.get_type().attr("__name__"))) +
                           " value; a column holds one type (str/bytes, or numbers, or arrays)");
    }
    offsets.push_back(static_cast<int64_t>(bytes.size()));
  }
  const int64_t* off = offsets.data();
  const char* data = bytes.data();
  return Column::WrapStrings(rows, off, data, strings);
}

/// A NumPy array (prism.data._batch normalized its dtype: the engine's, str/bytes objects,
/// or 'U'/'S') as a column, no copy for a C-contiguous array of the engine's dtypes.
Column NumpyToColumn(const std::string& name, py::array a) {
  if (a.ndim() == 0) {
    throw py::value_error("prism.data: column '" + name + "' is a scalar; return an array with one value per row");
  }
  const char kind = a.dtype().kind();
  if (kind == 'O' || kind == 'U' || kind == 'S') {
    if (a.ndim() != 1) {
      throw py::type_error("prism.data: column '" + name + "' is a " + std::to_string(a.ndim()) +
                           "-d array of strings or objects; only 1-d string columns are supported");
    }
    return StringColumn(name, a);
  }
  std::optional<DType> dtype = DTypeOfNumpy(a.dtype());
  if (!dtype) {
    throw py::type_error("prism.data: column '" + name + "' has dtype " + std::string(py::str(a.dtype())) +
                         ", which prism.data does not hold (float32, float64, int32, int64, uint8, bool, str)");
  }
  if (!(a.flags() & py::array::c_style) || reinterpret_cast<uintptr_t>(a.data()) % a.itemsize() != 0) {
    a = py::module_::import("numpy").attr("ascontiguousarray")(a);
  }
  std::vector<int64_t> row_shape;
  for (py::ssize_t d = 1; d < a.ndim(); ++d) row_shape.push_back(static_cast<int64_t>(a.shape(d)));
  const void* data = a.data();
  const int64_t rows = static_cast<int64_t>(a.shape(0));
  return Column::Wrap(*dtype, rows, std::move(row_shape), data, PyOwner(a));
}

/// A dict of arrays (normalized by prism.data._batch) as a block.
Block DictToBlock(const py::dict& d) {
  std::vector<std::pair<std::string, Column>> columns;
  for (auto [k, v] : d) {
    std::string name = py::cast<std::string>(k);
    if (!py::isinstance<py::array>(v)) {
      throw py::type_error("prism.data: column '" + name + "' is a " +
                           std::string(py::str(v.get_type().attr("__name__"))) + ", not a NumPy array");
    }
    columns.emplace_back(name, NumpyToColumn(name, py::reinterpret_borrow<py::array>(v)));
  }
  try {
    return Block::FromColumns(std::move(columns));
  } catch (const Error& e) {
    throw py::value_error(std::string(e.what()) + " (every column of a batch needs one value per row)");
  }
}

// ---- the trampoline and the class ------------------------------------------------------

/// The text a Python exception leaves with (prism.data._udf.describe: traceback, marker,
/// pickled exception, as prism._worker's). Call with the GIL, inside the catch.
std::string Describe(py::error_already_set& e) {
  try {
    py::object exc = e.value();
    if (e.trace()) PyException_SetTraceback(exc.ptr(), e.trace().ptr());
    return py::module_::import("prism.data._udf").attr("describe")(exc).cast<std::string>();
  } catch (py::error_already_set& inner) {
    return std::string(e.what());
  }
}

/// Loaded runners by payload (the payload's bytes as the key), at most kCacheSize, oldest
/// dropped first. Guarded by the GIL.
constexpr size_t kCacheSize = 256;
struct RunnerCache {
  std::unordered_map<std::string, py::object> runners;
  std::list<std::string> order;
};
RunnerCache& Cache() {
  static auto* cache = new RunnerCache();  // leaked: never destroyed after the interpreter
  return *cache;
}

py::object Runner(const std::string& payload) {
  RunnerCache& cache = Cache();
  auto it = cache.runners.find(payload);
  if (it != cache.runners.end()) return it->second;
  py::object runner =
      py::module_::import("prism.data._udf").attr("load_runner")(py::bytes(payload));
  if (cache.order.size() >= kCacheSize) {
    cache.runners.erase(cache.order.front());
    cache.order.pop_front();
  }
  cache.order.push_back(payload);
  cache.runners.emplace(payload, runner);
  return runner;
}

/// Runs `call` (which returns a dict of arrays) under the GIL and makes its result a block;
/// a Python exception becomes PythonUdfError.
template <typename F>
Block CallPython(F&& call) {
  std::string error;
  {
    TaskGil gil;
    try {
      py::object out = call();
      return DictToBlock(out.cast<py::dict>());
    } catch (py::error_already_set& e) {
      error = Describe(e);
    }
  }
  throw PythonUdfError(error);
}

/// Every Python function of prism.data: `payload` names it and how to call it.
Block PrismDataPythonUdf(const std::string& payload, const Block& block) {
  return CallPython([&] { return Runner(payload)(BlockToDict(block)); });
}

/// A Python callable class in the engine's actor pool: constructed once per actor from its
/// payload (prism.data._udf.load_class_runner), then called on each batch.
class PythonBatchClass {
 public:
  explicit PythonBatchClass(const std::string& payload) {
    std::string error;
    {
      TaskGil gil;
      try {
        runner_ = std::make_shared<py::object>(
            py::module_::import("prism.data._udf").attr("load_class_runner")(py::bytes(payload)));
        return;
      } catch (py::error_already_set& e) {
        error = Describe(e);
      }
    }
    throw PythonUdfError(error);
  }
  PythonBatchClass(const PythonBatchClass&) = default;
  PythonBatchClass(PythonBatchClass&&) = default;
  ~PythonBatchClass() {
    if (runner_ == nullptr || runner_.use_count() > 1) return;
    if (!Py_IsInitialized()) {
      runner_->release();
      return;
    }
    TaskGil gil;
    runner_.reset();
  }

  Block operator()(const Block& batch) {
    return CallPython([&] { return (*runner_)(BlockToDict(batch)); });
  }

 private:
  std::shared_ptr<py::object> runner_;
};

}  // namespace prism::python::data_binding

PRISM_REMOTE(prism::python::data_binding::PrismDataPythonUdf);

namespace prism::python::data_binding {

namespace data = prism::data;

// ---- engine calls from Python --------------------------------------------------------------

/// Raises the Python error prism.data._errors makes of an engine failure.
[[noreturn]] void RaiseEngineError(const char* kind, const std::string& message) {
  py::module_::import("prism.data._errors").attr("raise_engine_error")(kind, message);
  throw std::logic_error("prism.data._errors.raise_engine_error returned");  // it always raises
}

/// Runs an engine call without the GIL (`release`) or with it, turning the engine's
/// exceptions into Python's: TimeoutError, ValueError for bad arguments or a failed
/// consumption (a UDF's exception rebuilt with its type).
template <typename F>
auto Engine(F&& run, bool release = true) -> decltype(run()) {
  std::string timeout, error;
  {
    std::optional<ReleaseGil> unlocked;
    if (release) unlocked.emplace();
    try {
      return run();
    } catch (const TimeoutError& e) {
      timeout = e.what();
    } catch (const py::error_already_set&) {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!timeout.empty()) RaiseEngineError("timeout", timeout);
  RaiseEngineError("error", error);
}

data::RetryExceptions Retry(const py::object& r) {
  if (r.is_none()) return {};
  if (py::isinstance<py::bool_>(r)) return data::RetryExceptions(r.cast<bool>());
  return data::RetryExceptions(r.cast<std::vector<std::string>>());
}

py::list SchemaList(const data::Schema& s) {
  py::list out;
  for (const auto& f : s.fields) {
    out.append(py::make_tuple(f.name, data::DTypeName(f.dtype), py::tuple(py::cast(f.row_shape))));
  }
  return out;
}

py::list StatsList(const data::DatasetStats& s) {
  py::list out;
  for (const auto& o : s.operators) {
    py::dict d;
    d["name"] = o.name;
    d["tasks"] = o.tasks;
    d["blocks"] = o.blocks;
    d["rows"] = o.rows;
    d["bytes"] = o.bytes;
    d["peak_bytes"] = o.peak_bytes;
    d["seconds"] = o.seconds;
    d["retries"] = o.retries;
    d["actors_started"] = o.actors_started;
    d["peak_actors"] = o.peak_actors;
    out.append(d);
  }
  return out;
}

/// A BatchIterator for Python: next() gives a dict of arrays, None at the end.
class PyBatchIterator {
 public:
  explicit PyBatchIterator(data::BatchIterator it) : it_(std::make_unique<data::BatchIterator>(std::move(it))) {}
  py::object Next() {
    if (it_ == nullptr) return py::none();
    std::optional<Block> b = Engine([&] { return it_->Next(); });
    if (!b) {
      return py::none();
    }
    return BlockToDict(*b);
  }
  py::list Stats() {
    if (it_ == nullptr) return py::list();
    return StatsList(it_->Stats());
  }
  /// Ends the execution now (its running tasks are cancelled).
  void Close() {
    if (it_ == nullptr) return;
    std::unique_ptr<data::BatchIterator> it = std::move(it_);
    ReleaseGil release;
    it.reset();
  }
  ~PyBatchIterator() {
    // Dropped by Python (with the GIL): the executor's teardown waits for nothing Python.
    if (it_ != nullptr && Py_IsInitialized() && PyGILState_Check()) {
      ReleaseGil release;
      it_.reset();
    }
  }

 private:
  std::unique_ptr<data::BatchIterator> it_;
};

data::AggregateFn Agg(const std::string& kind, const std::string& column, int ddof) {
  if (kind == "count") return data::Count();
  if (kind == "sum") return data::Sum(column);
  if (kind == "min") return data::Min(column);
  if (kind == "max") return data::Max(column);
  if (kind == "mean") return data::Mean(column);
  if (kind == "std") return data::Std(column, ddof);
  throw py::value_error("prism.data: unknown aggregation '" + kind + "'");
}

data::ReadOptions ReadOpts(int64_t override_num_blocks) {
  data::ReadOptions o;
  if (override_num_blocks > 0) o.override_num_blocks = override_num_blocks;
  return o;
}

}  // namespace prism::python::data_binding

PYBIND11_MODULE(_data, m) {
  using namespace prism::python::data_binding;
  namespace data = prism::data;
  m.doc() = "prism.data's C++ half: the Data engine (prism/data/dataset.h) with Python UDFs";

  m.def("_core_registry_address",
        [] { return reinterpret_cast<uintptr_t>(&prism::internal::FunctionRegistry::Instance()); });
  m.def("_class_udf_registered", [] {
    return data::internal::FindClassUdf(data::ActorClass<PythonBatchClass>(std::string()).Key()) != nullptr;
  });
  m.def("trampoline_name", [] { return prism::platform::RegisteredName(&PrismDataPythonUdf); });
  // Conversions, for prism.data's own use and its tests (a batch round trip without the engine).
  m.def("roundtrip", [](const py::dict& d) { return BlockToDict(DictToBlock(d)); });

  py::class_<PyBatchIterator>(m, "BatchIterator")
      .def("next", &PyBatchIterator::Next)
      .def("stats", &PyBatchIterator::Stats)
      .def("close", &PyBatchIterator::Close);

  py::class_<data::DataIterator>(m, "DataIterator")
      .def("iter_batches",
           [](const data::DataIterator& it, int64_t batch_size, int prefetch, bool drop_last, int64_t shuffle,
              std::optional<uint64_t> seed) {
             return std::make_unique<PyBatchIterator>(
                 Engine([&] { return it.IterBatches(batch_size, prefetch, drop_last, shuffle, seed); }));
           })
      .def_property_readonly("split_index", &data::DataIterator::SplitIndex)
      .def_property_readonly("num_splits", &data::DataIterator::NumSplits)
      .def("to_bytes",
           [](const data::DataIterator& it) { return py::bytes(prism::platform::ToBytes(it)); })
      .def_static("from_bytes", [](const py::bytes& b) {
        return prism::platform::FromBytes<data::DataIterator>(std::string(b));
      });

  py::class_<data::Dataset>(m, "Dataset")
      .def("map_bound",
           [](const data::Dataset& ds, const std::string& kind, const py::bytes& payload, const std::string& name,
              int max_retries, const py::object& retry) {
             data::BoundUdf fn = data::BoundUdf::Of(PrismDataPythonUdf, std::string(payload), name);
             data::MapOptions o;
             o.max_retries = max_retries;
             o.retry_exceptions = Retry(retry);
             return Engine(
                 [&] {
                   if (kind == "map") return ds.Map(fn, o);
                   if (kind == "filter") return ds.Filter(fn, o);
                   return ds.FlatMap(fn, o);
                 },
                 false);
           })
      .def("map_batches_bound",
           [](const data::Dataset& ds, const py::bytes& payload, const std::string& name, int64_t batch_size,
              int max_retries, const py::object& retry) {
             data::BoundUdf fn = data::BoundUdf::Of(PrismDataPythonUdf, std::string(payload), name);
             data::MapBatchesOptions o;
             o.batch_size = batch_size;
             o.max_retries = max_retries;
             o.retry_exceptions = Retry(retry);
             return Engine([&] { return ds.MapBatches(fn, o); }, false);
           })
      .def("map_batches_class",
           [](const data::Dataset& ds, const py::bytes& payload, const std::string& name, int64_t batch_size,
              int min_actors, int max_actors, double num_cpus, double num_gpus, int max_retries,
              const py::object& retry) {
             data::ActorClass<PythonBatchClass> cls{std::string(payload)};
             cls.SetName(name);
             data::MapBatchesOptions o;
             o.batch_size = batch_size;
             o.concurrency = data::Concurrency(min_actors, max_actors);
             o.num_cpus = num_cpus;
             o.num_gpus = num_gpus;
             o.max_retries = max_retries;
             o.retry_exceptions = Retry(retry);
             return Engine([&] { return ds.MapBatches(cls, o); }, false);
           })
      .def("map_groups_bound",
           [](const data::Dataset& ds, const std::string& key, const py::bytes& payload, const std::string& name) {
             data::BoundUdf fn = data::BoundUdf::Of(PrismDataPythonUdf, std::string(payload), name);
             return Engine([&] { return ds.GroupBy(key).MapGroups(fn); }, false);
           })
      .def("aggregate",
           [](const data::Dataset& ds, const std::string& key,
              const std::vector<std::tuple<std::string, std::string, int>>& aggs) {
             std::vector<data::AggregateFn> fns;
             for (const auto& [kind, column, ddof] : aggs) fns.push_back(Agg(kind, column, ddof));
             return Engine([&] { return ds.GroupBy(key).Aggregate(fns); }, false);
           })
      .def("select_columns",
           [](const data::Dataset& ds, const std::vector<std::string>& c) {
             return Engine([&] { return ds.SelectColumns(c); }, false);
           })
      .def("drop_columns",
           [](const data::Dataset& ds, const std::vector<std::string>& c) {
             return Engine([&] { return ds.DropColumns(c); }, false);
           })
      .def("limit", [](const data::Dataset& ds, int64_t n) { return Engine([&] { return ds.Limit(n); }, false); })
      .def("repartition",
           [](const data::Dataset& ds, int64_t n, bool shuffle) {
             return Engine([&] { return ds.Repartition(n, shuffle); }, false);
           })
      .def("random_shuffle",
           [](const data::Dataset& ds, std::optional<uint64_t> seed) {
             return Engine([&] { return ds.RandomShuffle(seed); }, false);
           })
      .def("sort",
           [](const data::Dataset& ds, const std::string& key, bool descending) {
             return Engine([&] { return ds.Sort(key, descending); }, false);
           })
      .def("union",
           [](const data::Dataset& ds, const std::vector<data::Dataset>& others) {
             return Engine([&] { return ds.Union(others); });
           })
      .def("zip", [](const data::Dataset& ds, const data::Dataset& other) { return Engine([&] { return ds.Zip(other); }); })
      .def("with_options",
           [](const data::Dataset& ds, double task_timeout_s, uint64_t budget, int max_tasks, std::optional<bool> bars) {
             data::ExecutionOptions o;
             o.task_timeout_s = task_timeout_s;
             o.object_store_budget_bytes = budget;
             o.max_tasks_in_flight_per_op = max_tasks;
             o.progress_bars = bars;
             return Engine([&] { return ds.WithExecutionOptions(o); }, false);
           })
      .def("iter_batches",
           [](const data::Dataset& ds, int64_t batch_size, int prefetch, bool drop_last, int64_t shuffle,
              std::optional<uint64_t> seed) {
             return std::make_unique<PyBatchIterator>(
                 Engine([&] { return ds.IterBatches(batch_size, prefetch, drop_last, shuffle, seed); }));
           })
      .def("count", [](const data::Dataset& ds) { return Engine([&] { return ds.Count(); }); })
      .def("schema", [](const data::Dataset& ds) { return SchemaList(Engine([&] { return ds.Schema(); })); })
      .def("materialize", [](const data::Dataset& ds) { return Engine([&] { return ds.Materialize(); }); })
      .def("stats", [](const data::Dataset& ds) { return StatsList(ds.Stats()); })
      .def("stats_text", [](const data::Dataset& ds) { return ds.Stats().ToString(); })
      .def("num_blocks", [](const data::Dataset& ds) { return ds.NumBlocks(); })
      .def("split",
           [](const data::Dataset& ds, int n, bool equal) { return Engine([&] { return ds.Split(n, equal); }); })
      .def("streaming_split",
           [](const data::Dataset& ds, int n, bool equal) {
             return Engine([&] { return ds.StreamingSplit(n, equal); });
           })
      .def("write",
           [](const data::Dataset& ds, const std::string& format, const std::string& dir, const std::string& column) {
             Engine([&] {
               if (format == "csv") {
                 ds.WriteCsv(dir);
               } else if (format == "json") {
                 ds.WriteJson(dir);
               } else if (format == "numpy") {
                 ds.WriteNumpy(dir, column);
               } else {
                 ds.WriteHdf5(dir);
               }
               return 0;
             });
           });

  // ---- sources ----
  m.def("range", [](int64_t n, int64_t blocks) { return Engine([&] { return data::Range(n, blocks); }, false); });
  m.def("from_blocks", [](const py::list& batches) {
    std::vector<data::Block> blocks;
    for (py::handle b : batches) blocks.push_back(DictToBlock(b.cast<py::dict>()));
    return Engine([&] { return data::FromBlocks(blocks); });
  });
  m.def("read_csv",
        [](const std::string& path, char delimiter, int64_t blocks, const std::map<std::string, std::string>& types) {
          std::map<std::string, data::DType> column_types;
          for (const auto& [k, v] : types) {
            if (v == "int64") {
              column_types[k] = data::DType::kInt64;
            } else if (v == "float64") {
              column_types[k] = data::DType::kFloat64;
            } else if (v == "bool") {
              column_types[k] = data::DType::kBool;
            } else if (v == "string") {
              column_types[k] = data::DType::kString;
            } else {
              throw py::value_error("prism.data.read_csv: column_types['" + k + "'] is '" + v +
                                    "'; use int64, float64, bool or string");
            }
          }
          return Engine([&] { return data::ReadCsv(path, delimiter, ReadOpts(blocks), column_types); });
        });
  m.def("read_numpy", [](const std::string& path, int64_t blocks) {
    return Engine([&] { return data::ReadNumpy(path, ReadOpts(blocks)); });
  });
  m.def("read_hdf5", [](const std::string& path, const std::vector<std::string>& datasets, int64_t blocks) {
    return Engine([&] { return data::ReadHdf5(path, datasets, ReadOpts(blocks)); });
  });
  m.def("read_binary_files", [](const std::string& path, bool include_paths, int64_t blocks) {
    return Engine([&] { return data::ReadBinaryFiles(path, include_paths, ReadOpts(blocks)); });
  });
}
