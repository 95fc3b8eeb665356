// HDF5 state dicts: SaveStateDict, LoadStateDict, ReadAttributes.
//
// Layout of a file (format "prism-state-dict-1"):
//   /                 attributes: the caller's, prism_version, format
//   /model/<name>     one dataset per parameter and buffer, named by its module path
//                     ("conv1.weight"), with the tensor's shape and native type; 0-dim
//                     tensors use a scalar dataspace; half, bfloat16 and bool tensors are
//                     stored as float32 / uint8 with a "torch_dtype" attribute naming the
//                     original type
//   /optimizer        attribute "type" (Adam, SGD, ...); dataset torch_archive: the
//                     optimizer's torch::serialize::OutputArchive bytes (uint8)
//
// The file is written next to its destination as <file>.tmp, closed, fsynced and renamed
// over <file>, so a reader sees the old file or the complete new one. LoadStateDict first
// checks the file against the CRC-32 its checkpoint's commit recorded
// (VerifyCheckpointFile, prism/checkpoint_store.h), so a damaged file is an error, not
// weights. A save that fails for want of room says so, with the file system, the bytes
// free and about how many the file needed (fs/space.h; HDF5 keeps the errno of a failed
// write in its error stack's text, so Fail passes it on in a FileError).

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fs/durable_file.h"
#include "hdf5/hdf5.h"
#include "prism/checkpoint_store.h"
#include "prism/train/checkpoint.h"

namespace prism::train {
namespace {

using prism::internal::ErrnoText;
using prism::internal::FileError;
using prism::internal::FsyncPath;
using prism::internal::ParentDir;

constexpr const char* kFormat = "prism-state-dict-1";
constexpr const char* kModelGroup = "model";
constexpr const char* kOptimizerGroup = "optimizer";
constexpr const char* kOptimizerDataset = "torch_archive";

using prism::internal::Hdf5Cause;
using prism::internal::Hdf5Mutex;  // one HDF5 call at a time in the process, Data's included
using prism::internal::Hid;

[[noreturn]] void Fail(const std::string& file, const std::string& what) {
  const int call_errno = errno;
  int err = 0;
  std::string cause = Hdf5Cause(&err);
  // errno itself may be left over from an earlier call: trusted only when it says the disk
  // is full, and then only if the stack names no errno of its own.
  if (err == 0 && (call_errno == ENOSPC || call_errno == EDQUOT)) err = call_errno;
  throw FileError(file + ": " + what + (cause.empty() ? "" : ": " + cause), err);
}

/// Throws prism::Error naming `file` and `what` if an HDF5 call returned a negative id or
/// status.
template <typename T>
T Check(T rc, const std::string& file, const std::string& what) {
  if (rc < 0) Fail(file, what);
  return rc;
}

/// Our errors are thrown as prism::Error; HDF5's own printing to stderr would only repeat
/// them (per thread in thread-safe builds, so done on every call).
void SilenceHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

/// The serial (sec2) driver. Closing the file fails if an object is still open, so a leak
/// is an error and not a silently unflushed file; file locking is used where the file
/// system supports it and skipped where it does not (some parallel file systems).
Hid FileAccess(const std::string& file) {
  Hid fapl(Check(H5Pcreate(H5P_FILE_ACCESS), file, "cannot create file access properties"),
           H5Pclose);
  Check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_SEMI), file, "cannot set close degree");
  Check(H5Pset_file_locking(fapl.get(), true, true), file, "cannot set file locking");
  return fapl;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// The HDF5 memory type of a dtype we store as is, or -1.
hid_t NativeType(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return H5T_NATIVE_FLOAT;
    case torch::kDouble: return H5T_NATIVE_DOUBLE;
    case torch::kLong: return H5T_NATIVE_INT64;
    case torch::kInt: return H5T_NATIVE_INT32;
    case torch::kShort: return H5T_NATIVE_INT16;
    case torch::kChar: return H5T_NATIVE_INT8;
    case torch::kByte: return H5T_NATIVE_UINT8;
    default: return -1;
  }
}

// ---- Attributes -------------------------------------------------------------------------

