#pragma once
// A callable class for Dataset::MapBatches, run in a pool of actors (Ray's map_batches with
// a class and fn_constructor_args): each actor constructs the class once (a model loaded
// once) and calls it on every batch it is given.
//
//   class Model {
//    public:
//     explicit Model(std::string path) : net_(Load(path)) {}      // once per actor
//     Block operator()(const Block& batch) { return Predict(net_, batch); }
//   };
//   ds.MapBatches(ActorClass<Model>(std::string("model.bin")),
//                 {.batch_size = 64, .concurrency = {1, 4}});
//
// The class needs no registration: naming ActorClass<C>(args...) registers, at static
// initialization on every rank (one binary), how to build a C from those argument types.
// Constructor arguments travel as Prism values (prism/serialization.h: trivially copyable
// types, strings, vectors, Boost-serializable types); a string literal is sent as a
// std::string.

#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "prism/data/block.h"
#include "prism/platform/invoke.h"

namespace prism::data {

namespace internal {

/// A constructed callable class, as the actor holds it.
class ClassUdf {
 public:
  virtual ~ClassUdf() = default;
  /// Calls the object on one batch.
  virtual Block Call(const Block& batch) = 0;
};

/// Builds a class from its constructor arguments' bytes (one entry per argument).
using ClassFactory = std::unique_ptr<ClassUdf> (*)(const std::vector<std::string>& args);

/// Records how to build the class `key` (called at static initialization). Thread-safe.
void RegisterClassUdf(const std::string& key, ClassFactory factory);
/// The factory of `key`, or nullptr. Thread-safe.
ClassFactory FindClassUdf(const std::string& key);
/// A readable name of a type ("Model", "ns::Model").
std::string TypeName(const std::type_info& type);

/// How a constructor argument travels: a C string as a std::string, anything else decayed.
template <typename A>
using StoredArg =
    std::conditional_t<std::is_same_v<std::decay_t<A>, const char*> || std::is_same_v<std::decay_t<A>, char*>,
                       std::string, std::decay_t<A>>;

template <typename C>
class ClassHolder final : public ClassUdf {
 public:
  template <typename... A>
  explicit ClassHolder(A&&... args) : object_(std::forward<A>(args)...) {}
  Block Call(const Block& batch) override { return object_(batch); }

 private:
  C object_;
};

/// Registers, once per (class, argument types), how to build the class on any rank.
template <typename C, typename... A>
struct ClassRegistrar {
  static std::string Key() {
    std::string key = typeid(C).name();
    ((key += "|", key += typeid(A).name()), ...);
    return key;
  }
  static std::unique_ptr<ClassUdf> Make(const std::vector<std::string>& args) {
    if (args.size() != sizeof...(A)) {
      throw Error("prism::data: " + TypeName(typeid(C)) + " takes " + std::to_string(sizeof...(A)) +
                  " constructor argument(s), " + std::to_string(args.size()) + " sent");
    }
    return [&]<size_t... I>(std::index_sequence<I...>) -> std::unique_ptr<ClassUdf> {
      return std::make_unique<ClassHolder<C>>(platform::FromBytes<A>(args[I])...);
    }(std::index_sequence_for<A...>{});
  }
  // Dynamic initialization at program start on every rank (odr-used by ActorClass).
  inline static const bool registered = (RegisterClassUdf(Key(), &Make), true);
};

}  // namespace internal

/// A callable class C and the arguments its constructor gets on each actor (Ray's class
/// UDF with fn_constructor_args). C must be constructible from the arguments and have
/// `Block operator()(const Block&)` (const or not); each actor calls it from one thread.
/// A cheap value: the arguments are serialized here, once.
template <typename C>
class ActorClass {
 public:
  /// C's constructor arguments. Throws SerializationError if one cannot be serialized.
  template <typename... A>
    requires(!(sizeof...(A) == 1 && (std::is_same_v<std::decay_t<A>, ActorClass> && ...)))
  explicit ActorClass(A&&... args) {
    using Registrar = internal::ClassRegistrar<C, internal::StoredArg<A>...>;
    static_assert(std::is_constructible_v<C, internal::StoredArg<A>...>,
                  "prism::data::ActorClass<C>(args...): C has no constructor taking these arguments");
    static_assert(std::is_invocable_r_v<Block, C&, const Block&>,
                  "prism::data::ActorClass<C>: C needs Block operator()(const Block&)");
    (void)Registrar::registered;
    key_ = Registrar::Key();
    (args_.push_back(platform::ToBytes(internal::StoredArg<A>(std::forward<A>(args)))), ...);
  }

  /// The class's readable name ("Model"), used in operator names: "MapBatches(Model)";
  /// SetName's if it was given one.
  std::string Name() const { return name_.empty() ? internal::TypeName(typeid(C)) : name_; }
  /// Names the class in operator names instead of its C++ type (a language binding's one
  /// C++ class that holds each user class: "MapBatches(MyModel)"). Returns *this.
  ActorClass& SetName(std::string name) {
    name_ = std::move(name);
    return *this;
  }
  /// Internal: the registry key of (C, argument types).
  const std::string& Key() const { return key_; }
  /// Internal: the serialized constructor arguments.
  const std::vector<std::string>& Args() const { return args_; }

 private:
  std::string key_;
  std::vector<std::string> args_;
  std::string name_;
};

template <typename T>
struct IsActorClass : std::false_type {};
template <typename C>
struct IsActorClass<ActorClass<C>> : std::true_type {};

}  // namespace prism::data
