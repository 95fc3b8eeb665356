// SetNumReturns and streaming generators under mpirun: at 3 ranks the producers run on
// rank 2 and their values cross to rank 0 (the driver) over the real transport. The cases
// are shared with the in-process tests (tests/common/generator_cases.h).
#include "../common/generator_cases.h"

namespace {

using namespace generator_cases;

TEST(Generators, TupleReturnsAreObjectsOfTheirOwn) { TupleReturnsAreObjectsOfTheirOwn(); }
TEST(Generators, VectorReturnsAreObjectsOfTheirOwn) { VectorReturnsAreObjectsOfTheirOwn(); }
TEST(Generators, AFailedTaskFailsEveryReturnWithTheSameError) {
  AFailedTaskFailsEveryReturnWithTheSameError();
}
TEST(Generators, ValuesArriveInOrder) { GeneratorValuesArriveInOrder(); }
TEST(Generators, BackpressureBoundsTheValuesNotTaken) { BackpressureBoundsTheValuesNotTaken(); }
TEST(Generators, AnErrorMidStreamComesAfterTheValuesBeforeIt) {
  AnErrorMidStreamComesAfterTheValuesBeforeIt();
}
TEST(Generators, DroppingTheGeneratorStopsTheProducerAndFreesItsValues) {
  DroppingTheGeneratorStopsTheProducerAndFreesItsValues();
}
TEST(Generators, ATaskCanConsumeAGenerator) { ATaskCanConsumeAGenerator(); }
TEST(Generators, ActorMethodsCanStreamAndSplitTheirResults) {
  ActorMethodsCanStreamAndSplitTheirResults();
}
TEST(Generators, ARetriedGeneratorSkipsTheValuesItReportedBefore) {
  ARetriedGeneratorSkipsTheValuesItReportedBefore();
}

}  // namespace
