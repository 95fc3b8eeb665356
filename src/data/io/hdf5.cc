// HDF5 datasets as blocks: list, read a row range, write a part file.
//
// A file's datasets are columns when their first dimension (the rows) agrees; the other
// dimensions are the row shape. A read of rows [begin, end) is one H5Dread per dataset,
// from a hyperslab of the file's dataspace straight into the column's buffer (a
// prism::internal::Buffer: page-aligned from 2 MiB, never zero-filled), letting HDF5
// convert the file's type to the native one (big-endian, int16 -> int32, ...). Strings are
// read as HDF5 gives them (one char* per row for variable-length strings, fixed-size
// records otherwise) and packed into offsets + bytes.
//
// A part is written with the serial (sec2) driver, each column one contiguous dataset of
// the blocks' total rows, written block by block through hyperslabs: no dataset needs to
// grow, and the layout is the fastest to read back in row ranges. Types are the ones h5py
// writes (native numbers, bools as the enum {FALSE, TRUE} over int8, strings as
// variable-length UTF-8), so Python reads the parts back as it would its own files.

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "data/io/file_util.h"
#include "hdf5/hdf5.h"
#include "prism/internal/buffer.h"

namespace prism::data::io {
namespace {

using prism::internal::Hdf5Mutex;  // one HDF5 call at a time in the process, checkpoints included

using prism::internal::Hdf5Cause;
using prism::internal::Hid;

[[noreturn]] void Fail(const std::string& file, const std::string& what) {
  const std::string cause = Hdf5Cause();
  throw Error("prism::data: " + file + ": " + what + (cause.empty() ? "" : " (" + cause + ")"));
}

template <typename T>
T Check(T rc, const std::string& file, const std::string& what) {
  if (rc < 0) Fail(file, what);
  return rc;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

/// The sec2 driver; file locking where the file system supports it, skipped where not.
Hid FileAccess(const std::string& file) {
  Hid fapl(Check(H5Pcreate(H5P_FILE_ACCESS), file, "cannot create file access properties"),
           H5Pclose);
  Check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), file, "cannot set close degree");
  Check(H5Pset_file_locking(fapl.get(), true, true), file, "cannot set file locking");
  return fapl;
}

Hid OpenFile(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our errors say it; HDF5's print would repeat
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error("prism::data: the HDF5 file " + path + " does not exist: check the path");
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    Hdf5Cause();
    throw Error("prism::data: " + path + " is not an HDF5 file (or cannot be read)");
  }
  Hid fapl = FileAccess(path);
  return Hid(Check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), path, "cannot open the file"),
             H5Fclose);
}

// ---- Listing -----------------------------------------------------------------------------

// H5Lvisit's callback takes H5L_info_t (1.10) or H5L_info2_t (1.12+): deduced.
template <typename Info>
herr_t VisitLink(hid_t group, const char* name, const Info* info, void* out) {
  if (info->type != H5L_TYPE_HARD) return 0;
  hid_t object = H5Oopen(group, name, H5P_DEFAULT);
  if (object < 0) return 0;
  if (H5Iget_type(object) == H5I_DATASET)
    static_cast<std::vector<std::string>*>(out)->push_back(name);
  H5Oclose(object);
  return 0;
}

std::vector<std::string> AllDatasets(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  Check(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, &VisitLink, &names), path,
        "cannot list the datasets");
  std::sort(names.begin(), names.end());
  return names;
}

std::string NameList(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string out;
  for (size_t i = 0; i < names.size() && i < 20; ++i) out += (i ? ", " : "") + Quoted(names[i]);
  if (names.size() > 20) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

std::string TypeText(hid_t type) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") +
             std::to_string(8 * size);
    case H5T_FLOAT:
      return "float" + std::to_string(8 * size);
    case H5T_ENUM:
      return "an enum (other than h5py's bool)";
    case H5T_COMPOUND:
      return "a compound type";
    case H5T_ARRAY:
      return "an array type";
    case H5T_REFERENCE:
      return "references";
    case H5T_OPAQUE:
      return "an opaque type";
    case H5T_BITFIELD:
      return "a bitfield";
    case H5T_VLEN:
      return "variable-length sequences";
    default:
      return "an unsupported type class";
  }
}