Hid Utf8StringType(const std::string& file) {
  Hid type(Check(H5Tcopy(H5T_C_S1), file, "cannot create a string type"), H5Tclose);
  Check(H5Tset_size(type.get(), H5T_VARIABLE), file, "cannot create a string type");
  Check(H5Tset_cset(type.get(), H5T_CSET_UTF8), file, "cannot create a string type");
  return type;
}

void WriteAttribute(hid_t object, const std::string& name, const Attribute& value,
                    const std::string& file) {
  const std::string what = "cannot write attribute \"" + name + "\"";
  Hid space(Check(H5Screate(H5S_SCALAR), file, what), H5Sclose);
  if (const auto* i = std::get_if<int64_t>(&value)) {
    Hid attr(Check(H5Acreate2(object, name.c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   file, what),
             H5Aclose);
    Check(H5Awrite(attr.get(), H5T_NATIVE_INT64, i), file, what);
  } else if (const auto* d = std::get_if<double>(&value)) {
    Hid attr(Check(H5Acreate2(object, name.c_str(), H5T_NATIVE_DOUBLE, space.get(),
                              H5P_DEFAULT, H5P_DEFAULT),
                   file, what),
             H5Aclose);
    Check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, d), file, what);
  } else {
    // Variable-length UTF-8: h5py reads it as str, h5dump prints it as text.
    Hid type = Utf8StringType(file);
    Hid attr(Check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   file, what),
             H5Aclose);
    const char* text = std::get<std::string>(value).c_str();
    Check(H5Awrite(attr.get(), type.get(), &text), file, what);
  }
}

/// Reads a one-element integer, float or string attribute; nullopt for anything else
/// (arrays, compounds), which has no Attribute to map to.
std::optional<Attribute> ReadAttribute(hid_t object, const std::string& name,
                                       const std::string& file) {
  const std::string what = "cannot read attribute \"" + name + "\"";
  Hid attr(Check(H5Aopen(object, name.c_str(), H5P_DEFAULT), file, what), H5Aclose);
  Hid space(Check(H5Aget_space(attr.get()), file, what), H5Sclose);
  if (Check(H5Sget_simple_extent_npoints(space.get()), file, what) != 1) return std::nullopt;
  Hid type(Check(H5Aget_type(attr.get()), file, what), H5Tclose);
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      int64_t v = 0;
      Check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), file, what);
      return Attribute(v);
    }
    case H5T_FLOAT: {
      double v = 0;
      Check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), file, what);
      return Attribute(v);
    }
    case H5T_STRING: {
      if (Check(H5Tis_variable_str(type.get()), file, what) > 0) {
        Hid mem = Utf8StringType(file);
        char* text = nullptr;
        Check(H5Aread(attr.get(), mem.get(), &text), file, what);
        std::string v = text != nullptr ? text : "";
        H5free_memory(text);
        return Attribute(v);
      }
      // Fixed length (h5py's np.bytes_, h5dump-made files): null- or space-padded.
      size_t size = H5Tget_size(type.get());
      Hid mem(Check(H5Tcopy(H5T_C_S1), file, what), H5Tclose);
      Check(H5Tset_size(mem.get(), size), file, what);
      Check(H5Tset_strpad(mem.get(), H5T_STR_NULLPAD), file, what);
      std::string v(size, '\0');
      Check(H5Aread(attr.get(), mem.get(), v.data()), file, what);
      v.resize(std::strlen(v.c_str()));
      if (H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD) {
        while (!v.empty() && v.back() == ' ') v.pop_back();
      }
      return Attribute(v);
    }
    default:
      return std::nullopt;
  }
}

std::vector<std::string> AttributeNames(hid_t object, const std::string& file) {
  std::vector<std::string> names;
  // The callback only collects: exceptions must not cross HDF5's C frames.
  Check(H5Aiterate2(
            object, H5_INDEX_NAME, H5_ITER_INC, nullptr,
            [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
              static_cast<std::vector<std::string>*>(data)->push_back(name);
              return 0;
            },
            &names),
        file, "cannot list the attributes");
  return names;
}

std::map<std::string, Attribute> ReadRootAttributes(hid_t file_id, const std::string& file) {
  std::map<std::string, Attribute> out;
  for (const auto& name : AttributeNames(file_id, file)) {
    if (auto value = ReadAttribute(file_id, name, file)) out.emplace(name, std::move(*value));
  }
  return out;
}

