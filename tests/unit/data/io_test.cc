// prism::data's block readers and writers (src/data/io.h): HDF5 written with the C API
// here, .npy bytes written by hand, CSV split at every byte, binary files, part files and
// their commit, and every bad input's message.
#include "data/io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "../../common/test_util.h"

namespace {

namespace fs = std::filesystem;
namespace io = prism::data::io;
using prism::data::Block;
using prism::data::Column;
using prism::data::DType;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using prism_test::ErrorOf;

class DataIo : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/prism-data-io-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  void WriteText(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
  }
  std::string dir_;
};

// ---- HDF5 files made with the C API -------------------------------------------------------

class H5File {
 public:
  explicit H5File(const std::string& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(file_, 0);
  }
  ~H5File() { H5Fclose(file_); }
  hid_t id() const { return file_; }
  void Write(const std::string& name, hid_t type, std::vector<hsize_t> dims, const void* data,
             hid_t mem_type = -1) {
    hid_t space = dims.empty()
                      ? H5Screate(H5S_SCALAR)
                      : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dset = H5Dcreate2(file_, name.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(dset, 0) << name;
    EXPECT_GE(H5Dwrite(dset, mem_type < 0 ? type : mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
              0)
        << name;
    H5Dclose(dset);
    H5Pclose(lcpl);
    H5Sclose(space);
  }

 private:
  hid_t file_ = -1;
};

hid_t H5pyBool() {
  hid_t type = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t no = 0, yes = 1;
  H5Tenum_insert(type, "FALSE", &no);
  H5Tenum_insert(type, "TRUE", &yes);
  return type;
}

void MakeMixedFile(const std::string& path, int rows) {
  H5File f(path);
  std::vector<float> x(rows * 6);
  std::iota(x.begin(), x.end(), 0.0f);
  f.Write("x", H5T_NATIVE_FLOAT, {hsize_t(rows), 3, 2}, x.data());
  std::vector<int64_t> y(rows);
  std::iota(y.begin(), y.end(), int64_t{1} << 33);
  f.Write("y", H5T_STD_I64BE, {hsize_t(rows)}, y.data(), H5T_NATIVE_INT64);  // big-endian on disk
  std::vector<uint8_t> label(rows);
  for (int i = 0; i < rows; ++i) label[i] = static_cast<uint8_t>(i % 10);
  f.Write("label", H5T_NATIVE_UINT8, {hsize_t(rows)}, label.data());
  std::vector<int8_t> flag(rows);
  for (int i = 0; i < rows; ++i) flag[i] = i % 3 == 0;
  hid_t b = H5pyBool();
  f.Write("flag", b, {hsize_t(rows)}, flag.data());
  H5Tclose(b);
  std::vector<std::string> names(rows);
  std::vector<const char*> pointers(rows);
  for (int i = 0; i < rows; ++i) {
    names[i] = "name-" + std::to_string(i);
    pointers[i] = names[i].c_str();
  }
  hid_t vlen = H5Tcopy(H5T_C_S1);
  H5Tset_size(vlen, H5T_VARIABLE);
  H5Tset_cset(vlen, H5T_CSET_UTF8);
  f.Write("names", vlen, {hsize_t(rows)}, pointers.data());
  H5Tclose(vlen);
  std::vector<char> fixed(rows * 8, '\0');
  for (int i = 0; i < rows; ++i) std::snprintf(fixed.data() + i * 8, 8, "f%d", i);
  hid_t fixed_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(fixed_type, 8);
  H5Tset_strpad(fixed_type, H5T_STR_NULLPAD);
  f.Write("fixed", fixed_type, {hsize_t(rows)}, fixed.data());
  H5Tclose(fixed_type);
  std::vector<int16_t> z(rows);
  for (int i = 0; i < rows; ++i) z[i] = static_cast<int16_t>(-i);
  f.Write("group/z", H5T_NATIVE_INT16, {hsize_t(rows)}, z.data());
}

TEST_F(DataIo, Hdf5ListsDatasetsWithTheirTypesAndRows) {
  MakeMixedFile(Path("mixed.h5"), 100);
  io::Hdf5File info = io::InspectHdf5(Path("mixed.h5"));
  EXPECT_EQ(info.rows, 100);
  std::vector<std::string> names;
  for (const auto& d : info.datasets) names.push_back(d.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"fixed", "flag", "group/z", "label", "names", "x", "y"}));
  std::map<std::string, io::Hdf5Dataset> by_name;
  for (const auto& d : info.datasets) by_name[d.name] = d;
  EXPECT_EQ(by_name["x"].dtype, DType::kFloat32);
  EXPECT_EQ(by_name["x"].row_shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(by_name["y"].dtype, DType::kInt64);
  EXPECT_EQ(by_name["label"].dtype, DType::kUInt8);
  EXPECT_EQ(by_name["flag"].dtype, DType::kBool);
  EXPECT_EQ(by_name["names"].dtype, DType::kString);
  EXPECT_EQ(by_name["fixed"].dtype, DType::kString);
  EXPECT_EQ(by_name["group/z"].dtype, DType::kInt32);
  // Named datasets, in the order given; a leading slash is fine.
  io::Hdf5File some = io::InspectHdf5(Path("mixed.h5"), {"/y", "x"});
  ASSERT_EQ(some.datasets.size(), 2u);
  EXPECT_EQ(some.datasets[0].name, "y");
}

TEST_F(DataIo, Hdf5ReadsRowRangesOfEveryType) {
  MakeMixedFile(Path("mixed.h5"), 100);
  Block b = io::ReadHdf5Rows(Path("mixed.h5"), {}, 10, 30);
  EXPECT_EQ(b.num_rows(), 20);
  EXPECT_EQ(b.GetColumn("x").row_shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(b.GetColumn("x").Values<float>()[0], 60.0f);
  EXPECT_EQ(b.GetColumn("x").Values<float>()[119], 179.0f);
  EXPECT_EQ(b.GetColumn("y").Values<int64_t>()[5], (int64_t{1} << 33) + 15);
  EXPECT_EQ(b.GetColumn("label").Values<uint8_t>()[3], 3);
  EXPECT_TRUE(b.GetColumn("flag").Values<bool>()[2]);   // row 12
  EXPECT_FALSE(b.GetColumn("flag").Values<bool>()[3]);  // row 13
  EXPECT_EQ(b.GetColumn("names").StringAt(19), "name-29");
  EXPECT_EQ(b.GetColumn("fixed").StringAt(0), "f10");
  EXPECT_EQ(b.GetColumn("group/z").Values<int32_t>()[1], -11);
  // Column buffers are 16-byte aligned (a Buffer's storage).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.GetColumn("x").data()) % 16, 0u);
  // Ranges cover the file: [0, 37) + [37, 100) is all of it.
  Block whole = Block::Concat({io::ReadHdf5Rows(Path("mixed.h5"), {"y", "names"}, 0, 37),
                               io::ReadHdf5Rows(Path("mixed.h5"), {"y", "names"}, 37, 100)});
  EXPECT_EQ(whole.num_rows(), 100);
  EXPECT_EQ(whole.column_names(), (std::vector<std::string>{"y", "names"}));
  EXPECT_EQ(whole.GetColumn("names").StringAt(99), "name-99");
  EXPECT_EQ(io::ReadHdf5Rows(Path("mixed.h5"), {"x", "names"}, 50, 50).num_rows(), 0);
}

// A dataset whose declared shape is far beyond memory (chunked and never written, as a
// sparse file or a damaged header declares it): a read of its rows is a clear error,
// never a std::bad_alloc or a byte count that wrapped around (the HDF5 fuzz target's).
TEST_F(DataIo, Hdf5RowsBeyondMemoryOrAddressingAreAClearError) {
  {
    H5File f(Path("huge.h5"));
    auto declare = [&](const std::string& name, std::vector<hsize_t> dims) {
      hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      std::vector<hsize_t> chunk{1, 1024};
      H5Pset_chunk(dcpl, 2, chunk.data());
      hid_t dset = H5Dcreate2(f.id(), name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl,
                              H5P_DEFAULT);
      EXPECT_GE(dset, 0) << name;
      H5Dclose(dset);
      H5Pclose(dcpl);
      H5Sclose(space);
    };
    declare("beyond_memory", {4, hsize_t{1} << 42});      // 128 TiB in 4 rows
    declare("beyond_addressing", {4, hsize_t{1} << 62});  // 2^67 bytes
  }
  try {
    io::ReadHdf5Rows(Path("huge.h5"), {"beyond_memory"}, 0, 4);
    ADD_FAILURE() << "read 128 TiB";
  } catch (const prism::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("more than this rank can allocate: read fewer rows"));
  }
  try {
    io::ReadHdf5Rows(Path("huge.h5"), {"beyond_addressing"}, 0, 4);
    ADD_FAILURE() << "read 2^67 bytes";
  } catch (const prism::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"beyond_addressing\"'s shape gives rows too large to address"));
  }
  // It is still listed, with its rows.
  EXPECT_EQ(io::InspectHdf5(Path("huge.h5"), {"beyond_memory"}).rows, 4);
}

