#include "shell.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "core/plugin_host/error.hpp"

namespace areal::host::launcher {

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandOutput run_shell(const std::string& command) {
  CommandOutput r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    r.output = "cannot run " + command;
    return r;
  }
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(AREAL_CODE_INTERNAL, "cannot find areal-host's own path: " + ec.message());
  return p.string();
}

}  // namespace areal::host::launcher