// ---- Opening for reading ----------------------------------------------------------------

Hid OpenForReading(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw Error("no checkpoint file at " + file);
    throw Error("cannot access checkpoint file " + file + ": " + ErrnoText(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    throw Error(file + " is a directory, not a checkpoint file (pass the .h5 file inside it)");
  }
  htri_t is_hdf5 = H5Fis_hdf5(file.c_str());
  if (is_hdf5 == 0) {
    throw Error(file + " is not an HDF5 file (no HDF5 signature); expected a state dict " +
                "written by prism::train::SaveStateDict");
  }
  Check(is_hdf5, file, "cannot open the checkpoint file");
  Hid fapl = FileAccess(file);
  Hid f(Check(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), file,
              "cannot open the checkpoint file"),
        H5Fclose);
  return f;
}

bool LinkExists(hid_t loc, const std::string& name, const std::string& file) {
  return Check(H5Lexists(loc, name.c_str(), H5P_DEFAULT), file,
               "cannot look up \"" + name + "\"") > 0;
}

/// Refuses files of another format version; files without a format attribute (written by
/// hand or by h5py in the same layout) are read as they are.
void CheckFormat(hid_t file_id, const std::string& file) {
  if (H5Aexists(file_id, "format") <= 0) return;
  auto format = ReadAttribute(file_id, "format", file);
  const std::string* text = format ? std::get_if<std::string>(&*format) : nullptr;
  if (text == nullptr || *text != kFormat) {
    throw Error(file + " has format \"" + (text ? *text : std::string("?")) +
                "\"; this Prism reads \"" + kFormat + "\" (was it written by a newer Prism?)");
  }
}

// ---- Tensors ----------------------------------------------------------------------------

/// A tensor as it goes into the file: CPU, contiguous, in a type HDF5 has natively.
struct StoredTensor {
  torch::Tensor data;
  hid_t mem_type = -1;
  const char* torch_dtype = nullptr;  // the original dtype when it was converted
};

StoredTensor ForFile(const torch::Tensor& tensor, const std::string& name,
                     const std::string& file) {
  StoredTensor out;
  out.data = tensor.detach().to(torch::kCPU).contiguous();
  switch (out.data.scalar_type()) {
    case torch::kHalf:
      out.torch_dtype = "float16";
      out.data = out.data.to(torch::kFloat);
      break;
    case torch::kBFloat16:
      out.torch_dtype = "bfloat16";
      out.data = out.data.to(torch::kFloat);
      break;
    case torch::kBool:
      out.torch_dtype = "bool";
      out.data = out.data.to(torch::kByte);
      break;
    default:
      break;
  }
  out.mem_type = NativeType(out.data.scalar_type());
  if (out.mem_type < 0) {
    throw Error("cannot save tensor \"" + name + "\" to " + file + ": dtype " +
                std::string(c10::toString(tensor.scalar_type())) +
                " has no HDF5 mapping (state dicts hold float, double, half, bfloat16, " +
                "integer and bool tensors)");
  }
  return out;
}

void WriteTensor(hid_t group, const std::string& name, const torch::Tensor& tensor,
                 const std::string& file) {
  StoredTensor stored = ForFile(tensor, name, file);
  const std::string what = "cannot write dataset /model/" + name;
  Hid space;
  if (stored.data.dim() == 0) {
    space = Hid(Check(H5Screate(H5S_SCALAR), file, what), H5Sclose);
  } else {
    std::vector<hsize_t> dims(stored.data.sizes().begin(), stored.data.sizes().end());
    space = Hid(Check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                      file, what),
                H5Sclose);
  }
  Hid dataset(Check(H5Dcreate2(group, name.c_str(), stored.mem_type, space.get(), H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT),
                    file, what),
              H5Dclose);
  if (stored.data.numel() > 0) {
    Check(H5Dwrite(dataset.get(), stored.mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                   stored.data.data_ptr()),
          file, what);
  }
  if (stored.torch_dtype != nullptr) {
    WriteAttribute(dataset.get(), "torch_dtype", std::string(stored.torch_dtype), file);
  }
}

