#pragma once
// Block-level file readers and writers for prism::data (internal: the Dataset layer's
// sources and sinks call these from tasks). Every reader reads a row range (HDF5, .npy),
// a byte range (CSV) or a list of files (binary), so that ranks read one file in parallel;
// the caller plans the ranges from the sizes the listing functions return.
//
// Writes are committed as a whole (Ray/Spark's output committer, one level):
//   1. each write task writes its blocks to a part file of its own with Write*Part: first
//      as `<dir>/.part-NNNNN-<random>.<ext>`, then fsynced and renamed to
//      `<dir>/part-NNNNN.<ext>` (a retried task renames over its earlier attempt's part);
//   2. once every part is written, one caller runs CommitParts: it checks each part is
//      there, deletes temporary files that died with their writers, and atomically writes
//      `<dir>/_SUCCESS`, a JSON manifest of the parts and their rows. A directory without
//      `_SUCCESS` is not a finished output; ReadManifest says so.
//
// HDF5: the Debian library built for parallel HDF5 is not thread-safe, so every HDF5 call
// in this process goes through one mutex (tasks on one rank read one after another; ranks
// read in parallel). Errors are prism::Error naming the file (and dataset) and what to do.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prism/data/block.h"

namespace prism::data::io {

/// The files `path` names, sorted: a file; a directory's regular files (recursively,
/// skipping names that start with '.' or '_', such as _SUCCESS); or a glob pattern
/// ("/data/train-*.h5"). With `extensions` (".h5", ".hdf5"), only files ending in one of
/// them. Throws prism::Error if the path does not exist or nothing matches, naming it.
std::vector<std::string> ExpandPaths(const std::string& path,
                                     const std::vector<std::string>& extensions = {});

/// Size of a file in bytes. Throws prism::Error naming a missing file.
uint64_t FileSize(const std::string& path);

// ---- HDF5 -------------------------------------------------------------------------------

/// One dataset of a file: its path inside the file ("images", "train/x"), row count
/// (first dimension), the DType it reads as and the shape of a row (the other dimensions).
struct Hdf5Dataset {
  std::string name;
  int64_t rows = 0;
  DType dtype = DType::kFloat64;
  std::vector<int64_t> row_shape;
};

/// A file's datasets, all of `rows` rows.
struct Hdf5File {
  std::string path;
  int64_t rows = 0;
  std::vector<Hdf5Dataset> datasets;
};

/// The named datasets of one HDF5 file (all datasets in the file, in name order, when
/// `datasets` is empty). Throws prism::Error naming the file and dataset if the file is
/// missing or not HDF5, a dataset is missing (listing those there are), is a scalar, has a
/// type with no DType (listing the supported ones), or has a different row count from the
/// first.
///
/// Types read as: float32 and smaller floats -> float32; float64 -> float64; int8, int16,
/// int32, uint16 -> int32; int64, uint32 -> int64; uint8 -> uint8; h5py's bool enum ->
/// bool; fixed or variable-length strings -> string. uint64 and everything else (compound,
/// arrays, references) is an error.
Hdf5File InspectHdf5(const std::string& path, const std::vector<std::string>& datasets = {});

/// InspectHdf5 of each file that ExpandPaths(path_or_glob, {".h5", ".hdf5", ".he5"}) names.
std::vector<Hdf5File> ListHdf5(const std::string& path_or_glob,
                               const std::vector<std::string>& datasets = {});

/// Rows [begin, end) of the named datasets (all when empty) of one file as a block, one
/// column per dataset named as the dataset. The values are read straight into the
/// columns' buffers (one H5Dread per dataset; no further copy, except strings). Throws as
/// InspectHdf5, and for a range outside [0, rows].
Block ReadHdf5Rows(const std::string& path, const std::vector<std::string>& datasets, int64_t begin,
                   int64_t end);

// ---- Parts and their commit -------------------------------------------------------------

/// A part file written by a Write*Part call: its name inside the output directory, rows
/// and bytes.
struct Part {
  std::string file;
  int64_t rows = 0;
  uint64_t bytes = 0;
  /// Who wrote it (-1 and "" when not known), for CommitParts' error; not in the manifest.
  int rank = -1;
  std::string host;
};

/// The manifest CommitParts writes: "_SUCCESS".
inline constexpr const char* kManifestName = "_SUCCESS";

/// Writes `blocks` (one schema) to `<dir>/part-NNNNN.h5` (NNNNN = index, zero-padded to
/// 5 digits) through a temporary file, one dataset per column of the blocks' total rows
/// (contiguous; strings as variable-length UTF-8, bools as h5py's enum). Creates `dir` if
/// needed. Throws prism::Error for blocks of different schemas or an I/O failure (the
/// temporary file is removed).
Part WriteHdf5Part(const std::string& dir, int64_t index, const std::vector<Block>& blocks);

/// Writes the `column` of `blocks` to `<dir>/part-NNNNN.npy` (shape {rows, row_shape...}),
/// as WriteHdf5Part. Throws prism::Error for a string column or a missing column.
Part WriteNumpyPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks,
                    const std::string& column);

