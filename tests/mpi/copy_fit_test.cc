// A fetched copy that does not fit the reader's store. Run as MPMD with different caps:
// rank 0 holds 256 MiB, ranks 1 and 2 only 32 MiB. A 48 MiB object made on rank 0 cannot
// be copied to rank 1: the Get there fails with ObjectStoreFullError naming the object, the
// rank and the cap; a second Get fetches again (and fails the same way) rather than hang
// or read a stale entry; the original stays intact on rank 0; and rank 1 still fetches
// objects that fit.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace prism_test;

namespace {

using Doubles = std::vector<double>;
using Refs = std::vector<prism::ObjectRef<Doubles>>;

/// Gets the nested ref on the rank this runs on: its checksum, or the error's type and text.
std::string CfTryGet(Refs refs) {
  try {
    return "ok " + std::to_string(Checksum(*refs[0].Get(60000)));
  } catch (const prism::ObjectStoreFullError& e) {
    return std::string("ObjectStoreFullError: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
}
PRISM_REMOTE(CfTryGet);

std::string TryOn(int rank, const prism::ObjectRef<Doubles>& ref) {
  return *On(rank, CfTryGet).SetResource("CPU", 0).Remote(Refs{ref}).Get(120000);
}

TEST(CopyFit, ACopyTooLargeForTheReaderFailsClearlyAndTheOriginalStaysIntact) {
  ASSERT_GE(World(), 3) << "run as: mpirun -n 1 ... --prism-object-store-memory=256M : -n 2 ... 32M";
  const Doubles big = MakeDoubles((48u << 20) / sizeof(double), 7);
  const std::string want = "ok " + std::to_string(Checksum(big));
  auto ref = prism::Put(big);

  for (int attempt = 0; attempt < 2; ++attempt) {  // the second Get fetches again
    std::string got = TryOn(1, ref);
    EXPECT_EQ(got.rfind("ObjectStoreFullError: ", 0), 0u) << "attempt " << attempt << ": " << got;
    EXPECT_NE(got.find("rank 1"), std::string::npos) << got;
    EXPECT_NE(got.find("object_store_memory"), std::string::npos) << got;
  }
  EXPECT_EQ(TryOn(2, ref).rfind("ObjectStoreFullError: ", 0), 0u);

  // Nothing lost: the original reads back whole where it was made.
  EXPECT_EQ("ok " + std::to_string(Checksum(*ref.Get(60000))), want);

  // Rank 1 is fine otherwise: an object that fits arrives intact.
  const Doubles small = MakeDoubles((8u << 20) / sizeof(double), 8);
  EXPECT_EQ(TryOn(1, prism::Put(small)), "ok " + std::to_string(Checksum(small)));
}

}  // namespace