TEST_F(DataIo, Hdf5PartsRoundTripAndCommit) {
  std::vector<float> x(10 * 4);
  std::iota(x.begin(), x.end(), 0.0f);
  Block a = Block::FromColumns(
      {{"x", Column::FromVector(x, {2, 2})},
       {"id", Column::FromVector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
       {"ok", Column::FromVector(std::vector<bool>(10, true))},
       {"tag", Column::FromStrings({"a", "b", "", "d", "e", "f", "g", "h", "i", "j"})},
       {"nested/w", Column::FromVector(std::vector<double>(10, 2.5))}});
  const std::string out = Path("out");
  io::Part p0 = io::WriteHdf5Part(out, 0, {a.Slice(0, 4), a.Slice(4, 10)});
  io::Part p1 = io::WriteHdf5Part(out, 1, {a.Slice(2, 3)});
  EXPECT_EQ(p0.file, "part-00000.h5");
  EXPECT_EQ(p0.rows, 10);
  EXPECT_GT(p0.bytes, 0u);
  EXPECT_TRUE(fs::exists(Path("out/part-00001.h5")));
  Block back =
      io::ReadHdf5Rows(Path("out/part-00000.h5"), {"x", "id", "ok", "tag", "nested/w"}, 3, 8);
  EXPECT_EQ(back.schema(), a.schema());
  EXPECT_EQ(back.GetColumn("x").Values<float>()[0], 12.0f);
  EXPECT_EQ(back.GetColumn("id").Values<int64_t>()[4], 7);
  EXPECT_TRUE(back.GetColumn("ok").Values<bool>()[1]);
  EXPECT_EQ(back.GetColumn("tag").StringAt(0), "d");
  EXPECT_EQ(back.GetColumn("nested/w").Values<double>()[2], 2.5);
  // A part of no rows is fine.
  io::Part empty = io::WriteHdf5Part(out, 2, {a.Slice(0, 0)});
  EXPECT_EQ(io::InspectHdf5(Path("out/part-00002.h5")).rows, 0);

  // Commit: temporaries of dead writers go, the manifest lists the parts.
  WriteText("out/.part-00007-deadbeef.h5", "half a file");
  EXPECT_THAT(ErrorOf([&] { io::ReadManifest(out); }),
              HasSubstr("has no _SUCCESS: the write that made it did not finish"));
  io::CommitParts(out, {p0, p1, empty});
  EXPECT_FALSE(fs::exists(Path("out/.part-00007-deadbeef.h5")));
  auto parts = io::ReadManifest(out);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].file, "part-00001.h5");
  EXPECT_EQ(parts[1].rows, 1);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  }
  // Counts that are not non-negative integers, and file names that leave the directory, are
  // not a manifest (found by fuzzing, tests/fuzz/corpus/manifest/regress-*: 1e300 rows was
  // an undefined conversion, -5 rows was returned as is).
  const std::string manifest = prism_test::ReadText(Path("out/_SUCCESS"));
  for (const char* part : {"{\"file\": \"a.h5\", \"rows\": 1e300, \"bytes\": 1}",
                           "{\"file\": \"a.h5\", \"rows\": -5, \"bytes\": 1}",
                           "{\"file\": \"a.h5\", \"rows\": 1, \"bytes\": -1}",
                           "{\"file\": \"../a.h5\", \"rows\": 1, \"bytes\": 1}"}) {
    WriteText("out/_SUCCESS", std::string("{\"format\": \"prism-data-parts-1\", \"parts\": [") + part + "]}");
    EXPECT_THAT(ErrorOf([&] { io::ReadManifest(out); }), HasSubstr("is not a Prism manifest (part 0")) << part;
  }
  WriteText("out/_SUCCESS", manifest);
  // Output directories read as their parts (the manifest and hidden files skipped).
  EXPECT_EQ(io::ListHdf5(out).size(), 3u);
  EXPECT_THAT(ErrorOf([&] {
                io::CommitParts(out, {p0, {"part-00009.h5", 1, 1}});
              }),
              AllOf(HasSubstr("its part part-00009.h5, which a write task wrote, is not there"),
                    HasSubstr("storage every rank shares"), HasSubstr("check that the write task finished")));
  // Blocks of different schemas in one part.
  EXPECT_THAT(ErrorOf([&] {
                io::WriteHdf5Part(out, 3, {a, a.DropColumns({"tag"})});
              }),
              HasSubstr("block 1 has schema"));
  EXPECT_FALSE(fs::exists(Path("out/part-00003.h5")));
}

