// prism::ArrayView: reads of vector objects in place, on one rank and across ranks of an
// in-process cluster, and the copies it makes when it cannot alias.
#include "prism/array_view.h"

#include <gtest/gtest.h>

#include <numeric>

#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

std::vector<double> AvMake(int n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}
double AvSum(prism::ArrayView<double> v) { return std::accumulate(v.begin(), v.end(), 0.0); }
bool AvShared(prism::ArrayView<double> v) { return v.IsShared(); }
prism::ArrayView<double> AvEcho(prism::ArrayView<double> v) { return v; }
int AvRank() { return prism::GetRuntimeContext().GetRank(); }
PRISM_REMOTE(AvMake, AvSum, AvShared, AvEcho, AvRank);

template <typename F>
auto OnRank(int rank, F f) {
  return prism::Task(f).SetResource("rank:" + std::to_string(rank), 0.01);
}

TEST(ArrayView, ALocalGetViewReadsTheStoredBytesWithoutACopy) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  std::vector<double> values = AvMake(1 << 20);
  auto ref = prism::Put(values);
  prism::ArrayView<double> a = prism::GetView(ref);
  prism::ArrayView<double> b = prism::GetView(ref);
  EXPECT_TRUE(a.IsShared());
  EXPECT_EQ(a.data(), b.data());  // both read the one stored buffer
  ASSERT_EQ(a.size(), values.size());
  EXPECT_EQ(a.ToVector(), values);
  // A copying Get still works and is a different buffer.
  auto copy = prism::Get(ref);
  EXPECT_NE(copy->data(), a.data());
  EXPECT_EQ(*copy, values);
}

TEST(ArrayView, AViewOutlivesItsRefAndKeepsTheBytes) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  prism::ArrayView<double> view;
  {
    auto ref = prism::Put(AvMake(100000));
    view = prism::GetView(ref);
  }  // the object is freed in the store; the view still holds its buffer
  ASSERT_EQ(view.size(), 100000u);
  EXPECT_EQ(view[99999], 99999.0);
  EXPECT_EQ(std::accumulate(view.begin(), view.end(), 0.0), 99999.0 * 100000 / 2);
}

TEST(ArrayView, TasksReadVectorArgumentsInPlaceOnEveryRank) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3});
  auto ref = OnRank(1, AvMake).Remote(1 << 18);  // made on rank 1
  const double expected = (double(1 << 18) - 1) * (1 << 18) / 2;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(*OnRank(rank, AvSum).Remote(ref).Get(), expected) << "rank " << rank;
    EXPECT_TRUE(*OnRank(rank, AvShared).Remote(ref).Get()) << "rank " << rank;
  }
  // A vector value passed where a view is expected travels as one.
  EXPECT_EQ(*OnRank(2, AvSum).Remote(std::vector<double>{1, 2, 3}).Get(), 6.0);
  // A task may return a view; it reads back as a vector or as a view.
  auto echoed = OnRank(2, AvEcho).Remote(ref);
  EXPECT_EQ(prism::GetView(echoed).size(), size_t{1} << 18);
  EXPECT_EQ(prism::GetView(echoed)[12345], 12345.0);
  auto as_vector = prism::ObjectRef<std::vector<double>>(echoed.ID());
  EXPECT_EQ(as_vector.Get()->at(777), 777.0);
}

TEST(ArrayView, ViewsOfFetchedCopiesAliasTheLocalCopy) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  auto ref = OnRank(1, AvMake).Remote(1 << 20);  // 8 MiB: stored on rank 1, fetched here
  prism::ArrayView<double> a = prism::GetView(ref);
  prism::ArrayView<double> b = prism::GetView(ref);
  EXPECT_TRUE(a.IsShared());
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(a[(1 << 20) - 1], double((1 << 20) - 1));
}

TEST(ArrayView, BytesWithoutAnOwnerOrMisalignedAreCopied) {
  std::vector<char> raw(8 * 5 + 1);
  double x[5] = {1, 2, 3, 4, 5};
  std::memcpy(raw.data() + 1, x, sizeof x);  // misaligned for double
  auto owner = std::make_shared<const prism::internal::Buffer>(raw.data(), raw.size());
  auto misaligned = prism::ArrayView<double>::FromBytes(owner->data() + 1, sizeof x, &owner);
  EXPECT_FALSE(misaligned.IsShared());
  EXPECT_EQ(misaligned.ToVector(), std::vector<double>(x, x + 5));
  auto unowned = prism::ArrayView<double>::FromBytes(reinterpret_cast<const char*>(x), sizeof x, nullptr);
  EXPECT_FALSE(unowned.IsShared());
  EXPECT_NE(unowned.data(), x);
  EXPECT_EQ(unowned[4], 5.0);
  EXPECT_THROW(unowned.at(5), prism::Error);
}

TEST(ArrayView, AnElementTypeThatDoesNotFitTheBytesIsAClearError) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  auto ref = prism::Put(std::vector<char>{'a', 'b', 'c'});
  auto wrong = prism::ObjectRef<std::vector<int64_t>>(ref.ID());
  try {
    prism::GetView(wrong);
    FAIL() << "expected SerializationError";
  } catch (const prism::SerializationError& e) {
    EXPECT_NE(std::string(e.what()).find("element type does not match"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prism::GetView(prism::ObjectRef<std::vector<double>>()), prism::Error);
  prism::ArrayView<double> empty = prism::GetView(prism::Put(std::vector<double>{}));
  EXPECT_TRUE(empty.empty());
}

}  // namespace