/// h5py's bool: an enum of two 1-byte members FALSE = 0, TRUE = 1.
bool IsH5pyBool(hid_t type) {
  if (H5Tget_class(type) != H5T_ENUM || H5Tget_size(type) != 1 || H5Tget_nmembers(type) != 2)
    return false;
  bool ok = true;
  for (unsigned i = 0; i < 2; ++i) {
    char* name = H5Tget_member_name(type, i);
    if (name == nullptr) return false;
    int8_t value = -1;
    H5Tget_member_value(type, i, &value);
    ok = ok && ((std::strcmp(name, "FALSE") == 0 && value == 0) ||
                (std::strcmp(name, "TRUE") == 0 && value == 1));
    H5free_memory(name);
  }
  return ok;
}

/// The DType a file type reads as, or throws naming the dataset and type.
DType DTypeOfHdf5(hid_t type, const std::string& path, const std::string& dataset) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size <= 4) return DType::kFloat32;
      if (size == 8) return DType::kFloat64;
      break;
    case H5T_INTEGER: {
      const bool is_unsigned = H5Tget_sign(type) == H5T_SGN_NONE;
      if (is_unsigned && size == 1) return DType::kUInt8;
      if (size <= 2 || (size == 4 && !is_unsigned)) return DType::kInt32;
      if ((size == 4 && is_unsigned) || (size == 8 && !is_unsigned)) return DType::kInt64;
      break;
    }
    case H5T_ENUM:
      if (IsH5pyBool(type)) return DType::kBool;
      break;
    case H5T_STRING:
      return DType::kString;
    default:
      break;
  }
  throw Error("prism::data: " + path + ": dataset " + Quoted(dataset) + " holds " + TypeText(type) +
              ", which no column type holds (columns read floats up to 64 bits, integers up to "
              "int64 and uint32, h5py bools and strings): convert the dataset, e.g. in h5py "
              "f[name][...].astype('int64') or 'float64'");
}

Hdf5Dataset Describe(hid_t file, const std::string& path, const std::string& name) {
  Hid dset(
      Check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), path, "cannot open dataset " + Quoted(name)),
      H5Dclose);
  Hid type(Check(H5Dget_type(dset.get()), path, "cannot read the type of " + Quoted(name)),
           H5Tclose);
  Hid space(Check(H5Dget_space(dset.get()), path, "cannot read the shape of " + Quoted(name)),
            H5Sclose);
  const int ndims = Check(H5Sget_simple_extent_ndims(space.get()), path,
                          "cannot read the shape of " + Quoted(name));
  if (ndims == 0) {
    throw Error(
        "prism::data: " + path + ": dataset " + Quoted(name) +
        " is a scalar and has no rows: read only datasets whose first dimension is the rows");
  }
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  Check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), path,
        "cannot read the shape of " + Quoted(name));
  Hdf5Dataset d;
  d.name = name;
  d.dtype = DTypeOfHdf5(type.get(), path, name);
  d.rows = static_cast<int64_t>(dims[0]);
  for (int i = 1; i < ndims; ++i) d.row_shape.push_back(static_cast<int64_t>(dims[i]));
  if (d.dtype == DType::kString && !d.row_shape.empty()) {
    throw Error("prism::data: " + path + ": dataset " + Quoted(name) + " holds strings in " +
                std::to_string(ndims) +
                " dimensions; a string column has one string per row: "
                "reshape it to one dimension");
  }
  return d;
}

std::string Normalize(const std::string& name) {
  size_t start = name.find_first_not_of('/');
  return start == std::string::npos ? "" : name.substr(start);
}