// Issue 46: a part written on another host's local disk was reported as "missing (was every
// write task finished?)". The commit now names the part, its writer's rank and host, and
// says the output path must be shared storage.
TEST_F(DataIo, CommitOfAPartWrittenOnAnotherHostSaysTheStorageIsNotShared) {
  const std::string out = Path("node_local");
  Block rows = Block::FromColumns({{"id", Column::FromVector(std::vector<int64_t>{1, 2, 3})}});
  io::Part p0 = io::WriteJsonPart(out, 0, {rows.Slice(0, 2)});
  io::Part p1 = io::WriteJsonPart(out, 1, {rows.Slice(2, 3)});
  p0.rank = 0;
  p0.host = "h1";
  p1.rank = 2;
  p1.host = "h2-not-this-host";
  fs::remove(fs::path(out) / p1.file);  // as if on rank 2's own disk
  const std::string what = ErrorOf([&] { io::CommitParts(out, {p0, p1}); });
  EXPECT_THAT(what, HasSubstr("cannot commit " + out + ": its part part-00001.json, which rank 2 "
                              "(host h2-not-this-host) wrote, is not there"));
  EXPECT_THAT(what, HasSubstr("written on another host: the output path must be on storage every "
                              "rank shares (a file system every node mounts, not a node-local disk"));
  EXPECT_THAT(what, Not(HasSubstr("was every write task finished")));
  EXPECT_FALSE(fs::exists(fs::path(out) / io::kManifestName)) << "nothing committed";
}

