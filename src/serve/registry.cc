#include "serve/registry.h"

#include <unordered_map>

namespace prism::serve::internal {
namespace {

std::unordered_map<std::string, ClassEntry>& Classes() {
  static std::unordered_map<std::string, ClassEntry> classes;
  return classes;
}
std::unordered_map<std::string, MethodInvoker>& Methods() {
  static std::unordered_map<std::string, MethodInvoker> methods;
  return methods;
}

}  // namespace

bool RegisterClass(const std::string& key, ClassEntry entry) {
  Classes().emplace(key, std::move(entry));
  return true;
}

bool RegisterMethod(const std::string& key, MethodInvoker invoker) {
  Methods().emplace(key, std::move(invoker));
  return true;
}

const ClassEntry* FindClass(const std::string& key) {
  auto it = Classes().find(key);
  return it == Classes().end() ? nullptr : &it->second;
}

const MethodInvoker* FindMethod(const std::string& key) {
  auto it = Methods().find(key);
  return it == Methods().end() ? nullptr : &it->second;
}

}  // namespace prism::serve::internal