Hdf5File InspectLocked(hid_t file, const std::string& path,
                       const std::vector<std::string>& wanted) {
  std::vector<std::string> all = AllDatasets(file, path);
  std::vector<std::string> names;
  if (wanted.empty()) {
    names = all;
    if (names.empty()) throw Error("prism::data: " + path + " holds no datasets");
  } else {
    for (const auto& w : wanted) {
      std::string name = Normalize(w);
      if (!std::binary_search(all.begin(), all.end(), name)) {
        throw Error("prism::data: " + path + " has no dataset " + Quoted(w) +
                    "; its datasets are " + NameList(all));
      }
      names.push_back(name);
    }
  }
  Hdf5File out;
  out.path = path;
  for (const auto& name : names) {
    Hdf5Dataset d = Describe(file, path, name);
    if (!out.datasets.empty() && d.rows != out.rows) {
      throw Error("prism::data: " + path + ": dataset " + Quoted(d.name) + " has " +
                  std::to_string(d.rows) + " rows but " + Quoted(out.datasets.front().name) +
                  " has " + std::to_string(out.rows) +
                  ": the datasets read together need the same first dimension; name the ones "
                  "that belong together");
    }
    out.rows = d.rows;
    out.datasets.push_back(std::move(d));
  }
  return out;
}

// ---- Reading -----------------------------------------------------------------------------

hid_t NativeType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return H5T_NATIVE_FLOAT;
    case DType::kFloat64:
      return H5T_NATIVE_DOUBLE;
    case DType::kInt32:
      return H5T_NATIVE_INT32;
    case DType::kInt64:
      return H5T_NATIVE_INT64;
    case DType::kUInt8:
      return H5T_NATIVE_UINT8;
    default:
      return -1;
  }
}

Hid BoolType(const std::string& path) {
  Hid type(Check(H5Tenum_create(H5T_NATIVE_INT8), path, "cannot make the bool type"), H5Tclose);
  int8_t no = 0, yes = 1;
  Check(H5Tenum_insert(type.get(), "FALSE", &no), path, "cannot make the bool type");
  Check(H5Tenum_insert(type.get(), "TRUE", &yes), path, "cannot make the bool type");
  return type;
}

Hid Utf8StringType(const std::string& path) {
  Hid type(Check(H5Tcopy(H5T_C_S1), path, "cannot make a string type"), H5Tclose);
  Check(H5Tset_size(type.get(), H5T_VARIABLE), path, "cannot make a string type");
  Check(H5Tset_cset(type.get(), H5T_CSET_UTF8), path, "cannot make a string type");
  return type;
}

/// The bytes of `rows` rows of `d` in memory; throws when the count overflows (a damaged
/// or hostile shape, e.g. a row of 2^62 elements).
size_t BlockBytes(const std::string& path, const Hdf5Dataset& d, int64_t rows) {
  uint64_t bytes = static_cast<uint64_t>(DTypeSize(d.dtype));
  auto times = [&](int64_t n) {
    if (n < 0 || (n > 0 && bytes > std::numeric_limits<uint64_t>::max() / 2 /
                                       static_cast<uint64_t>(n))) {
      throw Error("prism::data: " + path + ": dataset " + Quoted(d.name) +
                  "'s shape gives rows too large to address (" + std::to_string(rows) +
                  " rows of " + std::to_string(d.row_shape.size()) +
                  "-dimensional rows): is the file damaged?");
    }
    bytes *= static_cast<uint64_t>(n);
  };
  times(rows);
  for (int64_t dim : d.row_shape) times(dim);
  return static_cast<size_t>(bytes);
}

