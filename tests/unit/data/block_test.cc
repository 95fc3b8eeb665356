// prism::data blocks: every column type, slices and selections without copies, concat
// and schema errors, rows, and blocks as objects read in place on one rank and across the
// ranks of an in-process cluster.
#include "prism/data/block.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "prism/api.h"
#include "prism/platform/in_process.h"
#include "prism/platform/invoke.h"
#include "../../common/test_util.h"

namespace {

using prism::data::Block;
using prism::data::Column;
using prism::data::DType;
using prism::data::Row;
using ::testing::HasSubstr;
using prism_test::ErrorOf;

Block MakeBlock(int64_t rows, int64_t first = 0) {
  std::vector<float> images(static_cast<size_t>(rows) * 4);
  std::iota(images.begin(), images.end(), static_cast<float>(first * 4));
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  std::iota(labels.begin(), labels.end(), first);
  std::vector<std::string> names;
  for (int64_t i = 0; i < rows; ++i) names.push_back("row-" + std::to_string(first + i));
  return Block::FromColumns({{"image", Column::FromVector(std::move(images), {2, 2})},
                             {"label", Column::FromVector(std::move(labels))},
                             {"name", Column::FromStrings(names)}});
}

TEST(DataColumn, EveryTypeHoldsItsValues) {
  Column f32 = Column::FromVector(std::vector<float>{1.5f, -2});
  Column f64 = Column::FromVector(std::vector<double>{3.25});
  Column i32 = Column::FromVector(std::vector<int32_t>{-7, 8, 9});
  Column i64 = Column::FromVector(std::vector<int64_t>{int64_t{1} << 40});
  Column u8 = Column::FromVector(std::vector<uint8_t>{0, 255});
  Column b = Column::FromVector(std::vector<bool>{true, false, true});
  Column s = Column::FromStrings({"", "hello", std::string("a\0b", 3)});
  EXPECT_EQ(f32.dtype(), DType::kFloat32);
  EXPECT_EQ(f32.Values<float>()[1], -2.0f);
  EXPECT_EQ(f64.Values<double>()[0], 3.25);
  EXPECT_EQ(i32.Values<int32_t>()[0], -7);
  EXPECT_EQ(i64.Values<int64_t>()[0], int64_t{1} << 40);
  EXPECT_EQ(u8.Values<uint8_t>()[1], 255);
  EXPECT_EQ(b.rows(), 3);
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_TRUE(b.Values<bool>()[0]);
  EXPECT_FALSE(b.Values<bool>()[1]);
  EXPECT_EQ(s.rows(), 3);
  EXPECT_EQ(s.StringAt(0), "");
  EXPECT_EQ(s.StringAt(1), "hello");
  EXPECT_EQ(s.StringAt(2), std::string("a\0b", 3));
  EXPECT_EQ(s.size_bytes(), 8u + 4 * 8);
  EXPECT_EQ(i32.size_bytes(), 12u);
  // A vector moved in is not copied.
  std::vector<double> big(1000, 1.0);
  const double* at = big.data();
  Column moved = Column::FromVector(std::move(big));
  EXPECT_EQ(moved.Values<double>().data(), at);
}

TEST(DataColumn, RowShapesAndSlicesShareTheBytes) {
  std::vector<float> values(5 * 28 * 28);
  std::iota(values.begin(), values.end(), 0.0f);
  Column images = Column::FromVector(values, {28, 28});
  EXPECT_EQ(images.rows(), 5);
  EXPECT_EQ(images.row_elements(), 28 * 28);
  EXPECT_EQ(images.row_shape(), (std::vector<int64_t>{28, 28}));
  Column middle = images.Slice(1, 3);
  EXPECT_EQ(middle.rows(), 2);
  EXPECT_EQ(middle.Values<float>().size(), 2u * 28 * 28);
  EXPECT_EQ(middle.Values<float>().data(), images.Values<float>().data() + 28 * 28);
  EXPECT_EQ(middle.Values<float>()[0], 28.0f * 28);
  EXPECT_EQ(middle.owner(), images.owner());

  Column s = Column::FromStrings({"a", "bb", "ccc", "dddd"});
  Column tail = s.Slice(2, 4);
  EXPECT_EQ(tail.StringAt(0), "ccc");
  EXPECT_EQ(tail.StringAt(1), "dddd");
  EXPECT_EQ(tail.StringAt(0).data(), s.StringAt(2).data());
  EXPECT_EQ(tail.size_bytes(), 7u + 3 * 8);
  EXPECT_EQ(s.Slice(4, 4).rows(), 0);
  EXPECT_EQ(s.Slice(4, 4).size_bytes(), 0u);
}

TEST(DataColumn, WrongTypesShapesAndRangesAreClearErrors) {
  Column i64 = Column::FromVector(std::vector<int64_t>{1, 2});
  EXPECT_THAT(ErrorOf([&] { i64.Values<float>(); }), HasSubstr("holds int64 values, not float32"));
  EXPECT_THAT(ErrorOf([&] { i64.StringAt(0); }), HasSubstr("holds int64 values, not string"));
  EXPECT_THAT(ErrorOf([&] { Column::FromStrings({"x"}).Values<uint8_t>(); }),
              HasSubstr("holds string values, not uint8"));
  EXPECT_THAT(ErrorOf([&] { Column::FromStrings({"x"}).StringAt(1); }),
              HasSubstr("row 1 out of range"));
  EXPECT_THAT(ErrorOf([&] { Column::FromVector(std::vector<float>(10), {3}); }),
              HasSubstr("10 float32 values are not a whole number of rows of shape [3]"));
  EXPECT_THAT(ErrorOf([&] { i64.Slice(1, 3); }),
              HasSubstr("slice [1, 3) is not inside the column's 2 rows"));
  EXPECT_THAT(ErrorOf([&] { i64.Slice(-1, 1); }), HasSubstr("is not inside"));
  alignas(8) char raw[24] = {};
  EXPECT_THAT(ErrorOf([&] { Column::Wrap(DType::kInt64, 2, {}, raw + 4, nullptr); }),
              HasSubstr("int64 values are not aligned"));
  EXPECT_EQ(Column::Wrap(DType::kInt32, 2, {}, raw + 4, nullptr).Values<int32_t>()[1], 0);
  EXPECT_THAT(ErrorOf([&] { Column::Wrap(DType::kString, 1, {}, "x", nullptr); }),
              HasSubstr("WrapStrings"));
}

TEST(DataBlock, ColumnsSchemaAndErrorsNamingColumns) {
  Block b = MakeBlock(4);
  EXPECT_EQ(b.num_rows(), 4);
  EXPECT_EQ(b.num_columns(), 3u);
  EXPECT_EQ(b.column_names(), (std::vector<std::string>{"image", "label", "name"}));
  EXPECT_EQ(b.schema().ToString(), "image: float32[2, 2], label: int64, name: string");
  EXPECT_EQ(b.schema(), MakeBlock(9).schema());
  EXPECT_EQ(b.GetColumn("label").Values<int64_t>()[3], 3);
  EXPECT_EQ(b.size_bytes(), 4u * 16 + 4 * 8 + (4 * 5 + 5 * 8));
  EXPECT_THAT(
      ErrorOf([&] { b.GetColumn("labels"); }),
      HasSubstr("no column \"labels\"; the block's columns are \"image\", \"label\", \"name\""));
  EXPECT_THAT(ErrorOf([&] {
                Block::FromColumns({{"a", Column::FromVector(std::vector<int32_t>{1, 2})},
                                    {"b", Column::FromVector(std::vector<int32_t>{1})}});
              }),
              HasSubstr("column \"b\" has 1 rows but column \"a\" has 2"));
  EXPECT_THAT(ErrorOf([&] {
                Block::FromColumns({{"a", Column::FromVector(std::vector<int32_t>{1})},
                                    {"a", Column::FromVector(std::vector<int32_t>{1})}});
              }),
              HasSubstr("two columns are named \"a\""));
  EXPECT_EQ(Block().num_rows(), 0);
}

TEST(DataBlock, SliceSelectDropAndAddShareColumns) {
  Block b = MakeBlock(10);
  Block s = b.Slice(3, 7);
  EXPECT_EQ(s.num_rows(), 4);
  EXPECT_EQ(s.GetColumn("label").Values<int64_t>()[0], 3);
  EXPECT_EQ(s.GetColumn("name").StringAt(3), "row-6");
  EXPECT_EQ(s.GetColumn("image").Values<float>()[0], 12.0f);
  EXPECT_EQ(s.GetColumn("image").data(),
            static_cast<const float*>(b.GetColumn("image").data()) + 12);
  EXPECT_THAT(ErrorOf([&] { b.Slice(5, 11); }),
              HasSubstr("slice [5, 11) is not inside the block's 10 rows"));

  Block sel = b.SelectColumns({"name", "label"});
  EXPECT_EQ(sel.column_names(), (std::vector<std::string>{"name", "label"}));
  EXPECT_EQ(sel.GetColumn("label").data(), b.GetColumn("label").data());
  EXPECT_THAT(ErrorOf([&] {
                b.SelectColumns({"label", "nope"});
              }),
              HasSubstr("no column \"nope\""));

  Block dropped = b.DropColumns({"image"});
  EXPECT_EQ(dropped.column_names(), (std::vector<std::string>{"label", "name"}));
  EXPECT_EQ(dropped.num_rows(), 10);
  EXPECT_THAT(ErrorOf([&] { b.DropColumns({"imag"}); }), HasSubstr("no column \"imag\""));

  Block added = b.AddColumn("weight", Column::FromVector(std::vector<double>(10, 0.5)));
  EXPECT_EQ(added.column_names().back(), "weight");
  EXPECT_EQ(b.num_columns(), 3u);  // the original is unchanged
  Block replaced = added.AddColumn("label", Column::FromVector(std::vector<int32_t>(10, 7)));
  EXPECT_EQ(replaced.column_names(), added.column_names());
  EXPECT_EQ(replaced.GetColumn("label").dtype(), DType::kInt32);
  EXPECT_THAT(ErrorOf([&] { b.AddColumn("w", Column::FromVector(std::vector<double>(3))); }),
              HasSubstr("cannot add column \"w\" of 3 rows to a block of 10 rows"));
  EXPECT_EQ(Block().AddColumn("x", Column::FromVector(std::vector<int64_t>{1, 2})).num_rows(), 2);
}

TEST(DataBlock, ConcatCopiesInOrderAndNamesTheDifferingColumn) {
  Block a = MakeBlock(3, 0), b = MakeBlock(0, 3), c = MakeBlock(5, 3);
  Block all = Block::Concat({a, b, c.Slice(1, 5)});
  EXPECT_EQ(all.num_rows(), 7);
  EXPECT_EQ(all.schema(), a.schema());
  std::vector<int64_t> labels(all.GetColumn("label").Values<int64_t>().begin(),
                              all.GetColumn("label").Values<int64_t>().end());
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(all.GetColumn("name").StringAt(3), "row-4");
  EXPECT_EQ(all.GetColumn("name").StringAt(6), "row-7");
  EXPECT_EQ(all.GetColumn("image").Values<float>()[3 * 4], 16.0f);
  EXPECT_EQ(Block::Concat({}).num_rows(), 0);
  EXPECT_EQ(Block::Concat({Block(), a, Block()}).GetColumn("label").data(),
            a.GetColumn("label").data());
  EXPECT_EQ(Block::Concat({a}).GetColumn("label").data(), a.GetColumn("label").data());

  Block other = a.AddColumn("label", Column::FromVector(std::vector<int32_t>{0, 1, 2}));
  EXPECT_THAT(ErrorOf([&] {
                Block::Concat({a, other});
              }),
              HasSubstr("column 1 is label: int64 in block 0 but label: int32 in block 1"));
  EXPECT_THAT(ErrorOf([&] {
                Block::Concat({a, a.DropColumns({"name"})});
              }),
              HasSubstr("block 1 lacks column name: string"));
  Block reshaped = a.AddColumn("image", Column::FromVector(std::vector<float>(12), {4}));
  EXPECT_THAT(ErrorOf([&] {
                Block::Concat({a, reshaped});
              }),
              HasSubstr("image: float32[2, 2] in block 0 but image: float32[4] in block 1"));
}

TEST(DataBlock, RowsInAndOut) {
  std::vector<Row> rows = {
      {{"id", int64_t{1}}, {"score", 0.5}, {"ok", true}, {"tag", std::string("a")}},
      {{"id", int64_t{2}}, {"score", int64_t{3}}, {"ok", false}, {"tag", std::string("b")}}};
  Block b = Block::FromRows(rows);
  EXPECT_EQ(b.schema().ToString(), "id: int64, ok: bool, score: float64, tag: string");
  EXPECT_EQ(b.GetColumn("score").Values<double>()[1], 3.0);
  auto back = b.ToRows();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(back[1].at("id")), 2);
  EXPECT_EQ(std::get<double>(back[0].at("score")), 0.5);
  EXPECT_EQ(std::get<bool>(back[0].at("ok")), true);
  EXPECT_EQ(std::get<std::string>(back[1].at("tag")), "b");
  // Narrow types widen.
  Block narrow = Block::FromColumns({{"x", Column::FromVector(std::vector<float>{1.5f})},
                                     {"y", Column::FromVector(std::vector<uint8_t>{200})}});
  EXPECT_EQ(std::get<double>(narrow.ToRows()[0].at("x")), 1.5);
  EXPECT_EQ(std::get<int64_t>(narrow.ToRows()[0].at("y")), 200);

