#pragma once
// Registration of remote functions. Every rank runs the same binary, so PRISM_REMOTE
// registers the same names everywhere at static initialisation; a task carries the name,
// and the executing rank looks the function up by it.
//
//   int Add(int a, int b) { return a + b; }
//   PRISM_REMOTE(Add);
//   int F(int); int F(int, int);
//   PRISM_REMOTE(PRISM_FUNC(F, int), PRISM_FUNC(F, int, int));
//   prism::Task(PRISM_FUNC(F, int)).Remote(1);

#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prism/errors.h"
#include "prism/generator.h"
#include "prism/internal/buffer.h"
#include "prism/internal/core_api.h"
#include "prism/serialization.h"

namespace prism::internal {

/// Runs a registered function on serialized arguments and writes its serialized result.
using Invoker = std::function<void(const std::vector<ByteView>& args, Buffer& result)>;
/// Creates an actor instance from serialized arguments (issue: actors).
using Factory = std::function<void*(const std::vector<ByteView>& args)>;
/// Runs a member function on an actor instance.
using MethodInvoker =
    std::function<void(void* self, const std::vector<ByteView>& args, Buffer& result)>;
/// Runs a function (self == nullptr) or method returning a tuple or pair, serializing each
/// element on its own with the ObjectRefs nested in it (SetNumReturns).
using PartsInvoker = std::function<void(void* self, const std::vector<ByteView>& args,
                                        std::vector<Buffer>& parts,
                                        std::vector<std::vector<ObjectId>>& contained)>;
/// Runs a streaming generator function (self == nullptr) or method, its values going to
/// `sink`.
using GeneratorInvoker =
    std::function<void(void* self, const std::vector<ByteView>& args, GeneratorSink& sink)>;

struct RemoteFunction {
  std::string name;
  size_t num_args = 0;
  Invoker invoke;         // free functions
  Factory create;         // actor factories (functions returning T*)
  MethodInvoker method;   // &Class::Method
  std::function<void(void*)> destroy;  // deletes what `create` made
  PartsInvoker invoke_parts;  // functions and methods returning a tuple or pair
  size_t num_parts = 0;       // a tuple's size (0: a vector, n given per call)
  GeneratorInvoker generate;  // streaming generators (first parameter StreamWriter<T>&)
  /// Free functions: the pointer itself and its type, for a caller on this rank that knows
  /// the signature and calls it directly (platform::Invoke: no serialization).
  void (*pointer)() = nullptr;
  const std::type_info* pointer_type = nullptr;
};

template <typename T>
struct TupleLike : std::false_type {};
template <typename... Ts>
struct TupleLike<std::tuple<Ts...>> : std::true_type {};
template <typename A, typename B>
struct TupleLike<std::pair<A, B>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};
/// A return type SetNumReturns can split into objects of their own: a std::tuple or
/// std::pair (as many objects as elements), or a std::vector (n given with each call).
template <typename R>
inline constexpr bool kSplittable = TupleLike<R>::value || IsVector<R>::value;

/// Serializes each element of a tuple, pair or vector on its own, collecting the refs nested
/// in each.
template <typename R>
void SerializeParts(const R& value, std::vector<Buffer>& parts,
                    std::vector<std::vector<ObjectId>>& contained) {
  auto one = [&](const auto& e) {
    ContainedRefScope scope;
    parts.push_back(Serialize(e));
    contained.push_back(scope.Take());
  };
  if constexpr (IsVector<R>::value) {
    parts.reserve(value.size());
    contained.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      const typename R::value_type& e = value[i];  // a copy for std::vector<bool>'s proxies
      one(e);
    }
  } else {
    std::apply([&](const auto&... element) { (one(element), ...); }, value);
  }
}

/// How many objects a split return of type R makes: the tuple's size, or 0 for a vector
/// (each call gives its own n).
template <typename R>
constexpr size_t NumParts() {
  if constexpr (TupleLike<R>::value) {
    return std::tuple_size_v<R>;
  } else {
    return 0;
  }
}