TEST_F(DataIo, Hdf5ReadsAndWritesFromManyThreadsAtOnce) {
  // Tasks on one rank read and write at the same time; the HDF5 library is not thread-safe,
  // so this crashes or corrupts reads without the process-wide lock.
  MakeMixedFile(Path("mixed.h5"), 400);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const int64_t begin = (t * 25 + i) % 300;
        Block b = io::ReadHdf5Rows(Path("mixed.h5"), {"x", "names"}, begin, begin + 100);
        if (b.GetColumn("x").Values<float>()[0] != begin * 6.0f ||
            b.GetColumn("names").StringAt(99) != "name-" + std::to_string(begin + 99)) {
          ++bad[t];
        }
        if (i % 5 == 0) io::WriteHdf5Part(Path("out"), t * 100 + i, {b});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EXPECT_EQ(io::ListHdf5(Path("out")).size(), 20u);
}

TEST_F(DataIo, Hdf5BadInputNamesTheFileAndDataset) {
  MakeMixedFile(Path("mixed.h5"), 20);
  EXPECT_THAT(ErrorOf([&] { io::InspectHdf5(Path("missing.h5")); }),
              HasSubstr("missing.h5 does not exist"));
  WriteText("text.h5", "not hdf5 at all");
  EXPECT_THAT(ErrorOf([&] { io::InspectHdf5(Path("text.h5")); }),
              HasSubstr("text.h5 is not an HDF5 file"));
  EXPECT_THAT(
      ErrorOf([&] {
        io::ReadHdf5Rows(Path("mixed.h5"), {"x", "images"}, 0, 1);
      }),
      HasSubstr("has no dataset \"images\"; its datasets are \"fixed\", \"flag\", \"group/z\""));
  EXPECT_THAT(ErrorOf([&] { io::ReadHdf5Rows(Path("mixed.h5"), {"x"}, 5, 21); }),
              HasSubstr("rows [5, 21) are not inside its 20 rows"));
  {
    H5File f(Path("odd.h5"));
    std::vector<float> a(10), b(9);
    f.Write("a", H5T_NATIVE_FLOAT, {10}, a.data());
    f.Write("b", H5T_NATIVE_FLOAT, {9}, b.data());
    std::vector<uint64_t> u(10);
    f.Write("u", H5T_NATIVE_UINT64, {10}, u.data());
    double scalar = 1;
    f.Write("s", H5T_NATIVE_DOUBLE, {}, &scalar);
    hid_t compound = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(compound, "p", 0, H5T_NATIVE_INT32);
    H5Tinsert(compound, "q", 4, H5T_NATIVE_FLOAT);
    std::vector<char> c(80);
    f.Write("c", compound, {10}, c.data());
    H5Tclose(compound);
  }
  EXPECT_THAT(ErrorOf([&] {
                io::InspectHdf5(Path("odd.h5"), {"a", "b"});
              }),
              HasSubstr("dataset \"b\" has 9 rows but \"a\" has 10"));
  EXPECT_THAT(ErrorOf([&] {
                io::InspectHdf5(Path("odd.h5"), {"a", "u"});
              }),
              HasSubstr("dataset \"u\" holds uint64, which no column type holds"));
  EXPECT_THAT(ErrorOf([&] { io::InspectHdf5(Path("odd.h5"), {"c"}); }),
              HasSubstr("dataset \"c\" holds a compound type"));
  EXPECT_THAT(ErrorOf([&] { io::InspectHdf5(Path("odd.h5"), {"s"}); }),
              HasSubstr("dataset \"s\" is a scalar and has no rows"));
  EXPECT_THAT(ErrorOf([&] { io::ListHdf5(Path("nothing-*.h5")); }),
              HasSubstr("no file ending in .h5, .hdf5, .he5 matches"));
  // A glob of two files lists both.
  MakeMixedFile(Path("more.h5"), 7);
  auto files = io::ListHdf5(Path("m*.h5"), {"x"});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].rows, 20);
  EXPECT_EQ(files[1].rows, 7);
}