  EXPECT_THAT(ErrorOf([&] { MakeBlock(2).ToRows(); }),
              HasSubstr("column \"image\" has rows of shape [2, 2] and a Row holds scalars"));
  EXPECT_THAT(ErrorOf([&] {
                Block::FromRows({{{"a", int64_t{1}}}, {{"b", int64_t{1}}}});
              }),
              HasSubstr("row 1 has no column \"a\""));
  EXPECT_THAT(ErrorOf([&] {
                Block::FromRows({{{"a", int64_t{1}}}, {{"a", std::string("x")}}});
              }),
              HasSubstr("column \"a\" holds int64 values and, at row 1, a string"));
  EXPECT_EQ(Block::FromRows({}).num_rows(), 0);
}

// ---- Bytes -----------------------------------------------------------------------------

bool InsideOf(const void* p, const prism::internal::Buffer& b) {
  auto* c = static_cast<const char*>(p);
  return c >= b.data() && c < b.data() + b.size();
}

TEST(DataBlockBytes, AReadFromAPayloadAliasesItAndACopyOtherwise) {
  Block b = MakeBlock(100).Slice(10, 60);  // a slice writes only its rows
  auto payload = std::make_shared<const prism::internal::Buffer>(prism::internal::Serialize(b));
  Block back = prism::internal::Deserialize<Block>(payload->data(), payload->size(), &payload);
  EXPECT_EQ(back.schema(), b.schema());
  EXPECT_EQ(back.num_rows(), 50);
  EXPECT_EQ(back.GetColumn("label").Values<int64_t>()[0], 10);
  EXPECT_EQ(back.GetColumn("name").StringAt(49), "row-59");
  for (const auto& name : back.column_names()) {
    EXPECT_TRUE(InsideOf(back.GetColumn(name).data(), *payload)) << name;
    EXPECT_EQ(back.GetColumn(name).owner(), std::static_pointer_cast<const void>(payload));
  }
  // The values start on 64-byte boundaries of the buffer.
  for (const auto& name : {"image", "label"}) {
    auto offset = static_cast<const char*>(back.GetColumn(name).data()) - payload->data();
    EXPECT_EQ(offset % 64, 0) << name;
  }
  // Without an owner: a copy.
  Block copied = prism::internal::Deserialize<Block>(payload->data(), payload->size());
  EXPECT_FALSE(InsideOf(copied.GetColumn("image").data(), *payload));
  EXPECT_EQ(copied.GetColumn("image").Values<float>()[0], 40.0f);
  EXPECT_EQ(copied.GetColumn("name").StringAt(0), "row-10");
}

