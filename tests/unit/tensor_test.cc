// torch::Tensor objects (prism/tensor.h): round trips of every common dtype and shape, reads
// that alias the store's buffer, lifetimes, and corrupt bytes.
#include "prism/tensor.h"

#include <gtest/gtest.h>

#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

torch::Tensor TnMake(int64_t rows, int64_t cols) {
  return torch::arange(rows * cols, torch::kFloat32).reshape({rows, cols});
}
double TnSum(torch::Tensor t) { return t.sum().item<double>(); }
bool TnAliases(torch::Tensor t, std::vector<prism::ObjectRef<torch::Tensor>> same) {
  // Within a task, the argument and a Get of the same object share one buffer.
  return prism::Get(same.at(0))->data_ptr() == t.data_ptr();
}
torch::Tensor TnTwice(torch::Tensor t) { return t * 2; }
PRISM_REMOTE(TnMake, TnSum, TnAliases, TnTwice);

template <typename F>
auto OnRank(int rank, F f) {
  return prism::Task(f).SetResource("rank:" + std::to_string(rank), 0.01);
}

TEST(TensorObject, EveryDtypeAndShapeRoundTrips) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  std::vector<torch::Tensor> cases = {
      torch::randn({3, 4}),
      torch::randn({2, 3, 5}, torch::kFloat64),
      torch::randint(-100, 100, {7}, torch::kInt32),
      torch::randint(0, 1 << 30, {2, 2}, torch::kInt64),
      torch::randint(0, 255, {9}, torch::kUInt8),
      torch::randn({4}).to(torch::kHalf),
      torch::randn({4}).gt(0),   // bool
      torch::tensor(3.5),        // zero-dimensional
      torch::empty({0, 3}),      // no elements
  };
  for (const auto& t : cases) {
    auto back = prism::Get(prism::Put(t));
    EXPECT_EQ(back->scalar_type(), t.scalar_type());
    EXPECT_EQ(back->sizes(), t.sizes());
    EXPECT_TRUE(torch::equal(*back, t)) << t;
  }
  // Non-contiguous: stored contiguous, same values.
  torch::Tensor wide = torch::randn({6, 8});
  torch::Tensor transposed = wide.t();
  ASSERT_FALSE(transposed.is_contiguous());
  auto back = prism::Get(prism::Put(transposed));
  EXPECT_TRUE(back->is_contiguous());
  EXPECT_TRUE(torch::equal(*back, transposed));
  // An undefined tensor stays undefined.
  EXPECT_FALSE(prism::Get(prism::Put(torch::Tensor()))->defined());
}

TEST(TensorObject, ALocalGetAliasesTheStoredBufferAndOutlivesTheRef) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  torch::Tensor t;
  {
    auto ref = prism::Put(TnMake(1024, 1024));  // 4 MiB: a mapped, page-aligned block
    auto a = prism::Get(ref);
    auto b = prism::Get(ref);
    EXPECT_EQ(a->data_ptr(), b->data_ptr());  // no copy: both are the stored bytes
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data_ptr()) % 64, 0u);
    t = *a;
  }  // ref and shared_ptrs gone: the tensor keeps the buffer
  EXPECT_EQ(t.index({1023, 1023}).item<float>(), 1024.0f * 1024 - 1);
  EXPECT_DOUBLE_EQ(t.sum().item<double>(), TnMake(1024, 1024).to(torch::kFloat64).sum().item<double>());
}

TEST(TensorObject, TasksTakeAndReturnTensorsAcrossRanks) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  auto made = OnRank(1, TnMake).Remote(512, 512);
  auto twice = OnRank(2, TnTwice).Remote(made);
  const double sum = double(512 * 512 - 1) * (512 * 512) / 2;
  EXPECT_DOUBLE_EQ(*OnRank(0, TnSum).Remote(twice).Get(), 2 * sum);
  EXPECT_TRUE(*OnRank(2, TnAliases).Remote(made, std::vector{made}).Get());
  auto local = prism::Get(twice);
  EXPECT_EQ(local->index({511, 511}).item<float>(), 2.0f * (512 * 512 - 1));
}

TEST(TensorObject, CorruptBytesAreASerializationError) {
  prism::internal::Buffer good = prism::internal::Serialize(torch::randn({4, 4}));
  // Truncated.
  EXPECT_THROW(prism::internal::Deserialize<torch::Tensor>(good.data(), good.size() - 3),
               prism::SerializationError);
  // Unknown dtype code.
  prism::internal::Buffer bad = good;
  bad.data()[0] = 120;
  EXPECT_THROW(prism::internal::Deserialize<torch::Tensor>(bad.data(), bad.size()),
               prism::SerializationError);
  // Read as the wrong type: a vector's bytes are not a tensor.
  prism::internal::Buffer vec = prism::internal::Serialize(std::vector<float>(16, 1.0f));
  EXPECT_THROW(prism::internal::Deserialize<torch::Tensor>(vec.data(), vec.size()),
               prism::SerializationError);
}

}  // namespace