/// The shape of a dataset: [] for a scalar dataspace.
std::vector<int64_t> DatasetShape(hid_t dataset, const std::string& file,
                                  const std::string& what) {
  Hid space(Check(H5Dget_space(dataset), file, what), H5Sclose);
  int rank = Check(H5Sget_simple_extent_ndims(space.get()), file, what);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) Check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file, what);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

/// The dtype to read a dataset into: its own type where torch has it, else the widest of
/// its kind (HDF5 converts). Throws for types that are not numbers.
torch::ScalarType ReadType(hid_t dataset, const std::string& name, const std::string& file) {
  const std::string what = "cannot read the type of /model/" + name;
  Hid type(Check(H5Dget_type(dataset), file, what), H5Tclose);
  size_t size = H5Tget_size(type.get());
  switch (H5Tget_class(type.get())) {
    case H5T_FLOAT:
      return size <= 4 ? torch::kFloat : torch::kDouble;
    case H5T_INTEGER:
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE) return size == 1 ? torch::kByte : torch::kLong;
      if (size == 1) return torch::kChar;
      if (size == 2) return torch::kShort;
      if (size == 4) return torch::kInt;
      return torch::kLong;
    default:
      throw Error(file + ": /model/" + name +
                  " is not an integer or floating-point dataset; it cannot be loaded into a "
                  "tensor");
  }
}

/// A parameter or buffer of the module to fill, with the open dataset it comes from.
struct LoadTarget {
  std::string name;
  torch::Tensor tensor;
  Hid dataset;
};

std::string OptimizerType(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return "Adam";
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return "AdamW";
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return "SGD";
  if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer)) return "RMSprop";
  if (dynamic_cast<const torch::optim::Adagrad*>(&optimizer)) return "Adagrad";
  if (dynamic_cast<const torch::optim::LBFGS*>(&optimizer)) return "LBFGS";
  return "unknown";
}

