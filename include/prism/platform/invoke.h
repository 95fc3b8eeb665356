#pragma once
// Invoke-by-name and serialization for libraries: a library gets a user's function as a
// pointer on the driver, sends its registered name to the ranks that run it, and calls it
// there by name (how prism::train runs a training loop on each worker): directly when the
// caller names the function's exact signature, else with serialized arguments. Values
// travel as bytes in Prism's own format (prism/serialization.h): trivially copyable types,
// strings, vectors of them, and Boost-serializable types.

#include <exception>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "prism/errors.h"
#include "prism/remote.h"
#include "prism/serialization.h"

namespace prism::platform {

/// The bytes of `value`. Thread-safe.
template <typename T>
std::string ToBytes(const T& value) {
  internal::Buffer b = internal::Serialize(value);
  return std::string(b.data(), b.size());
}

/// The value in `bytes`. Throws SerializationError if they do not hold exactly one T.
template <typename T>
T FromBytes(std::string_view bytes) {
  return internal::Deserialize<T>(bytes.data(), bytes.size());
}

/// The name `f` was registered under with PRISM_REMOTE: the same on every rank of the job
/// (one binary). Throws Error naming `what` if `f` is not registered.
template <typename F>
std::string RegisteredName(F f, const char* what = "a library") {
  try {
    return internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(f), what);
  } catch (const std::exception&) {
    throw Error(std::string("prism: ") + what +
                " was given a function that is not registered: add PRISM_REMOTE(<function>) "
                "next to its definition");
  }
}

/// The free function registered as `name`, as a pointer of type F (e.g. Block (*)(Block)),
/// if it was registered with exactly that type; nullptr if it was not, or no function is
/// registered under that name. Calling it costs what any call does: no serialization.
/// Thread-safe.
template <typename F>
F FindFunction(const std::string& name) {
  static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>,
                "prism::platform::FindFunction<F>: F is a function pointer type, e.g. int (*)(int)");
  const internal::RemoteFunction* fn = internal::FunctionRegistry::Instance().FindByName(name);
  if (fn == nullptr || fn->pointer == nullptr || *fn->pointer_type != typeid(F)) return nullptr;
  return reinterpret_cast<F>(fn->pointer);
}

/// Calls the free function registered as `name` on this rank, now, on this thread, and
/// returns its result as R (R = void: none). A function registered as R(Args...) or
/// R(const Args&...) is called directly: its arguments are copied as C++ values (a
/// prism::data::Block copies shared pointers, never its columns' bytes) and its result is
/// moved out, with no serialization. Any other signature (one whose parameters convert)
/// goes through Prism's serialization, as a task's would. Throws Error if no such
/// function is registered here, SerializationError if the result's bytes are not an R,
/// and whatever the function throws.
template <typename R, typename... Args>
R Invoke(const std::string& name, const Args&... args) {
  const internal::RemoteFunction* fn = internal::FunctionRegistry::Instance().FindByName(name);
  if (fn == nullptr || !fn->invoke) {
    throw Error("prism: no function registered as \"" + name +
                "\" in this binary (PRISM_REMOTE; every rank runs the same binary)");
  }
  if (fn->num_args != sizeof...(Args)) {
    throw Error("prism: \"" + name + "\" takes " + std::to_string(fn->num_args) + " argument(s), " +
                std::to_string(sizeof...(Args)) + " given");
  }
  if (fn->pointer != nullptr) {
    using ByValue = R (*)(Args...);
    using ByReference = R (*)(const Args&...);
    if (*fn->pointer_type == typeid(ByValue)) return reinterpret_cast<ByValue>(fn->pointer)(args...);
    if (*fn->pointer_type == typeid(ByReference)) {
      return reinterpret_cast<ByReference>(fn->pointer)(args...);
    }
  }
  std::vector<internal::Buffer> bytes;
  bytes.reserve(sizeof...(Args));
  (bytes.push_back(internal::Serialize(args)), ...);
  std::vector<internal::ByteView> views;
  for (const auto& b : bytes) views.push_back({b.data(), b.size()});
  internal::Buffer result;
  fn->invoke(views, result);
  if constexpr (!std::is_void_v<R>) return internal::Deserialize<R>(result.data(), result.size());
}

/// The demangled name of a C++ type, as TaskError::OriginalType() names the type of an
/// exception a task threw: "std::out_of_range", "prism::data::internal::OpError". A library
/// compares a failed task's OriginalType() with TypeName(typeid(ItsError)) to recognize its
/// own errors by type, never by parsing messages. Thread-safe.
std::string TypeName(const std::type_info& type);

/// The type of a caught exception: a TaskError's OriginalType() (what the task threw), a
/// std::exception's demangled dynamic type (TypeName), "unknown exception" for anything
/// else. Thread-safe.
std::string ExceptionType(std::exception_ptr e);

/// The message of a caught exception: a TaskError's OriginalMessage(), a std::exception's
/// what(), "a non-std::exception was thrown" for anything else. Thread-safe.
std::string ExceptionMessage(std::exception_ptr e);

/// "<type>: <message>" of a caught exception (ExceptionType and ExceptionMessage), for
/// telling a person why something failed. A program that must decide by the type asks
/// ExceptionType, never splits this string. Thread-safe.
std::string DescribeException(std::exception_ptr e);

}  // namespace prism::platform