Column ReadColumn(hid_t file, const std::string& path, const Hdf5Dataset& d, int64_t begin,
                  int64_t end) {
  const std::string what = "cannot read rows [" + std::to_string(begin) + ", " +
                           std::to_string(end) + ") of dataset " + Quoted(d.name);
  const int64_t rows = end - begin;
  if (rows == 0) {
    if (d.dtype == DType::kString) return Column::FromStrings({});
    return Column::Wrap(d.dtype, 0, d.row_shape, nullptr, nullptr);
  }
  Hid dset(Check(H5Dopen2(file, d.name.c_str(), H5P_DEFAULT), path, what), H5Dclose);
  Hid file_space(Check(H5Dget_space(dset.get()), path, what), H5Sclose);
  std::vector<hsize_t> start(d.row_shape.size() + 1, 0), count{static_cast<hsize_t>(rows)};
  start[0] = static_cast<hsize_t>(begin);
  for (int64_t dim : d.row_shape) count.push_back(static_cast<hsize_t>(dim));
  Check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        path, what);
  Hid mem_space(
      Check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), path, what),
      H5Sclose);

  if (d.dtype != DType::kString) {
    const size_t bytes = BlockBytes(path, d, rows);
    std::shared_ptr<prism::internal::Buffer> buffer;
    try {
      buffer = std::make_shared<prism::internal::Buffer>(bytes);
    } catch (const std::bad_alloc&) {
      throw Error("prism::data: " + path + ": " + what + " needs " + std::to_string(bytes) +
                  " bytes, more than this rank can allocate: read fewer rows per block");
    }
    const int64_t elements = static_cast<int64_t>(bytes / DTypeSize(d.dtype));
    Hid bool_type;
    hid_t mem_type = NativeType(d.dtype);
    if (d.dtype == DType::kBool) {
      bool_type = BoolType(path);
      mem_type = bool_type.get();
    }
    if (elements > 0) {
      Check(H5Dread(dset.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT,
                    buffer->data()),
            path, what);
    }
    const void* data = buffer->data();
    return Column::Wrap(d.dtype, rows, d.row_shape, data, std::move(buffer));
  }

  Hid file_type(Check(H5Dget_type(dset.get()), path, what), H5Tclose);
  const htri_t variable = Check(H5Tis_variable_str(file_type.get()), path, what);
  std::vector<std::string_view> values(static_cast<size_t>(rows));
  std::vector<char*> pointers;
  std::vector<char> fixed;
  Hid mem_type;
  if (variable) {
    mem_type = Hid(Check(H5Tcopy(H5T_C_S1), path, what), H5Tclose);
    Check(H5Tset_size(mem_type.get(), H5T_VARIABLE), path, what);
    Check(H5Tset_cset(mem_type.get(), H5Tget_cset(file_type.get())), path, what);
    pointers.assign(static_cast<size_t>(rows), nullptr);
    Check(H5Dread(dset.get(), mem_type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT,
                  pointers.data()),
          path, what);
    for (size_t i = 0; i < pointers.size(); ++i) {
      values[i] = pointers[i] == nullptr ? std::string_view() : std::string_view(pointers[i]);
    }
  } else {
    const size_t size = H5Tget_size(file_type.get());
    mem_type = Hid(Check(H5Tcopy(file_type.get()), path, what), H5Tclose);
    fixed.resize(static_cast<size_t>(rows) * size);
    Check(H5Dread(dset.get(), mem_type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT,
                  fixed.data()),
          path, what);
    const bool space_padded = H5Tget_strpad(file_type.get()) == H5T_STR_SPACEPAD;
    for (size_t i = 0; i < values.size(); ++i) {
      const char* p = fixed.data() + i * size;
      size_t n = strnlen(p, size);
      if (space_padded) {
        while (n > 0 && p[n - 1] == ' ') --n;
      }
      values[i] = std::string_view(p, n);
    }
  }
  size_t chars = 0;
  for (auto v : values) chars += v.size();
  const size_t offsets_bytes = (values.size() + 1) * sizeof(int64_t);
  auto buffer = std::make_shared<prism::internal::Buffer>(offsets_bytes + chars);
  auto* offsets = reinterpret_cast<int64_t*>(buffer->data());
  char* bytes = buffer->data() + offsets_bytes;
  int64_t at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    offsets[i] = at;
    if (!values[i].empty()) std::memcpy(bytes + at, values[i].data(), values[i].size());
    at += static_cast<int64_t>(values[i].size());
  }
  offsets[values.size()] = at;
  if (variable) H5Dvlen_reclaim(mem_type.get(), mem_space.get(), H5P_DEFAULT, pointers.data());
  return Column::WrapStrings(rows, offsets, bytes, std::move(buffer));
}

// ---- Writing -----------------------------------------------------------------------------