/// Process-wide table of remote functions: name -> function, and function pointer -> name.
/// Written only during static initialisation; read-only afterwards, hence lock-free reads.
class FunctionRegistry {
 public:
  static FunctionRegistry& Instance();
  /// Registers `fn` under its name, keyed by the bytes of the function pointer.
  void Add(const std::string& key, RemoteFunction fn);
  /// nullptr if no function of that name was registered.
  const RemoteFunction* FindByName(const std::string& name) const;
  /// The registered name of a function pointer; throws FunctionNotFound if unregistered.
  const std::string& NameOf(const std::string& key, const char* what) const;
  std::vector<std::string> Names() const;

 private:
  std::unordered_map<std::string, RemoteFunction> by_name_;
  std::unordered_map<std::string, std::string> name_by_key_;
};

/// Key of a function (or member function) pointer: its bytes.
template <typename F>
std::string FunctionKey(F f) {
  static_assert(std::is_pointer_v<F> || std::is_member_function_pointer_v<F>,
                "prism: a remote function must be a function or member function pointer");
  std::string key(sizeof(F), '\0');
  std::memcpy(key.data(), &f, sizeof(F));
  return key;
}

/// Splits "f, PRISM_FUNC(g, int), &C::M" at top-level commas and normalises each entry to
/// the name tasks carry: "f", "g(int)", "C::M".
std::vector<std::string> SplitRemoteNames(const char* text);

template <typename T>
T ReadArg(const ByteView& v) {
  return Deserialize<T>(v.data, v.size, v.owner);
}

inline void CheckArity(const std::string& name, size_t expected, size_t got) {
  if (expected != got) {
    throw Error("prism: remote function " + name + " takes " + std::to_string(expected) +
                " arguments but the task carried " + std::to_string(got));
  }
}

/// An argument as its parameter `P` takes it: a non-const lvalue reference gets the
/// deserialized copy itself (as in Ray, the caller's value never changes), every other
/// parameter (by value, const&, &&) gets it moved.
template <typename P, typename V>
decltype(auto) PassAs(V& value) {
  if constexpr (std::is_lvalue_reference_v<P> && !std::is_const_v<std::remove_reference_t<P>>) {
    return static_cast<V&>(value);
  } else {
    return static_cast<V&&>(value);
  }
}

template <typename R, typename... Args, size_t... I>
void InvokeFree(R (*f)(Args...), const std::vector<ByteView>& args, Buffer& out,
                std::index_sequence<I...>) {
  std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
  if constexpr (std::is_void_v<R>) {
    f(PassAs<Args>(std::get<I>(values))...);
  } else {
    DeferRefReleases defer;  // covers the destruction of the returned value
    SerializeInto(out, f(PassAs<Args>(std::get<I>(values))...));
  }
}

template <typename R, typename... Args, size_t... I>
void InvokeFreeParts(R (*f)(Args...), const std::vector<ByteView>& args, std::vector<Buffer>& parts,
                     std::vector<std::vector<ObjectId>>& contained, std::index_sequence<I...>) {
  std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
  DeferRefReleases defer;  // covers the destruction of the returned values
  SerializeParts(f(PassAs<Args>(std::get<I>(values))...), parts, contained);
}

template <typename C, typename R, typename... Args, typename Call, size_t... I>
void InvokeMethod(const Call& call, C* self, const std::vector<ByteView>& args, Buffer& out,
                  std::index_sequence<I...>) {
  std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
  if constexpr (std::is_void_v<R>) {
    call(self, PassAs<Args>(std::get<I>(values))...);
  } else {
    DeferRefReleases defer;
    SerializeInto(out, call(self, PassAs<Args>(std::get<I>(values))...));
  }
}