TEST(DataBlockBytes, CorruptOrForeignBytesAreSerializationErrors) {
  prism::internal::Buffer good = prism::internal::Serialize(MakeBlock(8));
  EXPECT_THROW(prism::internal::Deserialize<Block>(good.data(), good.size() - 5),
               prism::SerializationError);
  prism::internal::Buffer vec = prism::internal::Serialize(std::vector<float>(16, 1.0f));
  EXPECT_THAT(ErrorOf([&] { prism::internal::Deserialize<Block>(vec.data(), vec.size()); }),
              HasSubstr("not a Block"));
  // A string offset past the characters.
  Block s = Block::FromColumns({{"s", Column::FromStrings({"ab", "cd"})}});
  prism::internal::Buffer bytes = prism::internal::Serialize(s);
  const int64_t offsets[] = {0, 2, 4};
  const std::string text(bytes.data(), bytes.size());
  const size_t at = text.find(std::string(reinterpret_cast<const char*>(offsets), sizeof offsets));
  ASSERT_NE(at, std::string::npos);
  bytes.data()[at + 16] = 3;  // the last offset short of the 4 characters
  EXPECT_THAT(ErrorOf([&] { prism::internal::Deserialize<Block>(bytes.data(), bytes.size()); }),
              HasSubstr("string offsets do not span"));
}