// ---- NumPy ---------------------------------------------------------------------------------

std::string NpyBytes(const std::string& dict, const void* data, size_t n, int version = 1) {
  std::string header = dict;
  const size_t preamble = version == 1 ? 10 : 12;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  out += header;
  out.append(static_cast<const char*>(data), n);
  return out;
}

TEST_F(DataIo, NumpyReadsRowRangesOfHandWrittenFiles) {
  std::vector<float> f(4 * 3);
  std::iota(f.begin(), f.end(), 0.0f);
  WriteText("f.npy",
            NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }", f.data(), 48));
  io::NpyHeader h = io::ReadNpyHeader(Path("f.npy"));
  EXPECT_EQ(h.dtype, DType::kFloat32);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(h.data_offset % 64, 0u);
  Block b = io::ReadNpyRows(Path("f.npy"), 1, 3);
  EXPECT_EQ(b.column_names(), (std::vector<std::string>{"data"}));
  EXPECT_EQ(b.GetColumn("data").row_shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(b.GetColumn("data").Values<float>()[0], 3.0f);
  EXPECT_EQ(b.GetColumn("data").Values<float>()[5], 8.0f);

  std::vector<int64_t> v{5, 6, 7};
  WriteText("v2.npy",
            NpyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", v.data(), 24, 2));
  EXPECT_EQ(io::ReadNpyRows(Path("v2.npy"), 2, 3, "id").GetColumn("id").Values<int64_t>()[0], 7);
  uint8_t flags[] = {1, 0, 1};
  WriteText("b.npy",
            NpyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", flags, 3));
  EXPECT_TRUE(io::ReadNpyRows(Path("b.npy"), 0, 3).GetColumn("data").Values<bool>()[2]);
  // A 1-d Fortran-order array is the same bytes.
  WriteText("fo.npy",
            NpyBytes("{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }", v.data(), 24));
  EXPECT_EQ(io::ReadNpyRows(Path("fo.npy"), 0, 3).num_rows(), 3);
}

TEST_F(DataIo, NumpyPartsRoundTrip) {
  std::vector<int32_t> v(2 * 5 * 2);
  std::iota(v.begin(), v.end(), 0);
  Block b = Block::FromColumns(
      {{"m", Column::FromVector(v, {5, 2})}, {"s", Column::FromStrings({"a", "b"})}});
  io::Part p = io::WriteNumpyPart(Path("np"), 4, {b, b.Slice(1, 2)}, "m");
  EXPECT_EQ(p.file, "part-00004.npy");
  EXPECT_EQ(p.rows, 3);
  io::NpyHeader h = io::ReadNpyHeader(Path("np/part-00004.npy"));
  EXPECT_EQ(h.dtype, DType::kInt32);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(h.data_offset % 64, 0u);
  Block back = io::ReadNpyRows(Path("np/part-00004.npy"), 2, 3);
  EXPECT_EQ(back.GetColumn("data").Values<int32_t>()[0], 10);
  EXPECT_THAT(ErrorOf([&] { io::WriteNumpyPart(Path("np"), 5, {b}, "s"); }),
              HasSubstr("column \"s\" holds strings"));
  EXPECT_THAT(ErrorOf([&] { io::WriteNumpyPart(Path("np"), 5, {b}, "t"); }),
              HasSubstr("no column \"t\""));
}

TEST_F(DataIo, NumpyBadInputSaysWhatToDo) {
  float f[4] = {};
  auto error = [&](const std::string& dict, size_t n = 16) {
    WriteText("bad.npy", NpyBytes(dict, f, n));
    return ErrorOf([&] { io::ReadNpyHeader(Path("bad.npy")); });
  };
  EXPECT_THAT(error("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }"),
              HasSubstr("it is big-endian: convert it with numpy"));
  EXPECT_THAT(error("{'descr': '<U5', 'fortran_order': False, 'shape': (4,), }"),
              HasSubstr("dtype '<U5' has no column type"));
  EXPECT_THAT(error("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }"),
              HasSubstr("dtype '<f2' has no column type"));
  EXPECT_THAT(error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"),
              HasSubstr("Fortran order"));
  EXPECT_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4),
              HasSubstr("0-dimensional"));
  EXPECT_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"),
              HasSubstr("needs "));
  EXPECT_THAT(error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }"),
              HasSubstr("structured"));
  // Shapes whose byte count wraps around 2^64 (found by fuzzing the .npy reader,
  // tests/fuzz/corpus/npy/regress-*): they looked like a few bytes the file holds, and a
  // read made a block of 2^62 values per row over none.
  EXPECT_THAT(error("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }"),
              HasSubstr("holds more bytes than any file can"));
  EXPECT_THAT(error("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 4611686018427387904), }"),
              HasSubstr("holds more bytes than any file can"));
  EXPECT_THAT(error("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4611686018427387904), }"),
              HasSubstr("holds more bytes than any file can"));
  WriteText("plain.npy", "just some text, long enough");
  EXPECT_THAT(ErrorOf([&] { io::ReadNpyHeader(Path("plain.npy")); }), HasSubstr("not a .npy file"));
  EXPECT_THAT(ErrorOf([&] { io::ReadNpyRows(Path("gone.npy"), 0, 1); }),
              HasSubstr("gone.npy: No such file or directory (check the path"));
}