template <typename R, typename... Args>
RemoteFunction MakeRemote(const std::string& name, R (*f)(Args...)) {
  static_assert(!(IsStreamWriter<std::decay_t<Args>>::value || ...),
                "prism: a streaming generator takes its prism::StreamWriter<T>& as the first "
                "parameter and returns void");
  RemoteFunction fn;
  fn.name = name;
  fn.num_args = sizeof...(Args);
  if constexpr (std::is_pointer_v<R>) {  // an actor factory: Class* Create(...)
    using C = std::remove_pointer_t<R>;
    fn.create = [f, name](const std::vector<ByteView>& args) -> void* {
      CheckArity(name, sizeof...(Args), args.size());
      return [&]<size_t... I>(std::index_sequence<I...>) {
        std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
        return static_cast<void*>(f(PassAs<Args>(std::get<I>(values))...));
      }(std::index_sequence_for<Args...>{});
    };
    fn.destroy = [](void* p) { delete static_cast<C*>(p); };
  } else {
    static_assert(std::is_void_v<R> || kIsSerializable<std::decay_t<R>>,
                  "prism: the return type of a remote function must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
    static_assert((kIsSerializable<std::decay_t<Args>> && ...),
                  "prism: every parameter type of a remote function must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
    fn.invoke = [f, name](const std::vector<ByteView>& args, Buffer& out) {
      CheckArity(name, sizeof...(Args), args.size());
      InvokeFree(f, args, out, std::index_sequence_for<Args...>{});
    };
    fn.pointer = reinterpret_cast<void (*)()>(f);
    fn.pointer_type = &typeid(R (*)(Args...));
    if constexpr (kSplittable<R>) {
      fn.num_parts = NumParts<R>();
      fn.invoke_parts = [f, name](void*, const std::vector<ByteView>& args, std::vector<Buffer>& parts,
                                  std::vector<std::vector<ObjectId>>& contained) {
        CheckArity(name, sizeof...(Args), args.size());
        InvokeFreeParts(f, args, parts, contained, std::index_sequence_for<Args...>{});
      };
    }
  }
  return fn;
}

/// A streaming generator function: void f(StreamWriter<T>&, Args...).
template <typename T, typename... Args>
RemoteFunction MakeRemote(const std::string& name, void (*f)(StreamWriter<T>&, Args...)) {
  static_assert(kIsSerializable<std::decay_t<T>>,
                "prism: the values a streaming generator yields must be serializable: make them trivially copyable or give them a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  static_assert((kIsSerializable<std::decay_t<Args>> && ...),
                "prism: every parameter type of a remote function must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  RemoteFunction fn;
  fn.name = name;
  fn.num_args = sizeof...(Args);
  fn.generate = [f, name](void*, const std::vector<ByteView>& args, GeneratorSink& sink) {
    CheckArity(name, sizeof...(Args), args.size());
    [&]<size_t... I>(std::index_sequence<I...>) {
      std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
      StreamWriter<T> writer(sink);
      f(writer, PassAs<Args>(std::get<I>(values))...);
    }(std::index_sequence_for<Args...>{});
  };
  return fn;
}

template <typename C, typename R, typename... Args, typename Call>
RemoteFunction MakeMethod(const std::string& name, Call call) {
  static_assert(std::is_void_v<R> || kIsSerializable<std::decay_t<R>>,
                "prism: the return type of an actor method must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  static_assert((kIsSerializable<std::decay_t<Args>> && ...),
                "prism: every parameter type of an actor method must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  RemoteFunction fn;
  fn.name = name;
  fn.num_args = sizeof...(Args);
  fn.method = [call, name](void* self, const std::vector<ByteView>& args, Buffer& out) {
    CheckArity(name, sizeof...(Args), args.size());
    InvokeMethod<C, R, Args...>(call, static_cast<C*>(self), args, out,
                                std::index_sequence_for<Args...>{});
  };
  if constexpr (kSplittable<R>) {
    fn.num_parts = NumParts<R>();
    fn.invoke_parts = [call, name](void* self, const std::vector<ByteView>& args, std::vector<Buffer>& parts,
                                   std::vector<std::vector<ObjectId>>& contained) {
      CheckArity(name, sizeof...(Args), args.size());
      [&]<size_t... I>(std::index_sequence<I...>) {
        std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
        DeferRefReleases defer;
        SerializeParts(call(static_cast<C*>(self), PassAs<Args>(std::get<I>(values))...), parts, contained);
      }(std::index_sequence_for<Args...>{});
    };
  }
  return fn;
}

/// A streaming generator method: void C::M(StreamWriter<T>&, Args...).
template <typename C, typename T, typename... Args, typename Call>
RemoteFunction MakeGeneratorMethod(const std::string& name, Call call) {
  static_assert(kIsSerializable<std::decay_t<T>>,
                "prism: the values a streaming generator yields must be serializable: make them trivially copyable or give them a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  static_assert((kIsSerializable<std::decay_t<Args>> && ...),
                "prism: every parameter type of an actor method must be serializable: make it trivially copyable or give it a member `template <class Archive> void serialize(Archive& ar, unsigned) { ar & field1 & field2; }`");
  RemoteFunction fn;
  fn.name = name;
  fn.num_args = sizeof...(Args);
  fn.generate = [call, name](void* self, const std::vector<ByteView>& args, GeneratorSink& sink) {
    CheckArity(name, sizeof...(Args), args.size());
    [&]<size_t... I>(std::index_sequence<I...>) {
      std::tuple<std::decay_t<Args>...> values{ReadArg<std::decay_t<Args>>(args[I])...};
      StreamWriter<T> writer(sink);
      call(static_cast<C*>(self), writer, PassAs<Args>(std::get<I>(values))...);
    }(std::index_sequence_for<Args...>{});
  };
  return fn;
}

template <typename C, typename T, typename... Args>
RemoteFunction MakeRemote(const std::string& name, void (C::*m)(StreamWriter<T>&, Args...)) {
  return MakeGeneratorMethod<C, T, Args...>(
      name, [m](C* self, StreamWriter<T>& w, auto&&... a) { (self->*m)(w, std::forward<decltype(a)>(a)...); });
}

template <typename C, typename R, typename... Args>
RemoteFunction MakeRemote(const std::string& name, R (C::*m)(Args...)) {
  return MakeMethod<C, R, Args...>(
      name, [m](C* self, auto&&... a) -> R { return (self->*m)(std::forward<decltype(a)>(a)...); });
}

template <typename C, typename R, typename... Args>
RemoteFunction MakeRemote(const std::string& name, R (C::*m)(Args...) const) {
  return MakeMethod<C, R, Args...>(
      name, [m](C* self, auto&&... a) -> R { return (self->*m)(std::forward<decltype(a)>(a)...); });
}

template <typename... Fs>
bool RegisterRemote(const char* names, Fs... fs) {
  std::vector<std::string> split = SplitRemoteNames(names);
  size_t i = 0;
  (FunctionRegistry::Instance().Add(FunctionKey(fs), MakeRemote(split.at(i++), fs)), ...);
  return true;
}

/// PRISM_FUNC's helper: fixes the parameter types so only one overload matches.
template <typename... Args>
struct Overload {
  template <typename R>
  constexpr auto operator()(R (*f)(Args...)) const {
    return f;
  }
  template <typename C, typename R>
  constexpr auto operator()(R (C::*m)(Args...)) const {
    return m;
  }
};

}  // namespace prism::internal

#define PRISM_INTERNAL_CONCAT2(a, b) a##b
#define PRISM_INTERNAL_CONCAT(a, b) PRISM_INTERNAL_CONCAT2(a, b)

/// Registers remote functions, actor factories and actor methods. Use once per function,
/// at namespace scope, in any translation unit of the binary.
#define PRISM_REMOTE(...)                                                           \
  [[maybe_unused]] static const bool PRISM_INTERNAL_CONCAT(prism_remote_, __COUNTER__) = \
      ::prism::internal::RegisterRemote(#__VA_ARGS__, __VA_ARGS__)

/// Picks one overload of a function: PRISM_FUNC(F, int, double).
#define PRISM_FUNC(f, ...) ::prism::internal::Overload<__VA_ARGS__>{}(f)