// ---- In the object store ---------------------------------------------------------------

Block DbMake(int64_t rows, int64_t first) { return MakeBlock(rows, first); }
bool DbAliases(Block b, std::vector<prism::ObjectRef<Block>> same) {
  // In a task, the argument reads the stored bytes: a Get of the same object shares them.
  auto got = prism::Get(same.at(0));
  return got->GetColumn("image").data() == b.GetColumn("image").data() &&
         got->GetColumn("name").string_bytes() == b.GetColumn("name").string_bytes();
}
int64_t DbSumLabels(Block b) {
  auto v = b.GetColumn("label").Values<int64_t>();
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}
Block DbHead(Block b, int64_t n) { return b.Slice(0, n); }
std::vector<Block> DbSplit(Block b, int64_t parts) {
  std::vector<Block> out;
  const int64_t step = b.num_rows() / parts;
  for (int64_t i = 0; i < parts; ++i) out.push_back(b.Slice(i * step, (i + 1) * step));
  return out;
}
PRISM_REMOTE(DbMake, DbAliases, DbSumLabels, DbHead, DbSplit);

Block DbIdentity(Block b) { return b; }
Block DbIdentityRef(const Block& b) { return b; }
PRISM_REMOTE(DbIdentity, DbIdentityRef);

TEST(DataBlockInvoke, ABlockPassesThroughInvokeWithoutACopyEitherWay) {
  // platform::Invoke calls a function registered as Block(Block) or Block(const Block&)
  // directly: the UDF sees the caller's columns and its result keeps them (a MapBatches
  // batch read in place from the store stays in place).
  const Block in = MakeBlock(1000);
  for (const char* name : {"DbIdentity", "DbIdentityRef"}) {
    const Block out = prism::platform::Invoke<Block>(name, in);
    for (const auto& column : in.column_names()) {
      EXPECT_EQ(out.GetColumn(column).data(), in.GetColumn(column).data()) << name << " " << column;
    }
  }
  // A signature the caller does not name exactly still works, through serialization.
  EXPECT_EQ(prism::platform::Invoke<int64_t>("DbSumLabels", in),
            std::accumulate(in.GetColumn("label").Values<int64_t>().begin(),
                            in.GetColumn("label").Values<int64_t>().end(), int64_t{0}));
  const Block head = prism::platform::Invoke<Block>("DbHead", in, int64_t{10});
  EXPECT_EQ(head.num_rows(), 10);
  // The typed lookup: the pointer for the exact type, nullptr for any other or no name.
  EXPECT_EQ(prism::platform::FindFunction<Block (*)(Block)>("DbIdentity"), &DbIdentity);
  EXPECT_EQ(prism::platform::FindFunction<Block (*)(const Block&)>("DbIdentity"), nullptr);
  EXPECT_EQ(prism::platform::FindFunction<Block (*)(const Block&)>("DbIdentityRef"), &DbIdentityRef);
  EXPECT_EQ(prism::platform::FindFunction<Block (*)(Block)>("NoSuchFunction"), nullptr);
}

