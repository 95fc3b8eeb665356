// SetNumReturns and streaming generators in the in-process cluster, at 1 and 3 ranks (the
// cases are shared with tests/mpi/generator_test.cc). Each rank's store holds 24 MiB and
// cannot spill, so values that are never freed fail the later cases.
#include "../common/generator_cases.h"

#include "prism/platform/in_process.h"

namespace {

class Generators : public ::testing::TestWithParam<int> {
 protected:
  prism::platform::InProcessCluster cluster_{
      {.num_ranks = GetParam(), .num_cpus = 2, .object_store_memory = 24u << 20}};
};

using namespace generator_cases;

TEST_P(Generators, TupleReturnsAreObjectsOfTheirOwn) { TupleReturnsAreObjectsOfTheirOwn(); }
TEST_P(Generators, VectorReturnsAreObjectsOfTheirOwn) { VectorReturnsAreObjectsOfTheirOwn(); }
TEST_P(Generators, AFailedTaskFailsEveryReturnWithTheSameError) {
  AFailedTaskFailsEveryReturnWithTheSameError();
}
TEST_P(Generators, ValuesArriveInOrder) { GeneratorValuesArriveInOrder(); }
TEST_P(Generators, BackpressureBoundsTheValuesNotTaken) { BackpressureBoundsTheValuesNotTaken(); }
TEST_P(Generators, AnErrorMidStreamComesAfterTheValuesBeforeIt) {
  AnErrorMidStreamComesAfterTheValuesBeforeIt();
}
TEST_P(Generators, DroppingTheGeneratorStopsTheProducerAndFreesItsValues) {
  DroppingTheGeneratorStopsTheProducerAndFreesItsValues();
}
TEST_P(Generators, ATaskCanConsumeAGenerator) { ATaskCanConsumeAGenerator(); }
TEST_P(Generators, ActorMethodsCanStreamAndSplitTheirResults) {
  ActorMethodsCanStreamAndSplitTheirResults();
}
TEST_P(Generators, ARetriedGeneratorSkipsTheValuesItReportedBefore) {
  ARetriedGeneratorSkipsTheValuesItReportedBefore();
}

INSTANTIATE_TEST_SUITE_P(Ranks, Generators, ::testing::Values(1, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
