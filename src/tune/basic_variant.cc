// BasicVariantGenerator: random and grid search (Ray's tune/search/basic_variant.py and
// variant_generator.py).
//
// Trial i (counting from 0) is a pure function of (seed, i):
//   - its grid combination is i mod G, where G is the product of the grids' sizes; the
//     grids are taken in key order and, as in Ray's _grid_search_generator, the FIRST key
//     varies fastest: {a: [1, 2], b: [x, y]} gives (1,x) (2,x) (1,y) (2,y);
//   - the whole grid is run once per sample (Ray: each of num_samples passes generates
//     every combination), so num_samples = 2 gives the G combinations, then the G again;
//   - its other values come from a generator seeded with (seed, i): constants and
//     distributions first, then the SampleFrom functions in key order, each seeing the
//     values drawn so far (a later SampleFrom sees an earlier one's value).
// So the saved state is just the counter (and the seed), and a restored generator goes on
// with exactly the configs the uninterrupted one would have suggested.

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/tune/searcher.h"
#include "tune/metric_mode.h"
#include "tune/numbers.h"

namespace prism::tune {

namespace {

using internal::TrialSeed;

constexpr const char* kBasicVariantKind = "BasicVariantGenerator";

}  // namespace

struct BasicVariantGenerator::Impl {
  ParamSpace space;
  std::vector<std::pair<std::string, const Domain*>> grids;  // key order
  int64_t grid_count = 1;
  int num_samples = -1;  // TotalTrials is -1 until Setup
  uint64_t seed = 0;
  int64_t counter = 0;  // trials suggested so far
  bool set_up = false;
  // A RestoreState before Setup: Setup keeps the restored counter and seed.
  bool restored = false;

  Config Resolve(int64_t index) const {
    std::mt19937_64 rng(TrialSeed(seed, static_cast<uint64_t>(index)));
    Config config;
    int64_t combo = index % grid_count;
    std::map<std::string, Value> grid_values;
    for (const auto& [name, domain] : grids) {
      const auto n = static_cast<int64_t>(domain->values().size());
      grid_values[name] = domain->values()[combo % n];
      combo /= n;
    }
    for (const auto& [name, domain] : space) {
      if (domain.kind() == Domain::Kind::kSampleFrom) continue;
      const Value v = domain.kind() == Domain::Kind::kGrid ? grid_values.at(name)
                                                            : domain.Sample(rng, config);
      config.Set(name, ToText(v));
    }
    for (const auto& [name, domain] : space) {
      if (domain.kind() != Domain::Kind::kSampleFrom) continue;
      Value v;
      try {
        v = domain.Sample(rng, config);
      } catch (const std::exception& e) {
        throw Error("prism::tune: SampleFrom for parameter \"" + name + "\" threw: " + e.what() +
                    " (it sees only the constants, distributions and earlier SampleFrom values, "
                    "in key order; use Get with a fallback for the others)");
      } catch (...) {
        throw Error("prism::tune: SampleFrom for parameter \"" + name +
                    "\" threw a non-standard exception");
      }
      config.Set(name, ToText(v));
    }
    return config;
  }

  void RequireSetUp(const char* what) const {
    if (!set_up) {
      throw Error(std::string("prism::tune::BasicVariantGenerator::") + what +
                  " called before Setup; the Tuner calls Setup first");
    }
  }
};

BasicVariantGenerator::BasicVariantGenerator() : impl_(std::make_unique<Impl>()) {}
BasicVariantGenerator::~BasicVariantGenerator() = default;

void BasicVariantGenerator::Setup(const ParamSpace& space, const std::string& metric,
                                  const std::string& mode, int num_samples, uint64_t seed) {
  ValidateParamSpace(space);
  std::string own_metric, own_mode;  // random search needs neither, but a bad mode is an error
  internal::MergeMetricMode(own_metric, own_mode, metric, mode, "BasicVariantGenerator",
                            /*required=*/false);
  if (num_samples == 0 || num_samples < -1) {
    throw Error("prism::tune::BasicVariantGenerator: num_samples is " +
                std::to_string(num_samples) +
                "; pass TuneConfig::num_samples >= 1, or -1 for no limit");
  }
  Impl& m = *impl_;
  m.space = space;
  m.grids.clear();
  m.grid_count = 1;
  for (const auto& [name, domain] : m.space) {
    if (domain.kind() != Domain::Kind::kGrid) continue;
    m.grids.emplace_back(name, &domain);
    const auto n = static_cast<int64_t>(domain.values().size());
    if (m.grid_count > (int64_t{1} << 50) / n) {
      throw Error("prism::tune::BasicVariantGenerator: the grid searches' cross product is "
                  "too large (over 2^50 combinations at \"" + name +
                  "\"); use distributions instead of grids for some parameters");
    }
    m.grid_count *= n;
  }
  m.num_samples = num_samples;
  if (!m.restored) {
    m.seed = seed;
    m.counter = 0;
  }
  m.set_up = true;
}

Suggestion BasicVariantGenerator::Suggest(const std::string& trial_id) {
  Impl& m = *impl_;
  m.RequireSetUp("Suggest");
  const int64_t total = TotalTrials();
  if (total >= 0 && m.counter >= total) return Suggestion::Finished();
  Config config = m.Resolve(m.counter);
  ++m.counter;
  return Suggestion::Of(std::move(config));
}

void BasicVariantGenerator::OnTrialComplete(const std::string&, const Config&, const Metrics*,
                                            bool) {}

std::string BasicVariantGenerator::SaveState() const {
  nlohmann::json j;
  j["kind"] = kBasicVariantKind;
  j["seed"] = impl_->seed;
  j["counter"] = impl_->counter;
  return j.dump();
}

void BasicVariantGenerator::RestoreState(const std::string& state) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(state);
    if (j.at("kind").get<std::string>() != kBasicVariantKind) throw std::runtime_error("kind");
    impl_->seed = j.at("seed").get<uint64_t>();
    impl_->counter = j.at("counter").get<int64_t>();
  } catch (const std::exception& e) {
    throw Error("prism::tune::BasicVariantGenerator::RestoreState: the state is not one "
                "BasicVariantGenerator::SaveState wrote (" +
                std::string(e.what()) + "): \"" + state.substr(0, 200) +
                "\"; restore with the searcher the experiment ran with");
  }
  if (impl_->counter < 0) {
    throw Error("prism::tune::BasicVariantGenerator::RestoreState: negative counter in \"" +
                state + "\"");
  }
  impl_->restored = true;
}

int64_t BasicVariantGenerator::TotalTrials() const {
  if (impl_->num_samples < 0) return -1;
  return static_cast<int64_t>(impl_->num_samples) * impl_->grid_count;
}

}  // namespace prism::tune
