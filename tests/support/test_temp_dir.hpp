// Scratch folders for tests: /tmp/areal-STEM-PID, removed when the test
// process exits (ctest runs every GoogleTest case in a process of its own, so
// folders named by PID alone would pile up run after run: model files and
// checkpoints are tens of MB each).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace areal::testing {

inline std::string test_temp_dir(const std::string& stem) {
  struct Registry {
    std::vector<std::filesystem::path> dirs;
    ~Registry() {
      for (const auto& d : dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);  // best effort at exit
      }
    }
  };
  static Registry registry;
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("areal-" + stem + "-" + std::to_string(::getpid()));
  if (std::find(registry.dirs.begin(), registry.dirs.end(), p) == registry.dirs.end()) registry.dirs.push_back(p);
  return p.string();
}

}  // namespace areal::testing
