#pragma once
// Options of the map operators (Ray's map_batches/map arguments and ray_remote_args):
// retries of a UDF, and the actor pool of a callable class.
//
//   ds.Map(AddOne, {.max_retries = 2, .retry_exceptions = true});
//   ds.MapBatches(ActorClass<Model>("model.bin"),
//                 {.batch_size = 64, .concurrency = {1, 4}, .retry_exceptions = {"IoError"}});
//
// Plain values; thread-safe to copy.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace prism::data {

/// Which exceptions of a UDF make Prism run it again on the same block (Ray's
/// retry_exceptions): none (false, the default), all (true), or those whose demangled type
/// is one of these names ("std::runtime_error", "my::IoError": the exact type thrown; a
/// base class's name does not match a derived one).
class RetryExceptions {
 public:
  /// No exception is retried.
  RetryExceptions() = default;
  /// true: every exception is retried; false: none.
  RetryExceptions(bool all) : all_(all) {}  // NOLINT(google-explicit-constructor): Ray's spelling
  /// Exceptions of these types are retried.
  RetryExceptions(std::initializer_list<std::string> types) : types_(types) {}
  /// Exceptions of these types are retried.
  RetryExceptions(std::vector<std::string> types) : types_(std::move(types)) {}  // NOLINT
  /// A string would convert to `true`: give a list, {"std::runtime_error"}.
  RetryExceptions(const char*) = delete;

  /// True if every exception is retried.
  bool all() const { return all_; }
  /// The retried types (when not all).
  const std::vector<std::string>& types() const { return types_; }
  /// True if an exception of demangled type `type` is retried.
  bool Matches(const std::string& type) const {
    if (all_) return true;
    for (const std::string& t : types_) {
      if (t == type) return true;
    }
    return false;
  }

 private:
  bool all_ = false;
  std::vector<std::string> types_;
};

/// Retries of a row or batch UDF (Map, Filter, FlatMap; Ray's ray_remote_args).
struct MapOptions {
  /// Runs of a block's task after the first when its rank is lost (a system failure), and,
  /// for the exceptions retry_exceptions names, after the UDF threw (Ray's max_retries,
  /// default 3). Operators fused into one task take the largest of their max_retries for
  /// system failures; an exception is retried by the operator that threw's own options.
  int max_retries = 3;
  /// Which exceptions of the UDF are retried (Ray's retry_exceptions; default none).
  RetryExceptions retry_exceptions;
};

/// An actor pool's size (Ray's concurrency=(min, max) for a callable class): it starts at
/// `min` actors and grows to `max` while blocks wait and every actor is busy. `Concurrency(n)`
/// is a pool of fixed size n. max 0: as many actors as the cluster has CPUs (at least min).
struct Concurrency {
  /// From 1 actor up to the cluster's CPU count.
  Concurrency() = default;
  /// Exactly n actors.
  Concurrency(int n) : min(n), max(n) {}  // NOLINT(google-explicit-constructor): Ray's spelling
  /// From min_size up to max_size actors.
  Concurrency(int min_size, int max_size) : min(min_size), max(max_size) {}
  int min = 1;
  int max = 0;
};

/// Options of MapBatches (Ray's map_batches arguments). For a function only batch_size,
/// max_retries and retry_exceptions apply; the rest configure a callable class's pool.
struct MapBatchesOptions {
  /// Rows per UDF call (the last batch of a block smaller; batches never span blocks).
  int64_t batch_size = 1024;
  /// A callable class's actor pool size (see Concurrency).
  Concurrency concurrency;
  /// CPUs each actor holds while it lives (Ray reserves 1; Prism's actors hold none by
  /// default, so that a pool never starves the read tasks feeding it).
  double num_cpus = 0;
  /// GPUs each actor holds while it lives.
  double num_gpus = 0;
  /// As MapOptions::max_retries; for a class, a block whose actor died (its rank was lost)
  /// is sent to another actor, and a new actor replaces the dead one.
  int max_retries = 3;
  /// As MapOptions::retry_exceptions.
  RetryExceptions retry_exceptions;
};

}  // namespace prism::data
