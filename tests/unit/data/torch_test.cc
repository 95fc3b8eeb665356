// prism::data and torch: columns to tensors and back without copies, including columns
// read in place from the object store.
#include "prism/data/torch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prism/api.h"
#include "prism/platform/in_process.h"
#include "../../common/test_util.h"

namespace {

using prism::data::Block;
using prism::data::Column;
using prism::data::DType;
using ::testing::HasSubstr;
using prism_test::ErrorOf;

TEST(DataTorch, ColumnsBecomeTensorsWithoutACopy) {
  std::vector<float> values(6 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Column images = Column::FromVector(std::move(values), {2, 2});
  torch::Tensor t = prism::data::ToTensor(images);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{6, 2, 2}));
  EXPECT_EQ(t.scalar_type(), torch::kFloat32);
  EXPECT_EQ(t.data_ptr(), images.data());
  EXPECT_EQ(t.index({5, 1, 1}).item<float>(), 23.0f);
  // A slice's tensor starts at the slice's row.
  torch::Tensor tail = prism::data::ToTensor(images.Slice(4, 6));
  EXPECT_EQ(tail.data_ptr(), static_cast<const float*>(images.data()) + 16);
  // Every fixed-width dtype maps to its torch dtype; empty columns give empty tensors.
  EXPECT_EQ(prism::data::ToTensor(Column::FromVector(std::vector<double>{1})).scalar_type(),
            torch::kFloat64);
  EXPECT_EQ(prism::data::ToTensor(Column::FromVector(std::vector<int32_t>{1})).scalar_type(),
            torch::kInt32);
  EXPECT_EQ(prism::data::ToTensor(Column::FromVector(std::vector<int64_t>{1})).scalar_type(),
            torch::kInt64);
  EXPECT_EQ(prism::data::ToTensor(Column::FromVector(std::vector<uint8_t>{1})).scalar_type(),
            torch::kUInt8);
  torch::Tensor flags = prism::data::ToTensor(Column::FromVector(std::vector<bool>{true, false}));
  EXPECT_EQ(flags.scalar_type(), torch::kBool);
  EXPECT_TRUE(flags[0].item<bool>());
  EXPECT_EQ(prism::data::ToTensor(images.Slice(0, 0)).sizes(), (std::vector<int64_t>{0, 2, 2}));
  EXPECT_THAT(ErrorOf([] { prism::data::ToTensor(Column::FromStrings({"a"})); }),
              HasSubstr("a string column has no torch dtype"));
}

TEST(DataTorch, ATensorKeepsTheColumnBytesAlive) {
  torch::Tensor t;
  {
    Column c = Column::FromVector(std::vector<int64_t>(1000, 7));
    t = prism::data::ToTensor(c);
  }
  EXPECT_EQ(t.sum().item<int64_t>(), 7000);
}

TEST(DataTorch, TensorsBecomeColumnsWithoutACopy) {
  torch::Tensor t = torch::arange(24, torch::kFloat32).reshape({3, 8});
  Column c = prism::data::FromTensor(t);
  EXPECT_EQ(c.rows(), 3);
  EXPECT_EQ(c.row_shape(), (std::vector<int64_t>{8}));
  EXPECT_EQ(c.data(), t.data_ptr());
  EXPECT_EQ(c.Values<float>()[23], 23.0f);
  // Round trip: the same bytes.
  EXPECT_EQ(prism::data::ToTensor(c).data_ptr(), t.data_ptr());
  // Non-contiguous tensors are copied once, then held.
  Column transposed = prism::data::FromTensor(t.t());
  EXPECT_NE(transposed.data(), t.data_ptr());
  EXPECT_EQ(transposed.rows(), 8);
  EXPECT_EQ(transposed.Values<float>()[1], 8.0f);
  EXPECT_EQ(prism::data::FromTensor(torch::ones({4}, torch::kBool)).dtype(), DType::kBool);
  EXPECT_THAT(ErrorOf([] { prism::data::FromTensor(torch::ones({2}, torch::kHalf)); }),
              HasSubstr("convert with .to(torch::kFloat32)"));
  EXPECT_THAT(ErrorOf([] { prism::data::FromTensor(torch::tensor(1.0)); }),
              HasSubstr("0-dimensional"));
  EXPECT_THAT(ErrorOf([] { prism::data::FromTensor(torch::Tensor()); }), HasSubstr("undefined"));
}

TEST(DataTorch, ToTensorsOfABlockAndAStringColumn) {
  Block b = Block::FromColumns({{"x", prism::data::FromTensor(torch::randn({5, 3}))},
                                {"y", Column::FromVector(std::vector<int64_t>{0, 1, 0, 1, 1})},
                                {"name", Column::FromStrings({"a", "b", "c", "d", "e"})}});
  EXPECT_THAT(ErrorOf([&] { prism::data::ToTensors(b); }),
              HasSubstr("column \"name\" holds strings"));
  auto tensors = prism::data::ToTensors(b.DropColumns({"name"}));
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("x").sizes(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(tensors.at("y").sum().item<int64_t>(), 3);
}

TEST(DataTorch, ABlockFromTheStoreBecomesTensorsOverTheStoredBytes) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  torch::Tensor images = torch::rand({1024, 28, 28});
  auto ref = prism::Put(Block::FromColumns({{"image", prism::data::FromTensor(images)}}));
  torch::Tensor t;
  {
    auto block = prism::Get(ref);
    t = prism::data::ToTensors(*block).at("image");
    EXPECT_EQ(t.data_ptr(), block->GetColumn("image").data());
    EXPECT_EQ(prism::Get(ref)->GetColumn("image").data(), t.data_ptr());  // the store's bytes
    EXPECT_NE(t.data_ptr(), images.data_ptr());
  }
  EXPECT_TRUE(torch::equal(t, images));
}

}  // namespace
