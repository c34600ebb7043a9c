// The folder of the plugin library that includes this (its files, such as
// agent workers and Python runtimes, are installed beside it).
#pragma once

#include <dlfcn.h>

#include <filesystem>

namespace areal::workflows {

inline std::filesystem::path plugin_dir() {
  Dl_info info{};
  // dladdr of a function defined in this library (each plugin has its own copy: symbols are local).
  if (dladdr(reinterpret_cast<void*>(&plugin_dir), &info) == 0 || info.dli_fname == nullptr) return std::filesystem::current_path();
  return std::filesystem::path(info.dli_fname).parent_path();
}

}  // namespace areal::workflows