/// Writes `blocks` to `<dir>/part-NNNNN.csv` with a header row, as WriteHdf5Part. Floats
/// are written in their shortest round-trip form, bools as true/false, strings quoted
/// when they hold the delimiter, a quote or a line break. Throws prism::Error for a column
/// whose rows are arrays.
Part WriteCsvPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks,
                  char delimiter = ',');

/// Writes `blocks` to `<dir>/part-NNNNN.json` as JSON lines (one object a row, keys in
/// column order; a row's array as nested lists, NaN and infinities as null), as
/// WriteHdf5Part. Throws prism::Error for blocks of different schemas or an I/O failure.
Part WriteJsonPart(const std::string& dir, int64_t index, const std::vector<Block>& blocks);

/// Commits an output directory: checks each part's file is there, removes temporary
/// `.part-*` files left by writers that died, and atomically writes `<dir>/_SUCCESS` listing
/// the parts in order. Call it once, after every part is written. Throws prism::Error
/// naming a missing part, the rank and host that wrote it and what to check (the output
/// path must be on storage every rank shares; else the writer did not finish).
void CommitParts(const std::string& dir, const std::vector<Part>& parts);

/// The parts a committed directory lists, in order. Throws prism::Error if `dir` has no
/// _SUCCESS (the write did not finish) or it is not a manifest.
std::vector<Part> ReadManifest(const std::string& dir);

// ---- NumPy .npy --------------------------------------------------------------------------

/// What a .npy header says.
struct NpyHeader {
  DType dtype = DType::kFloat64;
  std::vector<int64_t> shape;  // shape[0] is the rows
  uint64_t data_offset = 0;    // where the elements start in the file
};

/// Reads and checks a .npy header (format versions 1, 2 and 3). Throws prism::Error naming
/// the file for a missing file, a file that is not .npy, a dtype with no DType (big-endian,
/// float16, unicode, objects...), Fortran order (with 2+ dimensions), a 0-d array, or a
/// file shorter than its shape says.
NpyHeader ReadNpyHeader(const std::string& path);

/// Rows [begin, end) of a .npy array as a block of one column named `column` (Ray's
/// read_numpy names it "data"), read with pread straight into the column's buffer.
Block ReadNpyRows(const std::string& path, int64_t begin, int64_t end,
                  const std::string& column = "data");

// ---- CSV ---------------------------------------------------------------------------------

struct CsvOptions {
  char delimiter = ',';
  /// Types for some columns (int64, float64, bool or string), instead of inferring them;
  /// pass what one range inferred to every other range so that all blocks share a schema.
  std::map<std::string, DType> column_types;
  /// The columns of column_types whose type the caller inferred (from a sample) rather than
  /// the user gave: a field that does not fit says to give the type instead.
  std::vector<std::string> inferred;
};

/// The column names of a CSV file's header row.
std::vector<std::string> ReadCsvHeader(const std::string& path, char delimiter = ',');

/// The rows of a CSV file that start in bytes [begin, end) (the header row excepted), as a
/// block: so ranges that split a file anywhere read every row once. Each column not in
/// options.column_types is int64 if every field read is an integer, float64 if every one
/// is a number or empty (empty reads as NaN), bool if every one is true/false (any case),
/// string otherwise. Fields may be quoted ("a, b", "say ""hi""") but not span lines.
/// Throws prism::Error naming the file and the row's byte offset for a row with a
/// different field count from the header, a quote left open, or a field that does not fit
/// its given type.
Block ReadCsvRange(const std::string& path, uint64_t begin, uint64_t end,
                   const CsvOptions& options = {});

// ---- Binary files ------------------------------------------------------------------------

/// One row per file: a "bytes" column (string dtype) with each file's contents and, with
/// include_paths, a "path" column first (Ray's read_binary_files). Throws prism::Error
/// naming a file that cannot be read.
Block ReadBinaryFiles(const std::vector<std::string>& paths, bool include_paths = true);

}  // namespace prism::data::io