template <typename F>
auto OnRank(int rank, F f) {
  return prism::Task(f).SetResource("rank:" + std::to_string(rank), 0.01);
}

TEST(DataBlockObject, AGetAliasesTheStoredBufferAndOutlivesTheRef) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  Block kept;
  {
    auto ref = prism::Put(MakeBlock(100000));  // ~3.5 MiB
    auto a = prism::Get(ref);
    auto b = prism::Get(ref);
    for (const auto& name : a->column_names()) {
      EXPECT_EQ(a->GetColumn(name).data(), b->GetColumn(name).data()) << name;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->GetColumn("image").data()) % 64, 0u);
    kept = a->Slice(99990, 100000);
  }  // the ref and the shared_ptrs are gone: the slice holds the buffer
  EXPECT_EQ(kept.GetColumn("label").Values<int64_t>()[9], 99999);
  EXPECT_EQ(kept.GetColumn("name").StringAt(0), "row-99990");
  EXPECT_EQ(kept.GetColumn("image").Values<float>()[39], 399999.0f);
}

TEST(DataBlockObject, TasksTakeAndReturnBlocksAcrossRanksReadInPlace) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  auto made = OnRank(1, DbMake).Remote(int64_t{200000}, int64_t{0});  // stored on rank 1
  const int64_t sum = int64_t{199999} * 200000 / 2;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(*OnRank(rank, DbSumLabels).Remote(made).Get(), sum) << "rank " << rank;
    EXPECT_TRUE(*OnRank(rank, DbAliases).Remote(made, std::vector{made}).Get()) << "rank " << rank;
  }
  // Fetched onto rank 0: two Gets read the one local copy.
  auto a = prism::Get(made);
  auto b = prism::Get(made);
  EXPECT_EQ(a->GetColumn("label").data(), b->GetColumn("label").data());
  EXPECT_EQ(a->GetColumn("name").StringAt(123456), "row-123456");
  // A task returns a slice; only its rows travel.
  auto head = OnRank(2, DbHead).Remote(made, int64_t{5});
  EXPECT_EQ(prism::Get(head)->num_rows(), 5);
  EXPECT_EQ(prism::Get(head)->GetColumn("name").StringAt(4), "row-4");
  // Several blocks in one object (a vector): each reads the one stored buffer in place.
  auto split = OnRank(1, DbSplit).Remote(made, int64_t{4});
  auto parts = prism::Get(split);
  auto again = prism::Get(split);
  ASSERT_EQ(parts->size(), 4u);
  EXPECT_EQ(parts->at(3).GetColumn("label").Values<int64_t>()[0], 150000);
  EXPECT_EQ(parts->at(3).GetColumn("name").StringAt(1), "row-150001");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(parts->at(i).GetColumn("image").data(), again->at(i).GetColumn("image").data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(parts->at(i).GetColumn("image").data()) % 64, 0u);
  }
  // A block passed by value travels as one.
  EXPECT_EQ(*OnRank(2, DbSumLabels).Remote(MakeBlock(10)).Get(), 45);
}

}  // namespace
