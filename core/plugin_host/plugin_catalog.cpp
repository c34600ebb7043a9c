#include "core/plugin_host/plugin_catalog.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <cstdint>
#include <exception>

#include "core/config/config_schema.hpp"
#include "core/plugin_host/error.hpp"

namespace fs = std::filesystem;

namespace areal {
namespace {

constexpr const char* kPrefix = "libareal-";
constexpr const char* kSuffix = ".so";

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 3 && s.compare(s.size() - 3, 3, kSuffix) == 0);
}

bool is_plugin_file(const fs::path& p) {
  const std::string f = p.filename().string();
  return f.rfind(kPrefix, 0) == 0 && f.size() > 12 && f.compare(f.size() - 3, 3, kSuffix) == 0;
}

std::string name_of_file(const fs::path& p) {
  const std::string f = p.filename().string();
  return f.substr(std::string(kPrefix).size(), f.size() - std::string(kPrefix).size() - 3);
}

}  // namespace

std::string executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

PluginCatalog::PluginCatalog(std::vector<std::string> config_dirs) : config_dirs_(std::move(config_dirs)) {}

std::vector<std::string> PluginCatalog::search_dirs() const {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("AREAL_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  for (const auto& d : config_dirs_) dirs.push_back(d);
  dirs.push_back((fs::path(executable_dir()) / ".." / "lib" / "areal" / "plugins").lexically_normal().string());
  // Keep the first occurrence of each directory: order is the search order.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (auto& d : dirs) {
    std::string key = fs::path(d).lexically_normal().string();
    if (!key.empty() && key.back() == '/') key.pop_back();
    if (seen.insert(key).second) unique.push_back(d);
  }
  return unique;
}

std::vector<std::string> PluginCatalog::available_names() const {
  std::set<std::string> names;
  for (const auto& n : builtin_names()) names.insert(n);
  for (const auto& d : search_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
      if (is_plugin_file(it->path())) names.insert(name_of_file(it->path()));
  }
  return {names.begin(), names.end()};
}

std::shared_ptr<LoadedPlugin> PluginCatalog::resolve(const std::string& name_or_path, int32_t expected_kind,
                                                     const std::string& base_dir) const {
  std::shared_ptr<LoadedPlugin> plugin;
  if (looks_like_path(name_or_path)) {
    fs::path p(name_or_path);
    if (p.is_relative()) p = fs::path(base_dir) / p;
    plugin = PluginLoader::load_file(p.lexically_normal().string());
  } else {
    plugin = load_builtin(name_or_path);
    if (!plugin) {
      for (const auto& d : search_dirs()) {
        fs::path candidate = fs::path(d) / (kPrefix + name_or_path + kSuffix);
        std::error_code ec;
        if (fs::exists(candidate, ec)) {
          plugin = PluginLoader::load_file(candidate.string());
          break;
        }
      }
    }
    if (!plugin) {
      std::string msg = "no plugin named '" + name_or_path + "'";
      std::string hint = config::nearest(name_or_path, available_names());
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      msg += "; looked for " + std::string(kPrefix) + name_or_path + kSuffix + " in:";
      for (const auto& d : search_dirs()) msg += " " + d;
      msg += " (set AREAL_PLUGIN_PATH or plugins.search_paths, or give a path)";
      throw Error(AREAL_CODE_NOT_FOUND, msg);
    }
  }
  if (expected_kind != 0 && plugin->kind() != expected_kind)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "plugin '" + plugin->name() + "' (" + plugin->path() + ") is a " +
                                                 kind_name(plugin->kind()) + " plugin, but a " + kind_name(expected_kind) +
                                                 " plugin is needed here");
  return plugin;
}

std::vector<std::shared_ptr<LoadedPlugin>> PluginCatalog::load_all(std::vector<std::string>& errors) const {
  std::vector<std::shared_ptr<LoadedPlugin>> out;
  std::set<std::string> seen;
  for (const auto& n : builtin_names()) {
    try {
      out.push_back(load_builtin(n));
      seen.insert(n);
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  for (const auto& d : search_dirs()) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
      if (is_plugin_file(it->path())) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      // Earlier directories shadow later ones, as in name resolution.
      if (seen.count(name_of_file(f))) continue;
      try {
        auto p = PluginLoader::load_file(f.string());
        seen.insert(name_of_file(f));
        out.push_back(p);
      } catch (const std::exception& e) {
        errors.push_back(e.what());
      }
    }
  }
  return out;
}

}  // namespace areal