// ---- CSV ---------------------------------------------------------------------------------

const char* kCsv =
    "id,score,name,flag\n"
    "1,0.5,plain,true\n"
    "2,,\"a, b\",false\n"
    "3,-1e3,\"say \"\"hi\"\"\",TRUE\r\n"
    "\n"
    "4,7,last,false";  // no final newline

TEST_F(DataIo, CsvInfersTypesAndReadsEveryRowOnceAtAnySplit) {
  WriteText("t.csv", kCsv);
  EXPECT_EQ(io::ReadCsvHeader(Path("t.csv")),
            (std::vector<std::string>{"id", "score", "name", "flag"}));
  const uint64_t size = io::FileSize(Path("t.csv"));
  Block all = io::ReadCsvRange(Path("t.csv"), 0, size);
  EXPECT_EQ(all.schema().ToString(), "id: int64, score: float64, name: string, flag: bool");
  EXPECT_EQ(all.num_rows(), 4);
  EXPECT_TRUE(std::isnan(all.GetColumn("score").Values<double>()[1]));
  EXPECT_EQ(all.GetColumn("score").Values<double>()[2], -1000.0);
  EXPECT_EQ(all.GetColumn("name").StringAt(1), "a, b");
  EXPECT_EQ(all.GetColumn("name").StringAt(2), "say \"hi\"");
  EXPECT_TRUE(all.GetColumn("flag").Values<bool>()[2]);
  EXPECT_EQ(all.GetColumn("id").Values<int64_t>()[3], 4);
  // Two ranges split at any byte, and three, read each row once.
  io::CsvOptions typed{.column_types = {{"id", DType::kInt64},
                                        {"score", DType::kFloat64},
                                        {"name", DType::kString},
                                        {"flag", DType::kBool}}};
  for (uint64_t k = 0; k <= size; ++k) {
    Block both = Block::Concat({io::ReadCsvRange(Path("t.csv"), 0, k, typed),
                                io::ReadCsvRange(Path("t.csv"), k, size, typed)});
    ASSERT_EQ(both.num_rows(), 4) << "split at " << k;
    EXPECT_EQ(both.GetColumn("name").StringAt(3), "last");
    const uint64_t m = (k + size) / 2;
    Block three = Block::Concat({io::ReadCsvRange(Path("t.csv"), 0, k, typed),
                                 io::ReadCsvRange(Path("t.csv"), k, m, typed),
                                 io::ReadCsvRange(Path("t.csv"), m, size + 10, typed)});
    ASSERT_EQ(three.num_rows(), 4) << "splits at " << k << ", " << m;
    EXPECT_EQ(three.GetColumn("id").Values<int64_t>()[2], 3);
  }
}

