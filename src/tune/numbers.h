#pragma once
// Small numeric helpers the schedulers and searchers share: a number as Tune prints it in
// messages, a uniform draw in [0, 1), and the SplitMix64 finalizer that derives per-trial
// seeds from the experiment's.

#include <cstdint>
#include <random>
#include <sstream>
#include <string>

namespace prism::tune::internal {

/// `v` as an ostream prints it (6 significant digits): 0.001, 1e+06, nan.
inline std::string FormatNumber(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

/// A draw in [0, 1) from the top 53 bits of one output (the same draw on every platform,
/// unlike std::uniform_real_distribution).
inline double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// SplitMix64's finalizer: well-mixed 64 bits from a counter or a seed.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The seed of the generator for suggestion `index` of an experiment seeded `seed`:
/// SplitMix64 spreads (seed, index) over all 64 bits.
inline uint64_t TrialSeed(uint64_t seed, uint64_t index) { return SplitMix64(seed ^ SplitMix64(index)); }

}  // namespace prism::tune::internal