/// Every defined parameter and buffer with its module path (a Linear without bias
/// registers an undefined "bias": there is nothing to store for it).
std::vector<std::pair<std::string, torch::Tensor>> NamedTensors(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

void WriteStateFile(const std::string& path, const std::string& file,
                    const torch::nn::Module& module, const std::string* optimizer_bytes,
                    const std::string& optimizer_type,
                    const std::map<std::string, Attribute>& attributes) {
  Hid fapl = FileAccess(file);
  Hid f(Check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), file,
              "cannot create the temporary file " + path),
        H5Fclose);
  {
    Hid model(Check(H5Gcreate2(f.get(), kModelGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    file, "cannot create group /model"),
              H5Gclose);
    for (const auto& [name, tensor] : NamedTensors(module)) {
      WriteTensor(model.get(), name, tensor, file);
    }
  }
  if (optimizer_bytes != nullptr) {
    Hid group(Check(H5Gcreate2(f.get(), kOptimizerGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    file, "cannot create group /optimizer"),
              H5Gclose);
    const std::string what = "cannot write /optimizer/torch_archive";
    hsize_t size = optimizer_bytes->size();
    Hid space(Check(H5Screate_simple(1, &size, nullptr), file, what), H5Sclose);
    Hid dataset(Check(H5Dcreate2(group.get(), kOptimizerDataset, H5T_NATIVE_UINT8, space.get(),
                                 H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      file, what),
                H5Dclose);
    if (size > 0) {
      Check(H5Dwrite(dataset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     optimizer_bytes->data()),
            file, what);
    }
    WriteAttribute(group.get(), "type", optimizer_type, file);
  }
  for (const auto& [name, value] : attributes) WriteAttribute(f.get(), name, value, file);
  WriteAttribute(f.get(), "prism_version", std::string(PRISM_VERSION), file);
  WriteAttribute(f.get(), "format", std::string(kFormat), file);
  // Closing flushes everything HDF5 buffered: its failure is a failed write.
  if (f.Close() < 0) Fail(file, "cannot close " + path + " (data may not have been written)");
}

/// About how many bytes the file of `module` and `optimizer_bytes` takes: the tensors as
/// stored (half and bfloat16 as float32) and the optimizer's bytes, with room for HDF5's
/// own headers.
uint64_t StateDictBytes(const torch::nn::Module& module, const std::string& optimizer_bytes) {
  uint64_t total = 4096 + optimizer_bytes.size();
  for (const auto& [name, tensor] : NamedTensors(module)) {
    const auto type = tensor.scalar_type();
    const uint64_t element =
        (type == torch::kHalf || type == torch::kBFloat16) ? 4 : tensor.element_size();
    total += 512 + static_cast<uint64_t>(tensor.numel()) * element;
  }
  return total;
}

/// Rethrows the exception in flight, as a full disk when that is why the save failed.
[[noreturn]] void RethrowSaveFailure(const std::string& file, uint64_t needed) {
  try {
    throw;
  } catch (const FileError& e) {
    const std::string dir = ParentDir(file);
    if (!prism::internal::OutOfSpace(e.err(), dir, needed)) throw;
    throw FileError("cannot save the state dict " + file + ": " +
                        prism::internal::NoSpaceText(e.err(), dir, needed, "the state dict") +
                        ". Nothing was written (a file already there is unchanged); free space "
                        "there or save to another file system (MakeTempCheckpointDir's "
                        "directories are under TMPDIR)",
                    e.err());
  }
}

}  // namespace

void SaveStateDict(const std::string& file, const torch::nn::Module& module,
                   const torch::optim::Optimizer* optimizer,
                   const std::map<std::string, Attribute>& attributes) {
  for (const char* reserved : {"prism_version", "format"}) {
    if (attributes.count(reserved)) {
      throw Error(std::string("SaveStateDict(") + file + "): attribute \"" + reserved +
                  "\" is written by Prism itself; pick another name");
    }
  }
  std::string parent = ParentDir(file);
  if (!std::filesystem::is_directory(parent)) {
    throw Error("cannot write " + file + ": directory " + parent + " does not exist");
  }
  // The optimizer's own format, byte for byte: optimizer.load reads it back as it is.
  std::string optimizer_bytes;
  std::string optimizer_type;
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive archive;
    optimizer->save(archive);
    archive.save_to([&](const void* data, size_t n) {
      optimizer_bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    optimizer_type = OptimizerType(*optimizer);
  }

  const std::string tmp = file + ".tmp";
  const uint64_t needed = StateDictBytes(module, optimizer_bytes);
  {
    std::lock_guard<std::mutex> lock(Hdf5Mutex());
    SilenceHdf5Errors();
    try {
      WriteStateFile(tmp, file, module, optimizer ? &optimizer_bytes : nullptr, optimizer_type,
                     attributes);
    } catch (...) {
      std::remove(tmp.c_str());  // every handle is closed by now: nothing half-written stays
      RethrowSaveFailure(file, needed);
    }
  }
  try {
    FsyncPath(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    RethrowSaveFailure(file, needed);
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + file + ": " + ErrnoText(err));
  }
  FsyncPath(parent);
}

void LoadStateDict(const std::string& file, torch::nn::Module& module,
                   torch::optim::Optimizer* optimizer) {
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  SilenceHdf5Errors();
  Hid f = OpenForReading(file);
  // After the open, so a missing file or a directory keeps its own message.
  if (std::string problem = VerifyCheckpointFile(file); !problem.empty()) {
    throw Error("refusing to load " + file + ": it does not match its checkpoint's record: " +
                problem + ". The checkpoint is damaged: load an older one (a new Fit of the "
                "run resumes from the newest intact checkpoint by itself)");
  }
  CheckFormat(f.get(), file);
  if (!LinkExists(f.get(), kModelGroup, file)) {
    throw Error(file + " has no /model group: it is not a state dict written by "
                       "prism::train::SaveStateDict");
  }
  Hid model(Check(H5Gopen2(f.get(), kModelGroup, H5P_DEFAULT), file, "cannot open /model"),
            H5Gclose);

  // Check every tensor before changing any, so a mismatch leaves the module as it was.
  std::vector<LoadTarget> targets;
  std::vector<std::string> problems;
  std::map<std::string, bool> is_parameter;
  for (const auto& item : module.named_parameters(true)) is_parameter[item.key()] = true;
  for (auto& [name, tensor] : NamedTensors(module)) {
    const char* kind = is_parameter.count(name) ? "parameter" : "buffer";
    std::vector<int64_t> expected(tensor.sizes().begin(), tensor.sizes().end());
    if (!LinkExists(model.get(), name, file)) {
      problems.push_back(std::string(kind) + " \"" + name + "\" (shape " + ShapeText(expected) +
                         ") is missing from /model");
      continue;
    }
    Hid dataset(Check(H5Dopen2(model.get(), name.c_str(), H5P_DEFAULT), file,
                      "cannot open /model/" + name),
                H5Dclose);
    std::vector<int64_t> found = DatasetShape(dataset.get(), file, "cannot read /model/" + name);
    if (found != expected) {
      problems.push_back(std::string(kind) + " \"" + name + "\": the module expects shape " +
                         ShapeText(expected) + ", the file holds " + ShapeText(found));
      continue;
    }
    targets.push_back({name, tensor, std::move(dataset)});
  }
  if (!problems.empty()) {
    std::string message = "cannot load " + file + " into the module:";
    const size_t shown = std::min<size_t>(problems.size(), 10);
    for (size_t i = 0; i < shown; ++i) message += "\n  " + problems[i];
    if (problems.size() > shown) {
      message += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    }
    message += "\n(was it saved from a different model architecture?)";
    throw Error(message);
  }

  // The optimizer's bytes are read before the module changes for the same reason.
  std::string optimizer_bytes;
  bool load_optimizer = false;
  if (optimizer != nullptr && LinkExists(f.get(), kOptimizerGroup, file)) {
    Hid group(Check(H5Gopen2(f.get(), kOptimizerGroup, H5P_DEFAULT), file,
                    "cannot open /optimizer"),
              H5Gclose);
    if (H5Aexists(group.get(), "type") > 0) {
      auto stored = ReadAttribute(group.get(), "type", file);
      const std::string* stored_type = stored ? std::get_if<std::string>(&*stored) : nullptr;
      std::string type = OptimizerType(*optimizer);
      if (stored_type != nullptr && *stored_type != "unknown" && type != "unknown" &&
          *stored_type != type) {
        throw Error("cannot load " + file + ": it holds " + *stored_type +
                    " optimizer state, the optimizer given is " + type);
      }
    }
    const std::string what = "cannot read /optimizer/torch_archive";
    if (!LinkExists(group.get(), kOptimizerDataset, file)) {
      throw Error(file + " has an /optimizer group without its torch_archive dataset");
    }
    Hid dataset(Check(H5Dopen2(group.get(), kOptimizerDataset, H5P_DEFAULT), file, what),
                H5Dclose);
    std::vector<int64_t> shape = DatasetShape(dataset.get(), file, what);
    if (shape.size() != 1) throw Error(file + ": /optimizer/torch_archive is not 1-D");
    optimizer_bytes.resize(static_cast<size_t>(shape[0]));
    if (!optimizer_bytes.empty()) {
      Check(H5Dread(dataset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                    optimizer_bytes.data()),
            file, what);
    }
    load_optimizer = true;
  }

  {
    torch::NoGradGuard no_grad;
    for (auto& target : targets) {
      torch::ScalarType type = ReadType(target.dataset.get(), target.name, file);
      torch::Tensor loaded = torch::empty(target.tensor.sizes(), torch::TensorOptions(type));
      if (loaded.numel() > 0) {
        Check(H5Dread(target.dataset.get(), NativeType(type), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                      loaded.data_ptr()),
              file, "cannot read /model/" + target.name);
      }
      target.tensor.copy_(loaded);  // into the module's own device and dtype
      target.dataset.Close();
    }
  }

  if (load_optimizer) {
    // Optimizer state lives where the parameters live.
    c10::optional<torch::Device> device;
    for (const auto& group : optimizer->param_groups()) {
      if (!group.params().empty()) {
        device = group.params().front().device();
        break;
      }
    }
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(optimizer_bytes.data(), optimizer_bytes.size(), device);
      optimizer->load(archive);
    } catch (const c10::Error& e) {
      throw Error("cannot load the optimizer state from " + file + ": " + e.what_without_backtrace() +
                  " (was it saved with another optimizer or parameter set?)");
    }
  }
}

std::map<std::string, Attribute> ReadAttributes(const std::string& file) {
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  SilenceHdf5Errors();
  Hid f = OpenForReading(file);
  return ReadRootAttributes(f.get(), file);
}

}  // namespace prism::train