TEST_F(DataIo, CsvPartsRoundTrip) {
  Block b = Block::FromColumns({{"f", Column::FromVector(std::vector<float>{1.5f, -0.25f})},
                                {"d", Column::FromVector(std::vector<double>{0.1, 1e300})},
                                {"i", Column::FromVector(std::vector<int32_t>{-3, 4})},
                                {"u", Column::FromVector(std::vector<uint8_t>{200, 0})},
                                {"b", Column::FromVector(std::vector<bool>{false, true})},
                                {"s", Column::FromStrings({"x,y", "q\"uote"})}});
  io::Part p = io::WriteCsvPart(Path("csv"), 0, {b, b});
  EXPECT_EQ(p.rows, 4);
  const std::string path = Path("csv/part-00000.csv");
  Block back = io::ReadCsvRange(path, 0, io::FileSize(path));
  EXPECT_EQ(back.schema().ToString(),
            "f: float64, d: float64, i: int64, u: int64, b: bool, s: string");
  EXPECT_EQ(back.GetColumn("f").Values<double>()[1], -0.25);
  EXPECT_EQ(back.GetColumn("d").Values<double>()[0], 0.1);
  EXPECT_EQ(back.GetColumn("d").Values<double>()[1], 1e300);
  EXPECT_EQ(back.GetColumn("i").Values<int64_t>()[2], -3);
  EXPECT_EQ(back.GetColumn("u").Values<int64_t>()[0], 200);
  EXPECT_TRUE(back.GetColumn("b").Values<bool>()[3]);
  EXPECT_EQ(back.GetColumn("s").StringAt(0), "x,y");
  EXPECT_EQ(back.GetColumn("s").StringAt(3), "q\"uote");
  Block image = Block::FromColumns({{"m", Column::FromVector(std::vector<float>(4), {2})}});
  EXPECT_THAT(ErrorOf([&] { io::WriteCsvPart(Path("csv"), 1, {image}); }),
              HasSubstr("column \"m\" has rows of shape [2] and a CSV field holds one value"));
}