void WriteColumn(hid_t file, const std::string& path, const std::string& name,
                 const std::vector<Block>& blocks, size_t index, int64_t total) {
  const std::string what = "cannot write dataset " + Quoted(name);
  const Column& first = blocks.front().column_at(index).second;
  std::vector<hsize_t> dims{static_cast<hsize_t>(total)};
  for (int64_t d : first.row_shape()) dims.push_back(static_cast<hsize_t>(d));
  Hid space(
      Check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), path, what),
      H5Sclose);
  Hid type;
  hid_t file_type = NativeType(first.dtype());
  if (first.dtype() == DType::kBool) {
    type = BoolType(path);
    file_type = type.get();
  } else if (first.dtype() == DType::kString) {
    type = Utf8StringType(path);
    file_type = type.get();
  }
  Hid lcpl(Check(H5Pcreate(H5P_LINK_CREATE), path, what), H5Pclose);
  Check(H5Pset_create_intermediate_group(lcpl.get(), 1), path, what);
  Hid dset(Check(H5Dcreate2(file, name.c_str(), file_type, space.get(), lcpl.get(), H5P_DEFAULT,
                            H5P_DEFAULT),
                 path, what),
           H5Dclose);
  int64_t row = 0;
  for (const auto& block : blocks) {
    const Column& c = block.column_at(index).second;
    if (c.rows() == 0) continue;
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = static_cast<hsize_t>(row);
    count[0] = static_cast<hsize_t>(c.rows());
    Hid file_space(Check(H5Dget_space(dset.get()), path, what), H5Sclose);
    Check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                              nullptr),
          path, what);
    Hid mem_space(
        Check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), path, what),
        H5Sclose);
    if (c.dtype() == DType::kString) {
      std::vector<std::string> owned(static_cast<size_t>(c.rows()));
      std::vector<const char*> pointers(owned.size());
      for (int64_t r = 0; r < c.rows(); ++r) {
        owned[r] = std::string(c.StringAt(r));
        pointers[r] = owned[r].c_str();
      }
      Check(H5Dwrite(dset.get(), file_type, mem_space.get(), file_space.get(), H5P_DEFAULT,
                     pointers.data()),
            path, what);
    } else if (c.size_bytes() > 0) {
      Check(
          H5Dwrite(dset.get(), file_type, mem_space.get(), file_space.get(), H5P_DEFAULT, c.data()),
          path, what);
    }
    row += c.rows();
  }
}

}  // namespace

Hdf5File InspectHdf5(const std::string& path, const std::vector<std::string>& datasets) {
  std::lock_guard lock(Hdf5Mutex());
  Hid file = OpenFile(path);
  return InspectLocked(file.get(), path, datasets);
}

std::vector<Hdf5File> ListHdf5(const std::string& path_or_glob,
                               const std::vector<std::string>& datasets) {
  std::vector<Hdf5File> out;
  for (const auto& path : ExpandPaths(path_or_glob, {".h5", ".hdf5", ".he5"})) {
    out.push_back(InspectHdf5(path, datasets));
  }
  return out;
}

Block ReadHdf5Rows(const std::string& path, const std::vector<std::string>& datasets, int64_t begin,
                   int64_t end) {
  std::lock_guard lock(Hdf5Mutex());
  Hid file = OpenFile(path);
  Hdf5File info = InspectLocked(file.get(), path, datasets);
  if (begin < 0 || end < begin || end > info.rows) {
    throw Error("prism::data: " + path + ": rows [" + std::to_string(begin) + ", " +
                std::to_string(end) + ") are not inside its " + std::to_string(info.rows) +
                " rows");
  }
  std::vector<std::pair<std::string, Column>> columns;
  for (const auto& d : info.datasets)
    columns.emplace_back(d.name, ReadColumn(file.get(), path, d, begin, end));
  return Block::FromColumns(std::move(columns));
}

Part WriteHdf5Part(const std::string& dir, int64_t index, const std::vector<Block>& blocks) {
  detail::CheckOneSchema(blocks, "WriteHdf5Part");
  detail::PartFile part(dir, index, ".h5");
  const int64_t total = detail::TotalRows(blocks);
  {
    std::lock_guard lock(Hdf5Mutex());
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const std::string& path = part.temp_path();
    Hid fapl = FileAccess(path);
    Hid file(Check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), path,
                   "cannot create the file"),
             H5Fclose);
    if (!blocks.empty()) {
      for (size_t i = 0; i < blocks.front().num_columns(); ++i) {
        WriteColumn(file.get(), path, blocks.front().column_at(i).first, blocks, i, total);
      }
    }
    Check(file.Close(), path, "cannot close the file (flushing it failed)");
  }
  return part.Commit(total);
}

}  // namespace prism::data::io