TEST_F(DataIo, CsvBadInputNamesTheRow) {
  WriteText("short.csv", "a,b\n1,2\n3\n");
  EXPECT_THAT(ErrorOf([&] { io::ReadCsvRange(Path("short.csv"), 0, 100); }),
              HasSubstr("short.csv: the row at byte 8 has 1 fields but the header has 2 columns"));
  WriteText("quote.csv", "a,b\n1,\"open\n2,3\n");
  EXPECT_THAT(ErrorOf([&] { io::ReadCsvRange(Path("quote.csv"), 0, 100); }),
              HasSubstr("has a quote left open"));
  WriteText("typed.csv", "a\n1\nx\n");
  io::CsvOptions options{.column_types = {{"a", DType::kInt64}}};
  EXPECT_THAT(
      ErrorOf([&] { io::ReadCsvRange(Path("typed.csv"), 0, 100, options); }),
      HasSubstr(
          "the row at byte 4 has \"x\" in column \"a\", which is not an int64 (the type given"));
  EXPECT_EQ(io::ReadCsvRange(Path("typed.csv"), 0, 100).GetColumn("a").dtype(), DType::kString);
  WriteText("empty.csv", "");
  EXPECT_THAT(ErrorOf([&] { io::ReadCsvRange(Path("empty.csv"), 0, 100); }),
              HasSubstr("needs a header row"));
  EXPECT_THAT(ErrorOf([&] { io::ReadCsvRange(Path("nope.csv"), 0, 100); }),
              HasSubstr("cannot open the CSV file"));
}

// ---- Binary files and paths -------------------------------------------------------------

TEST_F(DataIo, BinaryFilesAreRowsOfBytes) {
  fs::create_directories(Path("in/sub"));
  WriteText("in/a.bin", std::string("\0\1\2", 3));
  WriteText("in/empty.bin", "");
  WriteText("in/sub/c.bin", "hello");
  WriteText("in/.hidden", "x");
  WriteText("in/_SUCCESS", "{}");
  auto paths = io::ExpandPaths(Path("in"));
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[2], Path("in/sub/c.bin"));
  Block b = io::ReadBinaryFiles(paths);
  EXPECT_EQ(b.column_names(), (std::vector<std::string>{"path", "bytes"}));
  EXPECT_EQ(b.GetColumn("bytes").StringAt(0), std::string("\0\1\2", 3));
  EXPECT_EQ(b.GetColumn("bytes").StringAt(1), "");
  EXPECT_EQ(b.GetColumn("bytes").StringAt(2), "hello");
  EXPECT_EQ(b.GetColumn("path").StringAt(2), Path("in/sub/c.bin"));
  EXPECT_EQ(io::ReadBinaryFiles({Path("in/sub/c.bin")}, false).column_names(),
            (std::vector<std::string>{"bytes"}));
  EXPECT_THAT(ErrorOf([&] {
                io::ReadBinaryFiles({Path("in/a.bin"), Path("in/gone.bin")});
              }),
              HasSubstr("gone.bin: No such file or directory"));
  EXPECT_EQ(io::ExpandPaths(Path("in/*.bin")).size(), 2u);
  EXPECT_THAT(ErrorOf([&] { io::ExpandPaths(Path("in/*.png")); }), HasSubstr("no file matches"));
  EXPECT_THAT(ErrorOf([&] { io::ExpandPaths(Path("out")); }),
              HasSubstr("does not exist: check the path"));
  EXPECT_THAT(ErrorOf([&] { io::ExpandPaths(Path("in"), {".png"}); }),
              HasSubstr("holds no file ending in .png"));
}

}  // namespace
